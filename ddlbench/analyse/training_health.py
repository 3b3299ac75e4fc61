"""Whether a run's training went wrong: its step losses diverged (docs/metrics.md#training).

A throughput figure of a run whose training failed measures the same arithmetic, but a reader
should know that the model did not learn. The rule reads the loss of every step record
(warmup and measured), averaged over the run's ranks step by step, and calls the run
``diverged`` when

- its loss is not finite at the end: the last window of steps has no finite loss (the rank
  log writes NaN and infinity as ``null``) while the steps before it nearly all had one; or
- its loss went back up to where it started: the median of the last window is at least
  ``RETURN_RATIO`` x the starting loss, after the run had either clearly learnt (some window's
  median at most ``LEARNT_RATIO`` x the start) or blown up (a step at least ``BLOWUP_RATIO`` x
  the start, which leaves the weights where the loss stays at chance).

The starting loss is the median of the first ``HEAD_STEPS`` steps (the loss at
initialisation); the windows are ``WINDOW_FRACTION`` of the steps, at least ``MIN_WINDOW``.
A run that never learns (random labels: its loss stays near ln(classes)) never reaches half
its start and does not blow up, and a noisy run that learns ends well below 0.9 x its start,
so neither is flagged. Runs with fewer than ``MIN_STEPS`` finite losses are only checked for a
non-finite end. Cross-entropy losses are positive; a start of zero or below is not judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

#: verdicts, the runs table's ``training`` column
OK, DIVERGED, NO_LOSS = "ok", "diverged", "no loss"
#: the windows: this fraction of the steps, at least MIN_WINDOW steps
WINDOW_FRACTION = 0.05
MIN_WINDOW = 3
#: the starting loss: the median of the first steps (at most this many, at most a window)
HEAD_STEPS = 10
#: fewer finite losses than this: only a non-finite end is judged
MIN_STEPS = 20
#: learnt: a window's median at most this x the start
LEARNT_RATIO = 0.5
#: blew up: one step's loss at least this x the start
BLOWUP_RATIO = 2.0
#: back where it started: the last window's median at least this x the start
RETURN_RATIO = 0.9
#: a non-finite end needs the steps before it to have had a loss this often
REPORTED_FRACTION = 0.9
#: the runs table's columns this module fills
TRAINING_COLUMNS = ("training", "loss_first", "loss_best", "loss_last")


@dataclass(frozen=True)
class TrainingHealth:
    """The verdict on one loss series and the figures it rests on (NaN: none)."""

    verdict: str
    first: float = math.nan
    best: float = math.nan
    last: float = math.nan
    #: why the run diverged, in words (empty otherwise)
    reason: str = ""


def window_size(steps: int) -> int:
    """The window of a series of ``steps`` finite losses."""
    return max(MIN_WINDOW, int(round(WINDOW_FRACTION * steps)))


def run_loss_series(per_rank: Sequence[np.ndarray]) -> np.ndarray:
    """The run's loss per step: the mean over its ranks of their finite losses at the same
    position in their logs (NaN where no rank has one). Ranks of a synchronous run take the
    same steps; a shorter rank simply stops contributing."""
    arrays = [np.asarray(a, dtype=float) for a in per_rank if len(a)]
    if not arrays:
        return np.zeros(0)
    grid = np.full((len(arrays), max(len(a) for a in arrays)), np.nan)
    for i, a in enumerate(arrays):
        grid[i, : len(a)] = np.where(np.isfinite(a), a, np.nan)
    counts = np.sum(~np.isnan(grid), axis=0)
    sums = np.nansum(grid, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _nonfinite_end(losses: np.ndarray) -> Optional[int]:
    """Steps at the end without a finite loss, when they make a non-finite end (else None)."""
    finite = np.isfinite(losses)
    if not finite.any():
        return None
    trailing = len(losses) - 1 - int(np.flatnonzero(finite)[-1])
    before = finite[: len(losses) - trailing]
    if trailing >= window_size(int(before.sum())) and before.mean() >= REPORTED_FRACTION:
        return trailing
    return None


def _figures(values: np.ndarray) -> Dict[str, float]:
    """Start, best window, last window and the highest step after the start of ``values``."""
    w = window_size(len(values))
    head = min(HEAD_STEPS, w)
    stride = max(1, w // 2)
    medians = [float(np.median(values[i : i + w])) for i in range(0, len(values) - w + 1, stride)]
    medians.append(float(np.median(values[-w:])))
    return {
        "first": float(np.median(values[:head])),
        "best": min(medians),
        "last": medians[-1],
        "peak": float(values[head:].max()) if len(values) > head else math.nan,
    }


def training_health(losses: Sequence[float]) -> TrainingHealth:
    """The verdict on one run's loss per step (NaN or infinity: no finite loss that step)."""
    series = np.asarray(losses, dtype=float)
    values = series[np.isfinite(series)]
    if not len(values):
        return TrainingHealth(NO_LOSS)
    f = _figures(values)
    trailing = _nonfinite_end(series)
    if trailing is not None:
        why = f"no finite loss in the last {trailing} steps"
        return TrainingHealth(DIVERGED, f["first"], f["best"], math.nan, why)
    health = TrainingHealth(OK, f["first"], f["best"], f["last"])
    if len(values) < MIN_STEPS or not f["first"] > 0:
        return health
    start = f["first"]
    if f["last"] < RETURN_RATIO * start:
        return health
    if f["best"] <= LEARNT_RATIO * start:
        why = f"the loss fell from {start:.3g} to {f['best']:.3g}, then rose to {f['last']:.3g}"
    elif f["peak"] >= BLOWUP_RATIO * start:
        why = f"the loss blew up from {start:.3g} to {f['peak']:.3g} and stayed at {f['last']:.3g}"
    else:
        return health
    return TrainingHealth(DIVERGED, start, f["best"], f["last"], why)


def _none_if_nan(v: float) -> Optional[float]:
    return None if math.isnan(v) else v


def training_columns(
    row: Dict[str, Any], per_rank: Sequence[np.ndarray], problems: List[str]
) -> TrainingHealth:
    """Fill ``row``'s :data:`TRAINING_COLUMNS` from the run's per-rank loss series (rank
    order); a diverged run gets a line in ``problems``."""
    health = training_health(run_loss_series(per_rank))
    row["training"] = health.verdict
    row["loss_first"] = _none_if_nan(health.first)
    row["loss_best"] = _none_if_nan(health.best)
    row["loss_last"] = _none_if_nan(health.last)
    if health.verdict == DIVERGED:
        problems.append(f"training diverged: {health.reason}")
    return health
