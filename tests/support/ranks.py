"""Real ranks of a workload, started as subprocesses the way ``srun`` and job.sh start them.

``launch(tmp_path, workload, cfg, world_size=2, env="torch", nodes=1)`` writes ``run.json`` in
a fresh run directory and starts ``world_size`` processes of
``<env python> -m ddlbench.workloads.<workload> <run.json>`` with the per-task Slurm
variables and the job-wide DDLBENCH_* variables set as docs/run-config.md says (what
``srun`` and job.sh provide on a cluster; emulated nodes all have address 127.0.0.1). It
waits for all of them and returns a :class:`Launch` with exit codes, output and the parsed
rank logs. :func:`launch_ps` starts MXNet's scheduler, servers and workers the same way.
The framework environments are :mod:`tests.support.envs`'.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from ddlbench.workloads.vocabulary import workload_module
from tests.support.envs import require_env
from tests.support.repo import ROOT


def base_run_config(workload: str, framework: Optional[str] = None, **overrides: Any) -> Dict:
    """A complete ``ddlbench-run/1`` config as the planner writes it; nested dicts merge."""
    cfg: Dict[str, Any] = {
        "format": "ddlbench-run/1",
        "run_id": f"test-{workload}",
        "campaign": "tests",
        "framework": framework or workload,
        "workload": workload,
        "framework_options": {},
        "mode": "throughput",
        "model": "lenet",
        "data": {"kind": "digits", "path": None, "samples": 1438},
        "image_size": 28,
        "num_classes": 10,
        "device": "cpu",
        "precision": "fp32",
        "nodes": 1,
        "tasks_per_node": 2,
        "world_size": 2,
        "batch_size": 32,
        "global_batch_size": 64,
        "steps": {"warmup": 2, "measure": 8},
        "epochs": None,
        "target_accuracy": None,
        "optimizer": {
            "name": "sgd",
            "lr": 0.05,
            "base_lr": 0.05,
            "momentum": 0.9,
            "weight_decay": 0.0,
            "nesterov": False,
        },
        "lr_schedule": {
            "scaling": "none",
            "base_batch_size": 64,
            "warmup_epochs": 0.0,
            "decay_epochs": [],
            "decay_factor": 0.1,
        },
        "seed": 42,
        "repeat": 0,
        "allreduce": {"min_bytes": 1024, "max_bytes": 65536, "iters": 5, "warmup": 2},
        "log_dir": None,
        "mllog": False,
    }
    for key, value in overrides.items():
        if isinstance(cfg.get(key), dict) and isinstance(value, dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    return cfg


def _ports_free(base: int, count: int = 8) -> bool:
    for port in range(base, base + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def pick_job_id() -> int:
    """A job id whose port block (12000 + (id % 320) * 64) is free on this machine."""
    for _ in range(200):
        job_id = random.randint(1000, 999_999)
        if _ports_free(12000 + (job_id % 320) * 64):
            return job_id
    raise RuntimeError("no free port block")


def rank_environment(
    rank: int,
    world_size: int,
    nodes: int,
    job_id: int,
    run_dir: Path,
    base: Optional[Dict[str, str]] = None,
) -> Dict[str, str]:
    """The environment of one task, as srun + job.sh give it (docs/run-config.md)."""
    if world_size % nodes:
        raise ValueError("world_size must be a multiple of nodes")
    per_node = world_size // nodes
    hosts = [f"n{i + 1}" for i in range(nodes)]
    port_base = 12000 + (job_id % 320) * 64
    env = dict(os.environ if base is None else base)
    for key in [k for k in env if k.startswith(("SLURM_", "DDLBENCH_", "OMPI_", "PMI_"))]:
        del env[key]
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TF_CONFIG"):
        env.pop(key, None)
    env.update(
        {
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank % per_node),
            "SLURM_NODEID": str(rank // per_node),
            "SLURM_NTASKS": str(world_size),
            "SLURM_NNODES": str(nodes),
            "SLURM_NTASKS_PER_NODE": str(per_node) if nodes == 1 else f"{per_node}(x{nodes})",
            "SLURM_JOB_ID": str(job_id),
            "SLURM_JOB_NODELIST": "n1" if nodes == 1 else f"n[1-{nodes}]",
            "DDLBENCH_RUN_DIR": str(run_dir),
            "DDLBENCH_HOSTS": ",".join(hosts),
            "DDLBENCH_ADDRS": ",".join(["127.0.0.1"] * nodes),
            "DDLBENCH_PORT_BASE": str(port_base),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port_base),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def read_log(path: Path) -> List[Dict[str, Any]]:
    """The records of a rank log (every line must parse)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass
