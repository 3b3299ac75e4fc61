"""Where a rank runs: its device's identity and the cores it is bound to (docs/launching.md).

Standard library only, Python 3.8 syntax: used by ``ddlbench.workloads.node.rank_start`` before
any framework is imported, and by the tests on recorded ``nvidia-smi`` output and ``/sys``
trees (``tests/fixtures/placement/``).

The binding policy ``gpu-socket`` does what NVIDIA's MLPerf bind scripts do: the cores of a
rank are taken from its GPU's ``/sys/bus/pci/devices/<bus id>/local_cpulist`` (the CPUs of
the GPU's NUMA node), split between the local ranks whose GPUs share that list, whole cores
(all their hardware threads) at a time, at most ``cores_per_task`` each.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

FORMAT = "ddlbench-placement/1"


class PlacementError(RuntimeError):
    """A rank cannot be placed correctly (it would share a device with another)."""


def parse_cpulist(text: str) -> List[int]:
    """``"0-3,8,10-11"`` (the kernel's list format) -> ``[0, 1, 2, 3, 8, 10, 11]``."""
    cpus: List[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return sorted(set(cpus))


def format_cpulist(cpus: Sequence[int]) -> str:
    """The inverse of :func:`parse_cpulist`, with ranges collapsed."""
    out: List[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def tasks_on_node(env: Dict[str, str]) -> int:
    """Tasks of this step on this node, from ``SLURM_STEP_TASKS_PER_NODE``/``SLURM_TASKS_PER_NODE``
    (``"4(x2),3"``) and ``SLURM_NODEID``."""
    text = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    counts: List[int] = []
    for part in filter(None, text.split(",")):
        m = re.match(r"^(\d+)(?:\(x(\d+)\))?$", part.strip())
        if m:
            counts += [int(m.group(1))] * int(m.group(2) or 1)
    node = int(env.get("SLURM_NODEID", "0") or 0)
    if node < len(counts):
        return counts[node]
    return int(env.get("SLURM_NTASKS_PER_NODE", "1") or 1)


def parse_gpu_query(text: str) -> List[Dict[str, str]]:
    """``nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader`` -> rows."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            rows.append({"index": parts[0], "uuid": parts[1], "pci_bus_id": parts[2]})
    return rows


def sysfs_bus_id(pci_bus_id: str) -> str:
    """nvidia-smi's ``00000000:1A:00.0`` -> the kernel's ``0000:1a:00.0``."""
    domain, _, rest = pci_bus_id.strip().rpartition(":")
    domain, _, bus = domain.rpartition(":") if domain.count(":") else ("", "", domain)
    return f"{(domain or '0')[-4:].rjust(4, '0')}:{bus}:{rest}".lower()


def visible_gpus(env: Dict[str, str], rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """The GPUs this task sees, in CUDA's order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``).

    ``CUDA_VISIBLE_DEVICES`` holds indices or UUIDs; unset, every GPU is visible.
    """
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return list(rows)
    by_index = {r["index"]: r for r in rows}
    by_uuid = {r["uuid"]: r for r in rows}
    out = []
    for entry in filter(None, (e.strip() for e in cvd.split(","))):
        row = by_index.get(entry) or by_uuid.get(entry)
        if row is None:
            row = next((r for r in rows if r["uuid"].startswith(entry)), None)
        if row is None:
            break  # CUDA stops at the first entry it cannot resolve
        out.append(row)
    return out


def check_device_count(visible: int, tasks: int) -> None:
    """Refuse a node whose tasks outnumber the GPUs a task sees: two would share one."""
    if visible < tasks:
        raise PlacementError(
            f"this task sees {visible} GPU(s) but {tasks} tasks run on its node: ranks would "
            "share a GPU (request one GPU per task: --gres=gpu:N with N = tasks per node)"
        )


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def gpu_local_cpus(bus_id: str, sysroot: str = "/sys") -> Optional[List[int]]:
    """The CPUs of a PCI device's NUMA node, or None when /sys does not say."""
    text = _read(os.path.join(sysroot, "bus/pci/devices", sysfs_bus_id(bus_id), "local_cpulist"))
    return parse_cpulist(text) if text else None


def core_of(cpus: Sequence[int], sysroot: str = "/sys") -> Dict[int, Tuple[int, int]]:
    """CPU -> (package, core): hardware threads of one core share a key."""
    out: Dict[int, Tuple[int, int]] = {}
    for cpu in cpus:
        base = os.path.join(sysroot, f"devices/system/cpu/cpu{cpu}/topology")
        pkg, core = _read(f"{base}/physical_package_id"), _read(f"{base}/core_id")
        if pkg is None or core is None:
            out[cpu] = (-1, cpu)  # unknown topology: every CPU a core of its own
        else:
            out[cpu] = (int(pkg), int(core))
    return out


def _cores(cpus: Sequence[int], cores: Dict[int, Tuple[int, int]]) -> List[List[int]]:
    """``cpus`` grouped by core, cores ordered by their first CPU."""
    groups: Dict[Tuple[int, int], List[int]] = {}
    for cpu in sorted(cpus):
        groups.setdefault(cores.get(cpu, (-1, cpu)), []).append(cpu)
    return sorted(groups.values(), key=lambda g: g[0])


def split_cores(
    local_rank: int,
    near: List[Optional[List[int]]],
    allowed: Sequence[int],
    cores_per_task: int,
    cores: Dict[int, Tuple[int, int]],
) -> Tuple[List[int], str]:
    """``(cpus, how)`` of ``local_rank`` under ``gpu-socket``.

    ``near[j]``: the CPUs near local rank ``j``'s GPU (None: unknown). Ranks whose GPUs share
    a list split its allowed cores; when a list is unknown or too small for one core per rank,
    the allowed cores are split in blocks over all local ranks (``how`` says which).
    """
    mine = near[local_rank]
    if mine is not None:
        group = [j for j, cpus in enumerate(near) if cpus == mine]
        usable = _cores([c for c in mine if c in set(allowed)], cores)
        per = min(cores_per_task, len(usable) // len(group))
        if per > 0:
            k = group.index(local_rank)
            picked = usable[k * per : (k + 1) * per]
            return [c for core in picked for c in core], "gpu-socket"
    usable = _cores(allowed, cores)
    per = max(1, min(cores_per_task, len(usable) // max(1, len(near))))
    picked = usable[local_rank * per : (local_rank + 1) * per] or usable[-per:]
    why = "GPU's CPUs unknown" if mine is None else "too few cores near the GPU"
    return [c for core in picked for c in core], f"block ({why})"


def threads_per_core(cpus: Sequence[int], cores: Dict[int, Tuple[int, int]]) -> int:
    """Hardware threads per core among ``cpus`` (2 with hyperthreading)."""
    groups = _cores(cpus, cores)
    return max((len(g) for g in groups), default=1)


def parse_topo_affinity(text: str) -> Dict[int, List[int]]:
    """``nvidia-smi topo -m`` -> GPU index -> the CPUs of its "CPU Affinity" column.

    Used when ``/sys/bus/pci/devices/<bus id>/local_cpulist`` cannot be read (a container
    without the host's /sys).
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or "CPU Affinity" not in lines[0]:
        return {}
    header = [h.strip() for h in lines[0].split("\t")]
    col = header.index("CPU Affinity")
    out: Dict[int, List[int]] = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t")]
        m = re.match(r"^GPU(\d+)$", cells[0]) if cells else None
        if m and len(cells) > col and re.match(r"^[0-9,\-]+$", cells[col]):
            out[int(m.group(1))] = parse_cpulist(cells[col])
    return out
