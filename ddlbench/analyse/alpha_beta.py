"""The allreduce sweep fitted per layout to the alpha-beta model of a ring allreduce,
``t(M) = alpha + (2 (n - 1) / n) M / busbw`` (definitions: ``docs/scaling-model.md``), and
the links a layout that was not swept gets from those fits."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import pandas as pd

from ..values import missing
from . import hierarchy

MIN_SIZES = 3  # message sizes a layout needs for a fit of two constants with a residual


@dataclass
class AlphaBeta:
    """Ring allreduce time for one layout: ``alpha + factor(n) * bytes / busbw``."""

    world_size: int
    nodes: int
    alpha_s: float
    busbw_gbps: float
    points: int
    rms_rel_error: float

    def time(self, nbytes: float) -> float:
        n = self.world_size
        return self.alpha_s + 2 * (n - 1) / n * nbytes / (self.busbw_gbps * 1e9)


def fit_alpha_beta(allreduce: pd.DataFrame) -> List[AlphaBeta]:
    """One fit per (world size, nodes) with more than one rank and at least 3 sizes
    (:func:`fit_sweep` without its reasons)."""
    return fit_sweep(allreduce)[0]


def fit_sweep(allreduce: pd.DataFrame) -> Tuple[List[AlphaBeta], List[str]]:
    """The fits of a sweep and, for each layout that has none, why.

    ``allreduce``: the analysis' per-(configuration, size) table (``time_s`` median).
    Weighted least squares of ``t_i = a + b x_i`` with weights ``1 / t_i`` (relative
    errors: sizes span decades); ``alpha = a`` (clipped at 0), ``busbw = factor / b``. A
    slope that is not positive (the time does not grow with the size: the largest size is
    too small for the bandwidth to show above the timing noise) gives no fit.
    """
    fits: List[AlphaBeta] = []
    gaps: List[str] = []
    if not len(allreduce):
        return fits, ["the sweep has no measured allreduce"]
    ar = allreduce[allreduce["world_size"] > 1]
    if not len(ar):
        return fits, ["the sweep has no layout of more than one rank"]
    for (n, nodes), g in ar.groupby(["world_size", "nodes"], sort=True):
        g = g.groupby("bytes", as_index=False)["time_s"].median()
        fit, gap = _fit_layout(int(n), int(nodes), g)
        if fit is not None:
            fits.append(fit)
        else:
            gaps.append(gap)
    return fits, gaps


def _fit_layout(n: int, nodes: int, g: pd.DataFrame) -> Tuple[Optional[AlphaBeta], str]:
    where = f"{n} ranks on {nodes} node{'s' if nodes != 1 else ''}"
    if len(g) < MIN_SIZES:
        return None, f"{where}: {len(g)} message size(s), {MIN_SIZES} or more are needed"
    x = g["bytes"].to_numpy(dtype=float)
    t = g["time_s"].to_numpy(dtype=float)
    w = 1.0 / t
    A = np.stack([np.ones_like(x), x], axis=1) * w[:, None]
    (a, b), *_ = np.linalg.lstsq(A, t * w, rcond=None)
    if b <= 0:
        return None, (
            f"{where}: the time does not grow with the message size from {_size(x.min())} "
            f"to {_size(x.max())} ({1e3 * t.min():.3g}-{1e3 * t.max():.3g} ms), so no "
            "bandwidth can be fitted: the largest size is too small for the link's bandwidth "
            "to show above the timing noise (sweep larger messages, allreduce.max_bytes, or "
            "more iterations, allreduce.iters)"
        )
    busbw = 2 * (n - 1) / n / float(b) / 1e9
    fit = AlphaBeta(n, nodes, max(float(a), 0.0), busbw, len(g), math.nan)
    pred = np.array([fit.time(v) for v in x])
    fit.rms_rel_error = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return fit, ""


def _size(nbytes: float) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= div:
            return f"{nbytes / div:.3g} {unit}"
    return f"{nbytes:.0f} B"


def allreduce_time(fits: List[AlphaBeta], n: int, nodes: int, nbytes: float) -> float:
    """Predicted allreduce time of ``nbytes`` on ``n`` ranks over ``nodes`` nodes: the fit of
    that layout when it was swept, else the hierarchical ring (``hierarchy.ring``) on the
    links that the sweep's fits give (:func:`links_from_fits`)."""
    if n <= 1:
        return 0.0
    exact = [f for f in fits if f.world_size == n and f.nodes == nodes]
    if exact:
        return exact[0].time(nbytes)
    intra, inter = links_from_fits(fits)
    nodes = max(1, nodes)
    topo = hierarchy.Topology(max(1, math.ceil(n / nodes)), nodes, intra, inter)
    return hierarchy.ring(topo, nbytes).time_s


def links_from_fits(fits: List[AlphaBeta]) -> Tuple[hierarchy.Link, hierarchy.Link]:
    """The intra- and inter-node links of a sweep: bus bandwidth of the largest one-node and
    the largest several-node layout; latency per ring step from their alpha, split as
    NCCL's ring counts steps (``2(n-1) - 2(k-1)`` inside nodes, ``2(k-1)`` across)."""
    one = [f for f in fits if f.nodes <= 1 and f.world_size > 1]
    many = [f for f in fits if f.nodes > 1]
    intra = inter = None
    if one:
        r = max(one, key=lambda f: f.world_size)
        intra = hierarchy.Link(
            "fitted", r.busbw_gbps, r.alpha_s / (2 * (r.world_size - 1)), "fitted",
            busbw_range_gbps=_fit_range(r),
        )  # fmt: skip
    if many:
        r = max(many, key=lambda f: (f.world_size, f.nodes))
        a_in = intra.alpha_s if intra else r.alpha_s / (2 * (r.world_size - 1))
        cross = 2 * (r.nodes - 1)
        a_net = max(0.0, (r.alpha_s - (2 * (r.world_size - 1) - cross) * a_in) / cross)
        inter = hierarchy.Link("fitted", r.busbw_gbps, a_net, "fitted",
                               busbw_range_gbps=_fit_range(r))  # fmt: skip
    return intra or inter, inter or intra  # type: ignore[return-value]


def _fit_range(fit: AlphaBeta) -> Tuple[float, float]:
    """A fitted bus bandwidth's range: +- the fit's rms relative error."""
    e = 0.0 if missing(fit.rms_rel_error) else float(fit.rms_rel_error)
    return fit.busbw_gbps / (1 + e), fit.busbw_gbps * (1 + e)
