"""The report says only what its evidence supports (review 5): stragglers beyond their own
noise, the worst-N straggler table, no knee from one device count or one repeat, the summary's
interval, no empty sections, which samples a throughput counts, no test from one repeat."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd

from ddlbench.analyse.analysis import Settings, analyse, straggler_table
from ddlbench.analyse.large_batch import margin_table, sentences
from ddlbench.analyse.series import NO_KNEE_NO_INTERVAL, NO_KNEE_ONE_SCALE, RATE_APPLIED
from ddlbench.collect.collector import collect_campaign
from ddlbench.report.figures import figure_plan
from ddlbench.report.narrative import (
    _convergence_sentences,
    _largest_scale_words,
    _straggler_sentences,
    knee_sentence,
    window_sentences,
)
from ddlbench.report.sections import CONVERGENCE, SERIES, STATS, STRAGGLERS
from tests.support.synth import SynthRun, write_campaign


def _strag_runs(rows) -> pd.DataFrame:
    """A runs table of (run_id, world_size, index, jitter over median step)."""
    return pd.DataFrame(
        {
            "run_id": [r[0] for r in rows],
            "group": "g",
            "framework": "pytorch",
            "world_size": [r[1] for r in rows],
            "status": "ok",
            "straggler_index": [r[2] for r in rows],
            "straggler_metric": "compute",
            "step_straggler_index": 1.0,
            "compute_straggler_index": [r[2] for r in rows],
            "n_hosts": 1,
            "nodes": 1,
            "step_time_median_s": 0.01,
            "step_time_jitter_s": [0.01 * r[3] for r in rows],
            "slowest_rank": 0,
            "slowest_host": "vm",
            "slowest_ranks": "0@vm 8.2 ms",
        }
    )


def test_summary_counts_only_stragglers_beyond_their_noise() -> None:
    st = Settings()
    # lb-trim's: index 1.269 with 29 % step noise, on 2 ranks: within its noise
    a = SimpleNamespace(
        settings=st, stragglers=straggler_table(_strag_runs([("r1", 2, 1.269, 0.29)]), st)
    )
    assert not a.stragglers["beyond_noise"].any()
    (words,) = _straggler_sentences(a)
    assert words.startswith("No straggler beyond the runs' own noise: 1 run(s)")
    assert "the mean of both ranks' median compute times" in words
    assert "median rank" not in words
    # one beyond its noise (1.5 > 1.1 + 0.05) and one within: counted apart
    a.stragglers = straggler_table(_strag_runs([("r1", 2, 1.269, 0.29), ("r2", 4, 1.5, 0.05)]), st)
    (words,) = _straggler_sentences(a)
    assert words.startswith("1 run(s) with a straggler (index above 1.1 by more than")
    assert "worst: r2" in words and "median over its 4 ranks" in words
    assert "1 run(s) with an index above 1.1 but within their own step-to-step noise" in words


def test_straggler_table_says_it_shows_the_worst_15_and_leaves_out_one_rank_runs() -> None:
    rows = [(f"r{i:02d}", 2, 1.0 + i / 100, 0.01) for i in range(20)]
    rows += [(f"s{i}", 1, 1.0, 0.01) for i in range(3)]
    t = STRAGGLERS.table(straggler_table(_strag_runs(rows), Settings()))
    assert t is not None and len(t.rows) == 15
    assert "the worst 15 of 20 runs" in t.title
    assert "3 run(s) of one rank" in t.title
    assert all(r[1] == "2" for r in t.rows)
    # only one-rank runs: no table at all
    assert STRAGGLERS.table(straggler_table(_strag_runs(rows[-3:]), Settings())) is None


def test_no_knee_from_one_device_count_or_one_repeat(results) -> None:
    runs = [SynthRun(nodes=1, tasks_per_node=2, repeat=0, model="vgg16")]  # one N
    runs += [SynthRun(nodes=1, tasks_per_node=t, repeat=0) for t in (1, 2, 4)]  # 1 repeat
    runs += [
        SynthRun(nodes=1, tasks_per_node=t, repeat=r, model="lenet") for t in (1, 2) for r in (0, 1)
    ]
    a = analyse(collect_campaign(write_campaign(results, "knee", runs)))
    s = a.series.set_index("model")
    assert s.loc["vgg16", "knee_reason"] == NO_KNEE_ONE_SCALE
    assert s.loc["resnet50", "knee_reason"] == NO_KNEE_NO_INTERVAL
    for m in ("vgg16", "resnet50"):
        assert pd.isna(s.loc[m, "knee_low"]) and pd.isna(s.loc[m, "knee_high"])
    assert pd.isna(s.loc["vgg16", "knee_devices"])  # not even a point estimate
    assert not pd.isna(s.loc["lenet", "knee_low"]) and not s.loc["lenet", "knee_reason"]
    assert knee_sentence(s.loc["resnet50"], a.settings) == f"no knee ({NO_KNEE_NO_INTERVAL})"
    cells = {r[0]: r for r in SERIES.table(a.series, a.settings).rows}
    knee = SERIES.table(a.series, a.settings).columns.index("knee N")
    assert any(c[knee] == f"- ({NO_KNEE_ONE_SCALE})" for c in cells.values())


def _scale(lo: float, hi: float, repeats: int = 2):
    r = pd.Series(
        {"max_devices": 3, "base_devices": 2, "rate": "throughput", "speedup_at_max": 0.96}
    )
    r["efficiency_at_max"] = 0.64
    p = pd.Series(
        {
            "throughput_gmean": 2678.7,
            "ci95_low": lo,
            "ci95_high": hi,
            "repeats": repeats,
            "efficiency_ci95_low": 0.5,
            "efficiency_ci95_high": 0.8,
        }
    )
    return r, p


def test_summary_gives_the_interval_or_says_too_noisy() -> None:
    words = _largest_scale_words(*_scale(41.0, 174936.5), None)
    # the interval's ends to two significant digits at least (never rounded to 0), outward
    assert "too noisy to state" in words and "41-180,000 samples/s" in words
    assert "2,678.7" not in words and "2,700" not in words and "efficiency 64" not in words
    words = _largest_scale_words(*_scale(2500.0, 2900.0), None)
    # half-width 200: to tens; the efficiency's 15 points: to whole points (docs/reports.md)
    assert "2,680 samples/s on 3 devices (95 % interval 2,500-2,900 samples/s" in words
    assert "0.96x the 2 devices base" in words
    assert "efficiency 64 %, its 95 % interval 50 %-80 %" in words
    words = _largest_scale_words(*_scale(math.nan, math.nan, 1), 128)
    assert "1 repeat, no interval" in words and "tokens/s" in words


def test_no_empty_tables_and_no_figure_without_accuracies() -> None:
    configs = pd.DataFrame({"group": ["ar", "c"], "mode": ["allreduce", "convergence"]})
    configs["repeats"] = [2, 0]  # allreduce only, and a training configuration that failed
    assert STATS.table(configs) is None
    conv = pd.DataFrame(
        {
            "group": ["c"],
            "global_batch_size": [64],
            "lr": [0.1],
            "warmup": ["no warmup"],
            "repeats": [0],
            "final_accuracy_mean": [math.nan],
            "final_accuracy_ci95_low": [math.nan],
            "best_accuracy": [math.nan],
            "reached": [0],
            "time_to_accuracy_s": [math.nan],
            "target_accuracy": [0.9],
        }
    )
    row = CONVERGENCE.table(conv).rows[0]
    assert "not reached" not in row and "no complete run" in row and "0 of 0" not in row
    a = SimpleNamespace(
        points=pd.DataFrame(),
        largest_run=None,
        largest_ranks=pd.DataFrame(),
        convergence=conv,
        curves=pd.DataFrame(),
        allreduce=pd.DataFrame(),
        settings=Settings(),
    )
    assert [k for k, _, _ in figure_plan(a)] == []
    assert "target 90.0 %: no complete run" in _convergence_sentences(a)[0]


def test_repeat_statistics_say_which_samples_they_count() -> None:
    configs = pd.DataFrame(
        {
            "group": ["b1", "sync"],
            "mode": "throughput",
            "world_size": 2,
            "repeats": 2,
            "runs": 2,
            "rate": [RATE_APPLIED, "throughput"],
            "throughput_gmean": [6098.3, 3766.7],
            "rate_gmean": [3049.1, 3766.7],
            "throughput_ci95_low": math.nan,
            "throughput_ci95_high": math.nan,
            "throughput_min": 1.0,
            "throughput_max": 2.0,
            "throughput_cv": 0.01,
            "noisy": False,
            "step_time_median_s": 0.01,
            "step_time_jitter_s": 0.001,
        }
    )
    t = STATS.table(configs)
    rows = {r[0]: dict(zip(t.columns, r)) for r in t.rows}
    assert rows["b1"]["samples counted"] == "all, dropped ones too"
    assert rows["sync"]["samples counted"] == "all"
    applied = [c for c in t.columns if c.startswith("applied samples/s")]
    assert applied and rows["b1"][applied[0]] == "3,049.1" and rows["sync"][applied[0]] == ""


def test_large_batch_study_with_one_repeat_claims_no_test() -> None:
    conv = pd.DataFrame(
        {
            "group": ["b32", "b64"],
            "framework": "pytorch",
            "model": "lenet",
            "warmup": "gradual warmup",
            "global_batch_size": [32, 64],
            "final_accuracy_mean": [0.9499, 0.8384],
            "final_accuracy_std": math.nan,
            "repeats": 1,
        }
    )
    t = margin_table(conv, 0.01, 0.05)
    assert not t["tested"].any()
    (words,) = sentences(t, 0.01, 0.95)
    assert "Welch" not in words and "undetermined" not in words
    assert "no test of the 1 point margin is possible" in words
    assert "gradual warmup at 64: -11.15 points" in words


def test_one_run_window_and_the_accuracy_the_summary_names() -> None:
    runs = pd.DataFrame({"status": ["ok"], "measure_time_s": [1.3]})
    (w,) = window_sentences(runs)
    assert "1.3 s (1 run)" in w and "median" not in w
    conv = pd.DataFrame(
        {
            "group": ["c"],
            "global_batch_size": [32],
            "final_accuracy": [0.95],
            "final_accuracy_mean": [0.9499],
            "best_accuracy": [0.961],
        }
    )
    a = SimpleNamespace(convergence=conv, settings=Settings())
    (c,) = _convergence_sentences(a)
    assert "highest final accuracy 94.99 % (mean over the complete repeats" in c
    assert "the table's final accuracy" in c


def test_series_table_has_tokens_for_language_models() -> None:
    series = pd.DataFrame(
        {
            "series": ["s"],
            "label": ["pytorch ddp"],
            "mode": "throughput",
            "scaling": "weak",
            "base_devices": [2],
            "base_throughput": [9.25],
            "max_devices": [2],
            "efficiency_at_max": [1.0],
            "knee_low": [None],
            "knee_high": [None],
            "knee_reason": [NO_KNEE_ONE_SCALE],
            "peak_devices": [2],
            "seq_len": [128],
        }
    )
    t = SERIES.table(series, Settings())
    assert dict(zip(t.columns, t.rows[0]))["base tokens/s"] == "1,184.0"
