"""Student-t and normal distribution functions on numpy arrays (no scipy).

- :func:`betainc`: the regularised incomplete beta function ``I_x(a, b)`` by the continued
  fraction of Numerical Recipes (``betacf``, modified Lentz), vectorised;
- :func:`t_cdf`, :func:`t_sf`: Student's t distribution with real (Welch) degrees of
  freedom, ``P(T <= t) = 1 - I_{v/(v+t^2)}(v/2, 1/2) / 2`` for ``t >= 0``;
- :func:`t_ppf`: its quantile, by bisection on :func:`t_cdf` (to ~1e-12 relative);
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
    return _LGAMMA(x).astype(float)


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


def t_ppf(p, df) -> np.ndarray:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``0 < p < 1``)."""
    p, df = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(df, dtype=float))
    q = np.where(p > 0.5, p, 1.0 - p)  # solve the upper half, mirror back
    hi = np.ones_like(q)
    for _ in range(80):  # bracket: t_cdf(hi) >= q
        short = t_cdf(hi, df) < q
        if not short.any():
            break
        hi = np.where(short, hi * 2.0, hi)
    lo = np.zeros_like(q)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        below = t_cdf(mid, df) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    x = 0.5 * (lo + hi)
    x = np.where(p > 0.5, x, -x)
    return np.where((p <= 0) | (p >= 1) | np.isnan(p) | np.isnan(df), np.nan, x)


def norm_ppf(p: float) -> float:
    """The ``p`` quantile of the standard normal distribution."""
    return NormalDist().inv_cdf(p)
