"""Statistics over repeats: median, confidence intervals, coefficient of variation, jitter.

Definitions (also in ``docs/metrics.md``):

- headline value: the **median** over repeats;
- ``ci95_low``/``ci95_high``: 95 % **Student-t confidence interval of the mean**,
  ``mean +/- t(0.975, n-1) * s / sqrt(n)`` with ``s`` the sample standard deviation
  (``ddof=1``); undefined for ``n < 2``;
- ``median_ci95_low``/``median_ci95_high``: distribution-free **order-statistic confidence
  interval of the median** ``[x_(j), x_(n-j+1)]`` with the largest ``j`` whose binomial
  coverage ``1 - 2 P(Bin(n, 1/2) <= j-1)`` is at least 95 %; it exists only for ``n >= 6``;
- ``cv``: coefficient of variation ``s / mean``; a configuration is *noisy* when ``cv`` is
  above a threshold (default 5 %);
- jitter: ``1.4826 * MAD`` (median absolute deviation scaled to estimate a normal sigma,
  as in tf_cnn_benchmarks).
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

# t(0.975, df) for df = 1..30 (scipy.stats.t.ppf); beyond, the Cornish-Fisher expansion
_T975 = [
    12.706205,
    4.302653,
    3.182446,
    2.776445,
    2.570582,
    2.446912,
    2.364624,
    2.306004,
    2.262157,
    2.228139,
    2.200985,
    2.178813,
    2.160369,
    2.144787,
    2.131450,
    2.119905,
    2.109816,
    2.100922,
    2.093024,
    2.085963,
    2.079614,
    2.073873,
    2.068658,
    2.063899,
    2.059539,
    2.055529,
    2.051831,
    2.048407,
    2.045230,
    2.042272,
]
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """The 97.5 % quantile of Student's t distribution with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z, v = _Z975, float(df)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


def t_ci_mean(values: Sequence[float]) -> Tuple[float, float]:
    """95 % Student-t confidence interval of the mean (NaNs when fewer than 2 values)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2:
        return (math.nan, math.nan)
    mean = float(x.mean())
    half = t975(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return (mean - half, mean + half)


def median_ci_rank(n: int, confidence: float = 0.95) -> Optional[int]:
    """The 1-based ``j`` of the order-statistic interval [x_(j), x_(n-j+1)] for the median.

    The largest ``j`` with coverage ``1 - 2 P(B <= j-1) >= confidence``, ``B ~ Bin(n, 1/2)``;
    None when even [min, max] does not reach the confidence (n < 6 for 95 %).
    """
    best = None
    cdf = 0.0
    for j in range(1, n // 2 + 1):
        cdf += math.comb(n, j - 1) / 2.0**n  # P(B <= j-1)
        if 1.0 - 2.0 * cdf >= confidence:
            best = j
        else:
            break
    return best


def median_ci(values: Sequence[float], confidence: float = 0.95) -> Tuple[float, float]:
    x = np.sort(np.asarray(values, dtype=float))
    j = median_ci_rank(len(x), confidence)
    if j is None:
        return (math.nan, math.nan)
    return (float(x[j - 1]), float(x[len(x) - j]))


def jitter(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation."""
    x = np.asarray(values, dtype=float)
    if not len(x):
        return math.nan
    return 1.4826 * float(np.median(np.abs(x - np.median(x))))


def summarize(values: Sequence[float], noise_threshold: float = 0.05) -> Dict[str, float]:
    """Repeat statistics of one configuration's values (NaNs are ignored)."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = len(x)
    out: Dict[str, float] = {
        "n": n,
        "median": math.nan,
        "mean": math.nan,
        "std": math.nan,
        "cv": math.nan,
        "min": math.nan,
        "max": math.nan,
        "ci95_low": math.nan,
        "ci95_high": math.nan,
        "median_ci95_low": math.nan,
        "median_ci95_high": math.nan,
        "noisy": False,
    }
    if n == 0:
        return out
    out["median"] = float(np.median(x))
    out["mean"] = float(x.mean())
    out["min"] = float(x.min())
    out["max"] = float(x.max())
    if n >= 2:
        out["std"] = float(x.std(ddof=1))
        out["cv"] = out["std"] / out["mean"] if out["mean"] else math.nan
        out["ci95_low"], out["ci95_high"] = t_ci_mean(x)
        out["noisy"] = bool(out["cv"] > noise_threshold)
    out["median_ci95_low"], out["median_ci95_high"] = median_ci(x)
    return out


def intervals_overlap(a: Tuple[float, float], b: Tuple[float, float]) -> Optional[bool]:
    """Whether two closed intervals overlap; None when either is undefined."""
    if any(v is None or math.isnan(v) for v in (*a, *b)):
        return None
    return a[0] <= b[1] and b[0] <= a[1]
