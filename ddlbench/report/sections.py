"""The report's tables, described as data: one :class:`TableSpec` per table, by section.

To add a table: describe it in :data:`SPECS` (its analysis table, rows, columns, note); the
templates show every table of a section they know. Notes that restate a formula come from
:mod:`.captions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from ..analyse.analysis import Analysis
from ..analyse.series import RATE_APPLIED
from . import captions
from .efficiency import EFFICIENCY
from .format import (
    fbytes,
    fint,
    fms,
    fnum,
    fnum_in,
    fpct,
    fpct_in,
    fpct_range_in,
    frange,
    frange_in,
    fsig,
    fspeedup,
    ftext,
    missing,
)
from .lm import LANGUAGE_MODELS, LM_COMPARISONS
from .missing import ended_cause, ended_label
from .table import Column, Row, Table, TableSpec, col, tables_by_section, text

# ------------------------------------------------------------------ cells


def help_cell(r: Row) -> str:
    """The last step's "more devices help?" verdict and why."""
    v = r.get("more_devices_help")
    why = ftext(r.get("more_devices_reason"))
    if missing(v) or not v:
        return f"- ({why})" if why else "-"
    return f"{v}: {why}"


def knee_cell(r: Row) -> str:
    """The knee: one N, or the range of N it lies in."""
    lo, hi = r.get("knee_low"), r.get("knee_high")
    if missing(lo):
        why = ftext(r.get("knee_reason"))
        return f"- ({why})" if why else "-"
    return fint(lo) if int(lo) == int(hi) else f"{int(lo)} - {int(hi)}"


def step_cell(r: Row) -> str:
    """The verdict on the step from the previous N, with its gain."""
    v = r.get("step_verdict")
    if missing(v) or not v:
        return ""
    gain = "-" if missing(r["gain"]) else f"{100 * float(r['gain']):+.1f} %"
    return f"{v} ({fint(r['step_from'])} -> {fint(r['devices'])}: {gain})"


def efficiency_ci_cell(r: Row) -> str:
    """The efficiency's 95 % interval, both ends to the digits it supports."""
    lo, hi = r.get("efficiency_ci95_low"), r.get("efficiency_ci95_high")
    if not missing(r.get("base_devices")) and r["devices"] == r["base_devices"]:
        return "(base)"
    return fpct_range_in(lo, hi)


def _efficiency_cell(r: Row) -> str:
    """The efficiency to the digits of its 95 % interval."""
    return fpct_in(r["efficiency"], r.get("efficiency_ci95_low"), r.get("efficiency_ci95_high"))


def _scaled_interval(r: Row, key: str, low: str, high: str) -> Any:
    """``r[key]``'s interval: the throughput's (``low``, ``high``) scaled as ``key`` is (per
    device: by 1 / N); none when a value is missing."""
    tp, lo, hi = r.get("throughput_gmean"), r.get(low), r.get(high)
    if any(missing(v) for v in (tp, lo, hi, r.get(key))) or float(tp) <= 0:
        return None, None
    k = float(r[key]) / float(tp)
    return float(lo) * k, float(hi) * k


def _per_device_cell(r: Row) -> str:
    return fnum_in(r["per_device"], *_scaled_interval(r, "per_device", "ci95_low", "ci95_high"))


def _efficiency_at_max_cell(r: Row) -> str:
    lo, hi = r.get("efficiency_at_max_ci95_low"), r.get("efficiency_at_max_ci95_high")
    return fpct_in(r["efficiency_at_max"], lo, hi)


def _speedup_cell(r: Row) -> str:
    lo, hi = r.get("efficiency_ci95_low"), r.get("efficiency_ci95_high")
    return fspeedup(r.get("speedup"), r.get("efficiency"), lo, hi)


def accuracy_ci_cell(r: Row) -> str:
    """The final accuracy's 95 % interval, to the digits it supports (at most two)."""
    lo, hi = r.get("final_accuracy_ci95_low"), r.get("final_accuracy_ci95_high")
    return fpct_range_in(lo, hi, 2)


def _accuracy_cell(r: Row) -> str:
    lo, hi = r.get("final_accuracy_ci95_low"), r.get("final_accuracy_ci95_high")
    return fpct_in(r["final_accuracy_mean"], lo, hi, 2)


def _ci(header: str, low: str, high: str) -> Column:
    """An observed range (min - max), as measured."""
    return Column(header, lambda r: "-" if missing(r[low]) else frange(r[low], r[high]))


def _interval(header: str, low: str, high: str) -> Column:
    """A 95 % interval, both ends to the digits it supports (docs/reports.md#digits)."""
    return Column(
        header,
        lambda r: "-" if missing(r[low]) or missing(r[high]) else frange_in(r[low], r[high]),
    )


