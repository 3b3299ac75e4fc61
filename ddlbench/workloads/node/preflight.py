"""Interference pre-flight: is this node quiet before the measured steps start?

``python -m ddlbench.workloads.node.preflight --policy warn|fail --out
<run_dir>/provenance/preflight`` runs once per node (an ``srun --ntasks-per-node=1`` step of
the job script) before the ranks. It writes ``<node>.json`` (docs/telemetry.md#pre-flight) with:

* the CPU load: the CPUs that other processes kept busy over a short window (``/proc/stat``
  read twice, :data:`CPU_WINDOW_S` apart, less this process's own time), the load averages,
  the CPUs of the node and of this job, and ``cpu_busy`` when the other processes' share
  exceeds ``CPU_BUSY_FRACTION`` of the node's CPUs (the 1-minute load average is kept for
  the record only: it still carries steps that ended before, such as an image import);
* whether the node is shared: other Slurm jobs on it (``squeue -w <node>``), else whether the
  job holds fewer CPUs than the node has (``null`` when neither can be told);
* the GPUs (through NVML when available): processes running on them, utilisation, memory used.
  A GPU with a process, more than ``GPU_UTIL_BUSY_PCT`` % utilisation or more than
  ``GPU_MEM_BUSY_FRACTION`` of its memory in use makes the node busy.

``busy`` is true when anything above says so, with the reasons listed. Policy ``warn`` prints
them and exits 0; ``fail`` prints them and exits 3, so the job stops before measuring. Standard
library (and ``pynvml`` if present) only; Python 3.8 syntax.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from .gpu_sampler import node_name, nvml_call, nvml_text, open_nvml, visible_indices
from .health import node_health

FORMAT = "ddlbench-preflight/1"
#: other processes keeping more than this fraction of the node's CPUs busy make the node busy
#: (override: DDLBENCH_PREFLIGHT_LOAD_FRACTION)
CPU_BUSY_FRACTION = 0.25
#: seconds over which other processes' CPU use is read from /proc/stat (override:
#: DDLBENCH_PREFLIGHT_CPU_WINDOW)
CPU_WINDOW_S = 0.5
GPU_UTIL_BUSY_PCT = 5
GPU_MEM_BUSY_FRACTION = 0.03
EXIT_BUSY = 3


def read_proc_stat(path: str = "/proc/stat") -> Tuple[int, int]:
    """``(busy, total)`` jiffies of all CPUs together, from the ``cpu`` line of /proc/stat
    (idle and iowait are not busy; guest time is already inside user time)."""
    with open(path, encoding="ascii") as f:
        for line in f:
            if line.startswith("cpu "):
                fields = [int(v) for v in line.split()[1:9]]
                fields += [0] * (8 - len(fields))
                total = sum(fields)
                return total - fields[3] - fields[4], total
    raise OSError(f"no cpu line in {path}")


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def others_busy_cpus(window_s: float, cpus: int) -> Optional[float]:
    """CPUs kept busy by other processes over the next ``window_s`` seconds: the busy share of
    all CPUs from /proc/stat, less this process's own CPU time (``None`` without /proc/stat).
    A short window now, not the 1-minute load average, so that a step that ended before it
    (a container image import, the job's earlier steps) does not count."""
    try:
        busy0, total0 = read_proc_stat()
        own0 = _own_cpu_s()
        time.sleep(window_s)
        busy1, total1 = read_proc_stat()
        own1 = _own_cpu_s()
    except (OSError, ValueError):
        return None
    if total1 <= total0:
        return None
    ticks_per_s = (total1 - total0) / max(window_s, 1e-3) / cpus
    own_ticks = (own1 - own0) * ticks_per_s
    share = max(0.0, (busy1 - busy0 - own_ticks) / (total1 - total0))
    return share * cpus


def cpu_state(env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Other processes' CPU use over a short window, load averages and CPU counts;
    ``cpu_busy`` by :data:`CPU_BUSY_FRACTION` of the node's CPUs (on the window's figure; on
    the 1-minute load average only where /proc/stat cannot be read)."""
    env = os.environ if env is None else env
    cpus = os.cpu_count() or 1
    try:
        load1, load5, _ = os.getloadavg()
    except OSError:
        load1 = load5 = None
    job_cpus = _int(env.get("SLURM_CPUS_ON_NODE"))
    fraction = float(env.get("DDLBENCH_PREFLIGHT_LOAD_FRACTION") or CPU_BUSY_FRACTION)
    window = float(env.get("DDLBENCH_PREFLIGHT_CPU_WINDOW") or CPU_WINDOW_S)
    others = others_busy_cpus(window, cpus)
    basis = others if others is not None else load1
    busy = basis is not None and basis > fraction * cpus
    return {
        "load1": load1,
        "load5": load5,
        "others_busy_cpus": others,
        "cpu_window_s": window if others is not None else None,
        "node_cpus": cpus,
        "job_cpus": job_cpus,
        "load_fraction": fraction,
        "cpu_busy": bool(busy),
    }


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(str(value).split("(")[0]) if value else None
    except ValueError:
        return None


def other_jobs(node: str, job_id: Optional[str]) -> Optional[List[str]]:
    """Other Slurm jobs running on ``node`` (``None`` when squeue cannot be asked)."""
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-w", node, "-t", "RUNNING", "-o", "%i"],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    jobs = [j.strip() for j in proc.stdout.split() if j.strip()]
    own = str(job_id or "")
    return [j for j in jobs if j != own and not j.startswith(own + "_")]


def node_shared(
    cpu: Dict[str, Any], others: Optional[List[str]], local: bool = False
) -> Optional[bool]:
    """Other jobs on the node, else whether the job holds fewer CPUs than it has; ``None``
    when neither can be told, and on the local executor (this machine is no scheduler's node:
    only the CPU window says whether something else runs on it)."""
    if others is not None:
        return bool(others)
    if local:
        return None
    if cpu.get("job_cpus") is not None:
        return cpu["job_cpus"] < cpu["node_cpus"]
    return None


def gpu_state() -> Dict[str, Any]:
    """Per GPU: processes, utilisation, memory; or ``{"available": False, "reason": ...}``."""
    nvml, reason = open_nvml()
    if nvml is None:
        return {"available": False, "reason": reason, "gpus": []}
    gpus = []
    try:
        for i in visible_indices(nvml, nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            procs = (nvml_call(nvml.nvmlDeviceGetComputeRunningProcesses, h) or []) + (
                nvml_call(nvml.nvmlDeviceGetGraphicsRunningProcesses, h) or []
            )
            util = nvml_call(nvml.nvmlDeviceGetUtilizationRates, h)
            mem = nvml_call(nvml.nvmlDeviceGetMemoryInfo, h)
            gpus.append(
                {
                    "index": i,
                    "name": nvml_text(nvml_call(nvml.nvmlDeviceGetName, h)),
                    "processes": sorted({int(p.pid) for p in procs}),
                    "util_pct": None if util is None else util.gpu,
                    "mem_used_mib": None if mem is None else mem.used / 2**20,
                    "mem_total_mib": None if mem is None else mem.total / 2**20,
                }
            )
    finally:
        nvml_call(nvml.nvmlShutdown)
    return {"available": True, "reason": "", "gpus": gpus}


def busy_reasons(report: Dict[str, Any]) -> List[str]:
    """Why the node is not quiet (empty when it is)."""
    reasons = []
    cpu = report["cpu"]
    if cpu["cpu_busy"] and cpu.get("others_busy_cpus") is not None:
        reasons.append(
            f"other processes kept {cpu['others_busy_cpus']:.2f} of {cpu['node_cpus']} CPUs "
            f"busy over {cpu['cpu_window_s']:g} s (over {cpu['load_fraction']:.0%} of them)"
        )
    elif cpu["cpu_busy"]:
        reasons.append(
            f"CPU load {cpu['load1']:.2f} on {cpu['node_cpus']} CPUs "
            f"(over {cpu['load_fraction']:.0%} of them)"
        )
    if report.get("node_shared"):
        jobs = report.get("other_jobs")
        reasons.append(
            f"node shared with job(s) {', '.join(jobs)}" if jobs else "node not held exclusively"
        )
    for g in report["gpu"]["gpus"]:
        if g["processes"]:
            pids = ", ".join(str(p) for p in g["processes"])
            reasons.append(f"GPU {g['index']} runs process(es) {pids}")
        if g["util_pct"] is not None and g["util_pct"] > GPU_UTIL_BUSY_PCT:
            reasons.append(f"GPU {g['index']} is {g['util_pct']} % busy")
        total = g.get("mem_total_mib") or 0
        if total and g["mem_used_mib"] > GPU_MEM_BUSY_FRACTION * total:
            reasons.append(f"GPU {g['index']} has {g['mem_used_mib']:.0f} MiB in use")
    return reasons


def check(policy: str, job_id: Optional[str] = None) -> Dict[str, Any]:
    node = node_name()
    cpu = cpu_state()
    local = os.environ.get("DDLBENCH_LOCAL_EXECUTOR") == "1"
    job = job_id if job_id is not None else os.environ.get("SLURM_JOB_ID")
    others = None if local else other_jobs(node, job)
    report: Dict[str, Any] = {
        "format": FORMAT,
        "node": node,
        "t": time.time(),
        "policy": policy,
        "cpu": cpu,
        "other_jobs": others,
        "node_shared": node_shared(cpu, others, local),
        "gpu": gpu_state(),
        "health": node_health(node),  # docs/bad-nodes.md#health
    }
    report["reasons"] = busy_reasons(report) + [
        f"unhealthy: {f}" for f in report["health"]["failed"]
    ]
    report["busy"] = bool(report["reasons"])
    return report


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddlbench.workloads.node.preflight")
    parser.add_argument("--policy", choices=("warn", "fail"), default="warn")
    parser.add_argument("--out", required=True, help="folder of the per-node reports")
    args = parser.parse_args(argv)
    report = check(args.policy)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{report['node']}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    if not report["gpu"]["available"]:
        sys.stderr.write(
            f"ddlbench: pre-flight on {report['node']}: no GPU check ({report['gpu']['reason']})\n"
        )
    if report["busy"]:
        word = "refusing to measure" if args.policy == "fail" else "measuring anyway"
        sys.stderr.write(
            f"ddlbench: pre-flight on {report['node']}: node busy ({'; '.join(report['reasons'])})"
            f"; {word} (preflight: {args.policy})\n"
        )
        if args.policy == "fail":
            return EXIT_BUSY
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
