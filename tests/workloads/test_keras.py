"""The Keras 3 workload (custom loop under MultiWorkerMirroredStrategy), 2 real ranks on the CPU.

Runs in the ``tensorflow`` framework environment (Keras 3 is TensorFlow's Keras from 2.16 on).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.frameworks


def losses(records):
    return [r["loss"] for r in records if r["type"] == "step"]


def test_lenet_digits_two_ranks_throughput(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "keras",
        framework_options={"communication": "auto"},
        steps={"warmup": 2, "measure": 30},
        optimizer={"lr": 0.02, "base_lr": 0.02, "weight_decay": 1e-4},
    )
    result = launch_ranks("keras", cfg, world_size=2, env="tensorflow", timeout=240)
    check_data_parallel(result)
    for rank in range(2):
        meta = result.logs[rank][0]
        assert meta["workload"] == "keras" and meta["framework"] == "keras"
        assert meta["framework_version"].startswith("3.")
        assert meta["keras_backend"] == "tensorflow" and meta["tensorflow_version"]
        assert meta["backend"] == "auto" and meta["communication_effective"] == "ring"
        assert meta["param_count"] == 61_706 and meta["local_rank"] == rank
        steps = result.records(rank, "step")
        assert [s["phase"] for s in steps] == ["warmup"] * 2 + ["measure"] * 30
        assert all(s["samples"] == 32 and s["t_end"] > s["t_start"] for s in steps)
        summary = result.summary(rank)
        assert summary["status"] == "ok" and summary["steps_measured"] == 30
        assert summary["throughput"] == pytest.approx(30 * 32 / summary["measure_time_s"])
        values = losses(result.logs[rank])
        assert sum(values[-4:]) / 4 < sum(values[:4]) / 4 - 0.3, values
    assert losses(result.logs[0]) != losses(result.logs[1])


def test_lenet_digits_two_ranks_convergence(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "keras",
        mode="convergence",
        epochs=2,
        target_accuracy=0.99,
        optimizer={"lr": 0.05, "base_lr": 0.05},
    )
    result = launch_ranks("keras", cfg, world_size=2, env="tensorflow", timeout=240)
    check_data_parallel(result)
    evals = [result.records(rank, "eval") for rank in range(2)]
    assert [e["epoch"] for e in evals[0]] == [0, 1]
    assert [e["accuracy"] for e in evals[0]] == [e["accuracy"] for e in evals[1]]
    assert all(e["samples"] == 359 for e in evals[0])
    assert evals[0][-1]["loss"] < 2.2, evals[0]
    summary = result.summary(0)
    # a target that 2 epochs do not reach: the run completes and says so
    assert summary["status"] == "target_not_reached" and summary["time_to_accuracy_s"] is None
