"""Fixtures for the workload tests: a launcher that starts real ranks as subprocesses.

``launch_ranks(workload, cfg, world_size=2, env="torch", nodes=1)`` writes ``run.json`` in a
fresh run directory and starts ``world_size`` processes of
``<env python> -m ddlbench.workloads.<workload> <run.json>`` with the per-task Slurm
variables and the job-wide DDLBENCH_* variables set as docs/run-config.md says (what
``srun`` and job.sh provide on a cluster; emulated nodes all have address 127.0.0.1). It
waits for all of them and returns a :class:`Launch` with exit codes, output and the parsed
rank logs.

The framework environment's python is ``$DDLBENCH_ENVS/<env>/bin/python`` (default
``~/.cache/ddlbench/envs``); tests that need an absent environment are skipped, with the
reason, except under CI (CI=true), where they fail, because CI builds the environments.
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

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "ddlbench" / "schemas" / "rank-log-v1.schema.json"


def envs_root() -> Path:
    return Path(os.environ.get("DDLBENCH_ENVS") or Path.home() / ".cache" / "ddlbench" / "envs")


def env_python(env: str) -> Optional[str]:
    """The framework environment's python, or None if the environment is absent."""
    python = envs_root() / env / "bin" / "python"
    return str(python) if python.exists() else None


def require_env(env: str) -> str:
    python = env_python(env)
    if python:
        return python
    where = envs_root() / env
    if os.environ.get("CI"):
        pytest.fail(f"framework environment {env!r} missing at {where} (CI builds it)")
    pytest.skip(f"framework environment {env!r} not built at {where} (scripts/make-envs.sh {env})")


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
                [python, "-m", f"ddlbench.workloads.{workload}", str(run_dir / "run.json")],
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


@pytest.fixture
def launch_ranks(tmp_path: Path):
    """``launch_ranks(workload, config, world_size=2, env="torch", ...) -> Launch``."""

    def _launch(workload: str, config: Dict[str, Any], **kwargs: Any) -> Launch:
        return launch(tmp_path, workload, config, **kwargs)

    return _launch


@pytest.fixture
def framework_python():
    """``framework_python(env) -> str | None``: the environment's python if it is built."""
    return env_python


@pytest.fixture
def run_config():
    """``run_config(workload, framework=None, **overrides) -> dict``: a complete run.json."""
    return base_run_config


@pytest.fixture(scope="session")
def rank_log_schema() -> Dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@pytest.fixture(scope="session")
def validate_log(rank_log_schema):
    """``validate_log(records)``: every record valid, meta first, summary (if any) last."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(rank_log_schema)

    def _validate(records: List[Dict[str, Any]], complete: bool = True) -> None:
        assert records, "empty rank log"
        for rec in records:
            errors = sorted(validator.iter_errors(rec), key=lambda e: list(e.path))
            assert not errors, f"invalid {rec.get('type')} record {rec}: {errors[0].message}"
        assert records[0]["type"] == "meta", records[0]
        assert sum(r["type"] == "meta" for r in records) == 1
        if complete:
            assert records[-1]["type"] == "summary", records[-1]
            assert sum(r["type"] == "summary" for r in records) == 1

    return _validate


def check_ddp_logs(result: Launch, validate_log) -> None:
    """Checks every data-parallel training run must pass: schema, identical parameters."""
    result.check_ok()
    for rank, records in enumerate(result.logs):
        validate_log(records)
        meta = records[0]
        assert meta["rank"] == rank and meta["world_size"] == len(result.logs)
    sums = {result.summary(r)["param_sha256"] for r in range(len(result.logs))}
    assert len(sums) == 1 and None not in sums, f"parameters differ across ranks: {sums}"


@pytest.fixture
def check_data_parallel(validate_log):
    """``check_data_parallel(launch)``: all ranks ok, logs valid, same parameter checksum."""

    def _check(result: Launch) -> None:
        check_ddp_logs(result, validate_log)

    return _check


# -- real data on disk (tests/workloads/datagen.py) ---------------------------------------------
@dataclass
class DataSet:
    """A data set written for the tests: its folder and what was written (``items``:
    datagen's return value)."""

    path: Path
    items: Dict[str, Any]


@pytest.fixture(scope="session")
def mnist_data(tmp_path_factory) -> DataSet:
    """MNIST's four IDX files (train pair gzipped): 640 train, 100 t10k 28x28 images of 10
    classes; ``items``: ``{"train": (images, labels), "t10k": (images, labels)}``."""
    from tests.workloads.datagen import write_mnist

    path = tmp_path_factory.mktemp("mnist")
    return DataSet(path, write_mnist(path))


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> DataSet:
    """``train/`` (3 classes x 48) and ``val/`` (3 x 12) stripe images, PNG (RGB, gray) and
    JPEG; ``items``: ``{split: [relative paths]}``."""
    pytest.importorskip("PIL")
    from tests.workloads.datagen import write_image_folder

    path = tmp_path_factory.mktemp("imagefolder")
    return DataSet(path, write_image_folder(path))


@pytest.fixture(scope="session")
def id_folder(tmp_path_factory) -> DataSet:
    """``train/`` (2 x 16) and ``val/`` (2 x 5) flat gray PNGs whose value identifies them;
    ``items``: ``{split: [(value, label), ...]}`` in index order."""
    pytest.importorskip("PIL")
    from tests.workloads.datagen import write_id_folder

    path = tmp_path_factory.mktemp("idfolder")
    return DataSet(path, write_id_folder(path))
