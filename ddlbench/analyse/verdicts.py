"""Significance-tested verdicts over repeats (definitions and defaults: ``docs/metrics.md``).

Throughput is summarised by the rule of :mod:`ddlbench.analyse.stats`: on the log scale. The
verdicts' inputs are per-configuration statistics of the logs of the repeats (mean ``l``,
sample standard deviation ``s`` with ``ddof = 1``, number of complete repeats ``n``) as numpy
arrays, one element per comparison, so that a whole campaign is decided in a few array
operations. A relative change is then a difference of logs: ``exp(l_b - l_a) - 1`` is the
change of the geometric means, the same figure the report prints.

- :func:`welch_margin`: one-sided Welch test of ``H0: m_b <= c * m_a`` (``c = 1 + margin``)
  on arithmetic means (accuracies; the log-scale tests below shift a mean instead);
- :func:`gain_verdicts`: "does B beat A by at least ``min_gain``?" -> ``yes`` / ``no`` /
  ``inconclusive`` with the repeats a power calculation asks for;
- :func:`repeats_needed`: repeats per configuration for a one-sided Welch test at ``alpha``
  to detect a relative difference ``delta`` with probability ``power`` at the observed spread;
- :func:`knee_range`: the knee of a scaling series with its uncertainty;
- :func:`busy_note`, :func:`busy_verdict`: the one rule for a result resting on runs that the
  pre-flight found started on a busy node (``preflight_busy``): every comparison (the scaling
  steps, ``compare``, the language-model and backup-worker comparisons) makes a decisive verdict
  ``inconclusive`` and keeps the test's own in the reason (docs/metrics.md#busy-nodes).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..values import missing
from .distributions import norm_ppf, t_ppf, t_sf
from .stats import ratio_interval

YES, NO, INCONCLUSIVE = "yes", "no", "inconclusive"
MAX_REPEATS = 1000  # a power calculation asking for more says "more than 1000"
#: the words a verdict resting on a busy node's run carries beside it (tables, compare)
BUSY_NODE = "busy node"


@dataclass(frozen=True)
class VerdictSettings:
    """Defaults of every verdict (documented in docs/metrics.md)."""

    min_gain: float = 0.05  # the smallest relative change that counts (practical minimum)
    alpha: float = 0.05  # one-sided significance level of every test
    power: float = 0.80  # power of the repeat calculation
    confidence: float = 0.95  # two-sided confidence of the efficiency interval

    @property
    def test_level(self) -> float:
        """The two-sided confidence whose interval excludes a value exactly when a one-sided
        test at ``alpha`` rejects it (90 % at alpha 0.05): the interval shown beside a verdict."""
        return 1.0 - 2.0 * self.alpha


def change_intervals(num, den, settings: VerdictSettings) -> dict:
    """The change ``num / den - 1`` of two geometric means (each ``(mean log, sd log, n)``)
    with its ``confidence`` interval (``change_ci95_low``/``high``) and the interval the
    one-sided tests read (``change_test_ci_low``/``high`` at ``test_ci_level``), as the
    ``compare`` and language-model comparison tables hold them; NaN bounds with < 2 repeats."""
    out = {"test_ci_level": settings.test_level}
    for key, level in (("ci95", settings.confidence), ("test_ci", settings.test_level)):
        _, lo, hi = ratio_interval(*num, *den, 1.0, level)
        out[f"change_{key}_low"], out[f"change_{key}_high"] = float(lo[0]) - 1, float(hi[0]) - 1
    return out


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
    difference ``delta`` with probability ``power``.

    The verdicts pass the standard deviations of the logs as ``cv_a``, ``cv_b`` and
    ``delta = ln(1 + min_gain)`` (a log's standard deviation is about the CV when it is small).
    With ``sigma^2 = cv_a^2 + cv_b^2``:
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
    gain: float  # exp(l_b - l_a) - 1: the change of the geometric means
    p_value: float  # H0: no gain (mu_b <= mu_a)
    p_below: float  # H0: gain >= min_gain (rejected -> "no")
    repeats_needed: float  # per configuration, where the verdict is inconclusive; NaN if capped
    more_repeats: float  # beyond the fewer repeats the two have (inf: over MAX_REPEATS)
    reason: str
    repeats_capped: bool = False  # the power calculation asks for more than MAX_REPEATS


def _shift(l_a: np.ndarray, change: float) -> np.ndarray:
    """``l_a + ln(1 + change)``: the log of ``(1 + change)`` times A's geometric mean."""
    return l_a + (math.log1p(change) if change > -1 else -math.inf)


