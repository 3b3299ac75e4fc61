"""Drop rates, injected ranks and the backup-worker verdicts, on hand-made tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ddlbench.analyse.analysis import Settings
from ddlbench.analyse.backups import backup_verdicts, injection_table, sentences

ST = Settings()


def _ranks(run_id, b, injected, dropped, steps=10):
    return [
        {
            "run_id": run_id,
            "rank": r,
            "summary_steps_measured": float(steps),
            "summary_injected_steps": float(injected[r]),
            "summary_injected_s": 0.01 * injected[r],
            "summary_backup_workers": None if b is None else float(b),
            "summary_dropped_steps": None if b is None else float(dropped[r]),
        }
        for r in range(len(injected))
    ]


def _run(label, repeat, step, acc, tta, slowest=2):
    group = f"{label}-lenet-n1x3-b32"
    return {
        "run_id": f"{group}-r{repeat}",
        "group": group,
        "model": "lenet",
        "mode": "convergence",
        "nodes": 1,
        "tasks_per_node": 3,
        "world_size": 3,
        "status": "ok",
        "complete": True,
        "straggler_index": 1.8,
        "straggler_metric": "compute",
        "slowest_rank": slowest,
        "step_time_median_s": step,
        "throughput": 96 / step,
        "applied_samples_per_s": (64 if label.startswith("backup1") else 96) / step,
        "target_accuracy": 0.9,
        "time_to_accuracy_s": tta,
        "final_accuracy": acc,
    }


SYNC = [(0.100, 0.970, 10.0), (0.104, 0.972, 10.4), (0.098, 0.968, 9.9), (0.102, 0.971, 10.1)]
BACKUP = [(0.060, 0.962, 7.0), (0.061, 0.966, 7.2), (0.059, 0.964, 6.9), (0.062, 0.963, 7.1)]


def _tables():
    runs, ranks = [], []
    for i, (step, acc, tta) in enumerate(SYNC):
        runs.append(_run("sync", i, step, acc, tta))
        ranks += _ranks(runs[-1]["run_id"], None, [0, 0, 10], None)
    for i, (step, acc, tta) in enumerate(BACKUP):
        runs.append(_run("backup1", i, step, acc, tta))
        ranks += _ranks(runs[-1]["run_id"], 1, [0, 0, 10], [0, 1, 9])
    return pd.DataFrame(runs), pd.DataFrame(ranks)


def test_injection_table_drop_rates_and_found():
    runs, ranks = _tables()
    t = injection_table(runs, ranks).set_index("run_id")
    sync = t.loc["sync-lenet-n1x3-b32-r0"]
    assert sync["backup_workers"] == -1 and pd.isna(sync["drop_rates"])
    assert sync["injected"] == "2: 100 % of steps, 0.10 s" and bool(sync["found"])
    b = t.loc["backup1-lenet-n1x3-b32-r0"]
    assert b["drop_rates"] == "0: 0 %; 1: 10 %; 2: 90 %" and b["drop_rate_max"] == 0.9


def test_verdicts_against_plain_sync():
    runs, ranks = _tables()
    v = backup_verdicts(runs, ranks, ST.verdicts(), ST.accuracy_margin)
    assert len(v) == 1
    r = v.iloc[0]
    assert r["baseline"] == "sync-lenet-n1x3-b32" and r["repeats"] == 4
    # change of the geometric means (the report's one statistic over repeats):
    # (0.06 x 0.061 x 0.059 x 0.062)^(1/4) / (0.1 x 0.104 x 0.098 x 0.102)^(1/4) - 1
    gm_sync = (0.100 * 0.104 * 0.098 * 0.102) ** 0.25
    gm_backup = (0.060 * 0.061 * 0.059 * 0.062) ** 0.25
    assert r["step_change"] == pytest.approx(gm_backup / gm_sync - 1)
    assert r["step_change"] == pytest.approx(-0.40095, abs=1e-5)
    assert r["step_verdict"] == "improved" and r["step_p"] < 0.05
    assert r["tta_verdict"] == "improved"
    assert r["accuracy_difference"] == pytest.approx(0.96375 - 0.97025)
    assert r["accuracy_verdict"] == "within"  # 0.65 points below, margin 1 point
    text = sentences(v, ST.verdicts(), ST.accuracy_margin)[0]
    assert text.startswith(
        "Backup workers: backup1-lenet-n1x3-b32 (3 ranks, b = 1) against sync-lenet-n1x3-b32 "
        "(3 ranks, plain DDP; no b = 0 on these ranks: the backups and the mechanism "
        "together), 4 repeat(s)"
    )
    assert r["comparison"] == "same ranks"
    # applied samples/s: 64 / step against 96 / step -> 2/3 / 0.59905 - 1 = +11.3 %
    assert r["applied_change"] == pytest.approx((2 / 3) * gm_sync / gm_backup - 1)
    assert "median step time -40.1 % (shorter; p < 0.001)" in text
    # every run reached the target: time to accuracy on the geometric means 7.049 vs 10.099 s
    assert "time to the target: reached in 4 of 4 runs vs 4 of 4, geometric mean -30.2 %" in text


def test_no_target_reached_and_one_repeat_are_said():
    runs, ranks = _tables()
    runs["time_to_accuracy_s"] = math.nan
    runs["target_accuracy"] = math.nan
    runs = runs[runs["run_id"].str.endswith("-r0")]
    v = backup_verdicts(runs, ranks, ST.verdicts(), ST.accuracy_margin)
    r = v.iloc[0]
    assert r["step_verdict"] == "inconclusive" and r["accuracy_verdict"] is None
    text = sentences(v, ST.verdicts(), ST.accuracy_margin)[0]
    assert "fewer than 2 complete repeats" in text
    assert "time to" not in text


def test_nothing_without_injection_or_backups():
    runs, ranks = _tables()
    ranks["summary_injected_steps"] = None
    ranks["summary_backup_workers"] = None
    assert injection_table(runs, ranks).empty
    assert backup_verdicts(runs, ranks, ST.verdicts(), ST.accuracy_margin).empty
