"""The measured window of a throughput run: at least ``steps.measure`` steps and at least
``steps.measure_seconds`` seconds, at most ``steps.max_measure`` steps, with the ranks
agreeing on the count (docs/spec.md#steps)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from ddlbench.workloads.common import LRSchedule, RankLogger, normalize_run_config, run_training
from ddlbench.workloads.common.loop import Measurement
from ddlbench.workloads.common.window import MAX_ROUNDS, MeasureWindow


def cfg_for(tmp_path, rank: int, world: int, **steps) -> dict:
    return normalize_run_config(
        {
            "run_id": "w",
            "workload": "pytorch",
            "mode": "throughput",
            "log_dir": str(tmp_path / f"logs-{rank}"),
            "world_size": world,
            "steps": {"warmup": 2, "measure": 5, **steps},
        }
    )


def train(cfg: dict, rank: int, step_s: float, sum_ranks=None) -> Measurement:
    def step(_batch, _lr):
        time.sleep(step_s)
        return 1.0

    with RankLogger(cfg["log_dir"], rank) as log:
        m = Measurement(log)
        run_training(cfg, m, step, LRSchedule.from_config(cfg, 1e9), sum_ranks=sum_ranks)
    return m


def test_steps_only_when_no_time_is_asked(tmp_path):
    m = train(cfg_for(tmp_path, 0, 1, measure_seconds=0), 0, 0.001)
    assert m.steps_measured == 5
    fields = m.summary_fields()
    assert fields["measure_seconds_target"] == 0.0 and fields["measure_capped"] is False


def test_one_rank_measures_until_the_window_is_long_enough(tmp_path):
    m = train(cfg_for(tmp_path, 0, 1, measure_seconds=0.3), 0, 0.005)
    fields = m.summary_fields()
    assert fields["measure_time_s"] >= 0.3 and m.steps_measured > 5
    assert fields["measure_time_s"] < 1.0  # extrapolated from the steps so far
    assert m.steps_measured < 1000  # not run to the default cap
    assert fields["measure_capped"] is False and m.window.rounds <= MAX_ROUNDS
    text = (tmp_path / "logs-0" / "rank-0.jsonl").read_text()
    lines = [json.loads(x) for x in text.splitlines() if x]
    measured = [r for r in lines if r["type"] == "step" and r["phase"] == "measure"]
    assert len(measured) == m.steps_measured == fields["steps_measured"]


def test_the_cap_stops_a_run_that_cannot_reach_the_window(tmp_path):
    m = train(cfg_for(tmp_path, 0, 1, measure_seconds=60, max_measure=12), 0, 0.002)
    assert m.steps_measured == 12
    assert m.summary_fields()["measure_capped"] is True


def test_two_ranks_of_different_speed_take_the_same_steps(tmp_path):
    """Two ranks in threads, with a barrier as their allreduce: the slower and the faster rank
    want different counts, but every agreement gives both the same answer (a rank that took
    a step more would wait for ever in a real collective)."""
    barrier = threading.Barrier(2)
    lock = threading.Lock()
    box = {"sum": [0.0, 0.0]}

    def sum_ranks(values):
        with lock:
            box["sum"] = [a + b for a, b in zip(box["sum"], values)]
        barrier.wait()
        out = list(box["sum"])
        if barrier.wait() == 0:
            box["sum"] = [0.0, 0.0]
        barrier.wait()
        return out

    got = {}

    def rank(r: int, step_s: float) -> None:
        got[r] = train(cfg_for(tmp_path, r, 2, measure_seconds=0.25), r, step_s, sum_ranks)

    threads = [threading.Thread(target=rank, args=(r, s)) for r, s in ((0, 0.002), (1, 0.006))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got[0].steps_measured == got[1].steps_measured > 5
    assert got[0].window.rounds == got[1].window.rounds


def test_many_ranks_without_a_sum_is_an_error_not_a_hang(tmp_path):
    with pytest.raises(ValueError, match="agree on the step count"):
        train(cfg_for(tmp_path, 0, 2, measure_seconds=1), 0, 0.001)


def test_the_wish_is_the_mean_rounded_up_and_capped():
    w = MeasureWindow({"measure": 10, "measure_seconds": 2.0, "max_measure": 30}, 2)
    assert w.wanted(10, 2.5) == 0  # long enough
    assert w.wanted(10, 1.0) == 11  # 10 more at 0.1 s each, 5 % margin
    assert w.more(10, 1.0, lambda v: [v[0] + 6.0, v[1] + 1.0]) == 9  # (11 + 6) / 2 -> 9
    assert w.more(19, 1.5, lambda v: [100.0, 2.0]) == 11 and w.capped  # 30 - 19 left
    assert w.more(30, 1.9, lambda v: [5.0, 2.0]) == 0 and w.capped
    default = MeasureWindow({"measure": 50, "measure_seconds": 1.0}, 1)
    assert default.cap == 5000
