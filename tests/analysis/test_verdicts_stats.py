"""The verdicts' statistics on arrays with known answers.

Reference values and where they come from:
- Student t quantiles: the t table of any statistics textbook (e.g. NIST/SEMATECH
  e-Handbook of Statistical Methods, section 1.3.6.7.2, "Critical values of the Student's t
  distribution"), to the 3 decimals printed there, and ``scipy.stats.t.ppf`` to 6 decimals
  for the values already hard-coded in ``ddlbench.analyse.stats._T975``;
- closed forms: ``df = 1`` is the Cauchy distribution, ``P(T <= t) = 1/2 + atan(t)/pi``;
  ``df = 2``: ``P(T <= t) = 1/2 + t / (2 sqrt(2 + t^2))``;
- ``P(T > 2, df = 5) = 0.0509697`` (``scipy.stats.t.sf(2, 5)``; two-sided 0.1019);
- repeats per group of a two-sample t test: Cohen (1988), *Statistical Power Analysis for
  the Behavioral Sciences*, Table 2.4.1 (two-sided alpha 0.05, power 0.80: d = 0.5 -> 64,
  d = 0.8 -> 26, d = 0.2 -> 393), and G*Power 3 for one-sided alpha 0.05, power 0.80
  (d = 0.5 -> 51, d = 1 -> 14) and power 0.90 (d = 0.5 -> 70).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ddlbench.analyse.distributions import betainc, t_cdf, t_ppf, t_sf
from ddlbench.analyse.stats import _T975, ratio_interval
from ddlbench.analyse.verdicts import (
    ABOVE,
    BELOW,
    INCONCLUSIVE,
    NO,
    UNSURE,
    YES,
    VerdictSettings,
    change_verdicts,
    gain_verdicts,
    knee_range,
    repeats_needed,
    threshold_class,
    welch_margin,
)


def test_t_quantiles_match_the_tables():
    # NIST table, upper tail 0.05 and 0.025 and 0.01
    assert t_ppf(0.95, [1, 2, 5, 10, 20, 120]) == pytest.approx(
        [6.314, 2.920, 2.015, 1.812, 1.725, 1.658], abs=5e-4
    )
    assert t_ppf(0.99, [10, 30]) == pytest.approx([2.764, 2.457], abs=5e-4)
    # scipy's 97.5 % quantiles for df = 1..30
    assert t_ppf(0.975, np.arange(1, 31)) == pytest.approx(_T975, abs=2e-6)
    # symmetry, and the normal limit
    assert float(t_ppf(0.05, 10)) == pytest.approx(-1.812461, abs=1e-5)
    assert float(t_ppf(0.975, 1e7)) == pytest.approx(1.959964, abs=1e-5)


def test_t_cdf_closed_forms_and_tail():
    t = np.array([-3.0, -0.5, 0.0, 0.3, 1.0, 7.0])
    assert t_cdf(t, 1) == pytest.approx(0.5 + np.arctan(t) / math.pi, abs=1e-12)
    assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * np.sqrt(2 + t * t)), abs=1e-12)
    assert float(t_sf(2.0, 5)) == pytest.approx(0.0509697, abs=1e-7)
    # real (Welch) degrees of freedom: monotone between the integers, ppf inverts cdf
    assert float(t_sf(2.0, 2)) > float(t_sf(2.0, 2.5)) > float(t_sf(2.0, 3))
    q = t_ppf([0.9, 0.99], [2.5, 7.3])
    assert t_cdf(q, [2.5, 7.3]) == pytest.approx([0.9, 0.99], abs=1e-10)
    # I_x(2, 3) = sum_{j=2..4} C(4, j) x^j (1-x)^(4-j) at x = 0.4: 0.3456 + 0.1536 + 0.0256
    assert float(betainc(2, 3, 0.4)) == pytest.approx(0.5248, abs=1e-12)


def test_welch_statistic_by_hand():
    # A: mean 100, s 4, n 4 ; B: mean 110, s 6, n 5
    # v_a = 16/4 = 4, v_b = 36/5 = 7.2, se = sqrt(11.2) = 3.34664
    # t = 10 / 3.34664 = 2.98807 ; df = 11.2^2 / (4^2/3 + 7.2^2/4) = 125.44 / 18.29333 = 6.85714
    p, t, df = welch_margin(100, 4, 4, 110, 6, 5)
    assert t[0] == pytest.approx(10 / math.sqrt(11.2), rel=1e-12)
    assert df[0] == pytest.approx(125.44 / (16 / 3 + 7.2**2 / 4), rel=1e-12)
    assert p[0] == pytest.approx(float(t_sf(t[0], df[0])), rel=1e-12)
    assert 0.005 < p[0] < 0.025  # t(0.99, 7) = 2.998, t(0.975, 7) = 2.365
    # a margin: H0 mu_b <= 1.05 mu_a; L = 110 - 105 = 5, v_a = 1.05^2 * 4
    p, t, _ = welch_margin(100, 4, 4, 110, 6, 5, margin=0.05)
    assert t[0] == pytest.approx(5 / math.sqrt(1.05**2 * 4 + 7.2), rel=1e-12)
    # fewer than 2 repeats: no test; no spread at all: exact answer
    assert math.isnan(welch_margin(100, 0, 1, 110, 6, 5)[0][0])
    assert welch_margin(100, 0, 3, 110, 0, 3)[0][0] == 0.0
    assert welch_margin(100, 0, 3, 90, 0, 3)[0][0] == 1.0


def test_repeats_needed_matches_power_tables():
    # d = delta / sigma with sigma the common sd of each group (here in units of the mean)
    one_sided = repeats_needed([0.1, 0.05], [0.1, 0.05], 0.05, alpha=0.05, power=0.8)
    assert list(one_sided) == [51, 14]
    assert repeats_needed(0.1, 0.1, 0.05, alpha=0.05, power=0.9)[0] == 70
    # two-sided 0.05 is one-sided 0.025: Cohen's 64 (d = 0.5), 26 (d = 0.8), 393 (d = 0.2)
    two = repeats_needed([0.1, 0.0625, 0.25], [0.1, 0.0625, 0.25], 0.05, 0.025, 0.8)
    assert two[0] == 64 and two[1] == 26 and abs(two[2] - 393) <= 1
    # a missing CV takes the other's; none at all -> NaN
    assert repeats_needed(math.nan, 0.1, 0.05, 0.05, 0.8)[0] == 51
    assert math.isnan(repeats_needed(math.nan, math.nan, 0.05, 0.05, 0.8)[0])


def _logs(m, s):
    """Log-scale statistics of repeats with mean ``m`` and sd ``s``: ``ln m`` and the CV
    (the sd of the logs to first order): the verdicts' inputs."""
    m, s = np.asarray(m, dtype=float), np.asarray(s, dtype=float)
    return np.log(m), s / m


