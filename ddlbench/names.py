"""Validation of names that end up in paths, job names and shell words."""

from __future__ import annotations

import re

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_safe_name(value: str, what: str = "name") -> str:
    """Accept ``[A-Za-z0-9][A-Za-z0-9._-]*`` (max 128) with no ``..``: safe as a path component."""
    if not isinstance(value, str) or not SAFE_NAME.match(value) or ".." in value:
        raise ValueError(
            f"{what} {value!r} must start with a letter or digit and contain only letters, "
            "digits, '.', '_' and '-' (no '..', at most 128 characters)"
        )
    return value
