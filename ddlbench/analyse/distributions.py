"""Student-t and normal distribution functions on numpy arrays (no scipy).

- :func:`betainc`: the regularised incomplete beta function ``I_x(a, b)`` by the continued
  fraction of Numerical Recipes (``betacf``, modified Lentz), vectorised;
- :func:`t_cdf`, :func:`t_sf`: Student's t distribution with real (Welch) degrees of
  freedom, ``P(T <= t) = 1 - I_{v/(v+t^2)}(v/2, 1/2) / 2`` for ``t >= 0``;
- :func:`t_ppf`: its quantile, by safeguarded Newton steps on :func:`t_cdf`;
- :func:`norm_ppf`: the standard normal quantile (``statistics.NormalDist``).

Accuracy is checked against published tables in ``tests/analysis/test_verdicts_stats.py``.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

_LGAMMA = np.frompyfunc(math.lgamma, 1, 1)
_TINY = 1e-300
_EPS = 1e-15


def _lgamma(x: np.ndarray) -> np.ndarray:
    return np.asarray(_LGAMMA(x), dtype=float)


def _betacf(a: np.ndarray, b: np.ndarray, x: np.ndarray, iters: int = 400) -> np.ndarray:
    """Continued fraction of the incomplete beta function (converges for x < (a+1)/(a+b+2))."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = np.where(np.abs(d) < _TINY, _TINY, d)
    d = 1.0 / d
    h = d.copy()
    done = np.zeros(x.shape, dtype=bool)
    for m in range(1, iters + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = np.where(np.abs(d) < _TINY, _TINY, d)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        d = 1.0 / d
        h = np.where(done, h, h * d * c)
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = np.where(np.abs(d) < _TINY, _TINY, d)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        d = 1.0 / d
        delta = d * c
        h = np.where(done, h, h * delta)
        done |= np.abs(delta - 1.0) < _EPS
        if done.all():
            break
    return h


def betainc(a, b, x) -> np.ndarray:
    """Regularised incomplete beta ``I_x(a, b)`` for ``a, b > 0`` and ``0 <= x <= 1``."""
    a, b, x = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, x)))
    x = np.clip(x, 0.0, 1.0)
    out = np.where(x >= 1.0, 1.0, 0.0)
    inner = (x > 0.0) & (x < 1.0)
    if not inner.any():
        return out
    ai, bi, xi = a[inner], b[inner], x[inner]
    lbt = _lgamma(ai + bi) - _lgamma(ai) - _lgamma(bi) + ai * np.log(xi) + bi * np.log1p(-xi)
    front = np.exp(lbt)
    direct = xi < (ai + 1.0) / (ai + bi + 2.0)
    # symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges faster
    aa = np.where(direct, ai, bi)
    bb = np.where(direct, bi, ai)
    xx = np.where(direct, xi, 1.0 - xi)
    cf = _betacf(aa, bb, xx)
    val = front * cf / aa
    out[inner] = np.where(direct, val, 1.0 - val)
    return out


def t_sf(t, df) -> np.ndarray:
    """``P(T > t)`` for Student's t with ``df`` (real, > 0) degrees of freedom."""
    t, df = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(df, dtype=float))
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))  # P(T > |t|)
    out = np.where(t >= 0, tail, 1.0 - tail)
    out = np.where(np.isposinf(t), 0.0, out)
    out = np.where(np.isneginf(t), 1.0, out)
    return np.where(np.isnan(t) | np.isnan(df), np.nan, out)


def t_cdf(t, df) -> np.ndarray:
    """``P(T <= t)``."""
    return 1.0 - t_sf(t, df)


def t_pdf(t, df) -> np.ndarray:
    """Density of Student's t with ``df`` degrees of freedom."""
    t, df = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(df, dtype=float))
    logc = _lgamma((df + 1) / 2) - _lgamma(df / 2) - 0.5 * np.log(df * math.pi)
    return np.exp(logc - (df + 1) / 2 * np.log1p(t * t / df))


def _cornish_fisher(z: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Start value: the Cornish-Fisher expansion of the t quantile around the normal one."""
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


def t_ppf(p, df) -> np.ndarray:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``0 < p < 1``).

    Newton's method on :func:`t_cdf` from the Cornish-Fisher start, kept inside a bracket
    (a step leaving it bisects instead), to ~1e-12 relative."""
    p, df = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(df, dtype=float))
    bad = (p <= 0) | (p >= 1) | np.isnan(p) | np.isnan(df) | (df <= 0)
    q = np.where(bad, 0.75, np.where(p > 0.5, p, 1.0 - p))  # solve the upper half
    v = np.where(bad, 1.0, df)
    z = np.asarray(_NORM_PPF(q), dtype=float)
    x = np.maximum(_cornish_fisher(z, v), 1e-3)
    lo, hi = np.zeros_like(q), np.full_like(q, np.inf)
    solve = v <= 1000
    for _ in range(60 if solve.any() else 0):
        err = t_cdf(x, np.where(solve, v, 1.0)) - q
        lo = np.where(err < 0, x, lo)
        hi = np.where(err >= 0, x, hi)
        step = err / t_pdf(x, np.where(solve, v, 1.0))
        nxt = x - step
        outside = ~((nxt > lo) & (nxt < hi))
        mid = np.where(np.isinf(hi), 2.0 * x, 0.5 * (lo + hi))
        nxt = np.where(outside, mid, nxt)
        done = (np.abs(nxt - x) <= 1e-12 * np.maximum(np.abs(x), 1.0)) | ~solve
        x = nxt
        if done.all():
            break
    # many degrees of freedom: the expansion alone is exact to ~1e-12 (error O(v^-5))
    x = np.where(v > 1000, _cornish_fisher(z, v), x)
    x = np.where(p > 0.5, x, -x)
    return np.where(bad, np.nan, x)


_NORM_PPF = np.frompyfunc(NormalDist().inv_cdf, 1, 1)


def norm_ppf(p: float) -> float:
    """The ``p`` quantile of the standard normal distribution."""
    return NormalDist().inv_cdf(p)
