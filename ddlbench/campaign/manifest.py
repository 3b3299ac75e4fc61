"""Reading a rendered campaign folder (``results/<campaign>/campaign.json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ddlbench.campaign.paths import MANIFEST, STORE, WORK_DIR, CampaignPaths
from ddlbench.errors import InputError

#: older spellings of the names in :mod:`ddlbench.campaign.paths`
CAMPAIGN_FILE = MANIFEST
STATE_FILE = STORE


@dataclass
class RunInfo:
    run_id: str
    seq: int
    script: Path  # absolute
    run_dir: Path  # absolute
    nodes: int = 1
    tasks_per_node: int = 1
    gpus_per_node: int = 0
    world_size: int = 1
    time_limit_min: Optional[float] = None
    raw: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Campaign:
    name: str
    dir: Path
    cluster: Dict[str, Any]
    runs: List[RunInfo]
    raw: Dict[str, Any]

    @property
    def scheduler(self) -> str:
        return scheduler_of(self.cluster)

    @property
    def paths(self) -> CampaignPaths:
        return CampaignPaths(self.dir)

    @property
    def work_dir(self) -> Path:
        return self.paths.work

    @property
    def state_path(self) -> Path:
        return self.paths.store

    def run(self, run_id: str) -> RunInfo:
        for r in self.runs:
            if r.run_id == run_id:
                return r
        known = ", ".join(r.run_id for r in self.runs[:10])
        raise InputError(f"campaign {self.name!r} has no run {run_id!r} (runs: {known} ...)")

    def slurm_setting(self, key: str, default: Any = None) -> Any:
        return (self.cluster.get("slurm") or {}).get(key, default)

    def local_setting(self, key: str, default: Any = None) -> Any:
        return (self.cluster.get("local") or {}).get(key, default)


def scheduler_of(cluster: Dict[str, Any]) -> str:
    """A cluster profile's scheduler (``slurm`` unless it says otherwise)."""
    return str(cluster.get("scheduler") or "slurm")


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def manifest_head(path: Path, need: Sequence[str] = (), limit: int = 16384) -> Dict[str, Any]:
    """The manifest's top-level scalar fields before its first nested value (``format``,
    ``campaign``, ``created``...), read from the head of the file: ddlbench writes one
    top-level key per line, so finding the latest of many large campaigns never parses their
    lists of runs. A manifest written otherwise, or whose head lacks a key in ``need``, is
    parsed whole; an unreadable one gives {}."""
    try:
        with open(path, "rb") as f:
            lines = f.read(limit).decode("utf-8", "replace").splitlines()
    except OSError:
        return {}
    if not lines or lines[0].strip() != "{":
        return _whole(path)
    head: Dict[str, Any] = {}
    for line in lines[1:]:
        text = line.strip().rstrip(",")
        if text == "}" or text.endswith(("{", "[")):  # the end, or the first nested value
            return head if all(k in head for k in need) else _whole(path)
        try:
            head.update(json.loads("{" + text + "}"))
        except (ValueError, TypeError):
            return _whole(path)
    return _whole(path)  # no nested value within the limit


def _whole(path: Path) -> Dict[str, Any]:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


class ManifestError(InputError):
    """A ``campaign.json`` that cannot be read; ``detail`` says why, without the path."""

    def __init__(self, path: Path, detail: str):
        self.detail = detail
        super().__init__(f"{path}: {detail}")


def read_manifest(path: Path) -> Dict[str, Any]:
    """The manifest as plain values, checked: a ddlbench campaign whose every run has a
    ``run_id`` (no per-run objects, so even 10,000 runs are cheap). Raises ManifestError."""
    try:
        raw = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(path, f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ManifestError(path, "not a ddlbench campaign (a JSON object was expected)")
    fmt = str(raw.get("format", ""))
    if not fmt.startswith("ddlbench-campaign/"):
        raise ManifestError(path, f"format {fmt!r} is not a ddlbench campaign")
    entries = raw.get("runs") or []
    if not isinstance(entries, list):
        raise ManifestError(path, "'runs' is not a list")
    for seq, r in enumerate(entries):
        if not isinstance(r, dict) or not r.get("run_id"):
            raise ManifestError(
                path,
                f"runs[{seq}] has no 'run_id' (ddlbench submit writes this file; "
                "restore it from a copy, or render the campaign again)",
            )
    raw["runs"] = entries
    return raw


def load_campaign(campaign_dir: Path) -> Campaign:
    campaign_dir = Path(campaign_dir).resolve()
    paths = CampaignPaths(campaign_dir)
    try:
        raw = read_manifest(paths.manifest)
    except FileNotFoundError:
        raise InputError(
            f"{campaign_dir} is not a campaign folder (no {MANIFEST}); "
            "create one with `ddlbench submit SPEC`"
        ) from None
    runs: List[RunInfo] = []
    for seq, r in enumerate(raw["runs"]):
        run_id = str(r["run_id"])
        run_dir = campaign_dir / str(r.get("run_dir") or paths.rel_run_dir(run_id))
        script = campaign_dir / str(r.get("script") or paths.rel_job_script(run_id))
        tl = r.get("time_limit_min")
        runs.append(
            RunInfo(
                run_id=run_id,
                seq=seq,
                script=script,
                run_dir=run_dir,
                nodes=_int(r.get("nodes"), 1),
                tasks_per_node=_int(r.get("tasks_per_node"), 1),
                gpus_per_node=_int(r.get("gpus_per_node"), 0),
                world_size=_int(r.get("world_size"), 1),
                time_limit_min=float(tl) if tl is not None else None,
                raw=r,
            )
        )
    name = str(raw.get("campaign") or campaign_dir.name)
    return Campaign(
        name=name, dir=campaign_dir, cluster=dict(raw.get("cluster") or {}), runs=runs, raw=raw
    )


__all__ = [
    "CAMPAIGN_FILE",
    "STATE_FILE",
    "WORK_DIR",
    "Campaign",
    "RunInfo",
    "ManifestError",
    "load_campaign",
    "manifest_head",
    "read_manifest",
    "scheduler_of",
]
