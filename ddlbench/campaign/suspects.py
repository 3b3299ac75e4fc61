"""Which node? The evidence against nodes that a campaign's runs left behind.

For ``ddlbench status`` (and ``--json``): each run that ended ``HUNG`` gets a ``hang`` entry
(the ranks and hosts that never arrived, their phase and stack dumps: :mod:`.hangs`), each
run whose pre-flight health check failed on a node gets ``bad_nodes`` (the node and its failed
checks, from ``provenance/preflight/<node>.json``), and the campaign gets ``suspects``: one
entry per node with every piece of evidence against it. The report adds the stragglers and the
pairwise tests (:mod:`ddlbench.analyse.suspects`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from ddlbench.campaign import states as S
from ddlbench.campaign.hangs import describe, hang_summary
from ddlbench.campaign.paths import CampaignPaths, RunPaths


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


def _add(suspects: Dict[str, Dict[str, Any]], node: str, kind: str, item: Dict) -> None:
    entry = suspects.setdefault(node, {"node": node, "evidence": []})
    entry["evidence"].append(dict(item, kind=kind))


def annotate_status(campaign_dir: Path, status: Dict[str, Any]) -> Dict[str, Any]:
    """Add ``hang``/``bad_nodes`` to the rows of ``status`` and the campaign's ``suspects``."""
    paths = CampaignPaths.of(campaign_dir)
    suspects: Dict[str, Dict[str, Any]] = {}
    for row in status.get("runs", []):
        run_dir = paths.run_dir(row["run_id"])
        if row.get("state") in (S.HUNG, S.FAILED):
            summary = hang_summary(run_dir)
            if summary is not None:
                row["hang"] = summary
                row["reason"] = describe(summary)
                for h in summary["not_arrived"]:
                    item = {"run_id": row["run_id"], "rank": h["rank"], "phase": h["phase"]}
                    item.update(last_step=h["last_step"], stacks=h["stacks"])
                    _add(suspects, str(h["host"]), "hang", item)
        bad = health_failures(run_dir) if row.get("state") != S.NOT_SUBMITTED else []
        if bad:
            row["bad_nodes"] = bad
            for b in bad:
                checks = [c.get("check") for c in b["failed"]]
                _add(suspects, b["node"], "health", {"run_id": row["run_id"], "checks": checks})
    status["suspects"] = sorted(suspects.values(), key=lambda s: s["node"])
    return status


def bad_nodes(campaign_dir: Path, run_ids: List[str]) -> List[str]:
    """The nodes whose pre-flight health check failed in any of ``run_ids``."""
    paths = CampaignPaths.of(campaign_dir)
    nodes = set()
    for rid in run_ids:
        nodes.update(b["node"] for b in health_failures(paths.run_dir(rid)))
    return sorted(nodes)


def suspects_lines(status: Dict[str, Any]) -> List[str]:
    """The ``suspects`` as text lines for the status table."""
    lines = []
    for s in status.get("suspects", []):
        parts = []
        for e in s["evidence"]:
            if e["kind"] == "hang":
                parts.append(f"{e['run_id']}: rank {e['rank']} never arrived ({e['phase']})")
            else:
                parts.append(f"{e['run_id']}: health check failed ({', '.join(e['checks'])})")
        lines.append(f"suspect node {s['node']}: " + "; ".join(parts))
    return lines
