"""The MXNet workload (Gluon, dist_sync kvstore): scheduler + 1 server + 2 workers on the CPU.

The three roles run as the three srun steps of slurm_templates/mxnet.sh.j2 would start them:
the same command, ``DMLC_ROLE`` per step, and each step's own Slurm task variables (the worker
step has ranks 0..W-1). Runs in the ``mxnet`` framework environment.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from tests.workloads.conftest import Launch, pick_job_id, rank_environment, read_log, require_env

pytestmark = pytest.mark.frameworks


def launch_ps(
    tmp_path: Path,
    config: Dict[str, Any],
    workers: int = 2,
    servers: int = 1,
    timeout: float = 180.0,
    ps_grace: float = 20.0,
    extra_env: Optional[Dict[str, str]] = None,
) -> Dict[str, Any]:
    """Start scheduler, servers and workers; wait for the workers, then up to ``ps_grace``
    seconds for the scheduler and servers (killed after that); return exit codes, output,
    logs and how long the scheduler and servers outlived the last worker."""
    python = require_env("mxnet")
    run_dir = tmp_path / config.get("run_id", "run")
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    cfg = dict(config)
    cfg["log_dir"] = str(run_dir / "logs")
    cfg.update(world_size=workers, nodes=1, tasks_per_node=workers)
    cfg["global_batch_size"] = cfg["batch_size"] * workers
    (run_dir / "run.json").write_text(json.dumps(cfg, indent=2))
    job_id = pick_job_id()
    cmd = [python, "-m", "ddlbench.workloads.mxnet", str(run_dir / "run.json")]
    procs: List[subprocess.Popen] = []
    names: List[str] = []
    files = []
    steps = [("scheduler", 1), ("server", servers), ("worker", workers)]
    for role, ntasks in steps:
        for task in range(ntasks):
            env = rank_environment(task, ntasks, 1, job_id, run_dir)
            env.update(
                {
                    "DMLC_ROLE": role,
                    "DMLC_PS_ROOT_URI": env["DDLBENCH_ADDRS"].split(",")[0],
                    "DMLC_PS_ROOT_PORT": env["DDLBENCH_PORT_BASE"],
                    "DMLC_NUM_WORKER": str(workers),
                    "DMLC_NUM_SERVER": str(servers),
                    "SLURMD_NODENAME": "n1",
                }
            )
            env.update(extra_env or {})
            name = f"{role}-{task}"
            out = open(run_dir / f"{name}.out", "w+")  # noqa: SIM115 - closed below
            files.append(out)
            procs.append(
                subprocess.Popen(
                    cmd, env=env, cwd=str(run_dir), stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            )  # fmt: skip
            names.append(name)
    deadline = time.time() + timeout
    ended: Dict[str, float] = {}
    worker_names = [n for n in names if n.startswith("worker")]
    while len(ended) < len(procs) and time.time() < deadline:
        for name, p in zip(names, procs):
            if name not in ended and p.poll() is not None:
                ended[name] = time.time()
        if all(n in ended for n in worker_names):
            deadline = min(deadline, max(ended.values()) + ps_grace)
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    texts = {}
    for name, f in zip(names, files):
        f.seek(0)
        texts[name] = f.read()
        f.close()
    result = Launch(
        run_dir=run_dir,
        config=cfg,
        returncodes=[p.returncode for n, p in zip(names, procs) if n.startswith("worker")],
        stdout=[texts[f"worker-{k}"] for k in range(workers)],
        stderr=["" for _ in range(workers)],
        elapsed_s=0.0,
    )
    for rank in range(workers):
        path = run_dir / "logs" / f"rank-{rank}.jsonl"
        result.logs.append(read_log(path) if path.exists() else [])
    last_worker = max(ended.get(f"worker-{k}", float("inf")) for k in range(workers))
    return {
        "result": result,
        "codes": {n: p.returncode for n, p in zip(names, procs)},
        "output": texts,
        "ps_lag_s": {
            n: ended.get(n, float("inf")) - last_worker for n in names if not n.startswith("worker")
        },
    }


def losses(records):
    return [r["loss"] for r in records if r["type"] == "step"]


def describe(run: Dict[str, Any]) -> str:
    return (
        json.dumps(run["codes"])
        + "\n"
        + "\n".join(f"--- {name} ---\n{text[-2500:]}" for name, text in run["output"].items())
    )


def test_lenet_digits_scheduler_server_two_workers(tmp_path, run_config, check_data_parallel):
    cfg = run_config(
        "mxnet",
        framework_options={"kvstore": "dist_sync", "servers": 1},
        steps={"warmup": 2, "measure": 40},
        optimizer={"lr": 0.03, "base_lr": 0.03, "weight_decay": 1e-4},
    )
    run = launch_ps(tmp_path, cfg)
    result = run["result"]
    assert all(code == 0 for code in run["codes"].values()), describe(run)
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
    assert all(code == 0 for code in run["codes"].values()), describe(run)
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
    assert result.returncodes == [1, 1], describe(run)
    for rank in range(2):
        records = result.logs[rank]
        validate_log(records, complete=False)
        assert records[-1]["type"] == "error" and "no-such-kind" in records[-1]["message"]
