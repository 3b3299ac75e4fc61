"""Spare cores of a node for MXNet's scheduler and servers (docs/launching.md#mxnet).

The workers' step asks for ``T x C`` CPUs of a node (``--ntasks-per-node=T --cpus-per-task=C``);
Slurm allocated the job ``SLURM_CPUS_ON_NODE`` there. What is left over is where the scheduler
and servers run, so that they take no cycles from local rank 0 (which would make it a
straggler). Whole cores are taken, from the top of each socket in turn: with
``--distribution=block:cyclic`` Slurm gives the workers' step the lowest cores of each socket,
and ``gpu-socket`` binding splits a GPU's socket from its lowest core up.

Standard library only; Python 3.8 syntax. ``spare_cpus`` is a pure function, tested with
recorded ``/sys`` topologies.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Dict, List, Sequence, Tuple

from .placement import core_of, format_cpulist


def _cores_by_package(
    cpus: Sequence[int], cores: Dict[int, Tuple[int, int]]
) -> Dict[int, List[List[int]]]:
    """package -> its cores (each a list of hardware threads), ordered by first CPU."""
    groups: Dict[Tuple[int, int], List[int]] = {}
    for cpu in sorted(cpus):
        groups.setdefault(cores.get(cpu, (-1, cpu)), []).append(cpu)
    out: Dict[int, List[List[int]]] = {}
    for (pkg, _core), threads in sorted(groups.items(), key=lambda kv: kv[1][0]):
        out.setdefault(pkg, []).append(threads)
    return out


def spare_cpus(
    job_cpus: Sequence[int],
    cores: Dict[int, Tuple[int, int]],
    cpus_on_node: int,
    worker_tasks: int,
    worker_cpus: int,
) -> Tuple[List[int], str]:
    """``(cpus, why)``: the CPUs of ``job_cpus`` that the workers do not need; ``[]`` if none.

    ``job_cpus``: the CPUs a step holding the whole node may use (its affinity with
    ``--cpu-bind=none``); ``cores``: CPU -> (package, core) (``placement.core_of``);
    ``cpus_on_node``: ``SLURM_CPUS_ON_NODE``; ``worker_tasks x worker_cpus``: the workers' share.
    """
    used = worker_tasks * worker_cpus
    left = min(cpus_on_node, len(job_cpus)) - used
    if left <= 0:
        return [], (
            f"no spare cores: the node's {cpus_on_node} CPU(s) are the workers' "
            f"{worker_tasks} x {worker_cpus}; the scheduler and servers share the workers' cores"
        )
    packages = _cores_by_package(job_cpus, cores)
    threads = max((len(c) for cs in packages.values() for c in cs), default=1)
    want = left // threads
    if want <= 0:
        return [], f"no spare cores: {left} spare CPU(s) are less than one core of {threads}"
    picked: List[int] = []
    for _ in range(want):
        # the package with the most cores left gives its top core (ties: the lowest package)
        pkg = max(sorted(packages), key=lambda p: len(packages[p]))
        if not packages[pkg]:
            break
        picked += packages[pkg].pop()
    n_cores = len(picked) // threads
    why = (
        f"{n_cores} spare core(s): the node's {cpus_on_node} CPU(s) less the workers' "
        f"{worker_tasks} x {worker_cpus}"
    )
    return sorted(picked), why


#: why spare-looking cores are left alone when ddlbench did not bind the workers
NOT_CONFINED = (
    "; not placed there: the workers are not bound by ddlbench (cpu_bind gpu-socket on a GPU "
    "profile), so a worker may run on those cores"
)


def workers_bound(env: Dict[str, str]) -> bool:
    """Whether the workers bind themselves to the lowest cores of each socket (rank_start's
    ``gpu-socket`` policy on a GPU profile): only then are the top cores known to be free.
    Under Slurm's own binding without CPU cgroups, or with none, a worker may run anywhere."""
    return env.get("DDLBENCH_CPU_BIND") == "gpu-socket" and env.get("DDLBENCH_DEVICE") == "gpu"


def bind_ps_role(env: Dict[str, str], role: str) -> Dict[str, object]:
    """Bind this scheduler or server process to its node's spare cores and record it.

    Reads ``DDLBENCH_MXNET_WORKER_TASKS``/``DDLBENCH_MXNET_WORKER_CPUS`` (the workers' share
    of a node) and ``SLURM_CPUS_ON_NODE``; without them nothing is bound. Writes
    ``$DDLBENCH_RUN_DIR/provenance/mxnet-ps/<role>-<host>-<pid>.json`` and one line to stderr
    (the job's output).
    """
    host = env.get("SLURMD_NODENAME") or socket.gethostname()
    before = sorted(os.sched_getaffinity(0))
    rec: Dict[str, object] = {"role": role, "host": host, "cpus_before": format_cpulist(before)}
    tasks, cpus = env.get("DDLBENCH_MXNET_WORKER_TASKS"), env.get("DDLBENCH_MXNET_WORKER_CPUS")
    on_node = env.get("SLURM_CPUS_ON_NODE")
    if not (tasks and cpus and on_node):
        picked, why = [], "not placed: the workers' share of the node is unknown"
    else:
        cores = core_of(before)
        picked, why = spare_cpus(before, cores, int(on_node), int(tasks), int(cpus))
    if picked and not workers_bound(env):
        picked, why = [], why + NOT_CONFINED
    if picked:
        os.sched_setaffinity(0, picked)
    rec.update({"cpus": format_cpulist(sorted(os.sched_getaffinity(0))), "spare": bool(picked)})
    rec["why"] = why
    sys.stderr.write(f"ddlbench: mxnet {role} on {host}: cpus {rec['cpus']} ({why})\n")
    run_dir = env.get("DDLBENCH_RUN_DIR")
    if run_dir:
        folder = os.path.join(run_dir, "provenance", "mxnet-ps")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{role}-{host}-{os.getpid()}.json"), "w") as f:
            json.dump(rec, f, indent=1, sort_keys=True)
    return rec
