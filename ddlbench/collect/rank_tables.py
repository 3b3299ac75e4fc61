"""Per-rank tables: ``ranks`` (meta, summary, statistics), ``evals``, ``allreduce``, ``files``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Sequence

import numpy as np
import pandas as pd

from .columns import ALLREDUCE, EVALS, FILES, META, RANKS, SUMMARY, Column, names
from .reader import RankFile
from .tables import typed

META_COLUMNS = names(META)
#: columns named differently from the meta field they come from (docs/log-format.md)
META_FIELDS = {"precision_fallback_from": "precision_requested"}


def records_frame(kept: Sequence[RankFile], attr: str, cols: Sequence[Column]) -> pd.DataFrame:
    """One row per eval (``attr="evals"``) or allreduce record of the kept rank files."""
    fields = [c.name for c in cols if c.name not in ("run_id", "rank")]
    rows = []
    for f in kept:
        for rec in getattr(f, attr):
            row = {"run_id": f.run_key, "rank": f.rank}
            for c in fields:
                row[c] = rec.get(c)
            rows.append(row)
    df = pd.DataFrame(rows, columns=names(cols))
    if "dtype" in df:
        df["dtype"] = df["dtype"].astype(object)
    return typed(df, cols)


def evals_frame(kept: Sequence[RankFile]) -> pd.DataFrame:
    return records_frame(kept, "evals", EVALS)


def allreduce_frame(kept: Sequence[RankFile]) -> pd.DataFrame:
    return records_frame(kept, "allreduce", ALLREDUCE)


def _rank_row(f: RankFile, dup_count: Dict[int, int], campaign_dir: Path) -> Dict[str, Any]:
    meta = f.meta or {}
    row: Dict[str, Any] = {"run_id": f.run_key, "rank": f.rank}
    for c in META_COLUMNS:
        v = meta.get(META_FIELDS.get(c, c))
        row[c] = v if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True)
    row["start_time"] = meta.get("time")
    row["meta_run_id"] = meta.get("run_id")
    row["file"] = f.path.relative_to(campaign_dir).as_posix()
    row["duplicates"] = dup_count.get(id(f), 0)
    row["truncated_lines"] = f.truncated_lines
    row["bad_lines"] = f.bad_lines
    row["restarts"] = f.restarts
    s = f.summary
    row["has_summary"] = s is not None
    for c in SUMMARY:
        row[c.name] = None if s is None else s.get(c.name[len("summary_") :])
    row["has_error"] = bool(f.errors)
    row["error_message"] = f.errors[0].get("message") if f.errors else None
    row["evals"] = len(f.evals)
    row["allreduce_records"] = len(f.allreduce)
    return row


def ranks_frame(
    kept: Sequence[RankFile],
    stats: Dict[str, np.ndarray],
    dup_count: Dict[int, int],
    campaign_dir: Path,
) -> pd.DataFrame:
    """One row per kept rank file: its meta and summary records and its step statistics."""
    rows = [_rank_row(f, dup_count, campaign_dir) for f in kept]
    df = pd.DataFrame(rows, columns=[c.name for c in RANKS if c.name not in stats])
    for c, v in stats.items():
        df[c] = v
    return typed(df[names(RANKS)], RANKS)


def files_frame(files: Sequence[RankFile], campaign_dir: Path) -> pd.DataFrame:
    """Every log file found, and what was done with it."""
    rows = [
        {
            "file": f.path.relative_to(campaign_dir).as_posix(),
            "run_id": f.run_key,
            "rank": f.rank,
            "size": f.size,
            "status": f.status,
            "format_version": f.format_version,
            "steps": f.steps,
            "truncated_lines": f.truncated_lines,
            "bad_lines": f.bad_lines,
            "restarts": f.restarts,
            "line_by_line": f.detail,
        }
        for f in files
    ]
    df = pd.DataFrame(rows, columns=names(FILES))
    df = df.sort_values("file", kind="stable").reset_index(drop=True)
    return typed(df, FILES)