def gain_verdicts(
    l_a, s_a, n_a, l_b, s_b, n_b, settings: VerdictSettings = VerdictSettings()
) -> List[GainVerdict]:
    """Does B beat A by at least ``min_gain``, one verdict per element (log-scale inputs).

    ``yes``: the gain is significant (``p < alpha`` for ``H0: l_b <= l_a``) and the observed
    gain ``exp(l_b - l_a) - 1`` is at least ``min_gain``; ``no``: the data rule out a gain of
    ``min_gain`` (``p < alpha`` for ``H0: l_b >= l_a + ln(1 + min_gain)``); ``inconclusive``
    otherwise, with the repeats a power calculation asks for.
    """
    l_a, s_a, n_a, l_b, s_b, n_b = map(_arr, (l_a, s_a, n_a, l_b, s_b, n_b))
    g, a = settings.min_gain, settings.alpha
    p_up, _, _ = welch_margin(l_a, s_a, n_a, l_b, s_b, n_b, 0.0)
    # "no": reject l_b >= l_a + ln(1+g), i.e. test l_a + ln(1+g) > l_b (roles swapped)
    p_dn, _, _ = welch_margin(l_b, s_b, n_b, _shift(l_a, g), s_a, n_a, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        gain = np.exp(l_b - l_a) - 1.0
    need = repeats_needed(s_a, s_b, math.log1p(g), a, settings.power)
    have = np.minimum(n_a, n_b)
    out = []
    for i in range(len(l_a)):
        vals = (float(v[i]) for v in (gain, p_up, p_dn, need, have))
        out.append(_one_gain(*vals, settings))
    return out


def capped(need: float) -> bool:
    """Whether a :func:`repeats_needed` answer stands for "more than :data:`MAX_REPEATS`"
    (it is capped at ``MAX_REPEATS + 1``): never printed or written as a count."""
    return not math.isnan(need) and need > MAX_REPEATS


def _more(need: float, have: float) -> float:
    """The repeats beyond ``have``: inf when the calculation was capped, NaN when unknown."""
    if math.isnan(need):
        return math.nan
    return math.inf if capped(need) else max(need - have, 0.0)


def _advice(need: float, have: float, st: VerdictSettings, close: str) -> str:
    """What resolves an inconclusive test: the repeats still needed, or ``close`` when the
    repeats already run would resolve the minimum difference (the change lies near it)."""
    at = f"a {_pct(st.min_gain)} difference at the observed spread"
    at += f" (alpha {st.alpha:g}, power {st.power:g})"
    if capped(need):
        return f"more than {MAX_REPEATS} repeats per configuration would be needed to resolve {at}"
    if need - have >= 1:
        return f"{int(need - have)} more repeats would resolve {at}"
    return close


def _one_gain(gain, p_up, p_dn, need, have, st: VerdictSettings) -> GainVerdict:
    more, cap = _more(need, have), capped(need)
    shown = math.nan if cap else need  # the count, where a verdict asks for repeats

    def verdict(v: Optional[str], why: str) -> GainVerdict:
        asks = v == INCONCLUSIVE
        return GainVerdict(
            v, gain, p_up, p_dn, shown if asks else math.nan, more, why, cap and asks
        )

    if math.isnan(gain):
        return verdict(None, "no data")
    if math.isnan(p_up):
        why = f"fewer than 2 complete repeats at one of the two scales (have {int(have)})"
        if not math.isnan(need):
            why += f"; {_count(need)} repeats each resolve a {_pct(st.min_gain)} difference"
        return verdict(INCONCLUSIVE, why)
    if p_up < st.alpha and gain >= st.min_gain:
        return verdict(YES, _p(p_up))
    if p_dn < st.alpha:
        what = "a loss" if gain < 0 else f"below the {_pct(st.min_gain)} minimum"
        return verdict(NO, f"{what}, {_p(p_dn)}")
    close = (
        f"the gain is close to the {_pct(st.min_gain)} minimum; {int(have)} repeats "
        "already resolve that difference at the observed spread"
    )
    return verdict(INCONCLUSIVE, _advice(need, have, st, close))


def _pct(v: float) -> str:
    return f"{100 * v:g} %"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _count(n: float) -> str:
    """A repeats count as said: "about N", or "more than MAX_REPEATS" where capped."""
    return f"more than {MAX_REPEATS}" if capped(n) else f"about {int(n)}"


# ------------------------------------------------------------------ busy nodes


def busy_runs(runs: Any) -> Dict[str, int]:
    """Per configuration (``group``), its complete runs that the pre-flight found started on a
    busy node (``preflight_busy``); configurations without one are left out."""
    if not len(runs) or "preflight_busy" not in runs:
        return {}
    busy = runs["preflight_busy"].map(lambda b: not missing(b) and bool(b))
    if "complete" in runs:
        busy = busy & runs["complete"].fillna(False).astype(bool)
    return {str(g): int(n) for g, n in busy.groupby(runs["group"]).sum().items() if n}


def busy_counts(configs: Any) -> Dict[str, int]:
    """:func:`busy_runs` from a configuration table's ``busy_runs`` column (config_stats)."""
    if not len(configs) or "busy_runs" not in configs:
        return {}
    pairs = zip(configs["group"], configs["busy_runs"])
    return {str(g): int(n) for g, n in pairs if _num(n) and n}


def busy_note(sides: Sequence[Tuple[str, int, int]]) -> Optional[str]:
    """``started on a busy node (NAME: k of n complete run(s); ...)`` over the sides
    ``(name, complete runs on a busy node, complete runs)`` that have one; None otherwise."""
    words = [f"{name}: {k} of {n} complete run(s)" for name, k, n in sides if k]
    return "started on a busy node (" + "; ".join(words) + ")" if words else None


def busy_verdict(
    verdict: Optional[str],
    reason: str,
    busy: Optional[str],
    decisive: Sequence[str],
    words: Optional[Mapping[str, str]] = None,
) -> Tuple[Optional[str], str]:
    """The one rule for a result resting on a run that started on a busy node (``busy``: a
    :func:`busy_note`, None when no side has one): a ``decisive`` verdict becomes
    ``inconclusive``, the test's own (in ``words``, where given) kept in the reason; any
    other verdict stays and its reason says so. Interference slows a run by an amount its
    repeats' spread does not hold, so no test on it can say faster, slower or the same."""
    if not busy:
        return verdict, reason
    note = f"{busy}: the change may be interference"
    if verdict in decisive:
        said = (words or {}).get(str(verdict), str(verdict))
        return INCONCLUSIVE, f"{note}; the test alone says {said} ({reason})"
    return verdict, f"{note}; {reason}" if reason else note


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
            step_repeats_capped=False,
            step_busy=None,
            efficiency_ci95_low=math.nan,
            efficiency_ci95_high=math.nan,
            efficiency_class=None,
        )
    srow.update(
        more_devices_help=None,
        more_devices_reason=_no_step_reason(len(points), usable) if usable < 2 else "",
        more_devices_busy=None,
        helps_up_to=None,
        knee_low=None,
        knee_high=None,
    )


