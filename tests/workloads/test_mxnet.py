"""The MXNet workload (Gluon, dist_sync kvstore): scheduler + 1 server + 2 workers on the CPU.

The three roles run as the three srun steps of slurm_templates/mxnet.sh.j2 would start them:
the same command, ``DMLC_ROLE`` per step, and each step's own Slurm task variables (the worker
step has ranks 0..W-1). Runs in the ``mxnet`` framework environment.
"""

from __future__ import annotations

import pytest

from tests.support.ranks import describe_ps, launch_ps

pytestmark = pytest.mark.frameworks


def losses(records):
    return [r["loss"] for r in records if r["type"] == "step"]


def test_lenet_digits_scheduler_server_two_workers(tmp_path, run_config, check_data_parallel):
    cfg = run_config(
        "mxnet",
        framework_options={"kvstore": "dist_sync", "servers": 1},
        steps={"warmup": 2, "measure": 40},
        optimizer={"lr": 0.03, "base_lr": 0.03, "weight_decay": 1e-4},
    )
    run = launch_ps(tmp_path, cfg)
    result = run["result"]
    assert all(code == 0 for code in run["codes"].values()), describe_ps(run)
    check_data_parallel(result)
    for rank in range(2):
        meta = result.logs[rank][0]
        assert meta["workload"] == "mxnet" and meta["backend"] == "dist_sync"
        assert meta["kv_rank"] in (0, 1) and meta["param_count"] == 61_706
        assert meta["num_servers"] == 1 and meta["update_on_kvstore"] is False
        steps = result.records(rank, "step")
        assert [s["phase"] for s in steps] == ["warmup"] * 2 + ["measure"] * 40
        assert all(s["samples"] == 32 and s["t_end"] > s["t_start"] for s in steps)
        summary = result.summary(rank)
        assert summary["status"] == "ok" and summary["steps_measured"] == 40
        assert summary["throughput"] == pytest.approx(40 * 32 / summary["measure_time_s"])
        values = losses(result.logs[rank])
        assert sum(values[-4:]) / 4 < sum(values[:4]) / 4 - 0.3, values
    assert losses(result.logs[0]) != losses(result.logs[1])
    # scheduler and server leave by themselves once the workers have finalised the kvstore
    assert all(lag < 15 for lag in run["ps_lag_s"].values()), run["ps_lag_s"]
    assert not list((result.run_dir / "logs").glob("rank-2*")), "a PS process wrote a rank log"


def test_lenet_digits_convergence(tmp_path, run_config, check_data_parallel):
    cfg = run_config(
        "mxnet",
        run_id="conv",
        mode="convergence",
        epochs=2,
        target_accuracy=0.3,
        framework_options={"kvstore": "dist_sync"},
        optimizer={"lr": 0.05, "base_lr": 0.05},
    )
    run = launch_ps(tmp_path, cfg)
    result = run["result"]
    assert all(code == 0 for code in run["codes"].values()), describe_ps(run)
    check_data_parallel(result)
    evals = [result.records(rank, "eval") for rank in range(2)]
    assert [e["epoch"] for e in evals[0]] == [0, 1]
    assert [e["accuracy"] for e in evals[0]] == [e["accuracy"] for e in evals[1]]
    assert all(e["samples"] == 359 for e in evals[0])
    assert result.summary(0)["best_accuracy"] >= 0.3, evals[0]


def test_failing_workers_log_an_error_and_exit(tmp_path, run_config, validate_log):
    """An exception after the kvstore is up: each worker writes ``error`` and leaves at once
    (exit 1) instead of hanging in the kvstore's exit barrier; the scheduler and server are
    left to the job script, which kills them (here: the harness)."""
    cfg = run_config("mxnet", run_id="fail", data={"kind": "no-such-kind"})
    run = launch_ps(tmp_path, cfg, timeout=120, ps_grace=2)
    result = run["result"]
    assert result.returncodes == [1, 1], describe_ps(run)
    for rank in range(2):
        records = result.logs[rank]
        validate_log(records, complete=False)
        assert records[-1]["type"] == "error" and "no-such-kind" in records[-1]["message"]