def test_gain_verdicts_yes_no_inconclusive():
    st = VerdictSettings()
    # 1: quickstart-like, +0.4 % inside 3.5 % noise -> inconclusive with repeat advice
    # 2: +20 % with 1 % noise -> yes; 3: +1 % with 1 % noise -> no (below the minimum)
    # 4: -10 % -> no (a loss); 5: one repeat at one scale -> inconclusive
    la, sa = _logs([8589, 100, 100, 100, 100], [300, 1, 1, 1, 1])
    lb, sb = _logs([8624, 120, 101, 90, 130], [300, 1, 1, 1, 1])
    v = gain_verdicts(la, sa, [3, 3, 3, 3, 1], lb, sb, [3, 3, 3, 3, 3], st)
    assert [x.verdict for x in v] == [INCONCLUSIVE, YES, NO, NO, INCONCLUSIVE]
    assert v[0].gain == pytest.approx(35 / 8589)  # exp(l_b - l_a) - 1: the ratio - 1
    assert v[0].p_value == pytest.approx(0.447, abs=0.01)  # the Welch p ~ 0.46
    assert v[0].more_repeats >= 1 and "more repeats would resolve a 5 % difference" in v[0].reason
    assert "a loss" in v[3].reason and "below the 5 % minimum" in v[2].reason
    # significant but smaller than the practical minimum is never "yes"
    a, b = (*_logs([100], [0.1]), [5]), (*_logs([103], [0.1]), [5])
    small = gain_verdicts(*a, *b, st)[0]
    assert small.p_value < 1e-6 and small.verdict == NO
    # the minimum is a setting
    loose = gain_verdicts(*a, *b, VerdictSettings(min_gain=0.02))
    assert loose[0].verdict == YES


