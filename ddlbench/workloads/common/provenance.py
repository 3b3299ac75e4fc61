"""Provenance written by the workload itself: the packages a rank's interpreter sees (rank 0,
``provenance/packages.txt``), and per node (each node's local rank 0, at the end of the run,
``provenance/node-<host>.json``): the NCCL library the run loaded, GPU-to-GPU links from NVML's
topology, RDMA adapters (``/sys/class/infiniband``) and the network interfaces in use, the CPU
model and the NUMA layout. An item that cannot be read is ``{"absent": "<why>"}``.

The workload records them itself, rather than the batch script running ``pip freeze``, so the
list is that of the environment the ranks really run in: a venv, an Apptainer image or a Pyxis
container alike (a Pyxis container exists only inside srun steps).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from typing import Any, Dict, List, Optional


def installed_packages() -> List[str]:
    """``name==version`` of every installed distribution, sorted by name (as ``pip freeze``)."""
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:  # a broken installation without metadata
            continue
        found.setdefault(name.lower().replace("_", "-"), f"{name}=={dist.version}")
    return [found[key] for key in sorted(found)]


def write_packages(run_dir: str) -> str:
    """Write ``run_dir/provenance/packages.txt`` atomically; returns its path."""
    folder = os.path.join(run_dir, "provenance")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "packages.txt")
    lines = [
        f"# python {platform.python_version()} ({sys.executable})",
        *installed_packages(),
    ]
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


# -- per node: NCCL, GPU links, network adapters, CPU and NUMA ------------------------------------
#: GPU-to-GPU paths by NVML's topology level (nvidia-smi topo -m's names)
_TOPO_NAMES = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def absent(why: str) -> Dict[str, str]:
    """An item that could not be read, with the reason."""
    return {"absent": why}


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def nccl_loaded(maps_path: str = "/proc/self/maps") -> Dict[str, Any]:
    """The NCCL library this process loaded (path and ``ncclGetVersion``), if any."""
    maps = _read(maps_path)
    if maps is None:
        return absent(f"{maps_path} cannot be read")
    libs = sorted({ln.split()[-1] for ln in maps.splitlines() if "libnccl" in ln.split()[-1]})
    if not libs:
        return absent("no NCCL library loaded by the run (a CPU run, or not the NCCL backend)")
    import ctypes

    try:
        code = ctypes.c_int()
        ctypes.CDLL(libs[0]).ncclGetVersion(ctypes.byref(code))
    except (OSError, AttributeError) as exc:
        return {"library": libs[0], "version": None, "error": str(exc)}
    v = code.value
    major, minor, patch = (v // 10000, v % 10000 // 100, v % 100) if v >= 10000 else (
        v // 1000, v % 1000 // 100, v % 100)  # fmt: skip
    return {"library": libs[0], "version": f"{major}.{minor}.{patch}"}


def _nvlink_peers(nvml: Any, handle: Any) -> Dict[str, int]:
    """Active NVLinks of a GPU, counted by the remote PCI bus id."""
    peers: Dict[str, int] = {}
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if not nvml.nvmlDeviceGetNvLinkState(handle, link):
                continue
            bus = nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId
        except Exception:  # no such link, or no NVLink on this GPU
            continue
        key = bus.decode() if isinstance(bus, bytes) else str(bus)
        peers[key.lower()] = peers.get(key.lower(), 0) + 1
    return peers


def _nvidia_gpu_present(driver: str = "/proc/driver/nvidia/gpus", dev: str = "/dev") -> bool:
    """Whether the NVIDIA driver lists a GPU here (its /proc folder, or a /dev/nvidiaN)."""
    try:
        if os.listdir(driver):
            return True
    except OSError:
        pass
    try:
        return any(n[6:].isdigit() and n.startswith("nvidia") for n in os.listdir(dev))
    except OSError:
        return False


def gpu_links() -> Dict[str, Any]:
    """GPU-to-GPU links from NVML: ``NV<n>`` (n NVLinks) or the PCIe path (PIX ... SYS)."""
    try:
        import pynvml as nvml  # type: ignore[import-not-found]
    except ImportError:
        if not _nvidia_gpu_present():
            return absent("no NVIDIA GPU on this node (no NVIDIA driver sees one)")
        return absent("nvidia-ml-py (pynvml) is not installed in the run's environment")
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return absent(f"NVML does not start ({exc}): no GPU driver on this node")
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        buses = []
        for h in handles:
            bus = nvml.nvmlDeviceGetPciInfo(h).busId
            buses.append((bus.decode() if isinstance(bus, bytes) else str(bus)).lower())
        matrix: List[List[str]] = []
        for i, h in enumerate(handles):
            peers = _nvlink_peers(nvml, h)
            row = []
            for j, other in enumerate(handles):
                if i == j:
                    row.append("X")
                elif peers.get(buses[j]):
                    row.append(f"NV{peers[buses[j]]}")
                else:
                    level = nvml.nvmlDeviceGetTopologyCommonAncestor(h, other)
                    row.append(_TOPO_NAMES.get(int(level), str(level)))
            matrix.append(row)
        return {"gpus": len(handles), "matrix": matrix} if handles else absent("NVML sees no GPU")
    except Exception as exc:
        return absent(f"NVML topology cannot be read: {exc}")
    finally:
        nvml.nvmlShutdown()


def infiniband(root: str = "/sys/class/infiniband") -> Any:
    """RDMA adapters and their ports (state, rate, link layer) from ``/sys/class/infiniband``."""
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return absent(f"no {root}: no InfiniBand/RoCE adapter (or its driver) on this node")
    out = []
    for dev in devices:
        ports_dir = os.path.join(root, dev, "ports")
        ports = []
        for port in sorted(os.listdir(ports_dir)) if os.path.isdir(ports_dir) else []:
            p = os.path.join(ports_dir, port)
            ports.append(
                {
                    "port": int(port) if port.isdigit() else port,
                    "state": _read(os.path.join(p, "state")),
                    "rate": _read(os.path.join(p, "rate")),
                    "link_layer": _read(os.path.join(p, "link_layer")),
                }
            )
        out.append({"device": dev, "ports": ports})
    return out or absent(f"{root} lists no adapter")


def _default_route_ifaces(route_path: str = "/proc/net/route") -> List[str]:
    text = _read(route_path) or ""
    rows = [ln.split() for ln in text.splitlines()[1:]]
    return sorted({r[0] for r in rows if len(r) > 2 and r[1] == "00000000"})


def interfaces(root: str = "/sys/class/net", route_path: str = "/proc/net/route") -> Any:
    """Network interfaces that are up (not loopback): speed, MTU, whether the default route
    uses them, and whether NCCL_SOCKET_IFNAME names them."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return absent(f"{root} cannot be read")
    default = _default_route_ifaces(route_path)
    wanted = [w.lstrip("=^") for w in os.environ.get("NCCL_SOCKET_IFNAME", "").split(",") if w]
    out = []
    for name in names:
        state = _read(os.path.join(root, name, "operstate"))
        if name == "lo" or state not in ("up", "unknown"):
            continue
        speed = _read(os.path.join(root, name, "speed"))
        out.append(
            {
                "name": name,
                "state": state,
                "speed_mbps": int(speed) if speed and speed.isdigit() else None,  # -1: unknown
                "mtu": int(_read(os.path.join(root, name, "mtu")) or 0) or None,
                "default_route": name in default,
                "nccl_socket_ifname": any(name.startswith(w) for w in wanted),
            }
        )
    return out or absent("no network interface is up besides loopback")


