"""Whether collected data is up to date: a fingerprint of the collector's inputs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator, Optional

from ddlbench.campaign.paths import COLLECT_INFO, CampaignPaths

from .data_files import REQUIRED_FILES

COLLECTOR_VERSION = 3  # bump when the data files change meaning or columns


def iter_inputs(campaign_dir: Path) -> Iterator[Path]:
    """Every file whose change makes collected data stale."""
    paths = CampaignPaths.of(campaign_dir)
    store, wal = paths.store_files[:2]
    for p in (paths.manifest, store, wal):
        if p.is_file():
            yield p
    for rp in paths.run_folders():
        if rp.config.is_file():
            yield rp.config
        yield from rp.scheduler_outputs()
        yield from rp.all_rank_logs()
        # GPU telemetry and pre-flight reports feed run columns (collect/gpu_columns.py)
        yield from rp.telemetry_logs()
        yield from rp.preflight_reports()


def fingerprint(campaign_dir: Path) -> str:
    """A digest of the inputs' names, sizes and modification times."""
    h = hashlib.sha256()
    for p in iter_inputs(campaign_dir):
        try:
            st = p.stat()
        except OSError:
            continue
        rel = p.relative_to(campaign_dir).as_posix()
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    h.update(f"collector {COLLECTOR_VERSION}".encode())
    return h.hexdigest()


def read_collect_info(campaign_dir: Path) -> Optional[dict]:
    try:
        return json.loads((CampaignPaths.of(campaign_dir).data / COLLECT_INFO).read_text())
    except (OSError, ValueError):
        return None


def is_stale(campaign_dir: Path) -> bool:
    """True when data/ is missing, from another collector version, or older than its inputs."""
    info = read_collect_info(campaign_dir)
    if not info or info.get("collector_version") != COLLECTOR_VERSION:
        return True
    data = CampaignPaths.of(campaign_dir).data
    if any(not (data / name).is_file() for name in REQUIRED_FILES):
        return True
    return info.get("inputs") != fingerprint(campaign_dir)
