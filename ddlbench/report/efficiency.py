"""Report table: what each run applied, its model FLOP utilisation, energy and interference.

One row per run that has any of these facts (docs/mfu.md, docs/telemetry.md). Bold rows: a
fallback was taken, clocks were throttled, or the run started on a busy or shared node.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

import pandas as pd

COLUMNS = ("precision_ran", "tflops_per_device", "joules_per_sample", "interference")


def _flagged(r: Any, missing: Callable[[Any], bool]) -> bool:
    def true(v: Any) -> bool:
        return not missing(v) and bool(v)

    return true(r.get("fallbacks")) or true(r.get("gpu_throttled")) or true(r.get("interference"))


def efficiency_tables(runs: pd.DataFrame, table: Callable, fmt: Dict[str, Callable]) -> List[Any]:
    """``[Table]`` for the report, or ``[]`` when no run has the columns (older data)."""
    if not len(runs) or not all(c in runs for c in COLUMNS):
        return []
    have = runs[[c for c in COLUMNS]].notna().any(axis=1)
    rows = runs[have & (runs["mode"] != "allreduce")].sort_values("run_id")
    if not len(rows):
        return []
    fnum, fsig, fpct, ftext, missing = (
        fmt["fnum"], fmt["fsig"], fmt["fpct"], fmt["ftext"], fmt["missing"]
    )  # fmt: skip

    def flag_text(r: Any) -> str:
        if missing(r.get("gpu_throttled")):
            return "-"
        return "THROTTLED " + ftext(r.get("throttle_reasons")) if r["gpu_throttled"] else "no"

    spec = [
        ("run", lambda r: r["run_id"], False),
        ("precision", lambda r: ftext(r.get("precision_ran")), False),
        ("layout", lambda r: ftext(r.get("layout")), False),
        ("compile", lambda r: ftext(r.get("compile")), False),
        ("compile s", lambda r: fsig(r.get("compile_s")), True),
        ("TFLOP/s per device", lambda r: fsig(r.get("tflops_per_device")), True),
        ("peak", lambda r: fnum(r.get("peak_tflops")), True),
        ("MFU", lambda r: fpct(r.get("mfu")), True),
        ("mean power W", lambda r: fnum(r.get("gpu_power_w")), True),
        ("J/sample", lambda r: fsig(r.get("joules_per_sample")), True),
        ("GPU util", lambda r: fnum(r.get("gpu_util_pct")), True),
        ("throttled", flag_text, False),
        ("fallbacks", lambda r: ftext(r.get("fallbacks")), False),
        ("interference", lambda r: ftext(r.get("interference")), False),
    ]
    return [
        table(
            "Precision, compilation, MFU and energy per run",
            spec,
            rows,
            note=(
                "TFLOP/s per device = samples/s per device x training FLOPs per sample (3 x the "
                "analytic forward count); MFU = that / the device's peak for the precision that "
                "ran (docs/mfu.md). Power and J/sample: all the run's GPUs in the measured window "
                "(docs/telemetry.md). Bold: a fallback, throttled clocks, or a busy or shared node "
                "at the start: such a run is not a clean measurement."
            ),
            flag=lambda r: _flagged(r, missing),
        )
    ]
