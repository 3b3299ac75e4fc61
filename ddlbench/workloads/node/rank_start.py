"""Start one rank: check and record its device, bind its cores, then run the workload.

``python -m ddlbench.workloads.node.rank_start <workload> <run.json>`` is what every worker step
of a job script runs (docs/launching.md#the-rank-start); it runs the module that
``vocabulary.WORKLOAD_MODULES`` names for ``<workload>``. Before any framework is imported it

1. finds the rank's device: on GPU, the visible GPU ``SLURM_LOCALID mod visible`` (the one the
   workloads pick), its UUID and PCI bus id from ``nvidia-smi``; a task that sees fewer GPUs
   than there are tasks on its node is refused (exit 2), as ranks would share a GPU;
2. binds the rank's cores (``DDLBENCH_CPU_BIND``): ``gpu-socket`` takes them from its GPU's
   NUMA node (``/sys/bus/pci/devices/<bus id>/local_cpulist``), ``slurm`` and ``none`` keep
   what Slurm gave;
3. on the ranks ``DDLBENCH_NCCL_INFO_RANK`` (``0-3``), turns on NCCL's INIT/NET debug output into
   ``$DDLBENCH_LOG_DIR/nccl/`` (the transport NCCL chose, read by the collector);
4. on local rank 0 with ``DDLBENCH_TELEMETRY_DIR`` set, starts the node's GPU sampler on the
   step's cores that no local rank binds (all of the step's when there are none), not on
   local rank 0's;
5. writes ``$DDLBENCH_LOG_DIR/placement/rank-<r>.json`` (format ``ddlbench-placement/1``).

Test hook (documented in docs/launching.md): ``DDLBENCH_TEST_DEVICE=<name>`` gives every CPU
rank the device identity ``test:<name>``, as if all the ranks of a node drove one device, so
the collector's shared-device check can be exercised without GPUs.

Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import runpy
import signal
import socket
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..common.placement import (
    FORMAT,
    PlacementError,
    check_device_count,
    core_of,
    format_cpulist,
    gpu_local_cpus,
    parse_cpulist,
    parse_gpu_query,
    parse_topo_affinity,
    split_cores,
    tasks_on_node,
    threads_per_core,
    visible_gpus,
)
from ..vocabulary import workload_module

GPU_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"]


def _gpu_rows() -> List[Dict[str, str]]:
    try:
        out = subprocess.run(GPU_QUERY, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_gpu_query(out.stdout) if out.returncode == 0 else []


def _topo_affinity() -> Dict[int, List[int]]:
    try:
        out = subprocess.run(
            ["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_topo_affinity(out.stdout)


def _devices(env: Dict[str, str], tasks: int) -> Optional[List[Dict[str, str]]]:
    """The GPUs this task sees (None on CPU); refuses too few."""
    if env.get("DDLBENCH_DEVICE", "cpu") != "gpu":
        return None
    visible = visible_gpus(env, _gpu_rows())
    check_device_count(len(visible), tasks)
    return visible


def _device_record(
    env: Dict[str, str], host: str, local: int, gpus: Optional[List[Dict[str, str]]]
) -> Dict[str, Any]:
    if gpus is None:
        hook = env.get("DDLBENCH_TEST_DEVICE")
        ident = f"test:{hook}" if hook else f"cpu:{host}:{local}"
        return {"kind": "cpu", "uuid": ident}
    gpu = gpus[local % len(gpus)]
    return {"kind": "gpu", "visible_index": local % len(gpus), **gpu}


def _near_cpus(gpus: List[Dict[str, str]], tasks: int) -> List[Optional[List[int]]]:
    """The CPUs near each local rank's GPU (None where unknown)."""
    near = [gpu_local_cpus(gpus[j % len(gpus)]["pci_bus_id"]) for j in range(tasks)]
    if any(n is None for n in near):  # no host /sys here: ask nvidia-smi
        topo = _topo_affinity()
        near = [n or topo.get(int(gpus[j % len(gpus)]["index"])) for j, n in enumerate(near)]
    return near


def _bind(env: Dict[str, str], local: int, tasks: int, gpus) -> Dict[str, Any]:
    """Apply the binding policy; returns what was done (``_ranks_cpus``: the CPUs every local
    rank binds, when this rank can know them, for the GPU sampler; not recorded)."""
    policy = env.get("DDLBENCH_CPU_BIND", "slurm")
    before = sorted(os.sched_getaffinity(0))
    cores = core_of(before)
    rec: Dict[str, Any] = {"policy": policy, "cpus_from_slurm": format_cpulist(before)}
    rec["threads_per_core"] = threads_per_core(before, cores)
    rec["_step_cpus"], rec["_ranks_cpus"] = before, None
    cpus, how = before, "as Slurm bound it"
    if policy == "gpu-socket" and gpus is not None:
        near = _near_cpus(gpus, tasks)
        per_task = int(env.get("DDLBENCH_CORES_PER_TASK", "1") or 1)
        cpus, how = split_cores(local, near, before, per_task, cores)
        os.sched_setaffinity(0, cpus)
        rec["gpu_cpus"] = format_cpulist(near[local] or [])
        taken = [split_cores(j, near, before, per_task, cores)[0] for j in range(tasks)]
        rec["_ranks_cpus"] = sorted({c for cs in taken for c in cs})
    elif policy == "gpu-socket":
        how = "as Slurm bound it (no GPU)"
    rec.update({"cpus": format_cpulist(cpus), "how": how})
    # whole cores bound, against the profile's cpus_per_task (hyperthreads counted as CPUs
    # halve the cores: docs/cluster-profiles.md, threads_per_core)
    rec["cores"] = len({cores.get(c, (-1, c)) for c in cpus})
    rec["cores_per_task"] = int(env.get("DDLBENCH_CORES_PER_TASK", "0") or 0)
    return rec