def _no_step_reason(points: int, usable: int) -> str:
    """Why a series has no "more devices help?" verdict."""
    if points < 2:
        return "one device count only"
    if usable == 0:
        return "no complete run at any scale"
    return f"complete runs at one of its {points} device counts only"


def _step_busy(prev: dict, p: dict, busy: Mapping[str, int]) -> Optional[str]:
    """The busy-node note of a step from ``prev`` to ``p`` (None: both sides quiet)."""
    sides = []
    for q in (prev, p):
        name = f"{q['devices']} device{'' if q['devices'] == 1 else 's'}"
        sides.append((name, busy.get(str(q.get("group")), 0), int(_nan(q["repeats"]))))
    return busy_note(sides)


def _annotate_steps(
    pts: List[dict],
    srow: dict,
    m: np.ndarray,
    s: np.ndarray,
    n: np.ndarray,
    settings: VerdictSettings,
    busy: Mapping[str, int],
) -> None:
    """Each step's gain verdict (:func:`busy_verdict` where a side started on a busy node),
    how far more devices keep helping, and the last step's say."""
    steps = gain_verdicts(m[:-1], s[:-1], n[:-1], m[1:], s[1:], n[1:], settings)
    chain = True
    for prev, p, v in zip(pts[:-1], pts[1:], steps):
        note = _step_busy(prev, p, busy)
        verdict, reason = busy_verdict(v.verdict, v.reason, note, (YES, NO))
        p.update(
            step_from=prev["devices"],
            gain=v.gain,
            gain_p=v.p_value,
            step_verdict=verdict,
            step_reason=reason,
            step_repeats_needed=v.repeats_needed if verdict == v.verdict else math.nan,
            step_repeats_capped=v.repeats_capped and verdict == v.verdict,
            step_busy=note,
        )
        chain = chain and verdict == YES
        if chain:
            srow["helps_up_to"] = p["devices"]
    last = pts[-1]
    srow["more_devices_help"] = last["step_verdict"]
    srow["more_devices_busy"] = last["step_busy"]
    srow["more_devices_reason"] = (
        f"{pts[-2]['devices']} -> {last['devices']} devices: {_signed(last['gain'])}, "
        + last["step_reason"]
    )


