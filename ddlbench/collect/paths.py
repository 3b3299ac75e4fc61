"""The collected data's input fingerprint and staleness.

Finding campaigns (``results_root``, ``list_campaigns``, ``latest_campaign``,
``resolve_campaign``) is :mod:`ddlbench.campaign.resolve`'s; the names are re-exported here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator, Optional

from ddlbench.campaign.paths import DATA_DIR, CampaignPaths
from ddlbench.campaign.resolve import (
    ENV_RESULTS,
    latest_campaign,
    list_campaigns,
    resolve_campaign,
    results_root,
)

COLLECT_INFO = "collect.json"
COLLECTOR_VERSION = 2  # bump when the data files change meaning or columns

__all__ = [
    "COLLECT_INFO",
    "COLLECTOR_VERSION",
    "DATA_DIR",
    "ENV_RESULTS",
    "fingerprint",
    "is_stale",
    "iter_inputs",
    "latest_campaign",
    "list_campaigns",
    "read_collect_info",
    "resolve_campaign",
    "results_root",
]


def iter_inputs(campaign_dir: Path) -> Iterator[Path]:
    """Every file whose change makes collected data stale."""
    paths = CampaignPaths.of(campaign_dir)
    for p in (paths.manifest,) + paths.store_files[:2]:  # the store and its WAL
        if p.is_file():
            yield p
    for run in paths.run_folders():
        for p in sorted(run.dir.iterdir()):
            if p.is_file() and (p == run.config or p.suffix in (".err", ".out")):
                yield p
        yield from run.rank_logs()


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
    for name in ("runs.parquet", "ranks.parquet", "steps.parquet"):
        if not (CampaignPaths.of(campaign_dir).data / name).is_file():
            return True
    return info.get("inputs") != fingerprint(campaign_dir)
