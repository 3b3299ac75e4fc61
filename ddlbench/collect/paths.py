"""Re-exports for callers of earlier versions: finding campaigns is
:mod:`ddlbench.campaign.resolve`'s, and the collected data's freshness is ``freshness.py``'s."""

from __future__ import annotations

from ddlbench.campaign.paths import DATA_DIR
from ddlbench.campaign.resolve import (
    ENV_RESULTS,
    latest_campaign,
    list_campaigns,
    resolve_campaign,
    results_root,
)

from .freshness import (
    COLLECT_INFO,
    COLLECTOR_VERSION,
    fingerprint,
    is_stale,
    iter_inputs,
    read_collect_info,
)

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
