"""The TensorFlow workload (MultiWorkerMirroredStrategy, pure-TF loop), 2 real ranks on the CPU,
and the TF_CONFIG it builds from the Slurm environment (pure Python, no framework needed).

The framework tests run in the ``tensorflow`` environment (scripts/make-envs.sh tensorflow);
skipped with the reason when it is absent (failed under CI, which builds it).
"""

from __future__ import annotations

import json

import pytest

from ddlbench.workloads.tf.tfconfig import (
    TFConfigError,
    build_tf_config,
    ensure_tf_config,
    parse_tasks_per_node,
    tf_config_rank,
    tf_config_world_size,
)
from tests.support.ranks import rank_environment


def slurm_env(rank, ntasks, nnodes, addrs, port_base=20064, **extra):
    env = {
        "SLURM_PROCID": str(rank),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NNODES": str(nnodes),
        "DDLBENCH_ADDRS": addrs,
        "DDLBENCH_PORT_BASE": str(port_base),
    }
    env.update(extra)
    return env


def test_tf_config_workers_by_global_rank_on_their_node():
    env = slurm_env(3, 4, 2, "10.0.0.1,10.0.0.2", SLURM_NTASKS_PER_NODE="2")
    assert build_tf_config(env) == {
        "cluster": {
            "worker": ["10.0.0.1:20064", "10.0.0.1:20065", "10.0.0.2:20066", "10.0.0.2:20067"]
        },
        "task": {"type": "worker", "index": 3},
    }


def test_tf_config_uneven_nodes_from_slurm_tasks_per_node():
    env = slurm_env(2, 5, 3, "a,b,c", SLURM_TASKS_PER_NODE="2(x2),1")
    workers = build_tf_config(env)["cluster"]["worker"]
    assert workers == ["a:20064", "a:20065", "b:20066", "b:20067", "c:20068"]
    assert parse_tasks_per_node("2(x2),1") == [2, 2, 1]
    # emulated nodes share one address: the global rank keeps the ports apart
    env = slurm_env(1, 2, 2, "127.0.0.1,127.0.0.1", SLURM_NTASKS_PER_NODE="1(x2)")
    assert build_tf_config(env)["cluster"]["worker"] == ["127.0.0.1:20064", "127.0.0.1:20065"]


def test_tf_config_kept_when_set_and_errors_are_clear():
    preset = {
        "cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"]},
        "task": {"type": "worker", "index": 1},
    }
    env = dict(slurm_env(0, 2, 1, "x"), TF_CONFIG=json.dumps(preset))
    assert ensure_tf_config(env) == preset and json.loads(env["TF_CONFIG"]) == preset
    assert tf_config_rank(preset) == 2 and tf_config_world_size(preset) == 3
    env = slurm_env(1, 2, 1, "10.1.1.1")
    config = ensure_tf_config(env)
    assert json.loads(env["TF_CONFIG"]) == config and config["task"]["index"] == 1
    with pytest.raises(TFConfigError, match="DDLBENCH_ADDRS"):
        build_tf_config(slurm_env(0, 2, 1, ""))
    with pytest.raises(TFConfigError, match="SLURM_NNODES=2"):
        build_tf_config(slurm_env(0, 2, 2, "only-one"))
    with pytest.raises(TFConfigError, match="SLURM_PROCID=4"):
        build_tf_config(slurm_env(4, 2, 1, "a"))


def losses(records):
    return [r["loss"] for r in records if r["type"] == "step"]


def check_loss_decreases(records, drop=0.3):
    values = losses(records)
    assert sum(values[-4:]) / 4 < sum(values[:4]) / 4 - drop, values


@pytest.mark.frameworks
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


@pytest.mark.frameworks
def test_lenet_digits_two_nodes_convergence(launch_ranks, run_config, check_data_parallel):
    """Two emulated nodes (one rank each, both at 127.0.0.1), convergence mode."""
    cfg = run_config(
        "tensorflow",
        mode="convergence",
        epochs=3,
        target_accuracy=0.5,
        optimizer={"lr": 0.05, "base_lr": 0.025},
        lr_schedule={"scaling": "linear", "warmup_epochs": 1, "decay_epochs": [2]},
    )
    result = launch_ranks("tensorflow", cfg, world_size=2, nodes=2, env="tensorflow", timeout=240)
    check_data_parallel(result)
    metas = [result.logs[rank][0] for rank in range(2)]
    assert [m["node_rank"] for m in metas] == [0, 1]
    # docs/run-config.md: worker i at DDLBENCH_ADDRS[node of i]:DDLBENCH_PORT_BASE + i
    job_env = rank_environment(0, 2, 2, int(metas[0]["slurm_job_id"]), result.run_dir)
    port_base = int(job_env["DDLBENCH_PORT_BASE"])
    for rank, meta in enumerate(metas):
        assert meta["tf_config"] == {
            "cluster": {"worker": [f"127.0.0.1:{port_base}", f"127.0.0.1:{port_base + 1}"]},
            "task": {"type": "worker", "index": rank},
        }
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


def test_worker_ports_stay_in_the_job_block_beyond_64_workers():
    """80 workers on 20 nodes: every port is in the job's 64-port block, addresses distinct."""
    from ddlbench.workloads.tf.tfconfig import worker_addresses

    env = {
        "DDLBENCH_PORT_BASE": "12000",
        "DDLBENCH_ADDRS": ",".join(f"10.0.0.{i}" for i in range(20)),
        "SLURM_NNODES": "20",
        "SLURM_NTASKS": "80",
        "SLURM_NTASKS_PER_NODE": "4",
    }
    workers = worker_addresses(env)
    assert len(workers) == 80 and len(set(workers)) == 80
    assert all(12000 <= int(w.rsplit(":", 1)[1]) < 12064 for w in workers)
