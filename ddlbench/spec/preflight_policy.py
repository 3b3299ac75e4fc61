"""The cluster profile's pre-flight policy and its default, without the profile's models.

:mod:`ddlbench.spec.cluster` validates the ``preflight`` key with these; ``status`` and the
report (:mod:`ddlbench.analyse.suspects`) ask them on the login node without importing the
spec models (pydantic: 0.2-0.3 s of every report otherwise).
"""

from __future__ import annotations

from typing import Optional

#: the pre-flight policy of a profile that sets none: on CPU profiles too, since other
#: processes on a CPU node take the very cores that are measured (docs/telemetry.md)
DEFAULT_PREFLIGHT = "warn"


def preflight_policy(preflight: Optional[str]) -> str:
    """A profile's pre-flight policy from its ``preflight`` key (None: the default)."""
    return preflight or DEFAULT_PREFLIGHT
