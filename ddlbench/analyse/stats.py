"""Statistics over repeats: the one rule for every positive figure, its interval and ratios.

This module owns the rule (``docs/metrics.md``, Over repeats). Throughput, speedup and
efficiency are positive ratios, so they are summarised on the logarithmic scale:

- headline value: the **geometric mean** ``g = exp(l)`` with ``l`` the mean of ``ln x`` over
  the repeats and ``s`` the sample standard deviation of ``ln x`` (``ddof=1``);
- ``ci95_low``/``ci95_high``: the 95 % Student-t interval of ``l`` mapped back,
  ``exp(l +/- t(0.975, n-1) * s / sqrt(n))``: positive by construction, exact coverage for
  log-normal repeats, undefined for ``n < 2``;
- a ratio of two configurations (speedup, efficiency, a change between campaigns) is the ratio
  of their geometric means, ``exp(l_a - l_b)``, with the Welch t interval of ``l_a - l_b``
  (:func:`ratio_interval`); the verdicts test the same difference of logs;
- ``cv``: coefficient of variation ``std / mean`` (a description of the spread; a
  configuration is *noisy* when it is above a threshold, default 5 %);
- jitter: ``1.4826 * MAD`` (median absolute deviation scaled to estimate a normal sigma,
  as in tf_cnn_benchmarks).

Accuracies are not ratios (they live in [0, 1]); :func:`t_ci_mean` serves them.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from .distributions import norm_ppf, t_ppf

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


def log_stats(values: Sequence[float]) -> Tuple[float, float, int]:
    """``(l, s, n)``: mean and sample standard deviation (``ddof=1``) of ``ln x`` over the
    positive finite values; ``s`` is NaN for ``n < 2``, ``l`` for ``n == 0``."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    n = len(x)
    if not n:
        return (math.nan, math.nan, 0)
    lx = np.log(x)
    return (float(lx.mean()), float(lx.std(ddof=1)) if n >= 2 else math.nan, n)


def _arr(v) -> np.ndarray:
    return np.atleast_1d(np.asarray(v, dtype=float))


def _t_quantile(confidence: float, df: np.ndarray) -> np.ndarray:
    """The two-sided ``confidence`` quantile of t with ``df`` (inf: the normal one)."""
    q = np.full(df.shape, np.nan)
    fin = np.isfinite(df) & (df > 0)
    if fin.any():
        q[fin] = t_ppf((1 + confidence) / 2, df[fin])
    q[np.isinf(df)] = norm_ppf((1 + confidence) / 2)
    return q


def gmean_interval(lm, s, n, confidence: float = 0.95):
    """``(g, low, high)`` arrays: the geometric mean ``exp(lm)`` and its interval
    ``exp(lm +/- t((1+conf)/2, n-1) s / sqrt(n))`` (``lm``, ``s``: mean and standard deviation
    of the logs); low/high NaN where ``n < 2``."""
    lm, s, n = _arr(lm), _arr(s), _arr(n)
    ok = (n >= 2) & np.isfinite(lm) & np.isfinite(s)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = _t_quantile(confidence, np.where(ok, n - 1, np.nan)) * s / np.sqrt(n)
        g = np.exp(lm)
    return g, np.where(ok, g * np.exp(-half), np.nan), np.where(ok, g * np.exp(half), np.nan)


def ratio_interval(l_num, s_num, n_num, l_den, s_den, n_den, scale=1.0, confidence=0.95):
    """``(r, low, high)`` arrays: ``r = scale * exp(l_num - l_den)``, the ratio of two
    geometric means, with the Welch t interval of the difference of the mean logs:
    ``se = sqrt(s_num^2 / n_num + s_den^2 / n_den)``, degrees of freedom by
    Welch-Satterthwaite, ``r exp(+/- t((1+conf)/2, v) se)``. A side without spread adds
    nothing (a ratio against itself is exact); low/high NaN where either ``n < 2``."""
    l_num, s_num, n_num, l_den, s_den, n_den = map(_arr, (l_num, s_num, n_num, l_den, s_den, n_den))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = _arr(scale) * np.exp(l_num - l_den)
        v1 = s_num * s_num / n_num
        v2 = s_den * s_den / n_den
        var = v1 + v2
        den = np.where(v1 > 0, v1 * v1 / (n_num - 1), 0.0) + np.where(
            v2 > 0, v2 * v2 / (n_den - 1), 0.0
        )
        df = np.where(den > 0, var * var / den, np.inf)
    ok = (n_num >= 2) & (n_den >= 2) & np.isfinite(r) & np.isfinite(var)
    half = _t_quantile(confidence, np.where(ok, df, np.nan)) * np.sqrt(var)
    lo = np.where(ok, r * np.exp(-half), np.nan)
    hi = np.where(ok, r * np.exp(half), np.nan)
    return r, lo, hi


def repeat_centre(values: Sequence[float]) -> float:
    """The centre over repeats of a non-negative quantity (a time, a throughput): the
    geometric mean of the finite values; the arithmetic mean where one of them is 0 (a
    geometric mean would be 0); NaN when there is none."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return math.nan
    if (x > 0).all():
        return float(np.exp(np.log(x).mean()))
    return float(x.mean())


def t_ci_mean(values: Sequence[float]) -> Tuple[float, float]:
    """95 % Student-t confidence interval of the mean (NaNs when fewer than 2 values); for
    quantities that are not ratios (accuracies), never for throughput."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2:
        return (math.nan, math.nan)
    mean = float(x.mean())
    half = t975(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return (mean - half, mean + half)


def jitter(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation."""
    x = np.asarray(values, dtype=float)
    if not len(x):
        return math.nan
    return 1.4826 * float(np.median(np.abs(x - np.median(x))))


def summarize(values: Sequence[float], noise_threshold: float = 0.05) -> Dict[str, float]:
    """Repeat statistics of one configuration's positive values (NaNs are ignored): the
    geometric mean with its interval (the rule above) and, as a description of the spread,
    median, mean, standard deviation, CV, min and max."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = len(x)
    nan = math.nan
    out: Dict[str, float] = dict(n=n, gmean=nan, log_mean=nan, log_sd=nan, ci95_low=nan)
    out.update(ci95_high=nan, median=nan, mean=nan, std=nan, cv=nan, min=nan, max=nan)
    out["noisy"] = False
    if n == 0:
        return out
    out["median"] = float(np.median(x))
    out["mean"] = float(x.mean())
    out["min"] = float(x.min())
    out["max"] = float(x.max())
    lm, s, k = log_stats(x)
    out["log_mean"], out["log_sd"] = lm, s
    g, lo, hi = gmean_interval(lm, s, k)
    out["gmean"], out["ci95_low"], out["ci95_high"] = float(g[0]), float(lo[0]), float(hi[0])
    if n >= 2:
        out["std"] = float(x.std(ddof=1))
        out["cv"] = out["std"] / out["mean"] if out["mean"] else math.nan
        out["noisy"] = bool(out["cv"] > noise_threshold)
    return out


def intervals_overlap(a: Tuple[float, float], b: Tuple[float, float]) -> Optional[bool]:
    """Whether two closed intervals overlap; None when either is undefined."""
    if any(v is None or math.isnan(v) for v in (*a, *b)):
        return None
    return a[0] <= b[1] and b[0] <= a[1]
