"""What the scaling figures show, decided without matplotlib: which series they draw, whether
the efficiency figure is drawn at all, and where their value axes stop, with the 95 %
intervals that run beyond an axis and are cut there (docs/reports.md).

The figures (:mod:`.plots`, drawn in the figure worker) and their captions (the report's main
process, which imports no matplotlib) both ask this module, so that a caption says an
interval was cut exactly when the figure cuts one.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd

#: the efficiency axis stops at the larger of this (%) ...
EFFICIENCY_TOP_MIN = 150.0
#: ... and this multiple of the highest point; an interval beyond it is cut there
EFFICIENCY_TOP_FACTOR = 1.5
#: the throughput axis reaches at most this factor below the lowest and above the highest
#: point or ideal value; an interval beyond it is cut there
THROUGHPUT_SPAN = 4.0
#: matplotlib's default margin, as a fraction of the log range, kept on a side not cut
LOG_MARGIN = 0.05


def plot_series(points: pd.DataFrame, series: pd.DataFrame) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """The series to draw: throughput mode when present, else every mode."""
    if not len(points):
        return points, series
    modes = set(series["mode"])
    if "throughput" in modes:
        series = series[series["mode"] == "throughput"]
        points = points[points["series"].isin(set(series["series"]))]
    return points, series


def has_scaling(points: pd.DataFrame, series: pd.DataFrame) -> bool:
    """Whether a series drawn has an efficiency at two device counts or more: without one,
    the efficiency figure would be a stack of 100 % base points and is not drawn."""
    points, _ = plot_series(points, series)
    if not len(points) or "efficiency" not in points:
        return False
    p = points[points["efficiency"].notna()]
    return bool(len(p) and p.groupby("series")["devices"].nunique().max() >= 2)


def _values(points: pd.DataFrame, column: str) -> np.ndarray:
    if column not in points:
        return np.array([], dtype=float)
    v = pd.to_numeric(points[column], errors="coerce").to_numpy(dtype=float)
    return v[np.isfinite(v)]


def efficiency_top(points: pd.DataFrame) -> Tuple[float, float]:
    """The efficiency axis' top and the cap it never exceeds, in %: tall enough for every
    point and interval (at least 110 %, 5 points above the highest), but at most the cap,
    ``max(EFFICIENCY_TOP_MIN, EFFICIENCY_TOP_FACTOR x the highest point)``."""
    eff = _values(points, "efficiency")
    cap = max([EFFICIENCY_TOP_MIN] + [EFFICIENCY_TOP_FACTOR * 100 * v for v in eff])
    ends = np.concatenate([eff, _values(points, "efficiency_ci95_high")])
    needed = max([110.0] + [100 * v + 5 for v in ends])
    return min(needed, cap), cap


def efficiency_cut(points: pd.DataFrame, top: float) -> pd.Series:
    """Which points' efficiency intervals run beyond the axis top ``top`` (in %)."""
    if "efficiency_ci95_high" not in points:
        return pd.Series(False, index=points.index)
    high = pd.to_numeric(points["efficiency_ci95_high"], errors="coerce")
    return (100 * high > top).fillna(False).astype(bool)


def throughput_limits(points: pd.DataFrame) -> Optional[Tuple[float, float, bool, bool]]:
    """``(low, high, cut_low, cut_high)`` of the log throughput axis when an interval's end
    lies more than ``THROUGHPUT_SPAN`` times below the lowest or above the highest point or
    ideal value (that side stops there, the interval is cut; the other side keeps the
    default margin); None when every interval fits (the axis then fits everything)."""
    centre = np.concatenate(
        [_values(points, "throughput_gmean"), _values(points, "ideal_throughput")]
    )
    centre = centre[centre > 0]
    if not len(centre):
        return None
    lo, hi = float(centre.min()) / THROUGHPUT_SPAN, float(centre.max()) * THROUGHPUT_SPAN
    ends_lo = _values(points, "ci95_low")
    ends_hi = _values(points, "ci95_high")
    cut_low = bool(len(ends_lo) and ends_lo.min() < lo)
    cut_high = bool(len(ends_hi) and ends_hi.max() > hi)
    if not (cut_low or cut_high):
        return None
    ends = np.concatenate([centre, ends_lo[ends_lo > 0], ends_hi])
    low = lo if cut_low else float(ends.min())
    high = hi if cut_high else float(ends.max())
    pad = LOG_MARGIN * math.log10(high / low)
    low = low if cut_low else low / 10**pad
    high = high if cut_high else high * 10**pad
    return low, high, cut_low, cut_high


def _throughput_note(points: pd.DataFrame) -> str:
    limits = throughput_limits(points)
    if limits is None:
        return ""
    return (
        " Carets at the axis' edge: a 95 % interval that runs beyond the axis, which reaches "
        f"at most {THROUGHPUT_SPAN:g} times below the lowest and above the highest point or "
        "ideal value, is cut there."
    )


def _efficiency_note(points: pd.DataFrame) -> str:
    top, _ = efficiency_top(points)
    cut = efficiency_cut(points, top)
    if not cut.any():
        return ""
    return (
        f" Carets at the top edge: {int(cut.sum())} interval(s) run beyond the axis, which "
        f"stops at {top:.0f} % (the larger of {EFFICIENCY_TOP_MIN:g} % and "
        f"{EFFICIENCY_TOP_FACTOR:g} x the highest point), and are cut there."
    )


def figure_notes(points: pd.DataFrame, series: pd.DataFrame) -> Dict[str, str]:
    """What the captions of the throughput and efficiency figures add when the figure cuts
    an interval at an axis' edge (keyed like the figures); empty when none is cut."""
    if points is None or series is None or not len(points) or not len(series):
        return {}
    points, _ = plot_series(points, series)
    out = {"throughput": _throughput_note(points[points["throughput_gmean"].notna()])}
    if "efficiency" in points:
        out["efficiency"] = _efficiency_note(points[points["efficiency"].notna()])
    return {k: v for k, v in out.items() if v}
