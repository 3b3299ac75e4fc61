"""``ddlbench doctor``'s checks beside the framework probes: GPUs, the results folder, and
framework environments built by ``ddlbench envs build`` (``scripts/make-envs.sh``) that are
stale against their pins.

GPU checks (profiles with ``device: gpu``) read ``nvidia-smi`` and NVML on the machine where
doctor runs; where it has no GPU each is skipped with the reason (run doctor on a GPU node:
``srun -p PARTITION --gres=gpu:1 ddlbench doctor``). Standard library only, except the NVML
bindings (``pynvml``, from nvidia-ml-py), imported only when present.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

OK, FAIL, SKIP, NOT_CONFIGURED = "ok", "fail", "skip", "not configured"
STAMP_NAME = ".ddlbench-stamp"  # written by scripts/make-envs.sh into each env it builds


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    versions: Dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    #: ok, fail, skip (with the reason in detail) or not configured; skip and not configured
    #: are not failures
    state: str = ""
    #: the docs page (``ddlbench docs PAGE``) that says how to fix a failure
    docs: str = ""

    def __post_init__(self) -> None:
        if not self.state:
            self.state = OK if self.ok else FAIL


def skip(name: str, why: str) -> Check:
    return Check(name, True, why, state=SKIP)


Runner = Callable[[List[str]], Optional[str]]


def run_tool(args: List[str]) -> Optional[str]:
    """A tool's stdout, or None when it is missing, fails or hangs."""
    if shutil.which(args[0]) is None:
        return None
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def parse_gpu_query(text: str) -> List[Dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=index,name,driver_version,memory.total
    --format=csv,noheader``."""
    keys = ("index", "name", "driver", "memory")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(keys) and cells[0].isdigit():
            rows.append(dict(zip(keys, cells)))
    return rows


def parse_cuda_version(text: str) -> Optional[str]:
    """The ``CUDA Version: 12.4`` of ``nvidia-smi``'s banner (the driver's CUDA)."""
    m = re.search(r"CUDA Version:\s*([0-9.]+)", text)
    return m.group(1) if m else None


def gpu_checks(gpus_per_node: int, run: Runner = run_tool) -> List[Check]:
    """GPU count against the profile, driver and CUDA versions (from ``nvidia-smi``)."""
    query = run(
        [
            "nvidia-smi",
            "--query-gpu=index,name,driver_version,memory.total",
            "--format=csv,noheader",
        ]
    )
    rows = parse_gpu_query(query or "")
    if not rows:
        why = "no nvidia-smi here" if query is None else "nvidia-smi lists no GPU"
        why += " (a login node without GPUs?); run doctor on a GPU node to check them"
        return [skip(n, why) for n in ("gpus", "driver", "cuda")]
    names = sorted({r["name"] for r in rows})
    count = len(rows)
    enough = count >= gpus_per_node
    detail = f"{count} x {', '.join(names)}; profile gpus_per_node {gpus_per_node}"
    out = [Check("gpus", enough, detail + ("" if enough else ": fewer GPUs than the profile"))]
    drivers = sorted({r["driver"] for r in rows})
    out.append(Check("driver", len(drivers) == 1, "NVIDIA driver " + ", ".join(drivers)))
    cuda = parse_cuda_version(run(["nvidia-smi"]) or "")
    out.append(
        Check("cuda", True, f"driver supports CUDA {cuda}")
        if cuda
        else Check("cuda", False, "nvidia-smi shows no CUDA version")
    )
    return out


def nvml_check() -> Check:
    """Whether NVML answers (the per-node GPU telemetry sampler reads it)."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return skip("nvml", "the NVML bindings (nvidia-ml-py) are not installed here")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return skip("nvml", f"NVML does not start here ({exc}): no GPU driver on this node")
    try:
        n = pynvml.nvmlDeviceGetCount()
        if n == 0:
            return skip("nvml", "NVML sees no GPU")
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        watts = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        sm = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        return Check("nvml", True, f"{n} GPUs; GPU 0 draws {watts:.0f} W at {sm} MHz")
    except Exception as exc:
        return Check("nvml", False, f"NVML telemetry cannot be read: {exc}")
    finally:
        pynvml.nvmlShutdown()


