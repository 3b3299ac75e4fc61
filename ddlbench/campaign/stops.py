"""Runs stopped by SIGUSR1: Slurm's ``--signal=USR1@T`` warning that the time limit is near.

Each rank writes an ``error`` record (``stopped: SIGUSR1 ...``) and exits with
:data:`~ddlbench.campaign.states.STOPPED_EXIT_CODE`; the job then fails with that code, and the
run is recorded as ``TIMEOUT`` (it did not finish within its time limit), not ``FAILED``
(docs/launching.md#signals).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ddlbench.campaign import states as S

CAUSE = (
    "stopped on SIGUSR1, Slurm's warning that the time limit is near (--signal): each rank "
    "logged it and stopped; raise the time limit or lower the steps"
)


def stopped_values(exit_code: Optional[int]) -> Dict[str, Any]:
    """``{"state": TIMEOUT, "cause": ...}`` when the ranks stopped on SIGUSR1, else ``{}``."""
    if exit_code != S.STOPPED_EXIT_CODE:
        return {}
    return {"state": S.TIMEOUT, "cause": CAUSE}
