"""``ddlbench init``: a working folder with the example specs and a commented cluster profile.

On a Slurm login node the profile is filled from ``sinfo`` and ``scontrol show node``: the
partitions, GPUs per node (from the nodes' ``Gres``), CPUs and memory. Nothing is overwritten:
a file that exists is kept and reported. Standard library only (login-node code).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ddlbench.shipped import EXAMPLES, shipped_root

#: where the profile goes, relative to the folder: found as ``./configs/clusters/`` and as the
#: specs' folder's ``clusters/`` (docs/cluster-profiles.md#finding-a-profile)
PROFILE_DIR = "configs/clusters"
DEFAULT_NAME = "mycluster"
_GPU_GRES = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.-]+))?:(\d+)")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class Partition:
    name: str
    default: bool = False
    nodes: int = 0
    time_limit: str = ""
    cpus: List[int] = field(default_factory=list)
    mem_mb: List[int] = field(default_factory=list)
    gpus: List[Tuple[Optional[str], int]] = field(default_factory=list)
    #: nodes seen in ``scontrol show node`` (sinfo may list a partition on several lines)
    seen: int = 0

    @property
    def node_count(self) -> int:
        return self.seen or self.nodes

    @property
    def gpus_per_node(self) -> int:
        return min((n for _, n in self.gpus), default=0)

    @property
    def gpu_type(self) -> Optional[str]:
        types = {t for t, n in self.gpus if n}
        return types.pop() if len(types) == 1 else None


def parse_gres(gres: str) -> Tuple[Optional[str], int]:
    """``(type, count)`` of the GPUs in a Slurm ``Gres`` value (``gpu:a100:4(S:0-1)``,
    ``gpu:2``, ``(null)``); several GPU entries add up, the type is kept when there is one."""
    found = _GPU_GRES.findall(re.sub(r"\([^)]*\)", "", gres or ""))
    total = sum(int(n) for _, n in found)
    types = {t for t, _ in found if t}
    return (types.pop() if len(types) == 1 else None), total


def parse_sinfo(text: str) -> Dict[str, Partition]:
    """Partitions from ``sinfo --noheader --format=%P|%D|%l`` (``*`` marks the default)."""
    parts: Dict[str, Partition] = {}
    for line in text.splitlines():
        cells = line.strip().split("|")
        if len(cells) < 3 or not cells[0]:
            continue
        name = cells[0].rstrip("*")
        part = parts.setdefault(name, Partition(name))
        part.default = part.default or cells[0].endswith("*")
        part.nodes += int(cells[1]) if cells[1].isdigit() else 0
        part.time_limit = cells[2]
    return parts


def parse_nodes(text: str, parts: Dict[str, Partition]) -> None:
    """Add each node of ``scontrol show node --oneliner`` to its partitions: CPUs
    (``CPUTot``), memory (``RealMemory``, MB) and GPUs (``Gres``)."""
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "NodeName" not in fields:
            continue
        gres = parse_gres(fields.get("Gres", ""))
        for name in fields.get("Partitions", "").split(","):
            part = parts.get(name)
            if part is None:
                continue
            part.seen += 1
            if fields.get("CPUTot", "").isdigit():
                part.cpus.append(int(fields["CPUTot"]))
            if fields.get("RealMemory", "").isdigit():
                part.mem_mb.append(int(fields["RealMemory"]))
            part.gpus.append(gres)


#: why the last :func:`read_slurm` found no partition though ``sinfo`` is here (else None)
_SINFO_PROBLEM: List[Optional[str]] = [None]


def _run(args: List[str]) -> Optional[str]:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _SINFO_PROBLEM[0] = f"{args[0]}: {exc}"
        return None
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        last = lines[-1][:200] if lines else f"{args[0]} exited with {proc.returncode}"
        _SINFO_PROBLEM[0] = last
        return None
    return proc.stdout


def sinfo_problem() -> Optional[str]:
    """Why the last :func:`read_slurm` got nothing from an ``sinfo`` that is on ``PATH`` (its
    last error line), or None (no sinfo, or it answered)."""
    return _SINFO_PROBLEM[0]


def read_slurm() -> Tuple[Optional[str], Dict[str, Partition]]:
    """``(cluster name, partitions)`` from this node's Slurm, or ``(None, {})`` without it
    (:func:`sinfo_problem` says why when ``sinfo`` is here but failed)."""
    _SINFO_PROBLEM[0] = None
    if shutil.which("sinfo") is None:
        return None, {}
    text = _run(["sinfo", "--noheader", "--format=%P|%D|%l"])
    if not text:
        if text is not None:
            _SINFO_PROBLEM[0] = "sinfo listed no partition"
        return None, {}
    parts = parse_sinfo(text)
    parse_nodes(_run(["scontrol", "show", "node", "--oneliner"]) or "", parts)
    config = _run(["scontrol", "show", "config"]) or ""
    m = re.search(r"^ClusterName\s*=\s*(\S+)", config, re.M)
    return (m.group(1) if m else None), parts


def _pick(parts: Dict[str, Partition]) -> Optional[Partition]:
    """The default partition, else the first with GPUs, else the first."""
    ordered = list(parts.values())
    for pick in (lambda p: p.default, lambda p: p.gpus_per_node > 0, lambda p: True):
        for part in ordered:
            if pick(part):
                return part
    return None


def _mem(mb: int) -> str:
    """Slurm's ``--mem`` spelling of ``mb`` megabytes, rounded down (never ``0``: all memory)."""
    return f"{mb // 1024}G" if mb >= 1024 else f"{max(mb, 1)}M"


