"""Where campaigns live: the results root and campaign lookup (freshness: ``freshness.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Union

from ddlbench.campaign.paths import MANIFEST, CampaignPaths

from .errors import CampaignNotFound, CollectError
from .freshness import COLLECT_INFO, COLLECTOR_VERSION, fingerprint, is_stale, read_collect_info

__all__ = [
    "COLLECT_INFO",
    "COLLECTOR_VERSION",
    "fingerprint",
    "is_stale",
    "latest_campaign",
    "list_campaigns",
    "read_collect_info",
    "resolve_campaign",
    "results_root",
]

ENV_RESULTS = "DDLBENCH_RESULTS"
DEFAULT_RESULTS = "results"


def results_root(option: Union[str, Path, None] = None) -> Path:
    """The results root: ``option``, else ``$DDLBENCH_RESULTS``, else ``./results``."""
    if option:
        return Path(option)
    env = os.environ.get(ENV_RESULTS)
    return Path(env) if env else Path(DEFAULT_RESULTS)


def _created(campaign_dir: Path) -> tuple:
    path = CampaignPaths.of(campaign_dir).manifest
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
    found = [p for p in root.iterdir() if CampaignPaths.of(p).is_campaign()]
    return sorted(found, key=_created)


def latest_campaign(root: Union[str, Path]) -> Path:
    """The most recent campaign under ``root`` (by campaign.json ``created``, then mtime)."""
    found = list_campaigns(root)
    if not found:
        raise CampaignNotFound(f"no campaign (folder with a {MANIFEST}) under {root}")
    return found[-1]


def resolve_campaign(name: Union[str, Path, None], root: Union[str, Path, None] = None) -> Path:
    """A campaign folder from a name under the results root or a path; None: the latest."""
    base = results_root(root)
    if name is None or str(name) == "":
        return latest_campaign(base)
    candidates = [base / str(name), Path(name)]
    for c in candidates:
        if CampaignPaths.of(c).is_campaign():
            return c
    for c in candidates:
        paths = CampaignPaths.of(c)
        if c.is_dir() and paths.runs.is_dir():
            raise CollectError(f"{c} has no {paths.manifest.name} (not a campaign folder)")
    raise CampaignNotFound(f"unknown campaign {str(name)!r}: neither {base / str(name)} nor {name}")
