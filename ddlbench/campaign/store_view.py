"""A read-only view of a campaign's store (``state.sqlite``), as plain dictionaries.

Readers that must never write to, or lock, a campaign that may still be running (collect,
report, compare) use this view; the executors write through ``ddlbench.execute.store``.
The store is opened in SQLite's read-only URI mode. Standard library only.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Union

from ddlbench.campaign.paths import CampaignPaths

#: the attempt columns every reader may rely on, and some that older stores lack
ATTEMPT_COLUMNS = (
    "run_id",
    "number",
    "state",
    "job_id",
    "exit_code",
    "start_time",
    "end_time",
    "nodelist",
)
#: (the cause's columns: campaign/causes.py decides a run's cause from them)
OPTIONAL_ATTEMPT_COLUMNS = (
    "signal",
    "reason",
    "cause",
    "message",
    "failed_signal",
    "slurm_state",
    "cancel_requested",
)


class StoreView:
    """One read-only connection to ``state.sqlite``; use as a context manager."""

    def __init__(self, path: Path, *, timeout: float = 10.0):
        self.path = Path(path)
        uri = self.path.resolve().as_uri() + "?mode=ro"
        self.conn = sqlite3.connect(uri, uri=True, timeout=timeout)
        self.conn.row_factory = sqlite3.Row

    @classmethod
    def open(cls, campaign_dir: Union[str, Path]) -> Optional[StoreView]:
        """The view of the campaign's store; None when it has none or it cannot be opened."""
        path = CampaignPaths.of(campaign_dir).store
        if not path.is_file():
            return None
        try:
            return cls(path)
        except sqlite3.Error:
            return None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> StoreView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def columns(self, table: str) -> Set[str]:
        return {r[1] for r in self.conn.execute(f"PRAGMA table_info({_ident(table)})")}

    def attempts(self, columns: Sequence[str]) -> List[Dict[str, Any]]:
        """Every attempt (``columns`` of it), ordered by run id and attempt number."""
        cols = ", ".join(_ident(c) for c in columns)
        rows = self.conn.execute(f"SELECT {cols} FROM attempts ORDER BY run_id, number")
        return [dict(r) for r in rows]

    def meta(self, key: str, default: Any = None) -> Any:
        import json

        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not an SQL identifier: {name!r}")
    return name


@dataclass(frozen=True)
class AttemptRows:
    """Attempts as plain dictionaries, with the columns they have (even when there are none)."""

    columns: List[str]
    rows: List[Dict[str, Any]]


def read_attempts(
    campaign_dir: Union[str, Path], extra: Sequence[str] = ()
) -> Optional[AttemptRows]:
    """Every attempt of the campaign: :data:`ATTEMPT_COLUMNS` and those of
    :data:`OPTIONAL_ATTEMPT_COLUMNS` and ``extra`` the store has. None when there is no store,
    it cannot be read, or its layout is not one this ddlbench knows."""
    view = StoreView.open(campaign_dir)
    if view is None:
        return None
    try:
        with view:
            have = view.columns("attempts")
            if not set(ATTEMPT_COLUMNS) <= have:
                return None
            optional = list(OPTIONAL_ATTEMPT_COLUMNS) + list(extra)
            wanted = list(ATTEMPT_COLUMNS) + [c for c in optional if c in have]
            return AttemptRows(wanted, view.attempts(wanted))
    except sqlite3.Error:
        return None