def _describe(part: Partition) -> str:
    gpus = f"{part.gpus_per_node} GPUs" if part.gpus_per_node else "no GPUs"
    cpus = f"{min(part.cpus)} CPUs" if part.cpus else "CPUs unknown"
    mem = f"memory {_mem(min(part.mem_mb))}" if part.mem_mb else "memory unknown"
    limit = f", limit {part.time_limit}" if part.time_limit else ""
    return f"{part.name}: {part.node_count} nodes, {gpus}, {cpus}, {mem}{limit}"


_ENVIRONMENTS = """\
# Per-framework software on the compute nodes: a venv, modules, a conda env or a container
# (docs/environments.md). scripts/make-envs.sh builds these venvs; edit to your site's.
environments:
  pytorch:    {venv: "${DDLBENCH_ENVS:-~/.cache/ddlbench/envs}/torch"}
  tensorflow: {venv: "${DDLBENCH_ENVS:-~/.cache/ddlbench/envs}/tensorflow"}
  keras:      {venv: "${DDLBENCH_ENVS:-~/.cache/ddlbench/envs}/tensorflow"}
  horovod:    {venv: "${DDLBENCH_ENVS:-~/.cache/ddlbench/envs}/horovod"}
  mxnet:      {venv: "${DDLBENCH_ENVS:-~/.cache/ddlbench/envs}/mxnet"}
#  pytorch:
#    modules: [PyTorch/2.3.0-foss-2023b-CUDA-12.4.0]
#  pytorch:
#    container: {runtime: apptainer, image: /shared/images/pytorch.sif}
# Variables for every run, e.g. the network NCCL should use (docs/launching.md):
env:
  OMP_NUM_THREADS: "1"
#  NCCL_SOCKET_IFNAME: ib0
"""


def _c(text: str, comment: str = "") -> str:
    """A YAML line with its comment aligned at column 30."""
    return f"{text:<29} # {comment}" if comment else text


