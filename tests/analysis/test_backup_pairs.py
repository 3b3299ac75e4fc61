"""The backup-worker comparisons the report makes: the pairs of the study (b = 1 against b = 0,
b = 0 against plain DDP, b = 1 against plain DDP with N = R - b ranks), applied samples per
second beside the step time, time to accuracy with the runs that missed the target censored,
and the sentences that say so."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Dict, Sequence

import numpy as np
import pandas as pd
import pytest

from ddlbench.analyse.analysis import Settings
from ddlbench.analyse.backups import (
    COST,
    LIKE,
    PAPER,
    backup_verdicts,
    km_median,
    logrank_z,
    sentences,
)
from ddlbench.analyse.stats import log_stats, ratio_interval
from ddlbench.report.backups import backup_tables
from tests.support.backup_frames import backup_campaign as _campaign

ST = Settings()
VS = ST.verdicts()
SYNC = [0.030, 0.031, 0.029, 0.0305]
B0 = [0.029, 0.030, 0.0295, 0.0300]
B1 = [0.020, 0.0198, 0.0202, 0.0199]  # two thirds of b = 0: as many applied samples per second


def _study():
    return _campaign(
        [
            ("sync", 2, None, SYNC, None),
            ("sync", 3, None, SYNC, None),
            ("backup0", 2, 0, B0, None),
            ("backup0", 3, 0, B0, None),
            ("backup1", 2, 1, B1, None),
            ("backup1", 3, 1, B1, None),
        ]
    )


def test_pairs_are_the_studys():
    """b = 1 against b = 0 on the same ranks (not plain DDP on them), b = 0 against plain DDP,
    b = 1 against plain DDP with N = R - b ranks (none with 1 rank here)."""
    runs, ranks = _study()
    v = backup_verdicts(runs, ranks, VS, ST.accuracy_margin)
    got = {(r.group[:10], r.baseline[:10], r.comparison) for r in v.itertuples()}
    assert (
        got
        == {
            ("backup0-le", "sync-lenet", COST),
            ("backup1-le", "backup0-le", LIKE),
            ("backup1-le", "sync-lenet", PAPER),
            ("backup0-le", "sync-lenet", COST),
        }
        and len(v) == 5
    )
    paper = v[v["comparison"] == PAPER].iloc[0]
    assert (paper["world_size"], paper["baseline_world_size"]) == (3, 2)
    same = v[(v["comparison"] != PAPER)]
    assert (same["world_size"] == same["baseline_world_size"]).all()
    assert not (
        (v["backup_workers"] == 1)
        & (v["baseline_backup_workers"] == -1)
        & (v["world_size"] == v["baseline_world_size"])
    ).any()


def test_applied_rate_with_interval_beside_a_shorter_step():
    runs, ranks = _study()
    v = backup_verdicts(runs, ranks, VS, ST.accuracy_margin)
    r = v[(v["comparison"] == LIKE) & (v["world_size"] == 3)].iloc[0]
    new = runs[runs["group"] == r["group"]]["applied_samples_per_s"].to_numpy()
    base = runs[runs["group"] == r["baseline"]]["applied_samples_per_s"].to_numpy()
    ln, lb = log_stats(new), log_stats(base)
    assert r["applied_new"] == pytest.approx(math.exp(ln[0]))
    assert r["applied_change"] == pytest.approx(math.exp(ln[0] - lb[0]) - 1)
    # the interval the one-sided tests read (90 % at alpha 0.05), as compare shows it
    _, lo, hi = ratio_interval(*ln, *lb, 1.0, 0.90)
    assert (r["applied_change_low"], r["applied_change_high"]) == pytest.approx(
        (lo[0] - 1, hi[0] - 1)
    )
    assert r["applied_change_level"] == pytest.approx(0.90)
    assert r["applied_new_low"] < r["applied_new"] < r["applied_new_high"]
    assert r["step_verdict"] == "improved" and r["applied_verdict"] != "improved"
    text = sentences(pd.DataFrame([r]), VS, ST.accuracy_margin)[0]
    assert text.index("applied samples/s") < text.index("median step time")
    assert (
        "(shorter; p < 0.001), which counts steps, not samples: each step applies 2 of 3 ranks' "
        "batches, and the applied samples per second did not rise significantly" in text
    )
    assert "final accuracy" in text
    assert f"90 % CI {100 * (lo[0] - 1):+.1f} %" in text


def _missed() -> Dict[int, Dict]:
    """backup1 at 3 ranks: repeats 2 and 3 never reach the target."""
    return {0: {"tta": 1.0}, 1: {"tta": 2.0}, 2: {"tta": math.nan}, 3: {"tta": math.nan}}


def _censored_campaign():
    return _campaign(
        [
            ("backup0", 3, 0, B0, {i: {"tta": t} for i, t in enumerate([3.0, 3.1, 2.9, 3.05])}),
            ("backup1", 3, 1, B1, _missed()),
        ]
    )


def _evals(runs: pd.DataFrame, last: float) -> pd.DataFrame:
    rows = []
    for run_id in runs["run_id"]:
        for rank in (0, 1):
            for k in range(1, 5):
                rows.append({"run_id": run_id, "rank": rank, "elapsed_s": last * k / 4 + rank})
    return pd.DataFrame(rows)


def test_time_to_accuracy_counts_runs_and_censors_the_misses():
    runs, ranks = _censored_campaign()
    v = backup_verdicts(runs, ranks, VS, ST.accuracy_margin, _evals(runs, 5.0))
    r = v.iloc[0]
    assert (r["tta_reached_new"], r["tta_runs_new"]) == (2, 4)
    assert (r["tta_reached_base"], r["tta_runs_base"]) == (4, 4)
    assert r["tta_method"] == "censored"
    # the two misses stay at risk until 5.0 s (rank 0's last evaluation): S = 3/4, then 1/2
    # at 2.0 s; the subset that reached would give a geometric mean of sqrt(2) = 1.41 s
    assert r["tta_new"] == 2.0 and r["tta_new"] == km_median(
        np.array([1.0, 2.0, 5.0, 5.0]), np.array([True, True, False, False])
    )
    # no run of the base missed: its curve sits at 1/2 between 3.0 and 3.05 s, and the
    # midpoint is the ordinary median of its times, the convergence table's figure
    assert r["tta_base"] == pytest.approx(3.025) == np.median([3.0, 3.1, 2.9, 3.05])
    z = logrank_z([1.0, 2.0, 5.0, 5.0], [1, 1, 0, 0], [3.0, 3.1, 2.9, 3.05], [1, 1, 1, 1])
    assert r["tta_p"] == pytest.approx(0.5 * math.erfc(abs(z) / math.sqrt(2)))
    text = sentences(v, VS, ST.accuracy_margin)[0]
    assert "time to the target: reached in 2 of 4 runs vs 4 of 4" in text
    assert "censored at their last evaluation" in text
    assert "Kaplan-Meier median 2 s vs 3.02 s" in text


def test_no_time_verdict_from_the_runs_that_reached_alone():
    """Without evaluations to censor the misses at, no comparison (and no verdict)."""
    runs, ranks = _censored_campaign()
    r = backup_verdicts(runs, ranks, VS, ST.accuracy_margin).iloc[0]
    assert r["tta_verdict"] is None and math.isnan(r["tta_change"])
    text = sentences(pd.DataFrame([r]), VS, ST.accuracy_margin)[0]
    assert "reached in 2 of 4 runs vs 4 of 4; a run that missed the target" in text
    assert "no comparison" in text


def test_logrank_sign_and_km_with_censoring():
    fast = [1.0, 1.1, 1.2, 1.3]
    slow = [3.0, 3.1, 3.2, 3.3]
    assert logrank_z(fast, [1] * 4, slow, [1] * 4) > 0 > logrank_z(slow, [1] * 4, fast, [1] * 4)
    assert km_median(np.array([1.0, 9.0, 9.0]), np.array([True, False, False])) is None


def _acc(values: Sequence[float]) -> Dict[int, Dict]:
    return {i: {"acc": a} for i, a in enumerate(values)}


def test_accuracy_sentence_reads_as_a_sentence():
    runs, ranks = _campaign(
        [
            ("sync", 3, None, SYNC, _acc([0.950, 0.951, 0.949, 0.950])),
            ("backup0", 3, 0, B0, _acc([0.950, 0.951, 0.949, 0.950])),
            ("backup1", 3, 1, B1, _acc([0.80, 0.99, 0.70, 0.97])),
        ]
    )
    v = backup_verdicts(runs, ranks, VS, ST.accuracy_margin)
    texts = sentences(v, VS, ST.accuracy_margin)
    cost = next(t for t in texts if "backup0" in t.split(" against ")[0])
    like = next(t for t in texts if "backup1" in t.split(" against ")[0])
    assert "(+0.00 points): within 1 point of the baseline (p < 0.001)." in cost
    assert "the repeats cannot tell whether it is within 1 point of the baseline." in like
    assert all("point(s) of the plain run" not in t for t in texts)


def test_report_table_shows_applied_rate_and_reached_counts():
    runs, ranks = _censored_campaign()
    a = SimpleNamespace(runs=runs, settings=ST)
    data = SimpleNamespace(ranks=ranks, evals=_evals(runs, 5.0))
    table = backup_tables(a, data)[-1]
    assert table.title == "Backup workers: paired comparisons"
    row = dict(zip(table.columns, table.rows[0]))
    assert row["applied samples/s (geo. mean)"] != "-"
    assert row["change 90 % CI (the tests' level)"] != "-"
    assert row["reached target"] == "2/4 vs 4/4"
    assert row["time to target verdict"].endswith("(censored)")
    assert table.flags == [True]  # shorter steps, not more applied samples per second
