"""Per-node GPU telemetry sampler: NVML at about 10 Hz into ``telemetry/<node>.jsonl``.

``python -m ddlbench.workloads.node.gpu_sampler --out <run_dir>/telemetry [--hz 10]`` runs once
per node, started by the job script as a background step beside the ranks (never inside
them), and stops on SIGTERM/SIGINT (the job script's clean-up) or after ``--duration``.

Format ``ddlbench-telemetry/1`` (docs/telemetry.md), JSON Lines, one ``os.write`` per line:

* ``{"type": "meta", "format": ..., "node": ..., "t": ..., "hz": ..., "gpus": [...]}`` first;
* ``{"type": "sample", "t": ..., "power_w": [...], "energy_j": [...], "util_pct": [...],
  "mem_used_mib": [...], "sm_clock_mhz": [...], "throttle": [...]}``, one list entry per GPU
  of ``gpus`` (``null`` where NVML does not report the value);
* or, when there is nothing to sample (no ``nvidia-ml-py``, no driver, no GPU), a single
  ``{"type": "unavailable", "node": ..., "t": ..., "reason": ...}``: the run goes on, and
  the sampler says so once on stderr.

Imports only the standard library and, if present, ``pynvml`` (the ``nvidia-ml-py``
package). Python 3.8 syntax.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

FORMAT = "ddlbench-telemetry/1"


def node_name() -> str:
    """The Slurm node name (two emulated nodes may share one host name), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def open_nvml() -> Tuple[Any, str]:
    """``(pynvml, "")`` with NVML initialised, or ``(None, why not)``."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None, "nvidia-ml-py (module pynvml) is not installed in this environment"
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except Exception as exc:  # NVMLError: no driver, no library, no permission
        return None, f"NVML is not usable: {exc}"
    if count == 0:
        return None, "no GPU on this node"
    return pynvml, ""


def visible_indices(nvml: Any, count: int, env: Optional[Dict[str, str]] = None) -> List[int]:
    """The NVML indices of the job's GPUs: ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs) when
    set, else every GPU NVML sees (with cgroup-constrained devices those are the job's)."""
    value = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if not value:
        return list(range(count))
    wanted = [v.strip() for v in value.split(",") if v.strip()]
    out: List[int] = []
    uuids = {}
    for i in range(count):
        uuid = nvml_call(lambda i=i: nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)))
        if uuid is not None:
            uuids[nvml_text(uuid)] = i
    for w in wanted:
        if w.isdigit() and int(w) < count:
            out.append(int(w))
        elif w in uuids:
            out.append(uuids[w])
    return out or list(range(count))


def nvml_text(value: Any) -> str:
    """An NVML string (bytes in older bindings) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_call(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or None when NVML cannot tell."""
    try:
        return fn(*args)
    except Exception:  # NVML_ERROR_NOT_SUPPORTED and friends: the value is unknown
        return None


def _throttle_fn(nvml: Any) -> Any:
    # renamed "clocks event reasons" in recent NVML; the old name stays as an alias
    new = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return new or nvml.nvmlDeviceGetCurrentClocksThrottleReasons


def device_info(nvml: Any, index: int) -> Dict[str, Any]:
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    limit = nvml_call(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
    return {
        "index": index,
        "name": nvml_text(nvml_call(nvml.nvmlDeviceGetName, h)),
        "uuid": nvml_text(nvml_call(nvml.nvmlDeviceGetUUID, h)),
        "power_limit_w": None if limit is None else limit / 1000.0,
    }


def read_sample(nvml: Any, handles: List[Any]) -> Dict[str, Any]:
    """One sample of every GPU (NVML units converted: W, J, %, MiB, MHz)."""
    throttle = _throttle_fn(nvml)
    rec: Dict[str, Any] = {"type": "sample", "t": time.time()}
    cols: Dict[str, List[Any]] = {
        k: [] for k in ("power_w", "energy_j", "util_pct", "mem_used_mib", "sm_clock_mhz")
    }
    cols["throttle"] = []
    for h in handles:
        power = nvml_call(nvml.nvmlDeviceGetPowerUsage, h)  # mW
        energy = nvml_call(nvml.nvmlDeviceGetTotalEnergyConsumption, h)  # mJ since driver load
        util = nvml_call(nvml.nvmlDeviceGetUtilizationRates, h)
        mem = nvml_call(nvml.nvmlDeviceGetMemoryInfo, h)
        cols["power_w"].append(None if power is None else power / 1000.0)
        cols["energy_j"].append(None if energy is None else energy / 1000.0)
        cols["util_pct"].append(None if util is None else util.gpu)
        cols["mem_used_mib"].append(None if mem is None else mem.used / 2**20)
        cols["sm_clock_mhz"].append(nvml_call(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM))
        cols["throttle"].append(nvml_call(throttle, h))
    rec.update(cols)
    return rec


class LineWriter:
    """JSON lines, each with one ``os.write`` on an O_APPEND descriptor (as the rank logs)."""

    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: Dict[str, Any]) -> None:
        os.write(self.fd, (json.dumps(record) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


def run(out_dir: str, hz: float = 10.0, duration: Optional[float] = None) -> int:
    """Sample until SIGTERM/SIGINT (or ``duration`` seconds); returns the exit code (0)."""
    node = node_name()
    writer = LineWriter(os.path.join(out_dir, f"{node}.jsonl"))
    nvml, reason = open_nvml()
    if nvml is None:
        writer.write({"type": "unavailable", "node": node, "t": time.time(), "reason": reason})
        writer.close()
        sys.stderr.write(f"ddlbench: no GPU telemetry on {node}: {reason}; the run goes on\n")
        return 0
    indices = visible_indices(nvml, nvml.nvmlDeviceGetCount())
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
    writer.write(
        {
            "type": "meta",
            "format": FORMAT,
            "node": node,
            "t": time.time(),
            "hz": hz,
            "driver": nvml_text(nvml_call(nvml.nvmlSystemGetDriverVersion)),
            "gpus": [device_info(nvml, i) for i in indices],
        }
    )
    stop = {"now": False}

    def _stop(_sig: int, _frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    period = 1.0 / hz
    end = None if duration is None else time.monotonic() + duration
    next_t = time.monotonic()
    try:
        while not stop["now"] and (end is None or time.monotonic() < end):
            writer.write(read_sample(nvml, handles))
            next_t += period
            time.sleep(max(0.0, next_t - time.monotonic()))
    finally:
        writer.close()
        nvml_call(nvml.nvmlShutdown)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddlbench.workloads.node.gpu_sampler")
    parser.add_argument("--out", required=True, help="folder of the per-node telemetry logs")
    parser.add_argument("--hz", type=float, default=10.0, help="samples per second")
    parser.add_argument("--duration", type=float, default=None, help="stop after seconds")
    args = parser.parse_args(argv)
    if args.hz <= 0:
        parser.error("--hz must be positive")
    return run(args.out, args.hz, args.duration)


if __name__ == "__main__":
    raise SystemExit(main())