def _estimate(header: str, key: str, low: str, high: str) -> Column:
    """An estimate to the digits its 95 % interval (``low``, ``high``) supports."""
    return Column(header, lambda r: fnum_in(r[key], r.get(low), r.get(high)))


# ------------------------------------------------------------------ scaling


def _with_base(df: pd.DataFrame, order: List[str]):
    """The rows of the series that have a base (a complete run at some scale), sorted; None
    when no series has one (the base note names those without)."""
    rows = df[df["base_devices"].notna()] if "base_devices" in df else df.iloc[0:0]
    return rows.sort_values(order) if len(rows) else None


def _has_seq(df: pd.DataFrame) -> bool:
    """Whether a table holds language-model rows (their sequence length)."""
    return "seq_len" in df and bool(pd.to_numeric(df["seq_len"], errors="coerce").notna().any())


def _tokens(
    key: str, header: str = "tokens/s (geo. mean)", low: str = "", high: str = ""
) -> Column:
    """A language model's tokens/s (samples, i.e. sequences, per second x sequence length);
    blank for the other rows. With the samples/s interval's columns, to the digits it
    supports."""

    def cell(r: Row) -> str:
        seq = pd.to_numeric(pd.Series([r.get("seq_len")]), errors="coerce").iloc[0]
        if missing(seq) or missing(r[key]):
            return ""
        lo, hi = (r.get(low), r.get(high)) if low else (None, None)
        if missing(lo) or missing(hi):
            return fnum(float(r[key]) * float(seq))
        return fnum_in(float(r[key]) * float(seq), float(lo) * seq, float(hi) * seq)

    return Column(header, cell, when=_has_seq)


def _has_applied(df: pd.DataFrame) -> bool:
    """Whether a table holds a series of the applied rate (backup workers, b > 0)."""
    return "rate" in df and bool((df["rate"] == RATE_APPLIED).any())


#: which samples a series' figures count (docs/metrics.md#scaling): every sample, or with
#: backup workers only those whose gradient was applied; shown where a series has the latter
COUNTED = Column(
    "samples counted",
    lambda r: "applied only" if r.get("rate") == RATE_APPLIED else "all",
    numeric=False,
    when=_has_applied,
)
#: the same for the repeat statistics, which are of every processed sample: with backup
#: workers the dropped ranks' too, so a configuration shows its applied rate beside them
COUNTED_ALL = Column(
    "samples counted",
    lambda r: "all, dropped ones too" if r.get("rate") == RATE_APPLIED else "all",
    numeric=False,
    when=_has_applied,
)
APPLIED_RATE = Column(
    "applied samples/s (geo. mean; the scaling tables' figure)",
    lambda r: fnum(r["rate_gmean"]) if r.get("rate") == RATE_APPLIED else "",
    when=_has_applied,
)


SERIES = TableSpec(
    section="scaling",
    title="Scaling series",
    source="series",
    columns=[
        text("series", "label"),
        COUNTED,
        text("mode", "mode", ftext),
        text("scaling", "scaling", ftext),
        col("base N", "base_devices", fint),
        _estimate("base samples/s", "base_throughput", "base_ci95_low", "base_ci95_high"),
        _tokens("base_throughput", "base tokens/s", "base_ci95_low", "base_ci95_high"),
        col("max N", "max_devices", fint),
        Column("efficiency at max", _efficiency_at_max_cell),
        Column("knee N", knee_cell, numeric=False),
        col("peak N", "peak_devices", fint),
        Column("more devices help? (last step)", help_cell, numeric=False),
    ],
    select=lambda s: _with_base(s, ["label"]),
    note=captions.series_note,
)

SCALES = TableSpec(
    section="scaling",
    title="Throughput by scale",
    source="points",
    columns=[
        text("series", "label"),
        COUNTED,
        col("N", "devices", fint),
        Column("nodes x tasks", lambda r: f"{fint(r['nodes'])}x{fint(r['tasks_per_node'])}"),
        col("repeats", "repeats", fint),
        _estimate("samples/s (geo. mean)", "throughput_gmean", "ci95_low", "ci95_high"),
        _interval("95 % CI", "ci95_low", "ci95_high"),
        _tokens("throughput_gmean", low="ci95_low", high="ci95_high"),
        Column("per device", _per_device_cell),
        Column("speedup", _speedup_cell),
        Column("efficiency", _efficiency_cell),
        Column("efficiency 95 % CI", efficiency_ci_cell),
        Column("more than previous N?", step_cell, numeric=False),
    ],
    select=lambda p: _with_base(p, ["label", "devices"]),
    note=captions.SCALES_NOTE,
    flag=lambda r: bool(r["noisy"]),
)

# ------------------------------------------------------------------ repeats, stragglers

