"""The PyTorch DDP workload, with 2 real ranks on the CPU (gloo), in the torch environment."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.repo import ROOT

pytestmark = pytest.mark.frameworks

COUNTS = r"""
import json
from ddlbench.workloads.pytorch.models_torch import MODELS, build_model, param_count
import torch
out = {}
for name in MODELS:
    side, classes = (28, 10) if name == "lenet" else (224, 1000)
    with torch.device("meta"):
        model = build_model(name, classes, side)
    out[name] = param_count(model)
model = build_model("lenet", 10, 28)
out["lenet_logits"] = list(model(torch.zeros(2, 1, 28, 28)).shape)
model = build_model("resnet50", 1000, 224)
out["resnet50_cpu"] = param_count(model)
out["resnet50_logits"] = list(model(torch.zeros(1, 3, 64, 64)).shape)
print(json.dumps(out))
"""


def assert_loss_goes_down(losses):
    """Loss of the last 10 steps well below the first 4 (robust to a single spike)."""
    start = sum(losses[:4]) / 4
    assert min(losses[-10:]) < start - 0.5 and sum(losses[-10:]) / 10 < start - 0.2, losses


def test_param_counts_match_canonical(framework_python):
    python = framework_python("torch")
    if python is None:
        pytest.skip("torch environment not built")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([python, "-c", COUNTS], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)
    assert counts["lenet"] == 61_706
    assert counts["resnet50"] == counts["resnet50_cpu"] == 25_557_032
    assert counts["vgg16"] == 138_357_544
    assert counts["vgg19"] == 143_667_240
    assert counts["lenet_logits"] == [2, 10] and counts["resnet50_logits"] == [1, 1000]


def _losses(records):
    return [r["loss"] for r in records if r["type"] == "step"]


def test_lenet_digits_two_ranks_throughput(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "pytorch",
        framework_options={"backend": "gloo"},
        steps={"warmup": 3, "measure": 40},
        optimizer={"lr": 0.02, "base_lr": 0.02},
        mllog=True,
    )
    result = launch_ranks("pytorch", cfg, world_size=2)
    check_data_parallel(result)
    for rank in range(2):
        meta = result.logs[rank][0]
        assert meta["backend"] == "gloo" and meta["ddp"] is True and meta["param_count"] == 61_706
        assert meta["slurm_job_id"] is not None and meta["local_rank"] == rank
        steps = result.records(rank, "step")
        assert [s["phase"] for s in steps] == ["warmup"] * 3 + ["measure"] * 40
        assert all(s["samples"] == 32 and s["t_end"] > s["t_start"] for s in steps)
        measured = [s for s in steps if s["phase"] == "measure"]
        assert all(s["comm_s"] is not None and s["comm_s"] > 0 for s in measured)
        for s in measured:  # compute + comm partition the step (data fetch excluded)
            assert s["compute_s"] + s["comm_s"] <= (s["t_end"] - s["t_start"]) + 1e-3
        summary = result.summary(rank)
        assert summary["status"] == "ok" and summary["steps_measured"] == 40
        assert summary["samples_measured"] == 40 * 32
        assert summary["measure_time_s"] == pytest.approx(
            measured[-1]["t_end"] - measured[0]["t_start"]
        )
        assert summary["throughput"] == pytest.approx(1280 / summary["measure_time_s"])
        losses = _losses(result.logs[rank])
        assert_loss_goes_down(losses)
    # ranks see different data, so their losses differ, but their parameters do not
    assert _losses(result.logs[0]) != _losses(result.logs[1])
    mllog = [line for line in result.stdout[0].splitlines() if line.startswith(":::MLLOG")]
    keys = {json.loads(line[9:])["key"] for line in mllog}
    assert {"run_start", "run_stop", "global_batch_size", "opt_base_learning_rate"} <= keys
    assert ":::MLLOG" not in result.stdout[1]


def test_lenet_digits_two_ranks_convergence(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "pytorch",
        mode="convergence",
        epochs=6,
        target_accuracy=0.9,
        batch_size=32,
        optimizer={"lr": 0.03, "base_lr": 0.015},
        lr_schedule={"scaling": "linear", "warmup_epochs": 1, "decay_epochs": [5]},
    )
    result = launch_ranks("pytorch", cfg, world_size=2, timeout=120)
    check_data_parallel(result)
    evals = [result.records(rank, "eval") for rank in range(2)]
    assert [e["epoch"] for e in evals[0]] == list(range(6))
    # global accuracy: every rank reports the same figure, over the whole validation split
    assert [e["accuracy"] for e in evals[0]] == [e["accuracy"] for e in evals[1]]
    assert all(e["samples"] == 359 for e in evals[0])
    summary = result.summary(0)
    assert summary["final_accuracy"] >= 0.9, evals[0]
    assert summary["status"] == "ok" and summary["time_to_accuracy_s"] is not None
    first_reached = next(e for e in evals[0] if e["accuracy"] >= 0.9)
    assert summary["time_to_accuracy_s"] == pytest.approx(first_reached["elapsed_s"])
    steps = result.records(0, "step")
    assert len(steps) == 6 * (719 // 32)
    lrs = [s["lr"] for s in steps]
    assert lrs[0] == pytest.approx(0.015) and lrs[11] == pytest.approx(0.0225)  # warmup, epoch 0
    assert lrs[22] == pytest.approx(0.03) and lrs[-1] == pytest.approx(0.003)  # decay at epoch 5


def test_synthetic_single_rank_and_amp_on_cpu(launch_ranks, run_config, validate_log):
    cfg = run_config(
        "pytorch",
        data={"kind": "synthetic", "samples": 256},
        precision="amp",
        steps={"warmup": 1, "measure": 3},
    )
    result = launch_ranks("pytorch", cfg, world_size=1)
    result.check_ok()
    validate_log(result.logs[0])
    meta = result.logs[0][0]
    assert meta["ddp"] is False and meta["world_size"] == 1
    assert meta["precision"] == "fp32" and meta["precision_requested"] == "amp"
    assert "amp is not supported on the CPU" in result.stderr[0]
    steps = result.records(0, "step")
    assert all(s["comm_s"] is None and s["epoch"] == 0 for s in steps)  # 256 / 32 = 8 steps/epoch


def test_failure_logs_error_and_exits_nonzero(launch_ranks, run_config, validate_log):
    cfg = run_config("pytorch", model="no-such-model")
    result = launch_ranks("pytorch", cfg, world_size=2, timeout=120)
    assert all(code != 0 for code in result.returncodes), result.describe()
    for records in result.logs:
        validate_log(records, complete=False)
        assert records[-1]["type"] == "error" and "no-such-model" in records[-1]["message"]


def test_allreduce_torch_sweep(launch_ranks, run_config, validate_log):
    cfg = run_config(
        "allreduce_torch",
        framework="pytorch",
        mode="allreduce",
        framework_options={"backend": "gloo"},
        allreduce={"min_bytes": 1024, "max_bytes": 1 << 20, "iters": 5, "warmup": 2},
    )
    result = launch_ranks("allreduce_torch", cfg, world_size=2, timeout=120)
    result.check_ok()
    for rank in range(2):
        validate_log(result.logs[rank])
        records = result.records(rank, "allreduce")
        assert [r["bytes"] for r in records] == [1024 << i for i in range(11)]
        for r in records:
            assert r["dtype"] == "float32" and r["iters"] == 5 and r["time_s"] > 0
            assert r["algbw_gbps"] == pytest.approx(r["bytes"] / r["time_s"] / 1e9)
            assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"])  # 2(n-1)/n = 1 for n = 2
        assert result.summary(rank)["max_busbw_gbps"] > 0
