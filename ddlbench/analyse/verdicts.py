"""Significance-tested verdicts over repeats (definitions and defaults: ``docs/metrics.md``).

Inputs are per-configuration repeat statistics (mean ``m``, sample standard deviation ``s``
with ``ddof = 1``, number of complete repeats ``n``) as numpy arrays, one element per
comparison, so that a whole campaign is decided in a few array operations.

- :func:`welch_margin`: one-sided Welch test of ``H0: m_b <= c * m_a`` (``c = 1 + margin``);
- :func:`gain_verdicts`: "does B beat A by at least ``min_gain``?" -> ``yes`` / ``no`` /
  ``inconclusive`` with the repeats a power calculation asks for;
- :func:`repeats_needed`: repeats per configuration for a one-sided Welch test at ``alpha``
  to detect a relative difference ``delta`` with probability ``power`` at the observed CVs;
- :func:`ratio_ci`: confidence interval of a ratio of two means (delta method on the log);
- :func:`knee_range`: the knee of a scaling series with its uncertainty.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..values import missing
from .distributions import norm_ppf, t_ppf, t_sf

YES, NO, INCONCLUSIVE = "yes", "no", "inconclusive"
MAX_REPEATS = 1000  # a power calculation asking for more says "more than 1000"


@dataclass(frozen=True)
class VerdictSettings:
    """Defaults of every verdict (documented in docs/metrics.md)."""

    min_gain: float = 0.05  # the smallest relative change that counts (practical minimum)
    alpha: float = 0.05  # one-sided significance level of every test
    power: float = 0.80  # power of the repeat calculation
    confidence: float = 0.95  # two-sided confidence of the efficiency interval


def _arr(v) -> np.ndarray:
    return np.atleast_1d(np.asarray(v, dtype=float))


def welch_margin(m_a, s_a, n_a, m_b, s_b, n_b, margin=0.0):
    """One-sided Welch test of ``H0: mu_b <= (1 + margin) mu_a`` against ``mu_b > ...``.

    With ``c = 1 + margin``, ``L = m_b - c m_a``, ``v_a = c^2 s_a^2 / n_a``,
    ``v_b = s_b^2 / n_b``: ``t = L / sqrt(v_a + v_b)`` with Welch-Satterthwaite degrees of
    freedom ``(v_a + v_b)^2 / (v_a^2 / (n_a - 1) + v_b^2 / (n_b - 1))``; the p-value is
    ``P(T > t)``. A negative ``margin`` tests ``mu_b > (1 - |margin|) mu_a``. Returns
    ``(p, t, df)`` arrays; NaN where either side has fewer than 2 repeats. With no spread
    at all (``s_a = s_b = 0``) the p-value is 0 when ``L > 0`` and 1 otherwise.
    """
    m_a, s_a, n_a, m_b, s_b, n_b = map(_arr, (m_a, s_a, n_a, m_b, s_b, n_b))
    c = 1.0 + _arr(margin)
    with np.errstate(divide="ignore", invalid="ignore"):
        v_a = c * c * s_a * s_a / n_a
        v_b = s_b * s_b / n_b
        var = v_a + v_b
        diff = m_b - c * m_a
        t = diff / np.sqrt(var)
        df = var * var / (v_a * v_a / (n_a - 1) + v_b * v_b / (n_b - 1))
    ok = (n_a >= 2) & (n_b >= 2) & np.isfinite(m_a) & np.isfinite(m_b)
    exact = ok & (var == 0)
    p = np.full(t.shape, np.nan)
    test = ok & ~exact
    if test.any():
        p[test] = t_sf(t[test], df[test])
    p[exact] = np.where(diff[exact] > 0, 0.0, 1.0)
    return p, np.where(ok, t, np.nan), np.where(test, df, np.nan)


def repeats_needed(cv_a, cv_b, delta: float, alpha: float, power: float) -> np.ndarray:
    """Repeats per configuration for a one-sided Welch test at level ``alpha`` to detect a
    relative difference ``delta`` with probability ``power``.

    Standard deviations in units of the first mean: ``sigma^2 = cv_a^2 + cv_b^2``; then
    ``n = (t_{1-alpha, v} + t_{power, v})^2 sigma^2 / delta^2`` iterated from the normal
    quantiles with ``v = 2 (n - 1)`` (equal ``n``, near-equal variances), rounded up, at
    least 2. A missing CV takes the other's value; NaN when both are missing.
    """
    cv_a, cv_b = _arr(cv_a), _arr(cv_b)
    cv_a = np.where(np.isnan(cv_a), cv_b, cv_a)
    cv_b = np.where(np.isnan(cv_b), cv_a, cv_b)
    sig2 = cv_a * cv_a + cv_b * cv_b
    z = norm_ppf(1 - alpha) + norm_ppf(power)
    n = np.maximum(2.0, z * z * sig2 / (delta * delta))
    for _ in range(5):
        df = np.maximum(2.0 * (np.ceil(np.minimum(n, MAX_REPEATS + 1)) - 1.0), 1.0)
        q = np.array([_t_q(1 - alpha, v) + _t_q(power, v) for v in df.tolist()])
        n = np.maximum(2.0, q * q * sig2 / (delta * delta))
    n = np.ceil(np.minimum(n, MAX_REPEATS + 1))
    return np.where(np.isnan(sig2), np.nan, n)


@functools.lru_cache(maxsize=4096)
def _t_q(p: float, df: float) -> float:
    """A cached scalar t quantile (the power calculation asks for the same ones again)."""
    return float("nan") if math.isnan(df) else float(t_ppf(p, df))


@dataclass
class GainVerdict:
    verdict: Optional[str]  # yes / no / inconclusive / None (no test possible)
    gain: float  # m_b / m_a - 1
    p_value: float  # H0: no gain (mu_b <= mu_a)
    p_below: float  # H0: gain >= min_gain (rejected -> "no")
    repeats_needed: float  # per configuration, power calculation
    more_repeats: float  # beyond the fewer repeats the two configurations have
    reason: str


def gain_verdicts(
    m_a, s_a, n_a, m_b, s_b, n_b, settings: VerdictSettings = VerdictSettings()
) -> List[GainVerdict]:
    """Does B beat A by at least ``min_gain``, one verdict per element.

    ``yes``: the gain is significant (``p < alpha`` for ``H0: mu_b <= mu_a``) and the
    observed gain ``m_b / m_a - 1`` is at least ``min_gain``; ``no``: the data rule out a
    gain of ``min_gain`` (``p < alpha`` for ``H0: mu_b >= (1 + min_gain) mu_a``);
    ``inconclusive`` otherwise, with the repeats a power calculation asks for.
    """
    m_a, s_a, n_a, m_b, s_b, n_b = map(_arr, (m_a, s_a, n_a, m_b, s_b, n_b))
    g, a = settings.min_gain, settings.alpha
    p_up, _, _ = welch_margin(m_a, s_a, n_a, m_b, s_b, n_b, 0.0)
    # "no": reject mu_b >= (1+g) mu_a, i.e. test (1+g) mu_a > mu_b (roles swapped)
    p_dn, _, _ = welch_margin(m_b, s_b, n_b, (1 + g) * m_a, (1 + g) * s_a, n_a, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = m_b / m_a - 1.0
        cv_a, cv_b = s_a / m_a, s_b / m_a
    need = repeats_needed(cv_a, cv_b, g, a, settings.power)
    have = np.minimum(n_a, n_b)
    out = []
    for i in range(len(m_a)):
        vals = (float(v[i]) for v in (gain, p_up, p_dn, need, have))
        out.append(_one_gain(*vals, settings))
    return out


def _one_gain(gain, p_up, p_dn, need, have, st: VerdictSettings) -> GainVerdict:
    more = max(need - have, 0.0) if not math.isnan(need) else math.nan
    if math.isnan(gain):
        return GainVerdict(None, gain, p_up, p_dn, need, more, "no data")
    if math.isnan(p_up):
        why = f"fewer than 2 complete repeats at one of the two scales (have {int(have)})"
        if not math.isnan(need):
            why += f"; about {_count(need)} repeats each resolve a {_pct(st.min_gain)} difference"
        return GainVerdict(INCONCLUSIVE, gain, p_up, p_dn, need, more, why)
    if p_up < st.alpha and gain >= st.min_gain:
        return GainVerdict(YES, gain, p_up, p_dn, need, more, _p(p_up))
    if p_dn < st.alpha:
        what = "a loss" if gain < 0 else f"below the {_pct(st.min_gain)} minimum"
        return GainVerdict(NO, gain, p_up, p_dn, need, more, f"{what}, {_p(p_dn)}")
    if more >= 1:
        why = (
            f"{_count(more)} more repeats would resolve a {_pct(st.min_gain)} difference at "
            f"the observed CV (alpha {st.alpha:g}, power {st.power:g})"
        )
    else:
        why = (
            f"the gain is close to the {_pct(st.min_gain)} minimum; {int(have)} repeats "
            "already resolve that difference at the observed CV"
        )
    return GainVerdict(INCONCLUSIVE, gain, p_up, p_dn, need, more, why)


def _pct(v: float) -> str:
    return f"{100 * v:g} %"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _count(n: float) -> str:
    return f"more than {MAX_REPEATS}" if n > MAX_REPEATS else f"{int(n)}"


def ratio_ci(m_num, s_num, n_num, m_den, s_den, n_den, scale=1.0, confidence: float = 0.95):
    """Confidence interval of ``scale * m_num / m_den`` (delta method on the log).

    ``se(log R) = sqrt(cv_num^2 / n_num + cv_den^2 / n_den)`` with ``cv = s / m``;
    ``R exp(+/- t_{(1+conf)/2, v} se)``, ``v`` by Welch-Satterthwaite on the two terms.
    Returns ``(ratio, low, high)`` arrays; low/high NaN where either ``n < 2``. A term
    with no spread contributes nothing (a ratio against itself is exact).
    """
    m_num, s_num, n_num, m_den, s_den, n_den = map(_arr, (m_num, s_num, n_num, m_den, s_den, n_den))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = _arr(scale) * m_num / m_den
        v1 = (s_num / m_num) ** 2 / n_num
        v2 = (s_den / m_den) ** 2 / n_den
        var = v1 + v2
        den = np.where(v1 > 0, v1 * v1 / (n_num - 1), 0.0) + np.where(
            v2 > 0, v2 * v2 / (n_den - 1), 0.0
        )
        df = np.where(den > 0, var * var / den, np.inf)
    ok = (n_num >= 2) & (n_den >= 2) & (m_num > 0) & (m_den > 0)
    q = np.full(r.shape, np.nan)
    fin = ok & np.isfinite(df)
    if fin.any():
        q[fin] = t_ppf((1 + confidence) / 2, df[fin])
    q[ok & ~np.isfinite(df)] = norm_ppf((1 + confidence) / 2)
    half = q * np.sqrt(var)
    lo = np.where(ok, r * np.exp(-half), np.nan)
    hi = np.where(ok, r * np.exp(half), np.nan)
    return r, lo, hi


ABOVE, BELOW, UNSURE = "above", "below", "undetermined"


def threshold_class(low: Sequence[float], high: Sequence[float], threshold: float) -> List[str]:
    """Per point: ``above`` (CI entirely at or above the threshold), ``below`` (entirely
    below) or ``undetermined`` (the CI straddles it, or there is no CI)."""
    out = []
    for lo, hi in zip(low, high):
        if lo is not None and not math.isnan(lo) and lo >= threshold:
            out.append(ABOVE)
        elif hi is not None and not math.isnan(hi) and hi < threshold:
            out.append(BELOW)
        else:
            out.append(UNSURE)
    return out


def knee_range(devices: Sequence[int], classes: Sequence[str]) -> Tuple[int, int]:
    """``(low, high)``: efficiency stays at or above the threshold with confidence up to
    ``low`` (every scale up to it is ``above``; the base always is), and the data cannot
    exclude that it does up to ``high`` (no scale up to it is ``below``). ``low == high``:
    the knee is known. ``devices`` ascending, the first being the base."""
    low = high = devices[0]
    sure = True
    for d, c in zip(devices[1:], classes[1:]):
        if c == BELOW:
            break
        high = d
        if sure and c == ABOVE:
            low = d
        else:
            sure = False
    return low, high


# ------------------------------------------------------------------ scaling series


def _clear_verdicts(points: List[dict], srow: dict, usable: int) -> None:
    """The verdict columns, empty, on every point and on the series row."""
    for p in points:
        p.update(
            step_from=None,
            gain=math.nan,
            gain_p=math.nan,
            step_verdict=None,
            step_reason="",
            step_repeats_needed=math.nan,
            efficiency_mean=math.nan,
            efficiency_ci95_low=math.nan,
            efficiency_ci95_high=math.nan,
            efficiency_class=None,
        )
    srow.update(
        more_devices_help=None,
        more_devices_reason="one device count only" if usable < 2 else "",
        helps_up_to=None,
        knee_low=None,
        knee_high=None,
    )


def _annotate_steps(
    pts: List[dict],
    srow: dict,
    m: np.ndarray,
    s: np.ndarray,
    n: np.ndarray,
    settings: VerdictSettings,
) -> None:
    """Each step's gain verdict, how far more devices keep helping, and the last step's say."""
    steps = gain_verdicts(m[:-1], s[:-1], n[:-1], m[1:], s[1:], n[1:], settings)
    chain = True
    for prev, p, v in zip(pts[:-1], pts[1:], steps):
        p.update(
            step_from=prev["devices"],
            gain=v.gain,
            gain_p=v.p_value,
            step_verdict=v.verdict,
            step_reason=v.reason,
            step_repeats_needed=v.repeats_needed,
        )
        chain = chain and v.verdict == YES
        if chain:
            srow["helps_up_to"] = p["devices"]
    last = steps[-1]
    srow["more_devices_help"] = last.verdict
    srow["more_devices_reason"] = (
        f"{pts[-2]['devices']} -> {pts[-1]['devices']} devices: {_signed(last.gain)}, "
        + last.reason
    )


def annotate_series(
    points: List[dict], srow: dict, threshold: float, settings: VerdictSettings
) -> None:
    """Add the verdict columns to one scaling series' points (ascending device count, as
    dicts with ``devices``, ``throughput_mean``, ``throughput_std``, ``repeats``) and to
    its series row ``srow``. Points without a complete repeat take no part."""
    pts = [p for p in points if _num(p.get("throughput_mean")) and p["throughput_mean"] > 0]
    _clear_verdicts(points, srow, len(pts))
    if not pts:
        return
    m = np.array([p["throughput_mean"] for p in pts], dtype=float)
    s = np.array([_nan(p.get("throughput_std")) for p in pts], dtype=float)
    n = np.array([p["repeats"] or 0 for p in pts], dtype=float)
    d = np.array([p["devices"] for p in pts], dtype=float)
    base = pts[0]
    r, lo, hi = ratio_ci(m, s, n, m[0], s[0], n[0], d[0] / d, settings.confidence)
    lo[0] = hi[0] = r[0] = 1.0  # the base is 1 by definition
    classes = threshold_class(lo, hi, threshold)
    classes[0] = ABOVE if threshold <= 1.0 else BELOW
    for p, ri, li, hi_, c in zip(pts, r, lo, hi, classes):
        p.update(efficiency_mean=ri, efficiency_ci95_low=li, efficiency_ci95_high=hi_)
        p["efficiency_class"] = c
    srow["knee_low"], srow["knee_high"] = knee_range([p["devices"] for p in pts], classes)
    srow["helps_up_to"] = base["devices"]
    if len(pts) >= 2:
        _annotate_steps(pts, srow, m, s, n, settings)


def _num(v) -> bool:
    return isinstance(v, (int, float, np.floating, np.integer)) and not missing(v)


def _nan(v) -> float:
    return float(v) if _num(v) else math.nan


def _signed(g: float) -> str:
    return "-" if math.isnan(g) else f"{100 * g:+.1f} %"


# ------------------------------------------------------------------ compare

REGRESSED, IMPROVED, UNCHANGED = "regressed", "improved", "unchanged"


@dataclass
class ChangeVerdict:
    verdict: str  # regressed / improved / unchanged / inconclusive
    change: float  # m_new / m_base - 1
    p_value: float  # of the test behind the verdict (the smaller one-sided p otherwise)
    repeats_needed: float
    reason: str


def change_verdicts(
    m_a, s_a, n_a, m_b, s_b, n_b, settings: VerdictSettings = VerdictSettings()
) -> List[ChangeVerdict]:
    """Base A vs new B, with ``min_gain`` as the threshold ``d``:

    ``regressed``: ``p < alpha`` for ``H0: mu_b >= mu_a`` and ``m_b / m_a - 1 <= -d``;
    ``improved``: ``p < alpha`` for ``H0: mu_b <= mu_a`` and ``m_b / m_a - 1 >= d``;
    ``unchanged``: both ``H0: mu_b >= (1 + d) mu_a`` and ``H0: mu_b <= (1 - d) mu_a`` are
    rejected at ``alpha`` (two one-sided tests: the change lies within +/- d);
    ``inconclusive`` otherwise (with the repeats a power calculation asks for).
    """
    m_a, s_a, n_a, m_b, s_b, n_b = map(_arr, (m_a, s_a, n_a, m_b, s_b, n_b))
    d, a = settings.min_gain, settings.alpha
    p_up, _, _ = welch_margin(m_a, s_a, n_a, m_b, s_b, n_b, 0.0)
    p_down, _, _ = welch_margin(m_b, s_b, n_b, m_a, s_a, n_a, 0.0)
    p_lt_hi, _, _ = welch_margin(m_b, s_b, n_b, (1 + d) * m_a, (1 + d) * s_a, n_a, 0.0)
    p_gt_lo, _, _ = welch_margin((1 - d) * m_a, (1 - d) * s_a, n_a, m_b, s_b, n_b, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = m_b / m_a - 1.0
        need = repeats_needed(s_a / m_a, s_b / m_a, d, a, settings.power)
    have = np.minimum(n_a, n_b)
    out = []
    for i in range(len(m_a)):
        c, pu, pd_, ph, pl = (float(v[i]) for v in (change, p_up, p_down, p_lt_hi, p_gt_lo))
        nd, hv = float(need[i]), float(have[i])
        if math.isnan(pu):
            why = f"fewer than 2 complete repeats in one campaign (have {int(hv)})"
            out.append(ChangeVerdict(INCONCLUSIVE, c, math.nan, nd, why))
        elif pd_ < a and c <= -d:
            out.append(ChangeVerdict(REGRESSED, c, pd_, nd, _p(pd_)))
        elif pu < a and c >= d:
            out.append(ChangeVerdict(IMPROVED, c, pu, nd, _p(pu)))
        elif max(ph, pl) < a:
            out.append(ChangeVerdict(UNCHANGED, c, max(ph, pl), nd, f"within +/- {_pct(d)}"))
        else:
            more = nd - hv
            why = (
                f"{_count(more)} more repeats would resolve a {_pct(d)} difference at the "
                f"observed CV (alpha {a:g}, power {settings.power:g})"
                if more >= 1
                else f"the change is close to {_pct(d)}; {int(hv)} repeats already resolve that"
            )
            out.append(ChangeVerdict(INCONCLUSIVE, c, min(pu, pd_), nd, why))
    return out
