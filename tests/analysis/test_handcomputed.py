"""Metrics on fixtures whose numbers are computed by hand (the computation is in comments)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ddlbench.analyse.analysis import Settings, analyse, scaling_tables
from ddlbench.analyse.stats import jitter, summarize, t975
from ddlbench.collect.collector import collect_campaign
from tests.support.sweeps import S, exact_run
from tests.support.synth import write_campaign


def test_global_throughput_is_samples_over_the_union_window(results):
    # 2 ranks, batch 10, 1 warmup step then 3 measured steps, no gaps.
    # rank 0 starts at S:        warmup [S, S+0.5]; measured [S+0.5, S+1.5], [S+1.5, S+2.5],
    #                            [S+2.5, S+3.5]
    # rank 1 starts at S+0.25:   warmup [S+0.25, S+0.75]; measured [S+0.75, S+1.75],
    #                            [S+1.75, S+2.75], [S+2.75, S+4.75]   (last step takes 2 s)
    # measured samples: 2 ranks x 3 steps x 10 = 60
    # window: min measured t_start = S+0.5, max measured t_end = S+4.75 -> 4.25 s
    # global throughput = 60 / 4.25 = 14.1176...; per device = 7.0588...
    # Horovod-style "rank 0 x N" would say (30 / 3.0) x 2 = 20 (wrong: ignores rank 1's slow step)
    run = exact_run(
        nodes=1,
        tasks_per_node=2,
        batch_size=10,
        warmup_steps=1,
        measure_steps=3,
        step_times={0: [0.5, 1.0, 1.0, 1.0], 1: [0.5, 1.0, 1.0, 2.0]},
        rank_offsets={1: 0.25},
    )
    d = collect_campaign(write_campaign(results, "hand", [run]))
    r = d.runs.iloc[0]
    assert r["status"] == "ok" and bool(r["complete"])
    assert r["samples_measured"] == 60
    assert r["window_start"] == S + 0.5
    assert r["window_end"] == S + 4.75
    assert r["measure_time_s"] == 4.25
    assert r["throughput"] == pytest.approx(60 / 4.25, rel=1e-12)
    assert r["throughput_per_device"] == pytest.approx(60 / 4.25 / 2, rel=1e-12)
    assert r["throughput_rank0_x_n"] == pytest.approx(20.0, rel=1e-12)
    # per-rank figures: rank 1 measured 30 samples in [S+0.75, S+4.75] = 4 s -> 7.5/s
    rk = d.ranks.set_index("rank")
    assert rk.loc[1, "throughput"] == pytest.approx(7.5)
    assert rk.loc[0, "step_time_median_s"] == 1.0
    assert rk.loc[1, "step_time_median_s"] == 1.0  # median of [1, 1, 2]
    # warmup steps are in steps.parquet but outside every figure
    steps = d.steps()
    assert len(steps) == 8 and (steps["phase"] == "warmup").sum() == 2


def test_straggler_index_and_slowest_ranks(results):
    # 4 ranks, 3 measured steps each, per-rank median step times 1.0, 1.0, 1.2, 1.6 s:
    # median over ranks = (1.0 + 1.2) / 2 = 1.1; straggler index = 1.6 / 1.1 = 1.4545...
    # slowest rank: 3 (host gpu002, since 2 tasks per node), then 2
    # (durations are differences of Unix times near 1.8e9 s, whose float64 resolution is
    # 2.4e-7 s, so durations like 1.2 s come back to about 1e-7 relative)
    times = {
        0: [1.0, 1.0, 1.0],
        1: [0.9, 1.0, 1.1],
        2: [1.2, 1.2, 5.0],
        3: [1.6, 1.5, 1.7],
    }
    run = exact_run(
        nodes=2, tasks_per_node=2, batch_size=4, warmup_steps=0, measure_steps=3, step_times=times
    )
    d = collect_campaign(write_campaign(results, "strag", [run]))
    r = d.runs.iloc[0]
    assert r["straggler_index"] == pytest.approx(1.6 / 1.1, rel=1e-6)
    assert r["slowest_rank"] == 3 and r["slowest_host"] == "gpu002"
    assert r["slowest_ranks"].startswith("3@gpu002 1600.0 ms; 2@gpu002 1200.0 ms")
    a = analyse(d, Settings(straggler_threshold=1.1))
    assert bool(a.stragglers.iloc[0]["straggler"])
    # rank 2's jitter: median 1.2, |dev| = [0, 0, 3.8] -> MAD 0 -> jitter 0
    assert d.ranks.set_index("rank").loc[2, "step_time_jitter_s"] == pytest.approx(0.0, abs=1e-6)
    # rank 1: median 1.0, |dev| = [0.1, 0, 0.1] -> MAD 0.1 -> jitter 0.14826
    assert d.ranks.set_index("rank").loc[1, "step_time_jitter_s"] == pytest.approx(
        0.14826, abs=1e-6
    )


def _configs(medians):
    rows = []
    for n, t in medians.items():
        rows.append(
            {
                "group": f"pytorch-x-n{n}",
                "framework": "pytorch",
                "workload": "pytorch",
                "model": "resnet50",
                "mode": "throughput",
                "precision": "fp32",
                "data_kind": "synthetic",
                "scaling": "weak",
                "device": "gpu",
                "backend": "nccl",
                "lr_scaling": "linear",
                "warmup_epochs": 0.0,
                "nodes": n,
                "tasks_per_node": 1,
                "world_size": n,
                "batch_size": 32,
                "global_batch_size": 32 * n,
                "repeats": 3,
                "throughput_gmean": t,
                "throughput_log_mean": math.log(t),
                "throughput_log_sd": math.nan,
                "throughput_ci95_low": math.nan,
                "throughput_ci95_high": math.nan,
                "noisy": False,
            }
        )
    return pd.DataFrame(rows)


def test_efficiency_speedup_knee_and_saturation():
    # geometric means: N=1: 100, 2: 190, 4: 320, 8: 560, 16: 600, 32: 580 samples/s
    # eff(N) = (T(N)/N) / (T(1)/1):  1.0, 95/100 = 0.95, 80/100 = 0.80, 70/100 = 0.70,
    #                                37.5/100 = 0.375, 18.125/100 = 0.18125
    # speedup = T(N)/T(1): 1, 1.9, 3.2, 5.6, 6.0, 5.8
    # knee (largest N with eff >= 0.8, inclusive): 4; peak throughput at N=16 < 32: saturates
    pts, series = scaling_tables(
        _configs({1: 100.0, 2: 190.0, 4: 320.0, 8: 560.0, 16: 600.0, 32: 580.0}), Settings()
    )
    eff = dict(zip(pts["devices"], pts["efficiency"]))
    assert eff == pytest.approx({1: 1.0, 2: 0.95, 4: 0.8, 8: 0.7, 16: 0.375, 32: 0.18125})
    sp = dict(zip(pts["devices"], pts["speedup"]))
    assert sp == pytest.approx({1: 1, 2: 1.9, 4: 3.2, 8: 5.6, 16: 6.0, 32: 5.8})
    ideal = dict(zip(pts["devices"], pts["ideal_throughput"]))
    assert ideal[32] == 3200.0
    s = series.iloc[0]
    assert s["base_devices"] == 1 and s["knee_devices"] == 4
    assert s["peak_devices"] == 16 and bool(s["saturates"])
    # a higher threshold moves the knee down; the base is the smallest scale with data
    pts, series = scaling_tables(
        _configs({2: 200.0, 4: 380.0, 8: 640.0}), Settings(efficiency_threshold=0.9)
    )
    # base N=2 (100/device): eff(4) = 95/100 = 0.95, eff(8) = 80/100 = 0.8 -> knee 4
    assert series.iloc[0]["base_devices"] == 2 and series.iloc[0]["knee_devices"] == 4
    assert not bool(series.iloc[0]["saturates"])


def test_repeat_statistics_by_hand():
    # values 100, 110, 120: ln x = 4.605170, 4.700480, 4.787492; mean l = 4.697714
    # geometric mean exp(l) = (100 x 110 x 120)^(1/3) = 109.696131
    # sd of the logs s = 0.0911923, n = 3; half width t(0.975, 2) s / sqrt(3)
    #                  = 4.302653 x 0.0911923 / 1.732051 = 0.226534
    # 95 % interval exp(4.697714 -/+ 0.226534) = [87.459862, 137.585869]
    # CV = 10 / 110 = 0.0909 > 0.05 -> noisy (arithmetic, a description of the spread)
    st = summarize([120.0, 100.0, 110.0])
    assert st["gmean"] == pytest.approx(109.696131, abs=1e-5)
    assert st["log_sd"] == pytest.approx(0.0911923, abs=1e-6)
    assert st["ci95_low"] == pytest.approx(87.459862, abs=1e-4)
    assert st["ci95_high"] == pytest.approx(137.585869, abs=1e-4)
    assert st["median"] == 110 and st["mean"] == 110 and st["std"] == pytest.approx(10)
    assert st["cv"] == pytest.approx(1 / 11) and st["noisy"]
    # one value: a geometric mean but no interval, no CV, not noisy
    one = summarize([5.0])
    assert one["gmean"] == pytest.approx(5.0) and math.isnan(one["ci95_low"])
    assert not one["noisy"]


def test_t_quantiles_and_jitter():
    assert t975(1) == pytest.approx(12.706205, abs=1e-6)
    assert t975(30) == pytest.approx(2.042272, abs=1e-6)
    # Cornish-Fisher beyond the table; reference values from scipy.stats.t.ppf
    assert t975(31) == pytest.approx(2.039513446, abs=2e-6)
    assert t975(60) == pytest.approx(2.000297822, abs=1e-6)
    assert t975(1000) == pytest.approx(1.962339081, abs=1e-6)
    # [1, 2, 3, 4, 5]: median 3, |dev| = [2, 1, 0, 1, 2] -> MAD 1 -> 1.4826
    assert jitter([1, 2, 3, 4, 5]) == pytest.approx(1.4826)


def test_throughput_statistics_over_repeats_end_to_end(results):
    # 1 device, batch 8, 4 measured steps of 0.5 s / 0.25 s / 0.125 s in three repeats:
    # throughput = 32 samples / (4 x dt) = 16, 32, 64 samples/s -> geometric mean 32,
    # sd of the logs ln 2; interval 32 exp(-/+ 4.302653 x 0.693147 / sqrt(3)) = 32 exp(-/+ 1.721873)
    # = [5.719393, 179.039967]: wide (CV 50 %, 3 repeats), positive
    runs = [
        exact_run(batch_size=8, warmup_steps=0, measure_steps=4, repeat=i, step_times={0: [dt] * 4})
        for i, dt in enumerate((0.5, 0.25, 0.125))
    ]
    d = collect_campaign(write_campaign(results, "rep", runs))
    a = analyse(d)
    c = a.configs.iloc[0]
    assert list(d.runs["throughput"]) == [16.0, 32.0, 64.0]
    assert c["repeats"] == 3 and c["throughput_gmean"] == pytest.approx(32.0)
    assert c["throughput_ci95_low"] == pytest.approx(5.719393, abs=1e-4)
    assert c["throughput_ci95_high"] == pytest.approx(179.039967, abs=1e-3)
    assert c["throughput_median"] == 32.0 and c["throughput_mean"] == pytest.approx(112 / 3)
    assert bool(c["noisy"])


def test_compute_split_straggler_index(results):
    # compute_s = 0.5 x step time on every rank: per-rank compute medians 0.5, 0.5, 0.6, 0.8
    # -> compute straggler index = 0.8 / median(0.5, 0.5, 0.6, 0.8) = 0.8 / 0.55 = 1.4545...
    times = {0: [1.0] * 3, 1: [1.0] * 3, 2: [1.2] * 3, 3: [1.6] * 3}
    run = exact_run(
        nodes=1,
        tasks_per_node=4,
        warmup_steps=0,
        measure_steps=3,
        step_times=times,
        compute_fraction=0.5,
    )
    d = collect_campaign(write_campaign(results, "split", [run]))
    r = d.runs.iloc[0]
    assert r["compute_straggler_index"] == pytest.approx(0.8 / 0.55, rel=1e-6)
    rk = d.ranks.set_index("rank")
    assert rk.loc[3, "compute_median_s"] == pytest.approx(0.8, rel=1e-6)
    assert rk.loc[3, "comm_median_s"] == pytest.approx(0.8, rel=1e-6)