STATS = TableSpec(
    section="stats",
    title="Repeat statistics per configuration",
    source="configs",
    columns=[
        text("configuration", "group"),
        col("N", "world_size", fint),
        Column("runs ok/all", lambda r: f"{fint(r['repeats'])}/{fint(r['runs'])}"),
        COUNTED_ALL,
        _estimate(
            "samples/s (geo. mean)",
            "throughput_gmean",
            "throughput_ci95_low",
            "throughput_ci95_high",
        ),
        _interval("95 % CI", "throughput_ci95_low", "throughput_ci95_high"),
        APPLIED_RATE,
        _tokens("throughput_gmean", low="throughput_ci95_low", high="throughput_ci95_high"),
        _ci("min - max", "throughput_min", "throughput_max"),
        col("CV", "throughput_cv", lambda v: fpct(v, 2)),
        text("noisy", "noisy", lambda v: "NOISY" if v else ""),
        col("step time ms", "step_time_median_s", fms),
        col("jitter ms", "step_time_jitter_s", fms),
    ],
    select=lambda c: _with_statistics(c[c["mode"] != "allreduce"].sort_values("group")),
    note=captions.STATS_NOTE,
    flag=lambda r: bool(r["noisy"]),
)


def _nonempty(df: pd.DataFrame) -> Optional[pd.DataFrame]:
    """The rows, or None (no table) when there are none."""
    return df if len(df) else None


def _with_statistics(df: pd.DataFrame) -> Optional[pd.DataFrame]:
    """The configurations, or None (no table) when none has a complete repeat: a table of
    dashes says nothing the problems table does not."""
    done = pd.to_numeric(df["repeats"], errors="coerce").fillna(0) > 0 if len(df) else []
    return df if len(df) and bool(done.any()) else None


def _sig4(v: Any) -> str:
    return fsig(v, 4)


#: the straggler table's rows, at most
STRAGGLER_ROWS = 15


def _multi_rank(s: pd.DataFrame) -> pd.DataFrame:
    """The runs of more than one rank: one rank's index is 1 by definition."""
    return s[pd.to_numeric(s["world_size"], errors="coerce") > 1] if len(s) else s


@dataclass(frozen=True)
class _WorstSpec(TableSpec):
    """A table of the worst :data:`STRAGGLER_ROWS` runs of more than one rank, whose title
    says how many it shows of how many and which runs it leaves out."""

    def table(self, source: pd.DataFrame, settings: Any = None) -> Optional[Table]:
        t = super().table(source, settings)
        if t is None:
            return None
        n, single = len(_multi_rank(source)), len(source) - len(_multi_rank(source))
        shown = (
            f"the worst {STRAGGLER_ROWS} of {n} runs, worst first"
            if n > STRAGGLER_ROWS
            else "worst first"
        )
        t.title = f"{self.title} ({shown}" + (
            f"; {single} run(s) of one rank, whose index is 1 by definition, not listed)"
            if single
            else ")"
        )
        return t


STRAGGLERS = _WorstSpec(
    section="stragglers",
    title="Straggler index per run of more than one rank",
    source="stragglers",
    columns=[
        text("run", "run_id"),
        col("N", "world_size", fint),
        Column("status", ended_label, numeric=False),
        col("straggler index", "straggler_index", _sig4),
        text("by", "straggler_metric", ftext),
        Column(
            "step-time index",
            lambda r: _sig4(r["step_straggler_index"]),
            when=lambda s: bool((s["straggler_metric"] == "compute").any()),
        ),
        col("median step ms", "step_time_median_s", fms),
        col("jitter ms", "step_time_jitter_s", fms),
        col("step noise", "straggler_noise", fpct),
        text("suspect", "suspect", lambda v: "yes" if str(v) == "True" else "no"),
        text("slowest ranks (rank@host median)", "slowest_ranks", ftext),
    ],
    select=lambda s: _nonempty(_multi_rank(s).head(STRAGGLER_ROWS)),
    note=captions.STRAGGLER_NOTE,
    flag=lambda r: bool(r["straggler"]),
)

# ------------------------------------------------------------------ convergence, allreduce


def _time_to_target(r: Row) -> str:
    """The median time to the target over the runs that reached it, and how many of the
    complete runs that is: a time from some of them is never shown as if from all."""
    reached = 0 if missing(r.get("reached")) else int(r["reached"])
    runs = 0 if missing(r.get("repeats")) else int(r["repeats"])
    if not runs:
        return "no complete run"
    if missing(r["time_to_accuracy_s"]) or not reached:
        return "not reached"
    t = fsig(r["time_to_accuracy_s"], 4)
    return t if reached == runs else f"{t} (median of the {reached} that reached it)"


def _reached(r: Row) -> str:
    reached = 0 if missing(r.get("reached")) else int(r["reached"])
    if missing(r.get("repeats")) or not int(r["repeats"]):
        return "-"
    return f"{reached} of {fint(r['repeats'])}"