def annotate_series(
    points: List[dict],
    srow: dict,
    threshold: float,
    settings: VerdictSettings,
    busy: Optional[Mapping[str, int]] = None,
) -> None:
    """Add the verdict columns to one scaling series' points (ascending device count, as
    dicts with ``devices``, ``group``, ``throughput_log_mean``, ``throughput_log_sd``,
    ``repeats``) and to its series row ``srow``. Points without a complete repeat take no
    part. ``busy``: per configuration, its complete runs that started on a busy node
    (:func:`busy_runs`); a step with one on either side is ``inconclusive``."""
    pts = [p for p in points if _num(p.get("throughput_log_mean"))]
    _clear_verdicts(points, srow, len(pts))
    if not pts:
        return
    lm = np.array([p["throughput_log_mean"] for p in pts], dtype=float)
    s = np.array([_nan(p.get("throughput_log_sd")) for p in pts], dtype=float)
    n = np.array([p["repeats"] or 0 for p in pts], dtype=float)
    d = np.array([p["devices"] for p in pts], dtype=float)
    base = pts[0]
    _, lo, hi = ratio_interval(lm, s, n, lm[0], s[0], n[0], d[0] / d, settings.confidence)
    lo[0] = hi[0] = 1.0  # the base is 1 by definition
    classes = threshold_class(lo, hi, threshold)
    classes[0] = ABOVE if threshold <= 1.0 else BELOW
    for p, li, hi_, c in zip(pts, lo, hi, classes):
        p.update(efficiency_ci95_low=li, efficiency_ci95_high=hi_, efficiency_class=c)
    srow["knee_low"], srow["knee_high"] = knee_range([p["devices"] for p in pts], classes)
    srow["helps_up_to"] = base["devices"]
    if len(pts) >= 2:
        _annotate_steps(pts, srow, lm, s, n, settings, busy or {})


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
    change: float  # exp(l_new - l_base) - 1: the change of the geometric means
    p_value: float  # of the test behind the verdict (the smaller one-sided p otherwise)
    repeats_needed: float  # per configuration, where the verdict is inconclusive; NaN if capped
    reason: str
    repeats_capped: bool = False  # the power calculation asks for more than MAX_REPEATS


