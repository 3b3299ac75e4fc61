"""Collect per-rank logs of a campaign into tables (``data/*.parquet``).

Public API::

    collect_campaign(campaign_dir, *, run_states=None, progress=None, write=True) -> CampaignData
    ensure_collected(campaign_dir, *, run_states=None, progress=None, force=False) -> CampaignData
    load_data(campaign_dir) -> CampaignData
    resolve_campaign(name_or_path_or_None, results=None) -> Path
    results_root(option=None) -> Path
    is_stale(campaign_dir) -> bool

Importing this package is cheap; pandas and pyarrow load on first use of a function.
"""

from __future__ import annotations

from .errors import CampaignNotFound, CollectError, LogFormatError
from .paths import is_stale, latest_campaign, list_campaigns, resolve_campaign, results_root

__all__ = [
    "CampaignNotFound",
    "CollectError",
    "LogFormatError",
    "collect_campaign",
    "ensure_collected",
    "is_stale",
    "latest_campaign",
    "list_campaigns",
    "load_data",
    "resolve_campaign",
    "results_root",
]


def __getattr__(name):
    if name in ("collect_campaign", "ensure_collected", "load_data", "CampaignData"):
        from . import collector

        return getattr(collector, name)
    raise AttributeError(name)