def cpu_only_torch(check: Check, profile_name: str) -> Check:
    """A PyTorch without CUDA (``torch.version.cuda`` is None) cannot drive a GPU profile's
    GPUs: every rank would refuse at start. A failure, not an ok with a skipped NCCL."""
    if check.versions.get("cuda") != CPU_ONLY or not check.ok:
        return check
    detail = (
        f"{check.detail}: a CPU-only PyTorch on GPU profile '{profile_name}'; install a CUDA "
        "build (pip's default wheel on Linux, or the site's PyTorch module)"
    )
    return Check(check.name, False, detail, check.versions, check.seconds, docs="install")


#: the probe's ``cuda`` for a PyTorch built without CUDA
CPU_ONLY = "none (CPU-only build)"


def nccl_check(versions: Dict[str, str]) -> Check:
    """The NCCL version PyTorch was built with (from the pytorch probe's versions)."""
    nccl = versions.get("nccl")
    if nccl:
        return Check("nccl", True, f"NCCL {nccl} (PyTorch {versions.get('torch', '?')})")
    if "torch" in versions:
        return skip("nccl", "PyTorch here is a CPU build (no NCCL)")
    return skip("nccl", "no usable PyTorch environment to read NCCL's version from")


def results_check(results: Path) -> Check:
    """The results folder (or the folder that will hold it) is writable."""
    target = results if results.exists() else results.parent
    where = f"{results}" + ("" if results.exists() else " (created on first submit)")
    try:
        with tempfile.NamedTemporaryFile(dir=target or ".", prefix=".ddlbench-doctor-"):
            pass
    except OSError as exc:
        return Check("results", False, f"{where}: not writable ({exc.strerror or exc})")
    return Check("results", True, f"{where}: writable")


def parse_hashes(text: str) -> Dict[str, str]:
    """``make-envs.sh --hash`` output: ``<env> <hash>`` lines."""
    return dict(ln.split()[:2] for ln in text.splitlines() if len(ln.split()) >= 2)


def _stamped_venvs(venvs: List[str]) -> Dict[str, Path]:
    """The profile's venvs that scripts/make-envs.sh built (they hold its stamp), by env name."""
    from ddlbench.spec.cluster import expand_path

    out: Dict[str, Path] = {}
    for venv in venvs:
        try:
            path = Path(expand_path(venv))
        except ValueError:  # an unset variable: the framework probe reports it
            continue
        if (path / STAMP_NAME).is_file():
            out.setdefault(path.name, path)
    return out


def stale_env_checks(venvs: List[str], make_envs: Optional[Path]) -> List[Check]:
    """Each make-envs.sh environment of the profile against the pins it was built from."""
    stamped = _stamped_venvs(venvs)
    if not stamped:
        return []
    if make_envs is None or not make_envs.is_file():
        why = "the environment builder is not in this installation: stamps not compared"
        return [skip("env pins", why)]
    try:
        proc = subprocess.run(
            ["bash", str(make_envs), "--hash", *stamped],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [Check("env pins", False, f"{make_envs} --hash failed: {exc}")]
    pins = parse_hashes(proc.stdout) if proc.returncode == 0 else {}
    out = []
    for name, path in stamped.items():
        stamp = (path / STAMP_NAME).read_text().strip()
        want = pins.get(name)
        if want is None:
            out.append(skip(f"env {name}", f"{path}: not an environment make-envs.sh knows"))
        elif stamp == want:
            out.append(Check(f"env {name}", True, f"{path} matches its pins ({stamp})"))
        else:
            detail = f"{path} is stale: built from other pins (stamp {stamp}, pins {want}); "
            fix = f"run ddlbench envs build {name}"
            out.append(Check(f"env {name}", False, detail + fix, docs="install"))
    return out