def nccl_debug(env: Dict[str, str], rank: int, log_dir: str) -> Optional[str]:
    try:  # one rank ("0", older job scripts) or a range ("0-3": the first node's ranks)
        if rank not in parse_cpulist(env.get("DDLBENCH_NCCL_INFO_RANK") or ""):
            return None
    except ValueError:
        return None
    folder = os.path.join(log_dir, "nccl")
    os.makedirs(folder, exist_ok=True)
    if env.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    os.environ["NCCL_DEBUG_FILE"] = os.path.join(folder, f"rank-{rank}.%h.%p.log")
    return os.environ["NCCL_DEBUG_FILE"]


def sampler_cpus(step_cpus: List[int], ranks_cpus: Optional[List[int]]) -> Tuple[List[int], str]:
    """``(cpus, why)`` for the node's GPU sampler: the step's CPUs that no local rank binds;
    when every one is a rank's (or the ranks' are not known), all of the step's CPUs, so that
    the kernel runs it wherever a core is idle instead of on local rank 0's cores."""
    if ranks_cpus is not None:
        free = [c for c in step_cpus if c not in set(ranks_cpus)]
        if free:
            return free, "cores no rank is bound to"
        return list(step_cpus), "no core free of ranks: the step's CPUs, unbound"
    return list(step_cpus), "the step's CPUs (ranks not bound by ddlbench)"


def _start_sampler(env: Dict[str, str], rec: Dict[str, Any]) -> Optional[subprocess.Popen]:
    """The node's GPU sampler, started by local rank 0 on ``rec["sampler"]["cpus"]``."""
    out = env.get("DDLBENCH_TELEMETRY_DIR")
    if not out or rec.get("sampler") is None:
        return None
    cmd = [sys.executable, "-m", "ddlbench.workloads.node.gpu_sampler", "--out", out, "--hz", "10"]
    cpus = parse_cpulist(rec["sampler"]["cpus"])

    def place_child() -> None:  # not local rank 0's binding, which the child would inherit
        with contextlib.suppress(OSError):  # never fail the rank over its sampler's cores
            os.sched_setaffinity(0, cpus)

    return subprocess.Popen(cmd, preexec_fn=place_child)


def _stop(proc: Optional[subprocess.Popen]) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def place(env: Dict[str, str]) -> Dict[str, Any]:
    """Steps 1-3 and 5 of the module docstring; returns the placement record."""
    rank = int(env.get("SLURM_PROCID", "0") or 0)
    local = int(env.get("SLURM_LOCALID", "0") or 0)
    tasks = tasks_on_node(env)
    gpus = _devices(env, tasks)
    log_dir = env.get("DDLBENCH_LOG_DIR") or "."
    host = env.get("SLURMD_NODENAME") or socket.gethostname()
    rec: Dict[str, Any] = {
        "format": FORMAT,
        "rank": rank,
        "local_rank": local,
        "node_id": int(env.get("SLURM_NODEID", "0") or 0),
        "host": host,
        "tasks_on_node": tasks,
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "device": _device_record(env, host, local, gpus),
        "binding": _bind(env, local, tasks, gpus),
        "nccl_debug_file": nccl_debug(env, rank, log_dir),
        "nccl_expected": env.get("DDLBENCH_NCCL_NET"),
        "nccl_expected_nics": env.get("DDLBENCH_NCCL_NICS"),
        "sampler": None,
    }
    step_cpus, ranks_cpus = rec["binding"].pop("_step_cpus"), rec["binding"].pop("_ranks_cpus")
    if local == 0 and env.get("DDLBENCH_TELEMETRY_DIR"):
        cpus, why = sampler_cpus(step_cpus, ranks_cpus)
        rec["sampler"] = {"cpus": format_cpulist(cpus), "why": why}
    folder = os.path.join(log_dir, "placement")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"rank-{rank}.json"), "w") as f:
        json.dump(rec, f, indent=1, sort_keys=True)
    return rec


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or not re.match(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$", args[0]):
        sys.stderr.write("usage: python -m ddlbench.workloads.node.rank_start WORKLOAD RUN_JSON\n")
        return 2
    env = dict(os.environ)
    # until the workload arms its clean stop, Slurm's --signal=USR1 warning must not kill the
    # rank without a record (docs/launching.md#signals)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        rec = place(env)
    except PlacementError as e:
        sys.stderr.write(f"ddlbench: rank {env.get('SLURM_PROCID', '?')}: {e}\n")
        return 2
    b = rec["binding"]
    sys.stderr.write(
        f"ddlbench: rank {rec['rank']} on {rec['host']}: device {rec['device'].get('uuid')}, "
        f"cpus {b['cpus']} ({b['policy']}: {b['how']})\n"
    )
    sampler = _start_sampler(env, rec)
    module = workload_module(args[0])
    sys.argv = [module, *args[1:]]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        _stop(sampler)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
