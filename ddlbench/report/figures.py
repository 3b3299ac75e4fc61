"""Which figures a report has, and drawing them, whole or shared between two processes.

The figures themselves are drawn by :mod:`.plots` and :mod:`.plots_training`, the per-rank
figure of the Stragglers section here; :mod:`.worker` draws them in a second process while
the report's text is made. Which scaling figures are drawn: :mod:`.limits`.
"""

from __future__ import annotations

import math
import textwrap
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .limits import has_scaling
from .plots import (
    FORMATS,
    busbw_figure,
    efficiency_figure,
    new_figure,
    save,
    styled,
    throughput_figure,
)
from .plots_training import accuracy_batch_figure, curves_figure


def _straggler_metric(stragglers: Optional[pd.DataFrame], run_id: str) -> Optional[str]:
    """The quantity of ``run_id``'s straggler index (``compute`` or ``step``), if it has one."""
    if stragglers is None or not len(stragglers) or "straggler_metric" not in stragglers:
        return None
    hit = stragglers.loc[stragglers["run_id"] == run_id, "straggler_metric"]
    return str(hit.iloc[0]) if len(hit) and isinstance(hit.iloc[0], str) else None


def _rank_ranges(ax, r: pd.DataFrame, x, colors, ms: float) -> None:
    """Each rank's 5-95 % (thin) and 25-75 % (thick) step-time range."""
    lw_thin = 0.8 if len(r) <= 256 else 0.4
    lw_thick = 3.0 if len(r) <= 64 else (1.6 if len(r) <= 256 else 0.9)
    lo, hi = r["step_time_p5_s"] * ms, r["step_time_p95_s"] * ms
    ax.vlines(x, lo, hi, colors=colors, linewidth=lw_thin, alpha=0.6)
    lo, hi = r["step_time_p25_s"] * ms, r["step_time_p75_s"] * ms
    ax.vlines(x, lo, hi, colors=colors, linewidth=lw_thick)


def rank_ticks(ranks, most: int = 10) -> List[int]:
    """Integer x ticks at ranks that exist: the multiples of the smallest power of two that
    leaves at most ``most`` ticks between the lowest and the highest rank."""
    lo, hi = int(min(ranks)), int(max(ranks))
    step = 1
    while math.ceil((hi - lo + 1) / step) > most:
        step *= 2
    return [t for t in range(lo + (-lo) % step, hi + 1, step)]


def _rank_title(what: str, run_id: str, compute: bool, hosts: int, threshold) -> str:
    """The per-rank figure's title, naming only the marks drawn, wrapped to the width."""
    marks = ["dot: median"] if compute else ["dot: median", "bar: 25-75 %", "line: 5-95 %"]
    marks += ["colour alternates per host"] if hosts > 1 else []
    marks += ["dashed: median of ranks"] + (["dotted: straggler threshold"] if threshold else [])
    lines = textwrap.wrap(f"({'; '.join(marks)})", width=100)
    return "\n".join([f"Per-rank {what} (the straggler index's quantity), {run_id}"] + lines)


@styled
def rank_distribution_figure(
    ranks: pd.DataFrame,
    run_id: str,
    top: int = 3,
    metric: Optional[str] = None,
    threshold: Optional[float] = None,
):
    """Per-rank times of one run in the quantity its straggler index uses (``metric``):
    the per-rank median compute time for ``compute``, else the step time's median,
    interquartile range and 5-95 % range; the median over ranks, and ``threshold`` x it."""
    compute = metric == "compute" and "compute_median_s" in ranks
    key = "compute_median_s" if compute else "step_time_median_s"
    r = ranks.sort_values("rank")
    r = r[r[key].notna()]
    fig, (ax,) = new_figure(7.2, 4.4, top=0.87)
    if not len(r):
        return fig
    x, ms = r["rank"].to_numpy(), 1e3
    hosts = r["host"].fillna("?").astype(str).to_numpy()
    uniq = list(dict.fromkeys(hosts))
    shade = {h: ("#1f77b4" if i % 2 == 0 else "#ff7f0e") for i, h in enumerate(uniq)}
    colors = [shade[h] for h in hosts]
    if not compute:
        _rank_ranges(ax, r, x, colors, ms)
    dots = colors if compute else "black"  # without bars the dots carry the host colour
    ax.scatter(x, r[key] * ms, s=14 if len(r) <= 256 else 3, c=dots, zorder=3)
    centre = float(np.median(r[key])) * ms
    ax.axhline(centre, color="grey", linestyle="--", linewidth=1)
    top_y = float((r[key] if compute else r["step_time_p95_s"]).max()) * ms
    if threshold:
        ax.axhline(centre * threshold, color="#d62728", linestyle=":", linewidth=1)
        top_y = max(top_y, centre * threshold)
    slow = r.sort_values([key, "rank"], ascending=[False, True]).head(top)
    for _, s in slow.iterrows():
        ax.annotate(
            f"rank {int(s['rank'])}\n{s['host']}",
            (s["rank"], s[key] * ms),
            xytext=(6, 6),
            textcoords="offset points",
            fontsize=8,
        )
    what = "compute time" if compute else "step time"
    ax.set_xlabel("rank")
    ax.set_xticks(rank_ticks(x))
    ax.set_ylabel(f"{what} (ms)")
    title = _rank_title(what, run_id, compute, len(uniq), threshold)
    ax.set_title(title, fontsize=9.5)
    fig.subplots_adjust(top=0.87 - 0.035 * (title.count("\n") - 1))
    ax.set_xlim(x.min() - 1, x.max() + 1)
    ax.set_ylim(0, top_y * 1.18)
    return fig


def figure_plan(a) -> List[Tuple[str, str, Callable[[], object]]]:
    """``(key, file name, drawing function)`` of every figure the analysis has data for."""
    plan: List[Tuple[str, str, Callable[[], object]]] = []
    if len(a.points) and a.points["throughput_gmean"].notna().any():
        threshold = a.settings.efficiency_threshold
        plan.append(("throughput", "throughput", lambda: throughput_figure(a.points, a.series)))
        if has_scaling(a.points, a.series):  # else a stack of 100 % bases: not drawn
            draw_eff = partial(efficiency_figure, a.points, a.series, threshold)
            plan.append(("efficiency", "efficiency", draw_eff))
    if a.largest_run and len(a.largest_ranks):
        metric = _straggler_metric(a.stragglers, a.largest_run)
        draw = partial(rank_distribution_figure, a.largest_ranks, a.largest_run, metric=metric)
        plan.append(
            ("ranks", "rank_step_times", partial(draw, threshold=a.settings.straggler_threshold))
        )
    if len(a.convergence) and a.convergence["final_accuracy_mean"].notna().any():
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
