"""Slurm time strings (``--time``) to minutes."""

from __future__ import annotations

import re

#: the forms :func:`parse_minutes` reads, as its message and docs/spec.md list them
FORMATS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"

_FORMS = [
    (re.compile(r"^(\d+)$"), lambda m: int(m[1])),
    (re.compile(r"^(\d+):(\d{1,2})$"), lambda m: int(m[1]) + int(m[2]) / 60),
    (
        re.compile(r"^(\d+):(\d{1,2}):(\d{1,2})$"),
        lambda m: int(m[1]) * 60 + int(m[2]) + int(m[3]) / 60,
    ),
    (re.compile(r"^(\d+)-(\d+)$"), lambda m: int(m[1]) * 1440 + int(m[2]) * 60),
    (
        re.compile(r"^(\d+)-(\d+):(\d{1,2})$"),
        lambda m: int(m[1]) * 1440 + int(m[2]) * 60 + int(m[3]),
    ),
    (
        re.compile(r"^(\d+)-(\d+):(\d{1,2}):(\d{1,2})$"),
        lambda m: int(m[1]) * 1440 + int(m[2]) * 60 + int(m[3]) + int(m[4]) / 60,
    ),
]


def parse_minutes(value: str | int) -> float:
    """Minutes in a Slurm time limit: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``."""
    text = str(value).strip()
    for pattern, convert in _FORMS:
        m = pattern.match(text)
        if m:
            minutes = float(convert(m))
            if minutes <= 0:
                raise ValueError(f"time limit {value!r} must be positive")
            return minutes
    raise ValueError(f"time limit {value!r} is not a Slurm time ({FORMATS}, e.g. 02:00:00)")
