"""The training-health rule on synthetic loss series (docs/metrics.md#training), and a report
of a campaign with a diverged run: the warning in report.md, report.html, runs.csv and on
stderr."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ddlbench.analyse.training_health import (
    DIVERGED,
    NO_LOSS,
    OK,
    run_loss_series,
    training_health,
)
from ddlbench.collect.columns import RUNS, names
from ddlbench.report.render import build_report
from tests.support.cli import invoke
from tests.support.synth import SynthRun, write_campaign

LN10 = math.log(10)


def _rng(seed: int = 0) -> np.random.RandomState:
    return np.random.RandomState(seed)


def _learning(n: int, seed: int = 0) -> np.ndarray:
    """A normal run: ln 10 falling towards 0.05, per-batch noise growing to 50 % as the model
    leaves the uniform guess of its initialisation, and some spikes."""
    t = np.arange(n)
    loss = (LN10 - 0.05) * np.exp(-t / (0.1 * n)) + 0.05
    loss = loss * np.exp(0.5 * (1 - np.exp(-t / (0.02 * n))) * _rng(seed).randn(n))
    loss[_rng(seed + 1).choice(n, n // 100, replace=False)] = 1.6 * LN10  # batches gone wrong
    return loss


def _chance(n: int, seed: int = 0) -> np.ndarray:
    """A model that predicts uniformly: ln 10 and the noise of the batches' labels."""
    return LN10 + 0.02 * _rng(seed).randn(n)


def test_collapse_to_chance_after_learning_is_diverged():
    loss = np.concatenate([_learning(1600), _chance(700)])  # the quickstart's n1x1-r2
    h = training_health(loss)
    assert h.verdict == DIVERGED
    assert abs(h.first - LN10) < 0.2 and h.best < 0.2 and abs(h.last - LN10) < 0.05
    assert "fell from" in h.reason


def test_blow_up_then_chance_is_diverged():
    # the quickstart's n1x2-r0: learning for 20 steps, one step at 5.5, chance ever after
    loss = np.concatenate([np.linspace(2.3, 1.3, 22), [5.5, 4.7], _chance(1500)])
    h = training_health(loss)
    assert h.verdict == DIVERGED and "blew up" in h.reason


def test_non_finite_loss_at_the_end_is_diverged():
    loss = np.concatenate([_learning(500)[:300], [np.inf], np.full(199, np.nan)])
    h = training_health(loss)
    assert h.verdict == DIVERGED and math.isnan(h.last)
    assert h.reason == "no finite loss in the last 200 steps"
    # one missing loss at the end (a backup worker's dropped step) is not a divergence
    assert training_health(np.append(_learning(500), np.nan)).verdict == OK


def test_a_loss_reported_now_and_then_is_not_a_non_finite_end():
    loss = np.full(1000, np.nan)
    loss[::25] = _learning(1000)[::25]  # a program that prints its loss every 25 steps
    assert training_health(loss).verdict == OK


def test_runs_that_never_learn_are_not_flagged():
    # random labels: the loss stays near ln(classes) throughout
    assert training_health(_chance(3000)).verdict == OK
    assert training_health(math.log(1000) + 0.3 * _rng(3).randn(2000)).verdict == OK
    # benchmarks/_synth.py's campaigns: from 7.0 slowly down
    t = np.arange(400) / 400
    assert training_health(6.9 * np.exp(-0.05 * t) + 0.1).verdict == OK
    assert training_health(6.9 * np.exp(-1.5 * t) + 0.1).verdict == OK


def test_noisy_learning_is_ok():
    for seed in range(5):
        h = training_health(_learning(2000, seed))
        assert h.verdict == OK, h
        assert h.last < 0.3 * h.first


def test_short_runs_are_judged_only_on_a_non_finite_end():
    assert training_health([2.3, 0.1, 0.1, 2.3, 2.3, 2.3]).verdict == OK
    assert training_health([2.3, 2.2, 2.1, np.nan, np.nan, np.nan]).verdict == DIVERGED
    assert training_health([2.3, 2.2, 2.1, 2.0, np.nan]).verdict == OK
    assert training_health([2.3]).verdict == OK


def test_no_loss():
    assert training_health([]).verdict == NO_LOSS
    assert training_health([np.nan] * 50).verdict == NO_LOSS
    assert training_health(np.zeros(50)).verdict == OK  # zero start: not judged


def test_run_loss_series_is_the_mean_over_ranks_step_by_step():
    series = run_loss_series([np.array([1.0, np.nan, 3.0]), np.array([3.0, 2.0]), np.array([])])
    assert series.tolist() == [2.0, 2.0, 3.0]
    assert np.isnan(run_loss_series([np.array([np.nan, np.inf])])).all()
    assert len(run_loss_series([])) == 0


def test_the_runs_table_has_the_training_columns():
    assert {"training", "loss_first", "loss_best", "loss_last"} <= set(names(RUNS))


def _set_losses(camp, run_id: str, losses: np.ndarray) -> None:
    """Rewrite every rank log's step losses of a written run (``None``: not finite)."""
    logs = sorted((camp / "runs" / run_id / "logs").glob("**/rank-*.jsonl"))
    assert logs
    for log in logs:
        records = [json.loads(line) for line in log.read_text().splitlines()]
        steps = [r for r in records if r.get("type") == "step"]
        assert len(steps) == len(losses)
        for rec, v in zip(steps, losses):
            rec["loss"] = float(v) if np.isfinite(v) else None
        log.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_report_names_the_diverged_runs(results):
    runs = [
        SynthRun(tasks_per_node=tp, repeat=r, measure_steps=98) for tp in (1, 2) for r in (0, 1)
    ]
    camp = write_campaign(results, "lr", runs)
    collapsed = np.concatenate([_learning(60), _chance(40)])  # 2 warmup + 98 measured steps
    _set_losses(camp, "pytorch-resnet50-n1x2-b32-r1", collapsed)
    res = build_report(camp)
    md, html = res.files["md"].read_text(), res.files["html"].read_text()
    for text in (md, html.replace("-&gt;", "->")):
        assert "Training diverged in 1 of 4 run(s) (loss first -> best -> last)" in text
        assert "pytorch-resnet50-n1x2-b32-r1 2." in text  # its first loss, about ln 10
        assert "Their throughput is still shown, but their training failed" in text
    summary = md.split("## Summary")[1].split("##")[0]
    assert "Training diverged" in summary  # near the top, in the summary
    assert "training diverged: the loss fell from" in md  # the problems table's notes
    table = pd.read_csv(res.out_dir / "data" / "runs.csv").set_index("run_id")
    assert table.loc["pytorch-resnet50-n1x2-b32-r1", "training"] == DIVERGED
    assert (table.drop("pytorch-resnet50-n1x2-b32-r1")["training"] == OK).all()
    assert table["throughput"].notna().all()  # still measured, still shown
    r = invoke(["report", "--results", str(results), "lr", "--format", "md", "-q"])
    assert r.exit_code == 0, r.output
    assert "warning: training diverged in 1 run(s) (pytorch-resnet50-n1x2-b32-r1)" in r.stderr
