"""Run columns for the performance knobs, MFU, GPU telemetry and the interference pre-flight.

Added to the run table after the collector has built it (``add_gpu_columns``), from each run's
rank meta/summary records, its per-node telemetry logs and its pre-flight reports. Formulas in
docs/mfu.md and docs/telemetry.md.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from ddlbench.analyse.device_peaks import achieved_tflops, mfu, peak_tflops
from ddlbench.analyse.energy import joules_per_sample, window_energy
from ddlbench.collect.reader import meta_and_summaries
from ddlbench.collect.telemetry import read_preflight, read_run_telemetry

KNOB_COLUMNS = ["layout", "compile", "fallbacks", "compile_s"]
MFU_COLUMNS = ["flops_per_sample", "tflops_per_device", "peak_tflops", "mfu"]
TELEMETRY_COLUMNS = [
    "telemetry",
    "gpu_power_w",
    "energy_j",
    "joules_per_sample",
    "gpu_util_pct",
    "gpu_throttled",
    "throttle_reasons",
]
PREFLIGHT_COLUMNS = ["preflight_busy", "node_shared", "interference"]
GPU_RUN_COLUMNS = KNOB_COLUMNS + MFU_COLUMNS + TELEMETRY_COLUMNS + PREFLIGHT_COLUMNS


def _num(v: Any) -> Optional[float]:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def knob_fields(metas: List[dict], summaries: List[dict]) -> Dict[str, Any]:
    """What the ranks applied (rank 0's meta; fallbacks of every rank, once each). The precision
    that ran is the run table's ``precision`` (every rank's, ``run_table``)."""
    meta = metas[0] if metas else {}
    fallbacks: List[str] = []
    for m in metas:
        for f in m.get("fallbacks") or []:
            if f not in fallbacks:
                fallbacks.append(str(f))
    compile_s = [_num(s.get("compile_s")) for s in summaries]
    compile_s = [c for c in compile_s if c is not None]
    return {
        "layout": meta.get("layout"),
        "compile": meta.get("compile"),
        "fallbacks": "; ".join(fallbacks) or None,
        "compile_s": max(compile_s) if compile_s else None,
        "flops_per_sample": _num(meta.get("flops_per_sample")),
    }


def mfu_fields(row: Dict[str, Any], meta: Dict[str, Any]) -> Dict[str, Any]:
    achieved = achieved_tflops(_num(row.get("throughput_per_device")), row["flops_per_sample"])
    name = meta.get("device_name") or row.get("device_name")
    peak = peak_tflops(name if isinstance(name, str) else None, row.get("precision"))
    return {"tflops_per_device": achieved, "peak_tflops": peak, "mfu": mfu(achieved, peak)}


def telemetry_fields(run_dir: Path, row: Dict[str, Any]) -> Dict[str, Any]:
    tel = read_run_telemetry(run_dir)
    out: Dict[str, Any] = {k: None for k in TELEMETRY_COLUMNS}
    out["telemetry"] = tel.status if tel.status != "none" else None
    t0, t1 = _num(row.get("window_start")), _num(row.get("window_end"))
    if not tel.series or t0 is None or t1 is None or t1 <= t0:
        return out
    w = window_energy(tel.series, t0, t1)
    out.update(
        gpu_power_w=w.mean_power_w,
        energy_j=w.energy_j,
        joules_per_sample=joules_per_sample(w.energy_j, _num(row.get("samples_measured"))),
        gpu_util_pct=w.mean_util_pct,
        gpu_throttled=w.throttled,
        throttle_reasons=", ".join(w.throttle_reasons) or None,
    )
    return out


def preflight_fields(run_dir: Path) -> Dict[str, Any]:
    pf = read_preflight(run_dir)
    note = None
    if pf.busy:
        note = "started on a busy node: " + "; ".join(pf.reasons)
    elif pf.shared:
        note = "started on a shared node"
    return {"preflight_busy": pf.busy, "node_shared": pf.shared, "interference": note}


def add_gpu_columns(runs: pd.DataFrame, kept: Sequence[Any], campaign_dir: Path) -> pd.DataFrame:
    """``runs`` with :data:`GPU_RUN_COLUMNS`; a run that started on a busy or shared node, or
    whose GPU clocks were throttled, also gets a note in ``problems``, so that it never passes
    as a clean measurement."""
    metas, summaries = meta_and_summaries(kept)
    rows = []
    for row in runs.to_dict("records"):
        run_dir = campaign_dir / str(row["run_dir"])
        key = run_dir.name
        extra = knob_fields(metas.get(key, []), summaries.get(key, []))
        extra.update(mfu_fields({**row, **extra}, (metas.get(key) or [{}])[0]))
        extra.update(telemetry_fields(run_dir, row))
        extra.update(preflight_fields(run_dir))
        rows.append(extra)
    out = runs.copy()
    extra_df = pd.DataFrame(rows, columns=GPU_RUN_COLUMNS, index=runs.index)
    for c in GPU_RUN_COLUMNS:
        out[c] = extra_df[c]
    cols = ["interference", "gpu_throttled", "throttle_reasons"]
    notes = [_notes(r) for r in out[cols].to_dict("records")]
    if any(notes):
        out["problems"] = [_joined(p, n) for p, n in zip(out["problems"].tolist(), notes)]
    return out


def _notes(r: Dict[str, Any]) -> Optional[str]:
    """Why a run is not a clean measurement: interference at the start, throttled clocks."""
    parts = []
    if isinstance(r["interference"], str) and r["interference"]:
        parts.append(r["interference"])
    if r["gpu_throttled"] is True:
        parts.append(f"GPU clocks throttled in the measured window ({r['throttle_reasons']})")
    return "; ".join(parts) or None


def _joined(problems: Any, note: Any) -> Optional[str]:
    parts = [str(x) for x in (problems, note) if isinstance(x, str) and x]
    return "; ".join(parts) or None
