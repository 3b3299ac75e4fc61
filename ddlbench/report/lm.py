"""The report's language-model table: per transformer run, tokens/s, MFU under each convention,
peak memory per rank measured against the prediction, and the time to the first step
(docs/reports.md, docs/mfu.md#language-models, docs/memory.md). Shown in the "Precision, MFU and
energy" section; absent when no run is a transformer."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import pandas as pd

from ..analyse.lm_memory import predict_memory, wraps_one_rank
from ..campaign.paths import LM_COMPARISONS_CSV
from ..diskfull import atomic_path
from .format import fbytes, fint, fnum, fpct, fsig, ftext, missing
from .table import Column, Row, TableSpec, col, text

NOTE = (
    "parallel: the lm.parallel mode, ddp being data parallelism with the weights replicated "
    "on every rank, whatever the framework (PyTorch DDP, Horovod, TensorFlow's and Keras' "
    "distribution strategies); fsdp, fsdp-grad-op, hsdp and zero1 shard (PyTorch only). "
    "tokens/s = samples/s x seq_len (global, over the measured window). TFLOP/s per device = "
    "tokens/s per device x PaLM's FLOPs per token (CPU runs too). MFU under each "
    "convention (docs/mfu.md#language-models): PaLM's 6N + 12LdS per token, Megatron's with "
    "causal attention halved, and hardware FLOP utilisation counting checkpointing's "
    "recomputation; N excludes the input embedding tables. A value above 100 % is not shown "
    "(flag): the convention or the peak is wrong. Memory: the busiest rank's peak (GPU: "
    "allocated; CPU: resident set of live tensors) and predict_memory's for the run, its "
    "micro-batches per step included (docs/memory.md). "
    "Start-up: imports, process group, model build and sharding, and (compiled runs) the "
    "compilation in the first step."
)


def _measured(r: Row) -> Any:
    gpu = r.get("peak_allocated_bytes")
    return gpu if not missing(gpu) else r.get("peak_rss_model_bytes")


def _grad_accum(r: pd.Series) -> int:
    """A run's micro-batches per step (1 where the runs table has none)."""
    accum = r.get("grad_accum")
    return 1 if missing(accum) else int(accum)


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
            one_rank_wrapped=wraps_one_rank(r.get("framework_options")),
            grad_accum=_grad_accum(r),
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


def seq_len_of(runs: pd.DataFrame, group: Any) -> Optional[int]:
    """The sequence length of a configuration's transformer runs (None: not a transformer, or
    the runs disagree)."""
    if "parallel" not in runs or "seq_len" not in runs:
        return None
    mine = runs[(runs["group"] == group) & runs["parallel"].notna()]
    seqs = set(pd.to_numeric(mine["seq_len"], errors="coerce").dropna().astype(int))
    return seqs.pop() if len(seqs) == 1 else None


def _not_ok(r: Row) -> bool:
    """A run that did not complete (its figures are dashes)."""
    status = r.get("status")
    return not missing(status) and status != "ok"


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
        Column("status", lambda r: ftext(r.get("status")), numeric=False),  # why a row is dashes
        text("parallel", "parallel", ftext),
        text("checkpointing", "activation_checkpointing", ftext),
        col("seq", "seq_len", fint),
        col("tokens/s", "tokens_per_s", fnum),
        col("per device", "tokens_per_s_per_device", fnum),
        # the collector's, PaLM's FLOPs per token (collect/lm_columns.py, docs/mfu.md)
        Column("TFLOP/s per device", lambda r: fsig(r.get("tflops_per_device"))),
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
    flag=lambda r: not missing(r.get("mfu_flag")) or _not_ok(r),
)


# ------------------------------------------------------------------ comparisons

#: the summary's comparison sentences, at most (the table has them all)
MAX_SENTENCES = 12


def comparison_cell(r: Row) -> str:
    """``fsdp vs ddp``, ``checkpointing full vs none``."""
    what = "" if r["key"] == "parallel" else "checkpointing "
    return f"{what}{r['variant']} vs {r['reference']}"


def at_cell(r: Row) -> str:
    """Where the two were compared: the model, precision, scale, sequence, micro-batch and the
    other variant key's value (compilation and accumulation when set)."""
    parts = [
        f"{ftext(r['framework'])} {ftext(r['model'])} {ftext(r['precision'])}".strip(),
        f"{fint(r['world_size'])} ranks ({fint(r['nodes'])}x{fint(r['tasks_per_node'])})",
        f"seq {fint(r['seq_len'])}",
        f"micro-batch {fint(r['batch_size'])}",
    ]
    if not missing(r.get("grad_accum")) and int(r["grad_accum"]) > 1:
        parts.append(f"{int(r['grad_accum'])} micro-batches per step")
    if r["key"] == "parallel":
        parts.append(f"checkpointing {ftext(r['activation_checkpointing'])}")
    else:
        parts.append(ftext(r["parallel"]))
    if str(r.get("compile") or "") not in ("", "off", "eager"):
        parts.append(str(r["compile"]))
    return ", ".join(parts)


