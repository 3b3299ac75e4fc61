"""Where campaigns live: the results root, campaign lookup, and the input fingerprint."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterator, List, Optional, Union

from ddlbench.campaign.paths import RunPaths

from .errors import CampaignNotFound, CollectError

ENV_RESULTS = "DDLBENCH_RESULTS"
DEFAULT_RESULTS = "results"
DATA_DIR = "data"
COLLECT_INFO = "collect.json"
COLLECTOR_VERSION = 3  # bump when the data files change meaning or columns


def results_root(option: Union[str, Path, None] = None) -> Path:
    """The results root: ``option``, else ``$DDLBENCH_RESULTS``, else ``./results``."""
    if option:
        return Path(option)
    env = os.environ.get(ENV_RESULTS)
    return Path(env) if env else Path(DEFAULT_RESULTS)


def _created(campaign_dir: Path) -> tuple:
    path = campaign_dir / "campaign.json"
    try:
        created = json.loads(path.read_text()).get("created") or ""
    except (OSError, ValueError, AttributeError):
        created = ""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    return (str(created), mtime, campaign_dir.name)


def list_campaigns(root: Union[str, Path]) -> List[Path]:
    """Campaign folders (those with a campaign.json) under ``root``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if (p / "campaign.json").is_file()]
    return sorted(found, key=_created)


def latest_campaign(root: Union[str, Path]) -> Path:
    """The most recent campaign under ``root`` (by campaign.json ``created``, then mtime)."""
    found = list_campaigns(root)
    if not found:
        raise CampaignNotFound(f"no campaign (folder with a campaign.json) under {root}")
    return found[-1]


def resolve_campaign(name: Union[str, Path, None], root: Union[str, Path, None] = None) -> Path:
    """A campaign folder from a name under the results root or a path; None: the latest."""
    base = results_root(root)
    if name is None or str(name) == "":
        return latest_campaign(base)
    candidates = [base / str(name), Path(name)]
    for c in candidates:
        if (c / "campaign.json").is_file():
            return c
    for c in candidates:
        if c.is_dir() and (c / "runs").is_dir():
            raise CollectError(f"{c} has no campaign.json (not a campaign folder)")
    raise CampaignNotFound(f"unknown campaign {str(name)!r}: neither {base / str(name)} nor {name}")


def iter_inputs(campaign_dir: Path) -> Iterator[Path]:
    """Every file whose change makes collected data stale."""
    for name in ("campaign.json", "state.sqlite", "state.sqlite-wal"):
        p = campaign_dir / name
        if p.is_file():
            yield p
    runs = campaign_dir / "runs"
    if not runs.is_dir():
        return
    for run_dir in sorted(runs.iterdir()):
        if not run_dir.is_dir():
            continue
        for p in sorted(run_dir.iterdir()):
            if p.is_file() and (p.name == "run.json" or p.suffix in (".err", ".out")):
                yield p
        logs = run_dir / "logs"
        if logs.is_dir():
            yield from sorted(logs.rglob("rank-*.jsonl"))
        # GPU telemetry and pre-flight reports feed run columns (collect/gpu_columns.py)
        paths = RunPaths(run_dir)
        yield from paths.telemetry_logs()
        yield from paths.preflight_reports()


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
        return json.loads((campaign_dir / DATA_DIR / COLLECT_INFO).read_text())
    except (OSError, ValueError):
        return None


def is_stale(campaign_dir: Path) -> bool:
    """True when data/ is missing, from another collector version, or older than its inputs."""
    info = read_collect_info(campaign_dir)
    if not info or info.get("collector_version") != COLLECTOR_VERSION:
        return True
    for name in ("runs.parquet", "ranks.parquet", "steps.parquet"):
        if not (campaign_dir / DATA_DIR / name).is_file():
            return True
    return info.get("inputs") != fingerprint(campaign_dir)
