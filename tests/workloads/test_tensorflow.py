"""The TensorFlow workload (MultiWorkerMirroredStrategy, pure-TF loop), 2 real ranks on the CPU.

Run in the ``tensorflow`` framework environment (scripts/make-envs.sh tensorflow); skipped with
the reason when it is absent (failed under CI, which builds it).
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.frameworks


def losses(records):
    return [r["loss"] for r in records if r["type"] == "step"]


def check_loss_decreases(records, drop=0.3):
    values = losses(records)
    assert sum(values[-4:]) / 4 < sum(values[:4]) / 4 - drop, values


def test_lenet_digits_two_ranks_throughput(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "tensorflow",
        framework_options={"communication": "ring"},
        steps={"warmup": 2, "measure": 30},
        optimizer={"lr": 0.02, "base_lr": 0.02, "weight_decay": 1e-4},
        mllog=True,
    )
    result = launch_ranks("tensorflow", cfg, world_size=2, env="tensorflow", timeout=240)
    check_data_parallel(result)
    for rank in range(2):
        meta = result.logs[rank][0]
        assert meta["workload"] == "tensorflow" and meta["framework"] == "tensorflow"
        assert meta["backend"] == "ring" and meta["strategy"] == "MultiWorkerMirroredStrategy"
        assert meta["param_count"] == 61_706 and meta["local_rank"] == rank
        assert meta["slurm_job_id"] is not None and meta["precision"] == "fp32"
        steps = result.records(rank, "step")
        assert [s["phase"] for s in steps] == ["warmup"] * 2 + ["measure"] * 30
        assert all(s["samples"] == 32 and s["t_end"] > s["t_start"] for s in steps)
        summary = result.summary(rank)
        assert summary["status"] == "ok" and summary["steps_measured"] == 30
        assert summary["samples_measured"] == 30 * 32
        assert summary["throughput"] == pytest.approx(30 * 32 / summary["measure_time_s"])
        check_loss_decreases(result.logs[rank])
    # the ranks read different shards: their losses differ, their parameters do not
    assert losses(result.logs[0]) != losses(result.logs[1])
    mllog = [line for line in result.stdout[0].splitlines() if line.startswith(":::MLLOG")]
    assert {json.loads(line[9:])["key"] for line in mllog} >= {"run_start", "run_stop"}
    assert ":::MLLOG" not in result.stdout[1]


def test_lenet_digits_two_ranks_convergence(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "tensorflow",
        mode="convergence",
        epochs=3,
        target_accuracy=0.5,
        optimizer={"lr": 0.05, "base_lr": 0.025},
        lr_schedule={"scaling": "linear", "warmup_epochs": 1, "decay_epochs": [2]},
    )
    result = launch_ranks("tensorflow", cfg, world_size=2, env="tensorflow", timeout=240)
    check_data_parallel(result)
    evals = [result.records(rank, "eval") for rank in range(2)]
    assert [e["epoch"] for e in evals[0]] == [0, 1, 2]
    # global figures: every rank reports the same accuracy, over the whole validation split
    assert [e["accuracy"] for e in evals[0]] == [e["accuracy"] for e in evals[1]]
    assert all(e["samples"] == 359 for e in evals[0])
    summary = result.summary(0)
    assert summary["best_accuracy"] >= 0.5, evals[0]
    assert summary["status"] == "ok" and summary["time_to_accuracy_s"] is not None
    lrs = [s["lr"] for s in result.records(0, "step")]
    assert len(lrs) == 3 * (1438 // 2 // 32)
    assert lrs[0] == pytest.approx(0.025) and lrs[22] == pytest.approx(0.05)
    assert lrs[-1] == pytest.approx(0.005)
