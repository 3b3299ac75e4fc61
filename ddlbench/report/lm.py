"""The report's language-model table: per transformer run, tokens/s, MFU under each convention,
peak memory per rank measured against the prediction, and the time to the first step
(docs/reports.md, docs/mfu.md#language-models, docs/memory.md). Shown in the "Precision, MFU and
energy" section; absent when no run is a transformer."""

from __future__ import annotations

from typing import Any, Optional

import pandas as pd

from ..analyse.lm_memory import predict_memory
from .format import fbytes, fnum, fpct, fsig, ftext, missing
from .table import Column, Row, TableSpec, col, text

NOTE = (
    "tokens/s = samples/s x seq_len (global, over the measured window). MFU under each "
    "convention (docs/mfu.md#language-models): PaLM's 6N + 12LdS per token, Megatron's with "
    "causal attention halved, and hardware FLOP utilisation counting checkpointing's "
    "recomputation; N excludes the input embedding tables. A value above 100 % is not shown "
    "(flag): the convention or the peak is wrong. Memory: the busiest rank's peak (GPU: "
    "allocated; CPU: resident set of live tensors) and predict_memory's (docs/memory.md). "
    "Start-up: imports, process group, model build and sharding, and (compiled runs) the "
    "compilation in the first step."
)


def _measured(r: Row) -> Any:
    gpu = r.get("peak_allocated_bytes")
    return gpu if not missing(gpu) else r.get("peak_rss_model_bytes")


def _predicted(r: pd.Series) -> Optional[float]:
    try:
        return predict_memory(
            str(r["model"]),
            int(r["seq_len"]),
            int(r["batch_size"]),
            str(r.get("precision") or "fp32"),
            str(r["parallel"]),
            str(r["activation_checkpointing"]),
            int(r["world_size"]),
            int(r["tasks_per_node"]),
        )["total"]
    except (KeyError, TypeError, ValueError):
        return None


def lm_rows(runs: pd.DataFrame) -> Optional[pd.DataFrame]:
    """The transformer runs, with their predicted memory (None when there are none)."""
    if "parallel" not in runs or not runs["parallel"].notna().any():
        return None
    rows = runs[runs["parallel"].notna()].copy()
    rows["memory_predicted_bytes"] = [_predicted(r) for _, r in rows.iterrows()]
    return rows.sort_values(["group", "run_id"])


def _ratio(r: Row) -> str:
    measured, predicted = _measured(r), r.get("memory_predicted_bytes")
    if missing(measured) or missing(predicted) or not predicted:
        return "-"
    return f"{float(measured) / float(predicted):.2f}"


LANGUAGE_MODELS = TableSpec(
    section="efficiency",
    title="Language models: tokens/s, MFU per convention, memory per rank, start-up",
    source="runs",
    columns=[
        text("run", "run_id"),
        text("parallel", "parallel", ftext),
        text("checkpointing", "activation_checkpointing", ftext),
        col("seq", "seq_len", fnum),
        col("tokens/s", "tokens_per_s", fnum),
        col("per device", "tokens_per_s_per_device", fnum),
        col("MFU PaLM", "mfu_palm", fpct),
        col("MFU Megatron", "mfu_megatron", fpct),
        col("HFU", "hfu", fpct),
        text("MFU flag", "mfu_flag", ftext),
        Column("memory measured", lambda r: fbytes(_measured(r))),
        col("predicted", "memory_predicted_bytes", fbytes),
        Column("ratio", _ratio),
        col("import s", "startup_import_s", fsig),
        col("process group s", "startup_process_group_s", fsig),
        col("build+shard s", "startup_build_shard_s", fsig),
        col("compile s", "compile_s", fsig),
    ],
    select=lm_rows,
    note=NOTE,
    flag=lambda r: not missing(r.get("mfu_flag")),
)