def _cpulist_count(text: str) -> int:
    n = 0
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def cpu_and_numa(cpuinfo: str = "/proc/cpuinfo", nodes: str = "/sys/devices/system/node") -> Any:
    """The CPU model, its logical CPUs, and each NUMA node's CPUs and memory."""
    info = _read(cpuinfo)
    if info is None:
        return absent(f"{cpuinfo} cannot be read")
    models = [
        ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")
    ]
    out: Dict[str, Any] = {"model": models[0] if models else None, "logical_cpus": len(models)}
    try:
        numa = sorted(d for d in os.listdir(nodes) if d.startswith("node") and d[4:].isdigit())
    except OSError:
        out["numa"] = absent(f"no {nodes}: the kernel shows no NUMA layout")
        return out
    layout = []
    for node in sorted(numa, key=lambda d: int(d[4:])):
        cpus = _read(os.path.join(nodes, node, "cpulist")) or ""
        mem = _read(os.path.join(nodes, node, "meminfo")) or ""
        kb = [int(ln.split()[-2]) for ln in mem.splitlines() if "MemTotal:" in ln]
        layout.append(
            {
                "node": int(node[4:]),
                "cpus": cpus,
                "n_cpus": _cpulist_count(cpus),
                "mem_gib": round(kb[0] / 2**20, 1) if kb else None,
            }
        )
    out["numa"] = layout
    return out


def node_facts() -> Dict[str, Any]:
    """What this node offers the run (each item, or ``{"absent": why}``)."""
    return {
        "host": socket.gethostname(),
        "nccl": nccl_loaded(),
        "gpu_links": gpu_links(),
        "infiniband": infiniband(),
        "interfaces": interfaces(),
        "cpu": cpu_and_numa(),
    }


def write_node_facts(run_dir: str) -> str:
    """Write ``run_dir/provenance/node-<host>.json`` atomically (one node's local rank 0)."""
    facts = node_facts()
    folder = os.path.join(run_dir, "provenance")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"node-{facts['host']}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(facts, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)
    return path
