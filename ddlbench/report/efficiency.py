"""Report table: what each configuration applied, its model FLOP utilisation, energy and
interference.

One row per configuration (``group``: the repeats of one run), medians over its runs
(docs/mfu.md, docs/telemetry.md); the per-run figures are in ``runs.csv``. Bold rows: a
fallback was taken, clocks were throttled, or a run started on a busy or shared node.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

import pandas as pd

#: a run belongs in the table when one of these is known, or a rank logged (``ranks_present``)
COLUMNS = ("tflops_per_device", "joules_per_sample", "interference")


def _flagged(r: Any, missing: Callable[[Any], bool]) -> bool:
    def true(v: Any) -> bool:
        return not missing(v) and bool(v)

    return true(r.get("fallbacks")) or true(r.get("gpu_throttled")) or true(r.get("interference"))


def _median(values: pd.Series) -> Any:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return float(v.median()) if len(v) else None


def _texts(values: pd.Series) -> Any:
    seen: List[str] = []
    for v in values:
        for part in str(v).split("; ") if isinstance(v, str) and v else []:
            if part not in seen:
                seen.append(part)
    return "; ".join(seen) or None


def _any_flag(values: pd.Series) -> Any:
    known = [bool(v) for v in values if isinstance(v, (bool, int)) or hasattr(v, "item")]
    return any(known) if known else None


def by_configuration(rows: pd.DataFrame) -> pd.DataFrame:
    """Medians over each configuration's runs; flags if any run has them."""
    out = []
    for group, g in rows.groupby("group", sort=True):
        first = g.iloc[0]
        busy = g["interference"].notna() & (g["interference"] != "")
        rec: Dict[str, Any] = {"group": group, "runs": len(g)}
        for c in ("precision", "layout", "compile", "peak_tflops"):
            rec[c] = first.get(c)
        for c in ("compile_s", "tflops_per_device", "mfu", "gpu_power_w", "joules_per_sample"):
            rec[c] = _median(g[c])
        rec["gpu_util_pct"] = _median(g["gpu_util_pct"])
        rec["gpu_throttled"] = _any_flag(g["gpu_throttled"].dropna())
        rec["throttle_reasons"] = _texts(g["throttle_reasons"])
        rec["fallbacks"] = _texts(g["fallbacks"])
        rec["interference"] = (
            f"{int(busy.sum())} of {len(g)} runs: " + str(g.loc[busy, "interference"].iloc[0])
            if busy.any()
            else None
        )
        out.append(rec)
    return pd.DataFrame(out)


def efficiency_tables(runs: pd.DataFrame, table: Callable, fmt: Dict[str, Callable]) -> List[Any]:
    """``[Table]`` for the report, or ``[]`` when no run has the columns (older data)."""
    if not len(runs) or not all(c in runs for c in COLUMNS):
        return []
    have = runs[[c for c in COLUMNS]].notna().any(axis=1)
    if "ranks_present" in runs:
        have |= pd.to_numeric(runs["ranks_present"], errors="coerce").fillna(0) > 0
    rows = runs[have & (runs["mode"] != "allreduce")]
    if not len(rows):
        return []
    rows = by_configuration(rows)
    fnum, fsig, fpct, ftext, missing = (
        fmt["fnum"], fmt["fsig"], fmt["fpct"], fmt["ftext"], fmt["missing"]
    )  # fmt: skip

    def flag_text(r: Any) -> str:
        if missing(r.get("gpu_throttled")):
            return "-"
        return "THROTTLED " + ftext(r.get("throttle_reasons")) if r["gpu_throttled"] else "no"

    spec = [
        ("configuration", lambda r: r["group"], False),
        ("runs", lambda r: str(r["runs"]), True),
        ("precision", lambda r: ftext(r.get("precision")), False),
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
            "Precision, compilation, MFU and energy per configuration (median over runs)",
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
