"""Rank identity and the compute-node environment (docs/run-config.md)."""

from __future__ import annotations

import os
import platform
import re
import socket
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

DEFAULT_PORT_BASE = 29500


@dataclass(frozen=True)
class RankInfo:
    """Where this process sits in the job."""

    rank: int
    local_rank: int
    node_rank: int
    world_size: int
    local_size: int
    num_nodes: int
    host: str
    job_id: Optional[str]
    nodelist: Optional[str]

    @property
    def is_root(self) -> bool:
        return self.rank == 0


def _int(env: Mapping[str, str], *names: str) -> Optional[int]:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                continue
    return None


def parse_tasks_per_node(value: Optional[str]) -> List[int]:
    """Expand Slurm's compressed counts: ``"2(x3),1"`` -> ``[2, 2, 2, 1]``."""
    counts: List[int] = []
    if not value:
        return counts
    for part in value.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            return []
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts


def rank_info(environ: Optional[Mapping[str, str]] = None) -> RankInfo:
    """Rank identity from Slurm's per-task variables.

    Falls back to torchrun's (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI's and PMI's
    variables, and finally to a single process (rank 0 of 1), so a workload can
    be started by hand without any launcher.
    """
    env = os.environ if environ is None else environ
    rank = _int(env, "SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
    world = _int(env, "SLURM_NTASKS", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    local = _int(
        env, "SLURM_LOCALID", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"
    )
    node = _int(env, "SLURM_NODEID", "GROUP_RANK")
    nnodes = _int(env, "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    rank = 0 if rank is None else rank
    world = 1 if world is None else world
    local = rank if local is None else local
    node = 0 if node is None else node
    nnodes = 1 if nnodes is None else nnodes
    per_node = parse_tasks_per_node(
        env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    )
    if node < len(per_node):
        local_size = per_node[node]
    else:
        local_size = _int(env, "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE") or max(
            1, world // max(1, nnodes)
        )
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} outside world size {world}")
    return RankInfo(
        rank=rank,
        local_rank=local,
        node_rank=node,
        world_size=world,
        local_size=local_size,
        num_nodes=nnodes,
        host=socket.gethostname(),
        job_id=env.get("SLURM_JOB_ID") or None,
        nodelist=env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or None,
    )


def node_addresses(environ: Optional[Mapping[str, str]] = None) -> List[str]:
    """The job's node addresses in node order (``DDLBENCH_ADDRS``); ``["127.0.0.1"]`` if unset."""
    env = os.environ if environ is None else environ
    addrs = [a.strip() for a in env.get("DDLBENCH_ADDRS", "").split(",") if a.strip()]
    return addrs or ["127.0.0.1"]


def job_ports(environ: Optional[Mapping[str, str]] = None) -> List[int]:
    """The ports the job script chose free at job start (``DDLBENCH_PORTS``), in order."""
    env = os.environ if environ is None else environ
    raw = env.get("DDLBENCH_PORTS") or ""
    try:
        return [int(p) for p in raw.split(",") if p.strip()]
    except ValueError:
        return []


def port_base(environ: Optional[Mapping[str, str]] = None) -> int:
    """The job's rendezvous port: ``DDLBENCH_PORT`` (the first of ``DDLBENCH_PORTS``), else
    ``DDLBENCH_PORT_BASE`` (job scripts of earlier versions), else 29500."""
    env = os.environ if environ is None else environ
    for name in ("DDLBENCH_PORT", "DDLBENCH_PORT_BASE"):
        value = _int(env, name)
        if value is not None:
            return value
    ports = job_ports(env)
    return ports[0] if ports else DEFAULT_PORT_BASE


def master_addr_port(environ: Optional[Mapping[str, str]] = None) -> tuple[str, int]:
    """PyTorch rendezvous address: ``MASTER_ADDR``/``MASTER_PORT``, else first address/port base."""
    env = os.environ if environ is None else environ
    addr = env.get("MASTER_ADDR") or node_addresses(env)[0]
    port = _int(env, "MASTER_PORT")
    return addr, (port_base(env) if port is None else port)


def cpu_name() -> str:
    """The CPU model (``/proc/cpuinfo``'s ``model name``), or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def cpu_threads(cfg: Dict[str, Any], info: RankInfo) -> int:
    """Intra-op threads per rank on CPU: ``framework_options.threads``, else
    SLURM_CPUS_PER_TASK, else the usable cores divided by the tasks on this node."""
    opts = cfg.get("framework_options") or {}
    if opts.get("threads"):
        return int(opts["threads"])
    if os.environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
        return max(1, int(os.environ["SLURM_CPUS_PER_TASK"]))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, info.local_size))
