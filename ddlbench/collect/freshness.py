"""Whether collected data is up to date: a fingerprint of what the collector reads.

The fingerprint, kept in ``data/collect.json``, has two parts:

- the files the collector reads (``campaign.json``, each run's ``run.json``, Slurm output
  files, rank logs, GPU telemetry logs, pre-flight reports, placement records, NCCL's debug
  logs): their names, sizes and modification times;
- the campaign store's rows that the runs table takes its states from
  (:func:`ddlbench.collect.states.store_rows`: every attempt's run, number, state, job id,
  exit code, times, nodes, signals, reason, cause, message, whether a cancel was asked): a
  digest of their content.

The store is not taken by its files. Every open of ``state.sqlite`` in WAL mode creates,
empties or removes ``state.sqlite-wal`` and ``-shm``, so their sizes and times change when a
command only reads the store (``ddlbench status`` on ended runs, ``list``, ``report``); and a
write can sit in the WAL, leaving the main file as it was until a checkpoint. SQLite's own
counters do not say it either: ``PRAGMA data_version`` is per connection, and the file header's
change counter is not bumped by commits in WAL mode. Reading the rows is exact and cheap: one
read-only query of a table with a row per attempt (milliseconds, however large the logs). A
write that changes what the collector reads (a new attempt, a state, an exit code, a time)
makes the data stale; opening or reading the store, or a poll that only refreshes
bookkeeping columns, does not.

The collector takes the fingerprint before it reads the logs and the store, so one that changes
while it runs leaves the data stale, never wrongly fresh. Standard library only: ``list``
asks :func:`is_stale` of every campaign.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator, Optional

from ddlbench.campaign.paths import COLLECT_INFO, CampaignPaths

from .data_files import REQUIRED_FILES
from .states import store_rows

#: bump when the data files change meaning or columns; what each version changed:
#: docs/metrics.md#collector-versions
COLLECTOR_VERSION = 7


def iter_inputs(campaign_dir: Path) -> Iterator[Path]:
    """Every file whose change makes collected data stale (the store is :func:`store_digest`'s)."""
    paths = CampaignPaths.of(campaign_dir)
    if paths.manifest.is_file():
        yield paths.manifest
    for rp in paths.run_folders():
        if rp.config.is_file():
            yield rp.config
        yield from rp.scheduler_outputs()
        yield from rp.all_rank_logs()
        # GPU telemetry and pre-flight reports feed run columns (collect/gpu_columns.py)
        yield from rp.telemetry_logs()
        yield from rp.preflight_reports()
        # placement records and NCCL's debug logs feed the placement columns (placement.py)
        for k in rp.attempts():
            folder = rp.attempt(k)
            yield from sorted(folder.glob("placement/rank-*.json"))
            yield from sorted(folder.glob("nccl/*.log"))


def store_digest(campaign_dir: Path) -> str:
    """A digest of the store rows the collector reads; ``none`` without a readable store or
    without a row in it (the first ``status`` of a dry run creates an empty store: no change)."""
    found = store_rows(campaign_dir)
    if found is None or not found.rows:
        return "none"
    rows = [[row.get(c) for c in found.columns] for row in found.rows]  # ordered by the view
    doc = json.dumps([found.columns, rows], default=str)
    return hashlib.sha256(doc.encode()).hexdigest()


def fingerprint(campaign_dir: Path) -> str:
    """A digest of the input files' names, sizes and modification times, and of the store's
    rows that the collector reads."""
    h = hashlib.sha256()
    for p in iter_inputs(campaign_dir):
        try:
            st = p.stat()
        except OSError:
            continue
        rel = p.relative_to(campaign_dir).as_posix()
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    h.update(f"store\0{store_digest(campaign_dir)}\n".encode())
    h.update(f"collector {COLLECTOR_VERSION}".encode())
    return h.hexdigest()


def read_collect_info(campaign_dir: Path) -> Optional[dict]:
    try:
        return json.loads((CampaignPaths.of(campaign_dir).data / COLLECT_INFO).read_text())
    except (OSError, ValueError):
        return None


def is_stale(campaign_dir: Path) -> bool:
    """True when data/ is missing, from another collector version, or older than its inputs.

    The one rule for "collected and up to date": ``report``, ``compare`` and ``predict``
    collect again when it is true, and ``ddlbench list`` shows it in its COLLECTED column."""
    info = read_collect_info(campaign_dir)
    if not info or info.get("collector_version") != COLLECTOR_VERSION:
        return True
    data = CampaignPaths.of(campaign_dir).data
    if any(not (data / name).is_file() for name in REQUIRED_FILES):
        return True
    return info.get("inputs") != fingerprint(campaign_dir)
