"""Run states from the campaign store, read-only.

The collector takes run states as a DataFrame or a callable (see
:func:`ddlbench.collect.collector.collect_campaign`); :func:`store_states` is such a
callable. It reads the store's ``attempts`` table directly in read-only mode (so a report
never writes to, or locks, a campaign that is still running) and returns None when there is
no store or its layout is not the one it knows: every state is then ``unknown``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Optional

from ddlbench.campaign.paths import CampaignPaths

WANTED = ["run_id", "number", "state", "job_id", "exit_code", "start_time", "end_time", "nodelist"]
OPTIONAL = ["signal", "reason"]


def store_states(campaign_dir: Path):
    """One row per attempt: run_id, attempt, job_id, state, exit_code, start, end, nodelist."""
    import pandas as pd

    path = CampaignPaths.of(campaign_dir).store
    if not path.is_file():
        return None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return None
    try:
        cols = {r[1] for r in con.execute("PRAGMA table_info(attempts)")}
        if not set(WANTED) <= cols:
            return None
        sel = WANTED + [c for c in OPTIONAL if c in cols]
        rows = con.execute(f"SELECT {', '.join(sel)} FROM attempts ORDER BY run_id, number")
        df = pd.DataFrame(rows.fetchall(), columns=sel)
    except sqlite3.Error:
        return None
    finally:
        con.close()
    df = df.rename(columns={"number": "attempt", "start_time": "start", "end_time": "end"})
    return df


def iso_time(v) -> Optional[str]:
    """Unix seconds (or text) as an ISO-8601 UTC string."""
    import datetime as dt
    import math

    if v is None:
        return None
    if isinstance(v, (int, float)):
        if isinstance(v, float) and math.isnan(v):
            return None
        return dt.datetime.fromtimestamp(float(v), dt.timezone.utc).isoformat(timespec="seconds")
    return str(v)
