"""The report's warning about runs whose training diverged (ddlbench/analyse/training_health.py).

Their throughput is measured like any other run's and stays in every figure; the warning says
which runs did not learn, so that a reader does not take a failed training for a good one.
"""

from __future__ import annotations

from typing import List, Optional

import pandas as pd

from ..analyse.training_health import DIVERGED, NO_LOSS
from .format import missing

#: runs named in the warning, at most
LISTED = 6


def _diverged(runs: pd.DataFrame) -> pd.DataFrame:
    if not len(runs) or "training" not in runs:
        return runs.iloc[0:0]
    return runs[runs["training"] == DIVERGED].sort_values("run_id")


def _loss(v: object) -> str:
    """A loss to three significant digits (``6e-07``, ``2.31``)."""
    return "not finite" if missing(v) else f"{float(v):.3g}"


def diverged_sentences(runs: pd.DataFrame) -> List[str]:
    """The summary's warning: the diverged runs with their first, best and last loss."""
    bad = _diverged(runs)
    if not len(bad):
        return []
    judged = int((runs["training"].notna() & (runs["training"] != NO_LOSS)).sum())
    shown = [
        f"{r['run_id']} {_loss(r['loss_first'])} -> {_loss(r['loss_best'])} -> "
        f"{_loss(r['loss_last'])}"
        for _, r in bad.head(LISTED).iterrows()
    ]
    more = f"; {len(bad) - LISTED} more" if len(bad) > LISTED else ""
    return [
        f"Training diverged in {len(bad)} of {judged} run(s) (loss first -> best -> last): "
        + "; ".join(shown)
        + more
        + ". Their throughput is still shown, but their training failed: the learning rate "
        "is likely too high for that batch (docs/metrics.md#training)."
    ]


def diverged_warning(runs: pd.DataFrame) -> Optional[str]:
    """One line for stderr, or None when no run diverged."""
    bad = _diverged(runs)
    if not len(bad):
        return None
    ids = ", ".join(bad["run_id"].head(3)) + (", ..." if len(bad) > 3 else "")
    return (
        f"training diverged in {len(bad)} run(s) ({ids}): their throughput is in the report, "
        "but the training failed (learning rate likely too high)"
    )