def _has_backups(conv: pd.DataFrame) -> bool:
    return "backup_workers" in conv and bool(conv["backup_workers"].notna().any())


CONVERGENCE = TableSpec(
    section="convergence",
    title=(
        "Convergence runs (final accuracy: mean of complete repeats; best accuracy: median; "
        "time to target: median of the runs that reached it)"
    ),
    source="convergence",
    columns=[
        text("configuration", "group"),
        col("global batch", "global_batch_size", fint),
        Column(
            "applied batch (ranks - b) x batch",
            lambda r: fint(r["applied_batch_size"]),
            when=_has_backups,
        ),
        col("peak LR", "lr", fsig),
        text("warmup", "warmup"),
        col("repeats", "repeats", fint),
        Column("final accuracy", _accuracy_cell),
        Column("95 % CI", accuracy_ci_cell),
        col("best accuracy", "best_accuracy", lambda v: fpct(v, 2)),
        Column("reached target", _reached),
        Column("time to target s", _time_to_target),
        col("target", "target_accuracy", lambda v: fpct(v, 1)),
    ],
)


def _short_names(ar: pd.DataFrame) -> Dict[str, str]:
    """Column headers of the allreduce configurations: ``framework nodes x ranks per node``
    (their names when that is ambiguous)."""
    short = {}
    for g, r in ar.groupby("group").first().iterrows():
        nodes = int(r["nodes"]) if not missing(r["nodes"]) else 1
        per = int(r["world_size"]) // max(nodes, 1)
        short[g] = f"{r['framework']} {nodes}x{per}"
    if len(set(short.values())) < len(short):
        short = {g: g for g in short}
    return short


def _bandwidth_columns(ar: pd.DataFrame, piv: pd.DataFrame) -> List[Column]:
    """Message size, then one column per configuration (none for a single rank)."""
    short = _short_names(ar)
    single = set(ar.loc[ar["world_size"] <= 1, "group"])
    cols = [Column("message size", lambda r: fbytes(r.name))]
    for g in piv.columns:
        if g in single:
            cols.append(Column(short.get(g, g), lambda r: "no communication with 1 rank", False))
        else:
            cols.append(Column(short.get(g, g), lambda r, g=g: fsig(r[g])))
    return cols


def _bandwidth_spec(value: str, what: str, note: str = "") -> TableSpec:
    return TableSpec(
        section="allreduce",
        title=f"Allreduce {what} bandwidth (GB/s, median over repeats)",
        source="allreduce",
        columns=_bandwidth_columns,
        select=lambda ar: ar.pivot_table(
            index="bytes", columns="group", values=value, dropna=False
        ),
        note=note,
    )


# ------------------------------------------------------------------ problems

PROBLEMS = TableSpec(
    section="problems",
    title="Failed, hung, cancelled, incomplete and flagged runs",
    source="problem_runs",
    columns=[
        text("run", "run_id"),
        Column("status", ended_label, numeric=False),
        text("Slurm state", "slurm_state", ftext),
        col("exit", "exit_code", fint),
        col("attempts", "attempts", fint),
        text("job", "job_id", ftext),
        Column(
            "ranks summary/N",
            lambda r: f"{fint(r['ranks_with_summary'])}/{fint(r['world_size'])}",
        ),
        text("missing ranks", "missing_ranks", ftext),
        text("no summary", "ranks_without_summary", ftext),
        Column("error", ended_cause, numeric=False),
        Column(
            "training",
            lambda r: ftext(r["training"]),
            numeric=False,
            when=lambda s: "training" in s and bool((s["training"] == "diverged").any()),
        ),
        text("notes", "problems", ftext),
    ],
    flag=lambda r: r["status"] != "ok" or r.get("training") == "diverged",
)

#: every table of the report, in report order
SPECS: Sequence[TableSpec] = (
    SERIES,
    SCALES,
    STATS,
    STRAGGLERS,
    CONVERGENCE,
    _bandwidth_spec("busbw_gbps", "bus"),
    _bandwidth_spec("algbw_gbps", "algorithm", captions.ALLREDUCE_NOTE),
    EFFICIENCY,
    LANGUAGE_MODELS,
    LM_COMPARISONS,
    PROBLEMS,
)


def report_tables(a: Analysis) -> Dict[str, List[Table]]:
    """Every table of the report, by section."""
    return tables_by_section(SPECS, a)


def stderr_tails(a: Analysis) -> List[Dict[str, str]]:
    """The stderr tails of the problem runs that have one."""
    tails = []
    if len(a.problem_runs):
        for _, r in a.problem_runs.iterrows():
            if not missing(r["stderr_tail"]) and r["stderr_tail"]:
                tails.append({"run_id": r["run_id"], "tail": r["stderr_tail"]})
    return tails
