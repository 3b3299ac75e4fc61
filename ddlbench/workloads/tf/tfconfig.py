"""Build ``TF_CONFIG`` from the Slurm/ddlbench environment (standard library only).

TensorFlow's ``MultiWorkerMirroredStrategy`` finds its peers through ``TF_CONFIG``. Its own
``SlurmClusterResolver`` assumes GPUs and fails on CPU-only nodes, so the TensorFlow and Keras
workloads build ``TF_CONFIG`` themselves, *before* importing TensorFlow, following
``docs/run-config.md``:

* worker ``i`` listens on ``DDLBENCH_ADDRS[node of i]:DDLBENCH_PORTS[i]``: the job script
  chose one free port per worker at job start (``ddlbench.workloads.node.ports``), distinct, so
  workers that share an address (emulated nodes) never collide. Without ``DDLBENCH_PORTS``
  (job scripts of earlier versions) worker ``i`` takes ``DDLBENCH_PORT_BASE + i % 64``;
* the task index is ``SLURM_PROCID``;
* an existing ``TF_CONFIG`` is kept untouched.

Tasks are laid out by Slurm's default block distribution: node 0 holds ranks ``0..c0-1``,
node 1 the next ``c1`` ranks, and so on, with the per-node counts from ``SLURM_TASKS_PER_NODE``
(``"2(x3),1"``), else ``SLURM_NTASKS_PER_NODE``, else ``SLURM_NTASKS / SLURM_NNODES``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Mapping, Optional

_COUNT_RE = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")

#: size of the port block of earlier job scripts (DDLBENCH_PORT_BASE ...+63)
PORTS_PER_JOB = 64


class TFConfigError(RuntimeError):
    """The environment does not describe a multi-worker job well enough."""


def parse_tasks_per_node(spec: str) -> List[int]:
    """Expand Slurm's compressed per-node task counts: ``"2(x3),1"`` -> ``[2, 2, 2, 1]``."""
    counts: List[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        m = _COUNT_RE.match(part)
        if not m:
            raise TFConfigError(f"cannot parse task counts {spec!r}")
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts


def _int_env(env: Mapping[str, str], name: str) -> int:
    value = env.get(name)
    if value is None or value == "":
        raise TFConfigError(f"{name} is not set; cannot build TF_CONFIG")
    try:
        return int(value)
    except ValueError as exc:
        raise TFConfigError(f"{name}={value!r} is not an integer") from exc


def tasks_per_node(env: Mapping[str, str], num_nodes: int, num_tasks: int) -> List[int]:
    """Number of tasks on each node, in node order."""
    spec = env.get("SLURM_TASKS_PER_NODE") or env.get("SLURM_STEP_TASKS_PER_NODE")
    counts: Optional[List[int]] = None
    if spec:
        counts = parse_tasks_per_node(spec)
        if len(counts) == 1 and num_nodes > 1:
            counts = counts * num_nodes
    elif env.get("SLURM_NTASKS_PER_NODE"):
        per = parse_tasks_per_node(env["SLURM_NTASKS_PER_NODE"])
        counts = per * num_nodes if len(per) == 1 else per
    if counts is None or sum(counts) != num_tasks or len(counts) != num_nodes:
        if num_tasks % num_nodes:
            raise TFConfigError(
                f"cannot lay out {num_tasks} tasks on {num_nodes} nodes "
                "(set SLURM_TASKS_PER_NODE or SLURM_NTASKS_PER_NODE)"
            )
        counts = [num_tasks // num_nodes] * num_nodes
    return counts


def _worker_ports(env: Mapping[str, str], num_tasks: int) -> List[int]:
    """Worker i's port: ``DDLBENCH_PORTS[i]``, else ``DDLBENCH_PORT_BASE + i % 64``."""
    raw = env.get("DDLBENCH_PORTS")
    if raw:
        try:
            ports = [int(p) for p in raw.split(",") if p.strip()]
        except ValueError as exc:
            raise TFConfigError(f"DDLBENCH_PORTS={raw!r} is not a list of ports") from exc
        if len(ports) < num_tasks:
            raise TFConfigError(f"DDLBENCH_PORTS lists {len(ports)} ports for {num_tasks} workers")
        return ports
    base = _int_env(env, "DDLBENCH_PORT_BASE")
    return [base + rank % PORTS_PER_JOB for rank in range(num_tasks)]


def worker_addresses(env: Mapping[str, str]) -> List[str]:
    """``host:port`` of every worker, indexed by global rank."""
    addrs = [a.strip() for a in env.get("DDLBENCH_ADDRS", "").split(",") if a.strip()]
    if not addrs:
        raise TFConfigError("DDLBENCH_ADDRS is not set; cannot build TF_CONFIG")
    num_tasks = _int_env(env, "SLURM_NTASKS")
    ports = _worker_ports(env, num_tasks)
    num_nodes = int(env.get("SLURM_NNODES") or len(addrs))
    if num_nodes != len(addrs):
        raise TFConfigError(
            f"SLURM_NNODES={num_nodes} but DDLBENCH_ADDRS lists {len(addrs)} addresses"
        )
    counts = tasks_per_node(env, num_nodes, num_tasks)
    workers: List[str] = []
    for node, count in enumerate(counts):
        for _ in range(count):
            rank = len(workers)
            workers.append(f"{addrs[node]}:{ports[rank]}")
    return workers


def build_tf_config(env: Mapping[str, str]) -> Dict[str, object]:
    """The ``TF_CONFIG`` dictionary for this task."""
    workers = worker_addresses(env)
    index = _int_env(env, "SLURM_PROCID")
    if not 0 <= index < len(workers):
        raise TFConfigError(f"SLURM_PROCID={index} outside 0..{len(workers) - 1}")
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}


def ensure_tf_config(env: Optional[Dict[str, str]] = None) -> Dict[str, object]:
    """Set ``TF_CONFIG`` in ``env`` (default ``os.environ``) unless it is already set.

    Returns the configuration in force. A single-task job gets a one-worker cluster, so the
    same code path (``MultiWorkerMirroredStrategy``) serves 1 and N workers.
    """
    if env is None:
        env = os.environ  # type: ignore[assignment]
    assert env is not None
    existing = env.get("TF_CONFIG")
    if existing:
        try:
            return json.loads(existing)
        except ValueError as exc:
            raise TFConfigError(f"TF_CONFIG is set but is not JSON: {exc}") from exc
    config = build_tf_config(env)
    env["TF_CONFIG"] = json.dumps(config, separators=(",", ":"))
    return config


def tf_config_rank(config: Mapping[str, object]) -> int:
    """The worker index of a ``TF_CONFIG`` dictionary (chief counted first when present)."""
    task = config.get("task") or {}
    cluster = config.get("cluster") or {}
    assert isinstance(task, dict) and isinstance(cluster, dict)
    index = int(task.get("index", 0))
    if task.get("type") == "worker" and "chief" in cluster:
        index += len(cluster["chief"])
    return index


def tf_config_world_size(config: Mapping[str, object]) -> int:
    cluster = config.get("cluster") or {}
    assert isinstance(cluster, dict)
    return sum(len(cluster.get(kind, [])) for kind in ("chief", "worker"))
