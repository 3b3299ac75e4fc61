"""The evidence against nodes that a run left in its folder, read for "which node?".

The pre-flight health reports (``provenance/preflight/<node>.json``: the failed checks), the
``node_comm`` records of the per-node and pairwise allreduce tests (rank logs of the newest
attempt) and, in :mod:`.hangs`, the ``hang`` records. :mod:`ddlbench.analyse.suspects` weighs
them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from ddlbench.campaign.paths import RANK_LOG_GLOB, CampaignPaths, RunPaths


def health_failures(run_dir: Path) -> List[Dict[str, Any]]:
    """``[{node, failed: [{check, detail}]}]`` of the run's pre-flight health reports."""
    out: List[Dict[str, Any]] = []
    for path in RunPaths(Path(run_dir)).preflight_reports():
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        health = report.get("health") or {}
        failed = [c for c in health.get("checks", []) if c.get("status") == "fail"]
        if failed:
            node = str(report.get("node") or path.stem)
            out.append({"node": node, "failed": failed})
    return out


def bad_nodes(campaign_dir: Path) -> List[str]:
    """The nodes whose pre-flight health check failed in any run of the campaign."""
    paths = CampaignPaths.of(campaign_dir)
    nodes = set()
    if paths.runs.is_dir():
        for run_dir in sorted(paths.runs.iterdir()):
            nodes.update(b["node"] for b in health_failures(run_dir))
    return sorted(nodes)


def node_comm_records(run_dir: Path) -> List[Dict[str, Any]]:
    """The ``node_comm`` records of the newest attempt's rank logs."""
    out: List[Dict[str, Any]] = []
    for path in sorted(RunPaths(Path(run_dir)).log_dir().glob(RANK_LOG_GLOB)):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b'"node_comm"' not in data:  # most logs: found at memory speed, nothing parsed
            continue
        for line in data.decode(errors="replace").splitlines():
            if '"node_comm"' in line:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("type") == "node_comm":
                    out.append(rec)
    return out
