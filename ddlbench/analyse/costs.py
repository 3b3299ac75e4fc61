"""What a synchronous step costs beyond compute and bandwidth, and how sure a prediction is
(docs/scaling-model.md#costs-beyond-bandwidth, #prediction-intervals).

Synchronisation: every rank's step time is a draw from a distribution; a synchronous step ends
when the slowest of the ``N`` ranks is done, so it takes the expected maximum of ``N`` draws.
Relative to the median rank, the step grows by ``sync(N) = E[max of N draws] / median - 1``:

* from a campaign, the draws are its measured per-rank step times (each divided by its rank's
  median), and ``E[max of N]`` is the order-statistic sum
  ``sum_i x_(i) ((i/m)^N - ((i-1)/m)^N)`` over the ``m`` sorted draws;
* without one, the draws are normal with a coefficient of variation ``JITTER_CV`` (a default,
  stated as such wherever it is used), ``E[max of N] = 1 + cv z(N)`` with ``z(N)`` the expected
  maximum of ``N`` standard normal draws.

Intervals: the model is evaluated at the pessimistic and the optimistic end of its inputs
(each link's ``busbw_range_gbps``, the jitter's range) and widened by the base measurement's
relative uncertainty (``BASE_UNCERTAINTY`` when the base has no interval of its own).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence, Tuple

#: Default per-rank step-time coefficient of variation, and its range. An assumption, not a
#: measurement of a cluster: dedicated accelerators with a synthetic or cached input pipeline.
#: A campaign's measured per-rank step times replace it (``predict --from``, the report).
JITTER_CV = 0.02
JITTER_CV_RANGE = (0.01, 0.04)
JITTER_SOURCE = (
    "default per-rank step-time jitter: coefficient of variation 2 % (range 1-4 %), an "
    "assumption for dedicated accelerators, not measured on this cluster"
)
#: Relative half-width of a base throughput given without its interval (one measurement).
BASE_UNCERTAINTY = 0.02
#: Compute slowed while a collective overlaps it, as a share of the overlapped time: Lee et al.,
#: "Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
#: Learning", arXiv 2507.03114 (2025): 18.9 % on average, 40 % at most, on 4 x A100, H100,
#: MI250, MI210 (NVLink and xGMI rates). (mid, optimistic end, pessimistic end); in both
#: models by default since 2026-11-27, chosen on points read out of sample
#: (docs/scaling-model.md#overlap-slowdown); ``predict --overlap-slowdown 0`` leaves it out.
OVERLAP_SLOWDOWN = (0.189, 0.0, 0.40)
OVERLAP_SLOWDOWN_SOURCE = (
    f"compute slowed by {100 * OVERLAP_SLOWDOWN[0]:g} % (interval "
    f"{100 * OVERLAP_SLOWDOWN[1]:g}-{100 * OVERLAP_SLOWDOWN[2]:g} %) of the communication it "
    "overlaps: Lee et al. 2025's average and range, measured on 4 x A100/H100/MI250/MI210, not "
    "on this cluster"
)


def overlap_slowdown_s(share: float, comm_s: float, exposed_s: float, compute_s: float) -> float:
    """The step's growth from compute slowed while communication overlaps it: ``share`` of
    the overlapped communication time (``comm - exposed``), at most ``share`` of the compute."""
    return share * min(max(0.0, comm_s - exposed_s), compute_s)


@lru_cache(maxsize=None)
def expected_max_normal(n: int) -> float:
    """``z(n)``: the expected maximum of ``n`` independent standard normal draws (numerical
    integration of ``x n phi(x) Phi(x)^(n-1)``; 0 for one draw)."""
    if n <= 1:
        return 0.0
    h, total = 0.002, 0.0
    for i in range(int(16 / h) + 1):
        x = -8.0 + i * h
        phi = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        total += x * n * phi * cdf ** (n - 1) * h
    return total


def sync_fraction_normal(n: int, cv: float) -> float:
    """The step's growth over the median rank's time for ``n`` normal ranks: ``cv z(n)``."""
    return cv * expected_max_normal(n)


def sync_fraction_empirical(relative_times: Sequence[float], n: int) -> float:
    """The step's growth for ``n`` ranks drawn from measured step times, each divided by its
    rank's median: ``E[max of n draws] - 1`` by the order-statistic sum (see the module)."""
    xs = sorted(float(x) for x in relative_times if x > 0 and math.isfinite(x))
    m = len(xs)
    if n <= 1 or not m:
        return 0.0
    e = sum(x * ((i / m) ** n - ((i - 1) / m) ** n) for i, x in enumerate(xs, start=1))
    return max(0.0, e - 1.0)


#: A base interval wider than this (relative half-width) makes the prediction's interval too
#: wide to use; predict and the report say so.
NOISY_BASE = 0.25


def widen(low: float, high: float, rel: float) -> Tuple[float, float]:
    """``[low, high]`` widened by the factor ``1 + rel`` each way: the base's uncertainty, which
    is symmetric on the log scale as the base's interval is (a t interval of the log
    throughputs, docs/metrics.md), so never below 0 (:func:`relative_half_width`)."""
    return low / (1 + rel), high * (1 + rel)


def relative_half_width(low: float, high: float) -> float:
    """The uncertainty ``rel`` of an interval ``[low, high]`` of a positive quantity that is
    symmetric on the log scale: ``sqrt(high / low) - 1``, the factor ``1 + rel`` either way of
    its centre (the geometric mean): 2,314-12,804 around 5,443 is a factor of 2.35, -57 % to
    +135 %."""
    return math.sqrt(high / low) - 1


def factor_words(rel: float) -> str:
    """``rel`` as the reader's range around the centre: ``-57 % to +135 %``."""
    return f"{100 * (1 / (1 + rel) - 1):+.0f} % to {100 * rel:+.0f} %"


def efficiency_interval(low: float, high: float, rel: float, at_base: bool) -> Tuple[float, float]:
    """The efficiency interval of a point: :func:`widen` of the model's ends, except at the
    base itself, whose efficiency is 1 by definition (its throughput keeps the base's own
    uncertainty, its efficiency has none)."""
    return (1.0, 1.0) if at_base else widen(low, high, rel)