def change_verdicts(
    l_a, s_a, n_a, l_b, s_b, n_b, settings: VerdictSettings = VerdictSettings()
) -> List[ChangeVerdict]:
    """Base A vs new B (log-scale inputs), with ``min_gain`` as the threshold ``d`` and
    ``change = exp(l_b - l_a) - 1`` (the change of the geometric means):

    ``regressed``: ``p < alpha`` for ``H0: l_b >= l_a`` and ``change <= -d``;
    ``improved``: ``p < alpha`` for ``H0: l_b <= l_a`` and ``change >= d``;
    ``unchanged``: both ``H0: l_b >= l_a + ln(1 + d)`` and ``H0: l_b <= l_a + ln(1 - d)`` are
    rejected at ``alpha`` (two one-sided tests: the change lies within +/- d);
    ``inconclusive`` otherwise (with the repeats a power calculation asks for).
    """
    l_a, s_a, n_a, l_b, s_b, n_b = map(_arr, (l_a, s_a, n_a, l_b, s_b, n_b))
    d, a = settings.min_gain, settings.alpha
    p_up, _, _ = welch_margin(l_a, s_a, n_a, l_b, s_b, n_b, 0.0)
    p_down, _, _ = welch_margin(l_b, s_b, n_b, l_a, s_a, n_a, 0.0)
    p_lt_hi, _, _ = welch_margin(l_b, s_b, n_b, _shift(l_a, d), s_a, n_a, 0.0)
    p_gt_lo, _, _ = welch_margin(_shift(l_a, -d), s_a, n_a, l_b, s_b, n_b, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        change = np.exp(l_b - l_a) - 1.0
    need = repeats_needed(s_a, s_b, math.log1p(d), a, settings.power)
    have = np.minimum(n_a, n_b)
    out = []
    for i in range(len(l_a)):
        c, pu, pd_, ph, pl = (float(v[i]) for v in (change, p_up, p_down, p_lt_hi, p_gt_lo))
        out.append(_one_change(c, pu, pd_, ph, pl, float(need[i]), float(have[i]), settings))
    return out


def _one_change(c, pu, pd_, ph, pl, nd, hv, settings: VerdictSettings) -> ChangeVerdict:
    d, a = settings.min_gain, settings.alpha
    if math.isnan(pu):
        why = f"fewer than 2 complete repeats in one campaign (have {int(hv)})"
        return ChangeVerdict(INCONCLUSIVE, c, math.nan, _shown(nd), why, capped(nd))
    if pd_ < a and c <= -d:
        return ChangeVerdict(REGRESSED, c, pd_, math.nan, _p(pd_))
    if pu < a and c >= d:
        return ChangeVerdict(IMPROVED, c, pu, math.nan, _p(pu))
    if max(ph, pl) < a:
        return ChangeVerdict(UNCHANGED, c, max(ph, pl), math.nan, f"within +/- {_pct(d)}")
    close = f"the change is close to {_pct(d)}; {int(hv)} repeats already resolve that"
    why = _advice(nd, hv, settings, close)
    return ChangeVerdict(INCONCLUSIVE, c, min(pu, pd_), _shown(nd), why, capped(nd))


def _shown(need: float) -> float:
    """The repeats needed as a table holds them: NaN where the calculation was capped."""
    return math.nan if capped(need) else need
