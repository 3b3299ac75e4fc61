"""The language models' comparisons: each sharding mode against DDP and each activation
checkpointing mode against none, at the same scale, sequence length and micro-batch
(docs/metrics.md#language-model-comparisons, docs/reports.md).

A *cell* is everything a configuration fixes but the two variant keys (``parallel`` and
``activation_checkpointing``): framework, model, precision, device, backend, transport, nodes,
ranks per node, micro-batch, sequence length, gradient accumulation and compilation. Within a
cell, at each checkpointing mode, every ``parallel`` mode is compared with ``ddp``; at each
``parallel`` mode, ``selective`` and ``full`` checkpointing with ``none``.

The statistic is the one of the rest of the report (:mod:`ddlbench.analyse.stats`): the change
of the geometric means of tokens/s over the complete repeats, ``exp(l_v - l_r) - 1``, with the
Welch t interval of the difference of the mean logs (:func:`~.stats.ratio_interval`), and the
verdict is :func:`~.verdicts.change_verdicts`' (``min_gain`` the threshold): ``faster`` and
``slower`` (significant and at least the threshold), ``same`` (within +/- the threshold with
confidence: two one-sided tests), ``inconclusive`` (with the repeats that would decide). At the
same sequence length the change of tokens/s is the change of samples/s, the figure the
configurations' statistics hold.

A side with a complete run that the pre-flight found started on a busy node (``preflight_busy``:
other processes held the node's CPUs or GPUs) is not a clean measurement: the comparison says so
(``busy``) and its verdict is ``inconclusive`` whatever the test says, the test's own verdict
kept in the reason (docs/reports.md).
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import pandas as pd

from ..values import missing
from .lm_memory import wraps_one_rank
from .verdicts import (
    IMPROVED,
    MAX_REPEATS,
    REGRESSED,
    UNCHANGED,
    VerdictSettings,
    busy_note,
    busy_runs,
    busy_verdict,
    change_intervals,
    change_verdicts,
)

#: the reference of each comparison: (variant key, the value the others are compared with)
REFERENCES = (("parallel", "ddp"), ("activation_checkpointing", "none"))
#: fields of the runs table that a cell fixes besides the configuration's fields
LM_FIELDS = ("seq_len", "grad_accum", "compile")
VARIANT_KEYS = tuple(k for k, _ in REFERENCES)
#: the verdicts in words: change_verdicts' names for a change of throughput
WORDS = {IMPROVED: "faster", REGRESSED: "slower", UNCHANGED: "same"}

COLUMNS = [
    "key",
    "variant",
    "reference",
    "parallel",
    "activation_checkpointing",
    "framework",
    "model",
    "precision",
    "nodes",
    "tasks_per_node",
    "world_size",
    "batch_size",
    "seq_len",
    "grad_accum",
    "compile",
    "variant_group",
    "reference_group",
    "variant_repeats",
    "reference_repeats",
    "variant_tokens_per_s",
    "reference_tokens_per_s",
    "change",
    "change_ci95_low",
    "change_ci95_high",
    "change_test_ci_low",
    "change_test_ci_high",
    "test_ci_level",
    "p_value",
    "verdict",
    "reason",
    "repeats_needed",
    "repeats_capped",
    "variant_busy",
    "reference_busy",
    "busy",
]


def _lm_configs(runs: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """The configurations of transformer runs, with their variant keys and LM fields."""
    if not len(configs) or "parallel" not in runs or not runs["parallel"].notna().any():
        return pd.DataFrame()
    lm = runs[runs["parallel"].notna()].sort_values(["group", "repeat"])
    fields = [c for c in (*VARIANT_KEYS, *LM_FIELDS) if c in lm]
    first = lm.groupby("group", sort=True)[fields].first()
    own = configs.drop(columns=[f for f in fields if f in configs])  # the runs' values win
    c = own.set_index("group").join(first, how="inner").reset_index()
    for f in (*VARIANT_KEYS, *LM_FIELDS):
        if f not in c:
            c[f] = None
    c["activation_checkpointing"] = c["activation_checkpointing"].fillna("none")
    return c


def _cell_key(r: pd.Series, fields: Sequence[str]) -> Tuple[str, ...]:
    words = [r.get(f) for f in fields]
    return tuple("" if missing(w) else str(w) for w in words)


def _sides(
    c: pd.DataFrame, key: str, ref: str, fields: Sequence[str]
) -> List[Tuple[pd.Series, pd.Series]]:
    """(variant, reference) for every configuration with a reference in its cell: the same
    ``fields``, LM fields and other variant key."""
    other = next(k for k in VARIANT_KEYS if k != key)
    cell = [*fields, *LM_FIELDS, other]
    refs: Dict[Tuple[str, ...], pd.Series] = {}
    for _, r in c[c[key] == ref].iterrows():
        refs.setdefault(_cell_key(r, cell), r)
    pairs = []
    for _, r in c[c[key] != ref].sort_values([key, "group"]).iterrows():
        base = refs.get(_cell_key(r, cell))
        if base is not None:
            pairs.append((r, base))
    return pairs


def _reason(v: pd.Series, r: pd.Series, key: str, verdict, vs: VerdictSettings) -> str:
    """Why: the test's reason, in this table's words where the two lack repeats."""
    n_v, n_r = int(v["repeats"] or 0), int(r["repeats"] or 0)
    gain = f"{100 * vs.min_gain:g} %"
    if min(n_v, n_r) < 2:
        why = (
            f"fewer than 2 complete repeats ({v[key]}: {n_v}, {r[key]}: {n_r}): no interval "
            "and no test"
        )
        need = verdict.repeats_needed
        if verdict.repeats_capped or not math.isnan(need):
            count = f"more than {MAX_REPEATS}" if verdict.repeats_capped else f"about {int(need)}"
            why += f"; {count} repeats each would resolve a {gain} difference"
        return why
    if verdict.verdict in (IMPROVED, REGRESSED):
        return f"significant at alpha {vs.alpha:g} and at least {gain}"
    return verdict.reason


def _busy(row: dict, v: pd.Series, r: pd.Series, busy: Dict[str, int]) -> None:
    """The busy-node counts of both sides, in words (``busy``), and the verdict they allow
    (:func:`~.verdicts.busy_verdict`: a decisive one becomes ``inconclusive``)."""
    row["variant_busy"] = busy.get(str(v["group"]), 0)
    row["reference_busy"] = busy.get(str(r["group"]), 0)
    what = "" if row["key"] == "parallel" else "checkpointing "
    row["busy"] = busy_note(
        (
            (what + row["variant"], row["variant_busy"], row["variant_repeats"]),
            (what + row["reference"], row["reference_busy"], row["reference_repeats"]),
        )
    )
    row["verdict"], row["reason"] = busy_verdict(
        row["verdict"], row["reason"], row["busy"], tuple(WORDS.values())
    )


def _row(key: str, v: pd.Series, r: pd.Series, vs: VerdictSettings) -> dict:
    """One comparison: the change of tokens/s of ``v`` against ``r``, its interval and test."""
    seq = float(v["seq_len"]) if not missing(v.get("seq_len")) else math.nan
    row = {"key": key, "variant": str(v[key]), "reference": str(r[key])}
    for f in COLUMNS[3 : COLUMNS.index("compile") + 1]:  # what the comparison is at
        row[f] = v.get(f)
    row.update(variant_group=v["group"], reference_group=r["group"])
    n_v, n_r = int(v["repeats"] or 0), int(r["repeats"] or 0)
    row.update(variant_repeats=n_v, reference_repeats=n_r)
    row["variant_tokens_per_s"] = float(v["throughput_gmean"]) * seq
    row["reference_tokens_per_s"] = float(r["throughput_gmean"]) * seq
    lv = (v["throughput_log_mean"], v["throughput_log_sd"], n_v)
    lr = (r["throughput_log_mean"], r["throughput_log_sd"], n_r)
    row.update(change_intervals(lv, lr, vs))
    if not n_v or not n_r:
        missing_side = v["group"] if not n_v else r["group"]
        row.update(change=math.nan, p_value=math.nan, verdict="no data", repeats_needed=math.nan)
        row["repeats_capped"] = False
        row["reason"] = f"no complete run of {missing_side}"
        return row
    verdict = change_verdicts(*lr, *lv, vs)[0]
    row.update(change=verdict.change, p_value=verdict.p_value)
    row.update(verdict=WORDS.get(verdict.verdict, verdict.verdict))
    row.update(reason=_reason(v, r, key, verdict, vs), repeats_needed=verdict.repeats_needed)
    row["repeats_capped"] = verdict.repeats_capped
    return row


def _unwrapped(r: pd.Series) -> bool:
    """A configuration of one rank whose model no mode wrapped: no process group there,
    unless ``ddp_single_rank`` asked for one (docs/workloads.md#parallelism)."""
    if missing(r.get("world_size")) or int(r["world_size"]) > 1:
        return False
    return not wraps_one_rank(r.get("framework_options"))


def lm_comparisons(
    runs: pd.DataFrame,
    configs: pd.DataFrame,
    fields: Sequence[str],
    settings: Optional[VerdictSettings] = None,
) -> pd.DataFrame:
    """One row per comparison (columns :data:`COLUMNS`) of the configurations ``configs``
    (:func:`~.analysis.config_stats`) whose ``fields`` are equal; empty without transformer
    runs or without a reference configuration in any cell."""
    settings = settings or VerdictSettings()
    c = _lm_configs(runs, configs)
    busy = busy_runs(runs)
    rows = []
    for key, ref in REFERENCES if len(c) else ():
        for v, r in _sides(c, key, ref, fields):
            if key == "parallel" and _unwrapped(v) and _unwrapped(r):
                continue  # one rank wraps no mode: both ran the same program
            rows.append(_row(key, v, r, settings))
            _busy(rows[-1], v, r, busy)
    return pd.DataFrame(rows, columns=COLUMNS)
