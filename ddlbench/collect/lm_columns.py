"""Run columns of the transformer language models: tokens/s, MFU under each convention, peak
memory per rank and the time to the first step, from the ranks' meta and summary records
(docs/workloads.md#transformers, docs/mfu.md#language-models). Null for the CNN runs.

A transformer run also fills the run table's ``tflops_per_device`` and ``mfu``
(:data:`LM_MFU_COLUMNS`, null for it in ``gpu_columns.py``: it records FLOPs per token, not
per sample) under PaLM's convention (``TFLOPS_CONVENTION``), by ``lm_tflops``, the one formula
that the report reads through these columns.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from ddlbench.analyse.device_peaks import peak_tflops
from ddlbench.analyse.lm_mfu import MFU_COLUMN, TFLOPS_CONVENTION, lm_tflops, lm_utilisation
from ddlbench.collect.reader import meta_and_summaries

LM_COLUMNS = [
    "seq_len",
    "parallel",
    "activation_checkpointing",
    "grad_accum",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "flops_per_token_palm",
    "flops_per_token_megatron",
    "flops_per_token_hfu",
    "mfu_palm",
    "mfu_megatron",
    "hfu",
    "mfu_flag",
    "peak_rss_model_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "startup_import_s",
    "startup_process_group_s",
    "startup_build_shard_s",
]
#: the run table's achieved TFLOP/s and MFU (``gpu_columns.MFU_COLUMNS``): a transformer run's
#: under PaLM's FLOPs per token (MFU null above 100 %, as ``mfu_palm``)
LM_MFU_COLUMNS = ("tflops_per_device", "mfu")


def _num(v: Any) -> Optional[float]:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _largest(summaries: List[dict], key: str) -> Optional[float]:
    values = [_num(s.get(key)) for s in summaries]
    present = [v for v in values if v is not None]
    return max(present) if present else None


def lm_fields(row: Dict[str, Any], metas: List[dict], summaries: List[dict]) -> Dict[str, Any]:
    """One run's language-model columns (all None for a run without ``lm`` in its meta), and,
    for a transformer run only, its :data:`LM_MFU_COLUMNS`."""
    out: Dict[str, Any] = {c: None for c in LM_COLUMNS}
    meta = metas[0] if metas else {}
    lm = meta.get("lm")
    if not isinstance(lm, dict):
        return out
    for key in ("seq_len", "parallel", "activation_checkpointing", "grad_accum"):
        out[key] = lm.get(key)
    per_sample = _num(meta.get("tokens_per_sample"))
    flops = meta.get("flops_per_token") or {}
    for convention in ("palm", "megatron", "hfu"):
        out[f"flops_per_token_{convention}"] = _num(flops.get(convention))
    if per_sample:
        for col, src in (
            ("tokens_per_s", "throughput"),
            ("tokens_per_s_per_device", "throughput_per_device"),
        ):
            value = _num(row.get(src))
            out[col] = None if value is None else value * per_sample
    name = meta.get("device_name")
    peak = peak_tflops(name if isinstance(name, str) else None, meta.get("precision"))
    out.update(lm_utilisation(out["tokens_per_s_per_device"], flops, peak))
    out["tflops_per_device"] = lm_tflops(
        out["tokens_per_s_per_device"], flops.get(TFLOPS_CONVENTION)
    )
    out["mfu"] = out[MFU_COLUMN[TFLOPS_CONVENTION]]
    for key in ("peak_rss_model_bytes", "peak_allocated_bytes", "peak_reserved_bytes"):
        out[key] = _largest(summaries, key)
    startup = [m.get("startup") or {} for m in metas]
    for key in ("import_s", "process_group_s", "build_shard_s"):
        out[f"startup_{key}"] = _largest(startup, key)
    return out


def add_lm_columns(runs: pd.DataFrame, kept: Sequence[Any]) -> pd.DataFrame:
    """``runs`` with :data:`LM_COLUMNS` (largest rank for memory and start-up times) and the
    transformer runs' :data:`LM_MFU_COLUMNS` (the other runs keep theirs)."""
    metas, summaries = meta_and_summaries(kept)
    rows = []
    for row in runs.to_dict("records"):
        key = str(row["run_dir"]).rstrip("/").rsplit("/", 1)[-1]
        rows.append(lm_fields(row, metas.get(key, []), summaries.get(key, [])))
    out = runs.copy()
    names = [*LM_COLUMNS, *LM_MFU_COLUMNS]
    extra = pd.DataFrame(rows, columns=names, index=runs.index)
    for c in LM_COLUMNS:
        out[c] = extra[c]
    lm = pd.Series([LM_MFU_COLUMNS[0] in r for r in rows], index=runs.index, dtype=bool)
    for c in LM_MFU_COLUMNS:
        if c in out:
            out[c] = out[c].where(~lm, pd.to_numeric(extra[c], errors="coerce"))
    return out
