"""A figure with a 95 % interval is printed to the digits the interval supports
(docs/reports.md#digits): the half-width rounded as the Particle Data Group rounds an error,
at least two significant digits of the figure, the interval's ends rounded outward."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from ddlbench.analyse.analysis import Settings
from ddlbench.report.format import (
    fnum_in,
    fpct_in,
    fpct_range_in,
    fplaces,
    frange_in,
    fspeedup,
    interval_places,
)
from ddlbench.report.sections import SCALES, SERIES, STATS


@pytest.mark.parametrize(
    "lo, hi, places",
    [
        (5837.1, 9986.0, -2),  # half-width 2,074.45: leading 207, two digits: 2,100
        (4550.0, 4610.0, 0),  # 30: leading 300, two digits: 30
        (4500.0, 4600.0, -1),  # 50: leading 500, one digit: 50, to tens
        (4500.0, 4698.0, -1),  # 99: leading 990, up to 100 and two digits: to tens
        (4579.9, 4581.1, 1),  # 0.6: one digit, one decimal
        (4579.99, 4580.01, 1),  # 0.01 would allow 0.010, but at most one decimal by default
        (0.0, 0.0, 1),  # no width: the default
        (None, 3.0, 1),  # no interval: the default
        (math.nan, 3.0, 1),
        (10.0, 9.0, 1),  # an inverted interval is no interval
    ],
)
def test_places_come_from_the_half_width(lo, hi, places) -> None:
    assert interval_places(lo, hi) == places


def test_the_review_example_is_cut_to_what_its_interval_supports() -> None:
    # issue 31's leftover: "7,634.8 samples/s with a 95 % interval of 5,837.1-9,986.0"
    assert fnum_in(7634.8, 5837.1, 9986.0) == "7,600"
    assert frange_in(5837.1, 9986.0) == "5,800 - 10,000"
    # a narrow interval keeps the usual digit, and never more
    assert fnum_in(4580.63, 4579.9, 4581.1) == "4,580.6"
    assert fnum_in(4580.63, None, None) == "4,580.6"


def test_a_positive_bound_is_never_printed_as_zero() -> None:
    # an interval over a factor of 4,000 (two repeats): the low end keeps two digits
    assert frange_in(41.0, 174936.5, sep="-") == "41-180,000"
    assert fnum_in(2678.7, 41.0, 174936.5) == "2,700"
    # beyond the default decimal only where the bound would otherwise read as 0
    assert frange_in(0.0123, 88.0) == "0.012 - 88"


def test_huge_and_odd_values_still_print() -> None:
    assert fnum_in(1e30, 0.9e30, 1.1e30) == "1,000,000,000,000,000,000,000,000,000,000"
    assert fplaces(1e30, 1) == f"{1e30:,.1f}"  # 32 digits: beyond decimal's 28, not rounded
    assert fnum_in(float("inf"), 1.0, 2.0) == "inf"
    assert fnum_in(None, 1.0, 2.0) == "-" and frange_in(None, 2.0) == "-"


def test_percentages_use_percentage_points() -> None:
    assert fpct_in(0.9134, 0.625, 1.21) == "91 %"
    assert fpct_in(0.9134, 0.91, 0.917) == "91.3 %"
    # 100 x 1.16 is 115.99999999999999 in binary: no spurious floor to 115.9
    assert fpct_range_in(1.16, 1.315, sep="-") == "116 %-132 %"
    assert fpct_range_in(1.16, 1.2, sep="-") == "116.0 %-120.0 %"
    assert fpct_range_in(0.5, 0.8) == "50 % - 80 %"


def test_the_speedup_follows_the_efficiency_interval() -> None:
    # speedup 1.85 at efficiency 0.925: its interval is the efficiency's x 2
    assert fspeedup(1.8567, 0.92835, 0.87, 0.98) == "1.86"  # half-width 0.11: two decimals
    assert fspeedup(1.8567, 0.92835, 0.5, 1.4) == "1.9"  # half-width 0.9: one decimal
    assert fspeedup(1.8567, 0.92835, None, None) == "1.86"  # no interval: three digits


def test_the_printed_interval_holds_the_computed_one() -> None:
    rng = random.Random(31)
    for _ in range(2000):
        centre = 10 ** rng.uniform(-2, 6)
        lo = centre * rng.uniform(0.05, 0.999)
        hi = centre * rng.uniform(1.001, 20)
        a, b = (float(x.replace(",", "")) for x in frange_in(lo, hi).split(" - "))
        assert 0 < a <= lo and b >= hi, (lo, hi)
        v = float(fnum_in(centre, lo, hi).replace(",", ""))
        half = (hi - lo) / 2
        assert abs(v - centre) <= max(0.05 * half, 0.05 * centre, 0.05), (centre, lo, hi)


def test_the_tables_use_the_rule() -> None:
    points = pd.DataFrame(
        {
            "label": ["s"],
            "devices": [2],
            "nodes": [1],
            "tasks_per_node": [2],
            "repeats": [3],
            "throughput_gmean": [7634.8],
            "ci95_low": [5837.1],
            "ci95_high": [9986.0],
            "per_device": [3817.4],
            "speedup": [1.8113],
            "efficiency": [0.90565],
            "efficiency_ci95_low": [0.6923],
            "efficiency_ci95_high": [1.1845],
            "base_devices": [1],
            "noisy": [True],
        }
    )
    table = SCALES.table(points)
    row = dict(zip(table.columns, table.rows[0]))
    assert row["samples/s (geo. mean)"] == "7,600"
    assert row["95 % CI"] == "5,800 - 10,000"
    assert row["per device"] == "3,800"
    assert row["efficiency"] == "91 %"
    assert row["efficiency 95 % CI"] == "69 % - 119 %"
    assert row["speedup"] == "1.8"  # its interval 1.38-2.37: half-width 0.49, one digit
    configs = pd.DataFrame(
        {
            "group": ["c"],
            "mode": ["throughput"],
            "world_size": [2],
            "repeats": [3],
            "runs": [3],
            "throughput_gmean": [7634.8],
            "throughput_ci95_low": [7600.2],
            "throughput_ci95_high": [7669.9],
            "throughput_min": [7601.25],
            "throughput_max": [7668.75],
            "throughput_cv": [0.004],
            "noisy": [False],
            "step_time_median_s": [0.01],
            "step_time_jitter_s": [0.001],
        }
    )
    row = dict(zip(*(lambda t: (t.columns, t.rows[0]))(STATS.table(configs))))
    assert row["samples/s (geo. mean)"] == "7,635"  # half-width 35: to units
    assert row["95 % CI"] == "7,600 - 7,670"
    assert row["min - max"] == "7,601.2 - 7,668.8"  # observed values, as measured


def test_the_series_table_uses_the_points_intervals() -> None:
    series = pd.DataFrame(
        {
            "label": ["s"],
            "mode": ["throughput"],
            "scaling": ["weak"],
            "base_devices": [1],
            "base_throughput": [7634.8],
            "base_ci95_low": [5837.1],
            "base_ci95_high": [9986.0],
            "max_devices": [2],
            "efficiency_at_max": [0.5434],
            "efficiency_at_max_ci95_low": [0.416],
            "efficiency_at_max_ci95_high": [0.709],
            "knee_devices": [1],
            "knee_low": [1],
            "knee_high": [1],
            "peak_devices": [2],
            "more_devices_help": ["inconclusive"],
            "more_devices_reason": [""],
        }
    )
    table = SERIES.table(series, Settings())
    row = dict(zip(table.columns, table.rows[0]))
    assert row["base samples/s"] == "7,600"  # as the scaling table's base row says it
    assert row["efficiency at max"] == "54 %"  # half-width 14.7 points: two digits, units
