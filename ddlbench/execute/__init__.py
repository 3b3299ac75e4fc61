"""Executing rendered campaigns: on Slurm, or on this machine (the local executor).

The CLI calls :func:`submit_campaign`, :func:`campaign_status`, :func:`cancel_campaign`,
:func:`retry_campaign` and :func:`wait_campaign`; each takes a campaign folder
(``results/<campaign>/``) and keeps its state in ``state.sqlite`` there. The executor comes
from the cluster profile's ``scheduler`` (``slurm`` or ``local``). See docs/executors.md and
docs/campaigns.md.

Names are imported lazily: the srun/scontrol shims of the local executor live in this
package and must start fast.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "submit_campaign": "ddlbench.execute.api",
    "campaign_status": "ddlbench.execute.api",
    "cancel_campaign": "ddlbench.execute.api",
    "retry_campaign": "ddlbench.execute.api",
    "wait_campaign": "ddlbench.execute.api",
    "refresh": "ddlbench.execute.api",
    "make_executor": "ddlbench.execute.api",
    "SubmitSummary": "ddlbench.execute.base",
    "CampaignStore": "ddlbench.execute.store",
    "load_campaign": "ddlbench.campaign.manifest",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ddlbench.execute' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
