"""Readers of the per-node GPU telemetry logs and pre-flight reports of a run.

Formats ``ddlbench-telemetry/1`` and ``ddlbench-preflight/1`` (docs/telemetry.md), written on
the compute nodes by ``ddlbench.workloads.node.gpu_sampler`` and
``ddlbench.workloads.node.preflight``.
Unreadable lines (a sampler killed mid-write) are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from ddlbench.analyse.energy import NodeSeries
from ddlbench.campaign.paths import RunPaths

SERIES_KEYS = ("power_w", "energy_j", "util_pct", "throttle")


@dataclass
class RunTelemetry:
    series: List[NodeSeries] = field(default_factory=list)
    #: node -> why it has no telemetry ("no GPU on this node", ...)
    unavailable: Dict[str, str] = field(default_factory=dict)
    device_names: List[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.series:
            return "ok" if not self.unavailable else "partial"
        if self.unavailable:
            return "unavailable: " + "; ".join(sorted(set(self.unavailable.values())))
        return "none"


def _lines(path: Path) -> List[Dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def _matrix(samples: List[Dict[str, Any]], key: str, gpus: int) -> np.ndarray:
    fill = -1 if key == "throttle" else np.nan
    m = np.full((len(samples), gpus), fill, dtype=np.int64 if key == "throttle" else float)
    for i, s in enumerate(samples):
        values = s.get(key) or []
        for g, v in enumerate(values[:gpus]):
            if v is not None:
                m[i, g] = v
    return m


def read_node_log(path: Path, telemetry: RunTelemetry) -> None:
    """Add one node's log to ``telemetry``."""
    records = _lines(path)
    node = path.stem
    meta = next((r for r in records if r.get("type") == "meta"), None)
    gone = next((r for r in records if r.get("type") == "unavailable"), None)
    if meta is None:
        telemetry.unavailable[node] = str((gone or {}).get("reason") or "no telemetry header")
        return
    gpus = len(meta.get("gpus") or [])
    telemetry.device_names += [str(g.get("name")) for g in meta.get("gpus") or []]
    samples = sorted((r for r in records if r.get("type") == "sample"), key=lambda r: r["t"])
    t = np.array([float(s["t"]) for s in samples])
    cols = {k: _matrix(samples, k, gpus) for k in SERIES_KEYS}
    telemetry.series.append(NodeSeries(str(meta.get("node") or node), t, **cols))


def read_run_telemetry(run_dir: Path) -> RunTelemetry:
    telemetry = RunTelemetry()
    for path in RunPaths(Path(run_dir)).telemetry_logs():
        read_node_log(path, telemetry)
    return telemetry


@dataclass
class Preflight:
    """The pre-flight reports of a run's nodes, summarised."""

    nodes: int = 0
    busy_nodes: List[str] = field(default_factory=list)
    reasons: List[str] = field(default_factory=list)
    shared: Optional[bool] = None

    @property
    def busy(self) -> Optional[bool]:
        return None if not self.nodes else bool(self.busy_nodes)


def read_preflight(run_dir: Path) -> Preflight:
    out = Preflight()
    for path in RunPaths(Path(run_dir)).preflight_reports():
        try:
            rep = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        out.nodes += 1
        node = str(rep.get("node") or path.stem)
        if rep.get("busy"):
            out.busy_nodes.append(node)
            out.reasons += [f"{node}: {r}" for r in rep.get("reasons") or []]
        if rep.get("node_shared") is not None:
            out.shared = bool(out.shared) or bool(rep["node_shared"])
    return out