def _slurm_block(part: Optional[Partition]) -> List[str]:
    if part is None:
        return [
            "slurm:",
            _c("  partition: null", "your partition (sinfo lists them)"),
            _c("#  account: myproject", "if your site charges jobs to an account"),
            _c('  time_limit: "01:00:00"'),
            _c("  cpus_per_task: 8", "CPU cores per rank"),
            _c("  gpu_request: gres", "--gres=gpu:N; or gpus-per-node, or none"),
        ]
    gpus = part.gpus_per_node
    cpus = min(part.cpus) if part.cpus else 1
    per_rank = max(1, cpus // gpus) if gpus else cpus
    lines = [
        "slurm:",
        _c(f"  partition: {part.name}", "sinfo's default partition" if part.default else ""),
        _c("#  account: myproject", "if your site charges jobs to an account"),
        _c('  time_limit: "01:00:00"', f"the partition allows {part.time_limit or '?'}"),
        _c(f"  cpus_per_task: {per_rank}", f"{cpus} CPUs per node"),
    ]
    if part.mem_mb:
        lines.append(_c(f"#  mem: {_mem(min(part.mem_mb))}", "memory per node (--mem)"))
    if gpus and part.gpu_type:
        lines.append(_c(f"  gpu_type: {part.gpu_type}", "from the nodes' Gres"))
    lines.append(_c("  gpu_request: " + ("gres" if gpus else "none"), "--gres=gpu[:type]:N"))
    return lines


def profile_name(cluster: Optional[str]) -> str:
    """A profile name from Slurm's ClusterName (a safe name), else ``mycluster``."""
    name = _SAFE.sub("-", cluster or "").strip("-.")
    return name or DEFAULT_NAME


def profile_text(
    name: str,
    parts: Dict[str, Partition],
    when: Optional[datetime] = None,
    problem: Optional[str] = None,
) -> str:
    """The commented profile: filled from ``parts`` when there are any, else a skeleton (that
    says ``problem``, why sinfo gave nothing, when there is one)."""
    part = _pick(parts)
    stamp = (when or datetime.now(timezone.utc)).strftime("%Y-%m-%d")
    if part is None and problem:
        head = [
            f"# Cluster profile skeleton written by `ddlbench init` on {stamp}: sinfo is here",
            f"# but failed ({problem}),",
            "# so fill in the partition, GPUs and CPUs of your cluster, or delete this file and",
            "# run `ddlbench init` again once sinfo answers (init never overwrites a file).",
        ]
    elif part is None:
        head = [
            f"# Cluster profile skeleton written by `ddlbench init` on {stamp}; no Slurm was",
            "# found here, so fill in the partition, GPUs and CPUs of your cluster.",
        ]
    else:
        head = [
            f"# Cluster profile written by `ddlbench init` on {stamp} from this login node's",
            "# Slurm (sinfo, scontrol show node). Check every value. Partitions seen:",
            *(f"#   {_describe(p)}" + (" (default)" if p.default else "") for p in parts.values()),
        ]
    gpus = part.gpus_per_node if part else 0
    device = "gpu" if gpus or part is None else "cpu"
    nodes = f"{part.node_count}" if part and part.node_count else "null"
    lines = [
        *head,
        "# Use it with `cluster: "
        + name
        + "` in a spec; reference: `ddlbench docs cluster-profiles`.",
        f"name: {name}",
        f"description: {'Slurm partition ' + part.name if part else 'my cluster'}",
        "scheduler: slurm",
        _c(f"device: {device}", "gpu: one rank per GPU; cpu: ranks use CPU cores"),
        _c(f"gpus_per_node: {gpus or 1}", "from the nodes' Gres" if gpus else "ranks per node"),
        _c(f"max_nodes: {nodes}", "the largest run plan accepts"),
        *_slurm_block(part),
        _ENVIRONMENTS.rstrip("\n"),
    ]
    return "\n".join(lines) + "\n"


@dataclass
class InitResult:
    written: List[Path] = field(default_factory=list)
    kept: List[Path] = field(default_factory=list)
    profile: Optional[Path] = None
    profile_name: str = DEFAULT_NAME
    from_slurm: bool = False
    #: why sinfo, which is on PATH, gave no partition (its last error line); None otherwise
    sinfo_problem: Optional[str] = None


def _write_new(path: Path, text: str, result: InitResult) -> None:
    """Write ``path`` unless it exists (never overwrite)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        result.kept.append(path)
        return
    result.written.append(path)


def init_folder(
    folder: Path, slurm: Optional[Tuple[Optional[str], Dict[str, Partition]]] = None
) -> InitResult:
    """Write the example specs to ``folder/configs/`` and the profile to
    ``folder/configs/clusters/<name>.yaml``; ``slurm`` defaults to :func:`read_slurm`."""
    cluster, parts = read_slurm() if slurm is None else slurm
    problem = sinfo_problem() if slurm is None and not parts else None
    result = InitResult(
        profile_name=profile_name(cluster), from_slurm=bool(parts), sinfo_problem=problem
    )
    examples = shipped_root() / EXAMPLES
    for src in sorted(examples.glob("*.yaml")):
        _write_new(folder / "configs" / src.name, src.read_text(encoding="utf-8"), result)
    result.profile = folder / PROFILE_DIR / f"{result.profile_name}.yaml"
    text = profile_text(result.profile_name, parts, problem=problem)
    _write_new(result.profile, text, result)
    return result