def test_ratio_interval_by_hand():
    # efficiency of N=4 against a 1-device base: (1/4) * exp(ln 320 - ln 100) = 0.8
    # sd of the logs 0.025 (N=4) and 0.02 (base), n = 3 each
    # v1 = 0.025^2/3 = 2.0833e-4, v2 = 0.02^2/3 = 1.3333e-4, se = sqrt(3.41667e-4) = 0.018484
    # df = (3.41667e-4)^2 / ((2.0833e-4)^2/2 + (1.3333e-4)^2/2) = 3.7977
    ln320, ln100 = math.log(320), math.log(100)
    r, lo, hi = ratio_interval([ln320], [0.025], [3], ln100, 0.02, 3, scale=0.25)
    v1, v2 = 0.025**2 / 3, 0.02**2 / 3
    df = (v1 + v2) ** 2 / (v1**2 / 2 + v2**2 / 2)
    half = float(t_ppf(0.975, df)) * math.sqrt(v1 + v2)
    assert r[0] == pytest.approx(0.8)
    assert lo[0] == pytest.approx(0.8 * math.exp(-half), rel=1e-9)
    assert hi[0] == pytest.approx(0.8 * math.exp(half), rel=1e-9)
    assert 0.75 < lo[0] < 0.8 < hi[0] < 0.85
    assert math.isnan(ratio_interval([ln320], [0.025], [1], ln100, 0.02, 3)[1][0])


def test_knee_range_and_classes():
    cls = threshold_class([1.0, 0.85, 0.75, 0.5], [1.0, 0.95, 0.86, 0.7], 0.8)
    assert cls == [ABOVE, ABOVE, UNSURE, BELOW]
    assert knee_range([1, 2, 4, 8], cls) == (2, 4)
    assert knee_range([1, 2, 4], [ABOVE, ABOVE, ABOVE]) == (4, 4)
    assert knee_range([1, 2, 4], [ABOVE, BELOW, ABOVE]) == (1, 1)
    # once unsure, a later "above" does not make the lower end confident
    assert knee_range([1, 2, 4, 8], [ABOVE, UNSURE, ABOVE, BELOW]) == (1, 4)


def test_change_verdicts_for_compare():
    la, sa = _logs([100, 100, 100, 100, 100], [1, 1, 1, 10, 1])
    lb, sb = _logs([80, 100.5, 110, 97, 96], [1, 1, 1, 10, 1])
    v = change_verdicts(la, sa, [5, 5, 5, 3, 5], lb, sb, [5, 5, 5, 3, 5])
    assert [x.verdict for x in v] == [
        "regressed",
        "unchanged",
        "improved",
        "inconclusive",
        "inconclusive",
    ]
    assert v[0].change == pytest.approx(-0.2) and v[0].p_value < 0.001
    # -4 % with 1 % noise: significant but not beyond the 5 % threshold, and not within
    # it with confidence either
    assert "close to 5 %" in v[4].reason or "more repeats" in v[4].reason


def test_compare_verdict_agrees_with_the_interval_it_shows():
    """``compare`` shows the two-sided 1 - 2 alpha interval of the change: on random samples
    (2-6 repeats a side, CV 0.2-40 %, changes -30..+30 % or about 0) ``improved`` or
    ``regressed`` exactly when it excludes 0 and the change passes the threshold,
    ``unchanged`` exactly when it lies within +/- the threshold (on the log scale, as the tests
    are)."""
    rng = np.random.default_rng(31)
    vs = VerdictSettings()
    d, level = vs.min_gain, 1 - 2 * vs.alpha
    k = 2000
    n_a, n_b = rng.integers(2, 7, k), rng.integers(2, 7, k)
    s_a, s_b = np.exp(rng.uniform(np.log(0.002), np.log(0.4), (2, k)))
    l_a = np.log(1000.0) + rng.normal(0, 1, k) * s_a / np.sqrt(n_a)
    change = np.where(rng.random(k) < 0.5, rng.uniform(-0.3, 0.3, k), rng.normal(0, 0.01, k))
    l_b = l_a + np.log1p(change)
    verdicts = change_verdicts(l_a, s_a, n_a, l_b, s_b, n_b, vs)
    _, lo, hi = ratio_interval(l_b, s_b, n_b, l_a, s_a, n_a, 1.0, level)
    seen = set()
    for v, low, high in zip(verdicts, lo, hi):
        seen.add(v.verdict)
        significant = low > 1 or high < 1
        if v.verdict in ("improved", "regressed"):
            assert significant and abs(v.change) >= d
            assert (v.verdict == "improved") == (low > 1)
        elif v.verdict == "unchanged":
            assert 1 - d <= low and high <= 1 + d
        else:
            assert not (significant and abs(v.change) >= d)
            assert not (1 - d <= low and high <= 1 + d)
    assert seen == {"improved", "regressed", "unchanged", "inconclusive"}