class Launch:
    run_dir: Path
    config: Dict[str, Any]
    returncodes: List[int]
    stdout: List[str]
    stderr: List[str]
    elapsed_s: float
    logs: List[List[Dict[str, Any]]] = field(default_factory=list)

    def records(self, rank: int, kind: str) -> List[Dict[str, Any]]:
        return [r for r in self.logs[rank] if r["type"] == kind]

    def summary(self, rank: int) -> Dict[str, Any]:
        (summary,) = self.records(rank, "summary")
        return summary

    def describe(self) -> str:
        parts = [f"run dir {self.run_dir}, exit codes {self.returncodes}"]
        for rank, (out, err) in enumerate(zip(self.stdout, self.stderr)):
            parts.append(f"--- rank {rank} stdout ---\n{out[-3000:]}")
            parts.append(f"--- rank {rank} stderr ---\n{err[-3000:]}")
        return "\n".join(parts)

    def check_ok(self) -> None:
        assert self.returncodes == [0] * len(self.returncodes), self.describe()


def launch(
    tmp_path: Path,
    workload: str,
    config: Dict[str, Any],
    world_size: int = 2,
    env: str = "torch",
    nodes: int = 1,
    timeout: float = 180.0,
    python: Optional[str] = None,
    extra_env: Optional[Dict[str, str]] = None,
    background: Optional[List[str]] = None,
) -> Launch:
    """Start the ranks (and first ``background``, a job-wide helper such as Horovod's
    rendezvous server, run as ``<python> -m <background...>`` with the job's environment,
    as job.sh does on the first node; it is terminated when the ranks are done)."""
    python = python or require_env(env)
    run_dir = tmp_path / config.get("run_id", "run")
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    cfg = dict(config)
    cfg["log_dir"] = str(run_dir / "logs")
    cfg["world_size"], cfg["nodes"] = world_size, nodes
    cfg["tasks_per_node"] = world_size // nodes
    cfg["global_batch_size"] = cfg["batch_size"] * world_size
    (run_dir / "run.json").write_text(json.dumps(cfg, indent=2))
    job_id = pick_job_id()
    procs = []
    outs = []
    t0 = time.time()
    helper = None
    if background:
        henv = rank_environment(0, world_size, nodes, job_id, run_dir)
        for key in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"):
            henv.pop(key)
        henv.update(extra_env or {})
        helper_log = open(run_dir / "background.log", "w")  # noqa: SIM115 - closed below
        helper = subprocess.Popen(
            [python, "-m", *background],
            env=henv,
            cwd=str(run_dir),
            stdout=helper_log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    for rank in range(world_size):
        penv = rank_environment(rank, world_size, nodes, job_id, run_dir)
        penv.update(extra_env or {})
        out = open(run_dir / f"rank-{rank}.out", "w+")  # noqa: SIM115 - closed below
        err = open(run_dir / f"rank-{rank}.err", "w+")  # noqa: SIM115
        outs.append((out, err))
        procs.append(
            subprocess.Popen(
                [python, "-m", workload_module(workload), str(run_dir / "run.json")],
                env=penv,
                cwd=str(run_dir),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        )
    codes: List[int] = []
    deadline = t0 + timeout
    try:
        for p in procs:
            codes.append(p.wait(timeout=max(1.0, deadline - time.time())))
    except subprocess.TimeoutExpired:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        codes = [p.returncode for p in procs]
        timed_out = True
    else:
        timed_out = False
    if helper is not None:
        helper.terminate()
        try:
            helper.wait(timeout=10)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()
        helper_log.close()
    texts = []
    for out, err in outs:
        out.seek(0)
        err.seek(0)
        texts.append((out.read(), err.read()))
        out.close()
        err.close()
    result = Launch(
        run_dir=run_dir,
        config=cfg,
        returncodes=codes,
        stdout=[t[0] for t in texts],
        stderr=[t[1] for t in texts],
        elapsed_s=time.time() - t0,
    )
    if timed_out:
        pytest.fail(f"ranks did not finish within {timeout} s\n" + result.describe())
    for rank in range(world_size):
        path = run_dir / "logs" / f"rank-{rank}.jsonl"
        result.logs.append(read_log(path) if path.exists() else [])
    return result


def check_ddp_logs(result: Launch, validate_log) -> None:
    """Checks every data-parallel training run must pass: schema, identical parameters."""
    result.check_ok()
    for rank, records in enumerate(result.logs):
        validate_log(records)
        meta = records[0]
        assert meta["rank"] == rank and meta["world_size"] == len(result.logs)
    sums = {result.summary(r)["param_sha256"] for r in range(len(result.logs))}
    assert len(sums) == 1 and None not in sums, f"parameters differ across ranks: {sums}"


@dataclass
class DataSet:
    """A data set written for the tests: its folder and what was written (``items``:
    datagen's return value)."""

    path: Path
    items: Dict[str, Any]


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
    cmd = [python, "-m", "ddlbench.workloads.mx.mxnet_main", str(run_dir / "run.json")]
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


def describe_ps(run: Dict[str, Any]) -> str:
    """The exit codes and the end of every role's output of a :func:`launch_ps` run."""
    return (
        json.dumps(run["codes"])
        + "\n"
        + "\n".join(f"--- {name} ---\n{text[-2500:]}" for name, text in run["output"].items())
    )