def _signed(v: Any) -> str:
    return "-" if missing(v) else f"{100 * float(v):+.1f} %"


def change_ci_cell(r: Row) -> str:
    """The change's interval that the verdict's one-sided tests read (90 % at alpha 0.05)."""
    lo, hi = r.get("change_test_ci_low"), r.get("change_test_ci_high")
    return "-" if missing(lo) or missing(hi) else f"{_signed(lo)} to {_signed(hi)}"


def _level(r: Row) -> str:
    level = r.get("test_ci_level")
    return f"{100 * float(level):g} % CI" if not missing(level) else "CI"


def p_cell(r: Row) -> str:
    p = r.get("p_value")
    if missing(p):
        return "-"
    return "p < 0.001" if float(p) < 0.001 else f"p = {float(p):.3f}"


def verdict_words(r: Row) -> str:
    """The verdict, and beside it whether a side started on a busy node (the pre-flight)."""
    busy = "" if missing(r.get("busy")) else " (busy node)"
    return f"{ftext(r['verdict'])}{busy}"


def comparison_sentence(r: Row) -> str:
    """One comparison in words: its one statistic, interval, test and verdict."""
    head = f"{comparison_cell(r)} at {at_cell(r)}"
    if r["verdict"] == "no data":
        return f"{head}: no comparison ({r['reason']})."
    ci = change_ci_cell(r)
    ci = f"{_level(r)} {ci}" if ci != "-" else "no interval"
    p = p_cell(r)
    p = f", {p}" if p != "-" else ""
    return (
        f"{head}: tokens/s {_signed(r['change'])} ({ci}){p}, verdict {r['verdict']} "
        f"({r['reason']})."
    )


def comparison_sentences(comparisons: pd.DataFrame) -> List[str]:
    """The summary's sentences: the first :data:`MAX_SENTENCES` comparisons, then a count."""
    if not len(comparisons):
        return []
    out = [comparison_sentence(r) for _, r in comparisons.head(MAX_SENTENCES).iterrows()]
    if len(comparisons) > MAX_SENTENCES:
        more = len(comparisons) - MAX_SENTENCES
        out.append(f"{more} more language-model comparisons are in their table.")
    return out


def comparisons_note(settings: Any) -> str:
    g = fpct(settings.min_gain, 0) if settings is not None else "5 %"
    a = f"{settings.alpha:g}" if settings is not None else "0.05"
    return (
        "Each sharding mode against DDP, and each activation-checkpointing mode against none, "
        "at the same scale, sequence length, micro-batch and everything else. tokens/s: the "
        "geometric mean over the complete repeats; change: the ratio of the geometric means "
        "minus 1, with the Welch t interval of the difference of the mean logs at 90 %, the "
        "interval the one-sided tests read: faster or slower always has one that excludes 0 "
        f"(docs/metrics.md#language-model-comparisons). faster / "
        f"slower: one-sided Welch test on the logs at alpha {a} and a change of at least {g}; "
        f"same: within +/- {g} with confidence (two one-sided tests); inconclusive otherwise, "
        "with the repeats that would decide. With fewer than 2 complete repeats of either "
        "side there is no interval and no test."
    )


LM_COMPARISONS = TableSpec(
    section="efficiency",
    title="Language models: sharding and checkpointing against DDP and none (tokens/s)",
    source="lm_comparisons",
    columns=[
        Column("comparison", comparison_cell, numeric=False),
        Column("at", at_cell, numeric=False),
        Column("repeats", lambda r: f"{r['variant_repeats']} / {r['reference_repeats']}"),
        col("tokens/s", "variant_tokens_per_s", fnum),
        col("reference tokens/s", "reference_tokens_per_s", fnum),
        Column("change", lambda r: _signed(r["change"])),
        Column("90 % CI", change_ci_cell),
        Column("p", p_cell),
        Column("verdict", lambda r: verdict_words(r), numeric=False),
        text("why", "reason", ftext),
    ],
    note=comparisons_note,
)


def write_comparisons(comparisons: pd.DataFrame, out_dir: Path) -> Optional[Path]:
    """``lm_comparisons.csv`` in the report folder: every column of
    :data:`~ddlbench.analyse.lm_verdicts.COLUMNS` (None, and no file, without comparisons; a
    file from an earlier report is removed then)."""
    path = out_dir / LM_COMPARISONS_CSV
    if not len(comparisons):
        path.unlink(missing_ok=True)
        return None
    with atomic_path(path) as tmp:
        comparisons.to_csv(tmp, index=False, float_format="%.6g")
    return path
