"""Analysis of collected campaign data (formulas: ``docs/metrics.md``).

Public API::

    analyse(data: CampaignData, settings: Settings | None = None) -> Analysis
    Settings(efficiency_threshold=0.8, noise_threshold=0.05, straggler_threshold=1.10)
    compare(base: CampaignData, new: CampaignData, threshold=0.05, settings=None) -> DataFrame
"""

from __future__ import annotations

__all__ = ["Analysis", "Settings", "analyse", "compare"]


def __getattr__(name):
    if name in ("Analysis", "Settings", "analyse"):
        from . import analysis

        return getattr(analysis, name)
    if name == "compare":
        from .compare import compare

        return compare
    raise AttributeError(name)
