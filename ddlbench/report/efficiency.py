"""Report table: what each configuration applied, its model FLOP utilisation, energy and
interference.

One row per configuration (``group``: the repeats of one run), medians over its runs
(docs/mfu.md, docs/telemetry.md); the per-run figures are in ``runs.csv``. Bold rows: a
fallback was taken, clocks were throttled, or a run started on a busy or shared node.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pandas as pd

from . import captions
from .format import fnum, fpct, fsig, ftext, missing
from .table import Column, Table, TableSpec, col, text

#: a run belongs in the table when one of these is known, or a rank logged (``ranks_present``)
COLUMNS = ("tflops_per_device", "joules_per_sample", "interference")


def _flagged(r: Any) -> bool:
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


def efficiency_rows(runs: pd.DataFrame) -> Optional[pd.DataFrame]:
    """One row per configuration, or None when no run has the columns (older data)."""
    if not all(c in runs for c in COLUMNS):
        return None
    have = runs[[c for c in COLUMNS]].notna().any(axis=1)
    if "ranks_present" in runs:
        have |= pd.to_numeric(runs["ranks_present"], errors="coerce").fillna(0) > 0
    rows = runs[have & (runs["mode"] != "allreduce")]
    if not len(rows):
        return None
    return by_configuration(rows)


def _transformer_rows(runs: pd.DataFrame) -> Optional[pd.DataFrame]:
    """:func:`efficiency_rows` with no image layout for the transformer runs (their achieved
    TFLOP/s and MFU are the collector's, under PaLM's FLOPs per token: collect/lm_columns.py)."""
    if "parallel" in runs and "layout" in runs:
        runs = runs.assign(layout=runs["layout"].where(runs["parallel"].isna(), None))
    return efficiency_rows(runs)


LM_NOTE = (
    " Transformer runs: TFLOP/s per device = tokens/s per device x PaLM's training FLOPs per "
    "token, MFU that over the peak (the language-model table has every convention); no image "
    "layout; compile: what the run applied (TensorFlow's and Keras' train step is a tf.function)."
)


def _throttled(v: Any, reasons: Any) -> str:
    if missing(v):
        return "-"
    return "THROTTLED " + ftext(reasons) if v else "no"


EFFICIENCY = TableSpec(
    section="efficiency",
    title="Precision, compilation, MFU and energy per configuration (median over runs)",
    source="runs",
    columns=[
        text("configuration", "group"),
        col("runs", "runs", str),
        text("precision", "precision", ftext),
        text("layout", "layout", ftext),
        text("compile", "compile", ftext),
        col("compile s", "compile_s", fsig),
        col("TFLOP/s per device", "tflops_per_device", fsig),
        col("peak", "peak_tflops", fnum),
        col("MFU", "mfu", fpct),
        col("mean power W", "gpu_power_w", fnum),
        col("J/sample", "joules_per_sample", fsig),
        col("GPU util", "gpu_util_pct", fnum),
        Column("throttled", lambda r: _throttled(r["gpu_throttled"], r["throttle_reasons"]), False),
        text("fallbacks", "fallbacks", ftext),
        text("interference", "interference", ftext),
    ],
    select=_transformer_rows,
    note=captions.EFFICIENCY_NOTE + LM_NOTE,
    flag=_flagged,
)


def efficiency_tables(runs: pd.DataFrame) -> List[Table]:
    """``[Table]`` for the report, or ``[]`` when no run has the columns (older data)."""
    table = EFFICIENCY.table(runs)
    return [table] if table is not None else []
