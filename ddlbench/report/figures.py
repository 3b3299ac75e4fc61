"""Which figures a report has, and drawing them, whole or shared between two processes.

The figures themselves are drawn by :mod:`.plots`; :mod:`.worker` draws them in a second
process while the report's text is made.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from .plots import (
    FORMATS,
    accuracy_batch_figure,
    busbw_figure,
    curves_figure,
    efficiency_figure,
    rank_distribution_figure,
    save,
    throughput_figure,
)


def _straggler_metric(stragglers: Optional[pd.DataFrame], run_id: str) -> Optional[str]:
    """The quantity of ``run_id``'s straggler index (``compute`` or ``step``), if it has one."""
    if stragglers is None or not len(stragglers) or "straggler_metric" not in stragglers:
        return None
    hit = stragglers.loc[stragglers["run_id"] == run_id, "straggler_metric"]
    return str(hit.iloc[0]) if len(hit) and isinstance(hit.iloc[0], str) else None


def figure_plan(a) -> List[Tuple[str, str, Callable[[], object]]]:
    """``(key, file name, drawing function)`` of every figure the analysis has data for."""
    plan: List[Tuple[str, str, Callable[[], object]]] = []
    if len(a.points) and a.points["throughput_gmean"].notna().any():
        threshold = a.settings.efficiency_threshold
        plan.append(("throughput", "throughput", lambda: throughput_figure(a.points, a.series)))
        plan.append(
            ("efficiency", "efficiency", lambda: efficiency_figure(a.points, a.series, threshold))
        )
    if a.largest_run and len(a.largest_ranks):
        metric = _straggler_metric(a.stragglers, a.largest_run)
        draw = partial(rank_distribution_figure, a.largest_ranks, a.largest_run, metric=metric)
        plan.append(
            ("ranks", "rank_step_times", partial(draw, threshold=a.settings.straggler_threshold))
        )
    if len(a.convergence):
        plan.append(
            ("accuracy", "accuracy_vs_batch", partial(accuracy_batch_figure, a.convergence))
        )
    if len(a.curves):
        plan.append(("curves", "training_curves", partial(curves_figure, a.curves)))
    if len(a.allreduce):
        plan.append(("busbw", "allreduce_busbw", partial(busbw_figure, a.allreduce)))
    return plan


def part_of(index: int, count: int, ext: str) -> int:
    """Which of two processes that draw at once draws figure ``index`` of ``count`` in format
    ``ext``: every other figure, both formats (one figure object for both), and the last of an
    odd count split by format (its PNG costs more than its SVG)."""
    if count % 2 and index == count - 1:
        return 0 if ext == FORMATS[0] else 1
    return index % 2


def make_figures(
    analysis, directory: Path, formats: Sequence[str] = FORMATS, part: Optional[int] = None
) -> Dict[str, Dict[str, Path]]:
    """Every figure that the analysis has data for; name -> {"png": path, "svg": path}
    (only the ``formats`` asked for; with ``part``, only that process's share, :func:`part_of`)."""
    out: Dict[str, Dict[str, Path]] = {}
    plan = figure_plan(analysis)
    for i, (key, name, draw) in enumerate(plan):
        mine = [f for f in formats if part is None or part_of(i, len(plan), f) == part]
        if mine:
            out[key] = save(draw(), directory, name, mine)
    return out
