"""Run states from the campaign store (``state.sqlite``), read-only.

The collector takes run states as a DataFrame or a callable (see
:func:`ddlbench.collect.collector.collect_campaign`); :func:`store_states` is such a
callable. It reads the store through the campaign package's read-only view
(:mod:`ddlbench.campaign.store_view`), so a report never writes to, or locks, a campaign that
is still running, and returns None when there is no store or its layout is not the one it
knows: every state is then ``unknown``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ddlbench.campaign.causes import end_cause
from ddlbench.campaign.store_view import (
    ATTEMPT_COLUMNS,
    OPTIONAL_ATTEMPT_COLUMNS,
    AttemptRows,
    read_attempts,
)
from ddlbench.values import missing

WANTED = list(ATTEMPT_COLUMNS)
OPTIONAL = list(OPTIONAL_ATTEMPT_COLUMNS)
#: the columns read only to word the reason (campaign/causes.py), not kept in the frame
CAUSE_ONLY = ("cause", "message", "failed_signal", "slurm_state", "cancel_requested")


def store_rows(campaign_dir: Path) -> Optional[AttemptRows]:
    """The store's rows that the run states come from (None: no store, or one it cannot read).
    The collected data's fingerprint digests the same rows (``freshness.py``)."""
    return read_attempts(campaign_dir)


def store_states(campaign_dir: Path):
    """One row per attempt: run_id, attempt, job_id, state, exit_code, start, end, nodelist."""
    import pandas as pd

    found = store_rows(campaign_dir)
    if found is None:
        return None
    df = pd.DataFrame(found.rows, columns=found.columns)
    df = df.rename(columns={"number": "attempt", "start_time": "start", "end_time": "end"})
    # the words status and wait show (campaign/causes.py): a failing task says more than
    # Slurm's reason, a cancel says it was one, a queue reason is never how a run ended
    df["reason"] = [end_cause(row) for row in found.rows]
    return df.drop(columns=[c for c in CAUSE_ONLY if c in df.columns])


def iso_time(v) -> Optional[str]:
    """Unix seconds (or text) as an ISO-8601 UTC string."""
    import datetime as dt

    if missing(v):
        return None
    if isinstance(v, (int, float)):
        return dt.datetime.fromtimestamp(float(v), dt.timezone.utc).isoformat(timespec="seconds")
    return str(v)
