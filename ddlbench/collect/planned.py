"""The runs a campaign planned: its manifest, plus run folders that the manifest does not list.

The manifest is read by :func:`ddlbench.campaign.manifest.load_campaign`; file names come from
:mod:`ddlbench.campaign.paths`. A run's planned config is its ``run.json`` once the job has
started, else the copy its job script carries: so a run that never ran still has its planned
settings, and a configuration's identity never depends on which repeat happened to run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

from ddlbench.campaign.manifest import load_campaign
from ddlbench.campaign.paths import CampaignPaths, RunPaths
from ddlbench.errors import InputError

from .errors import CollectError

#: manifest fields copied into the runs table as planned
PLAN_FIELDS = (
    "framework",
    "workload",
    "model",
    "mode",
    "nodes",
    "tasks_per_node",
    "gpus_per_node",
    "world_size",
    "batch_size",
    "global_batch_size",
    "lr",
    "repeat",
    "precision",
    "scaling",
    "group",
    "run_dir",
    "transport",
    "label",
    "variant",
)


def load_manifest(campaign_dir: Path) -> dict:
    """The campaign's manifest as a dict; :class:`CollectError` when it is missing or bad."""
    try:
        return load_campaign(Path(campaign_dir)).raw
    except InputError as exc:
        raise CollectError(str(exc)) from None


def read_json(path: Path) -> Optional[dict]:
    try:
        v = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return v if isinstance(v, dict) else None


def group_of(run_id: str) -> str:
    return re.sub(r"-r\d+$", "", run_id)


def planned_runs(campaign_dir: Path, manifest: dict) -> List[dict]:
    """Manifest runs, plus run folders that the manifest does not list (sorted by run id)."""
    paths = CampaignPaths.of(campaign_dir)
    runs = []
    seen = set()
    for entry in manifest.get("runs", []):
        if not isinstance(entry, dict) or not entry.get("run_id"):
            continue
        rid = str(entry["run_id"])
        if rid in seen:
            continue
        seen.add(rid)
        e = dict(entry)
        e.setdefault("run_dir", paths.rel_run_dir(rid))
        e.setdefault("script", paths.rel_job_script(rid))
        e["in_manifest"] = True
        runs.append(e)
    known_dirs = {(campaign_dir / r["run_dir"]).resolve() for r in runs}
    for rp in paths.run_folders():
        if rp.dir.resolve() in known_dirs:
            continue
        cfg = read_json(rp.config) or {}
        rid = str(cfg.get("run_id") or rp.run_id)
        if rid in seen:
            rid = rp.run_id
        seen.add(rid)
        e: Dict[str, Any] = {k: cfg.get(k) for k in PLAN_FIELDS if k in cfg}
        e.update(run_id=rid, run_dir=paths.rel_run_dir(rp.run_id), in_manifest=False)
        e.setdefault("group", group_of(rid))
        runs.append(e)
    runs.sort(key=lambda r: r["run_id"])
    return runs


def planned_config(campaign_dir: Path, entry: dict) -> dict:
    """The run's config: ``run.json`` once started, else the copy in its job script."""
    rp = RunPaths(campaign_dir / entry["run_dir"])
    cfg = read_json(rp.config)
    if cfg is not None:
        return cfg
    script = entry.get("script")
    if not script or not (campaign_dir / script).is_file():
        return {}
    from ddlbench.render.campaign import read_run_config

    try:
        return read_run_config(rp.dir, campaign_dir / script)
    except (OSError, ValueError):
        return {}
