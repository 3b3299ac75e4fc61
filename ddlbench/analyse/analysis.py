"""Campaign-level analysis: repeat statistics, scaling, stragglers, convergence, allreduce.

Input is the collected :class:`~ddlbench.collect.collector.CampaignData`; every formula is
written out in ``docs/metrics.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from ..values import missing
from .large_batch import STUDY_FIELDS, study_keys
from .lm_verdicts import lm_comparisons
from .series import (
    LM_SERIES_FIELDS,
    RATE_STATS,
    RATE_THROUGHPUT,
    backup_workers_of,
    series_rate,
    series_tables,
)
from .stats import summarize, t_ci_mean
from .verdicts import VerdictSettings, busy_runs


@dataclass
class Settings:
    """Thresholds of the analysis (defaults documented in docs/metrics.md)."""

    efficiency_threshold: float = 0.8  # knee: largest scale with efficiency >= this
    noise_threshold: float = 0.05  # a configuration is noisy when CV > this
    straggler_threshold: float = 1.10  # a run has a straggler when its index > this
    min_gain: float = 0.05  # "more devices help" / compare: the smallest change that counts
    alpha: float = 0.05  # one-sided significance level of the verdicts' tests
    power: float = 0.80  # power of the repeat advice of inconclusive verdicts
    confidence: float = 0.95  # of the efficiency interval that places the knee
    accuracy_margin: float = 0.01  # large-batch study: accuracy points below the baseline

    def verdicts(self) -> VerdictSettings:
        return VerdictSettings(self.min_gain, self.alpha, self.power, self.confidence)


@dataclass
class Analysis:
    """Tables derived from one campaign (all pandas DataFrames; empty when not applicable)."""

    settings: Settings
    runs: pd.DataFrame
    configs: pd.DataFrame  # one row per configuration (group): statistics over repeats
    points: pd.DataFrame  # one row per (scaling series, device count)
    series: pd.DataFrame  # one row per scaling series: base, knee, peak
    stragglers: pd.DataFrame  # runs with a straggler index, worst first
    largest_run: Optional[str]  # run whose per-rank distribution is plotted
    largest_ranks: pd.DataFrame  # that run's ranks (step-time quantiles per rank)
    convergence: pd.DataFrame  # per convergence configuration
    curves: pd.DataFrame  # eval records (lowest rank per run) of convergence runs
    allreduce: pd.DataFrame  # per (configuration, message size)
    problem_runs: pd.DataFrame  # failed, incomplete, not run, or ok with problems
    provenance: Dict[str, object] = field(default_factory=dict)
    #: language models: sharding modes against DDP, checkpointing against none (lm_verdicts)
    lm_comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)


# ------------------------------------------------------------------ configurations

CONFIG_FIELDS = [
    "framework",
    "workload",
    "model",
    "mode",
    "precision",
    "data_kind",
    "scaling",
    "device",
    "nodes",
    "tasks_per_node",
    "world_size",
    "batch_size",
    "global_batch_size",
    "lr",
    "lr_scaling",
    "warmup_epochs",
    "backend",
    "transport",
]
#: what else tells configurations apart besides :data:`CONFIG_FIELDS`: the framework entry's
#: label and options (sync vs backup1) and the spec variant; a configuration is its ``group``
#: (these are in its run ids), and the scaling series and the large-batch study key by them
ENTRY_FIELDS = ["label", "variant", "framework_options", *LM_SERIES_FIELDS]


def _identity_run(g: pd.DataFrame) -> pd.Series:
    """The run whose fields describe a configuration (``g``: its runs, by repeat).

    Every run carries the configuration's planned fields (the collector takes them from the
    plan, so a repeat that never ran has them too); the lowest repeat that ran is preferred,
    because fields such as ``precision`` and ``backend`` say what ran when a run could not use
    the planned setting (a result is never labelled with a setting that did not run)."""
    ran = g[g["ranks_present"].fillna(0) > 0] if "ranks_present" in g else g
    return (ran if len(ran) else g).iloc[0]


#: the throughput statistics of a configuration (``throughput_<name>`` columns): the headline
#: geometric mean with its interval and log-scale moments (the one rule of
#: :mod:`ddlbench.analyse.stats`), then the spread described
THROUGHPUT_STATS = (
    "gmean",
    "ci95_low",
    "ci95_high",
    "log_mean",
    "log_sd",
    "median",
    "mean",
    "std",
    "cv",
    "min",
    "max",
)


def _rate_stats(done: pd.DataFrame, options: object, st: dict, settings: Settings) -> dict:
    """The statistics of the rate the configuration's scaling series is of (``rate``,
    ``rate_<stat>``; :func:`~ddlbench.analyse.series.series_rate`): its throughput's ``st``
    unless backup workers make it the applied samples per second."""
    rate, values = series_rate(done, options)
    if rate != RATE_THROUGHPUT:
        st = summarize(values, settings.noise_threshold)
    out: Dict[str, object] = {"rate": rate}
    for k in RATE_STATS:
        out[f"rate_{k}"] = st["n" if k == "repeats" else k]
    out["rate_cv"] = st["cv"]  # compare reads the rate's spread too
    return out


def config_stats(runs: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Statistics over the repeats of every configuration (``group``).

    Only complete runs contribute (``complete``: every rank wrote its summary, no error).
    """
    rows = []
    if not len(runs):
        return pd.DataFrame()
    busy = busy_runs(runs)
    for group, g in runs.groupby("group", sort=True):
        g = g.sort_values("repeat")
        first = _identity_run(g)
        row = {"group": group}
        for c in (*CONFIG_FIELDS, *ENTRY_FIELDS):
            row[c] = first.get(c)
        done = g[g["complete"]]
        row["runs"] = len(g)
        row["runs_complete"] = len(done)
        row["runs_failed"] = int((g["status"] == "failed").sum())
        tp = done["throughput"].to_numpy(dtype=float)
        st = summarize(tp, settings.noise_threshold)
        row["repeats"] = st["n"]
        for k in THROUGHPUT_STATS:
            row[f"throughput_{k}"] = st[k]
        row["noisy"] = st["noisy"]
        row.update(_rate_stats(done, row["framework_options"], st, settings))
        ws = row["world_size"]
        row["per_device"] = st["gmean"] / ws if not missing(ws) and ws else math.nan
        row["step_time_median_s"] = (
            float(np.nanmedian(done["step_time_median_s"]))
            if len(done) and done["step_time_median_s"].notna().any()
            else math.nan
        )
        row["step_time_jitter_s"] = (
            float(np.nanmedian(done["step_time_jitter_s"]))
            if len(done) and done["step_time_jitter_s"].notna().any()
            else math.nan
        )
        row["straggler_index_max"] = (
            float(done["straggler_index"].max())
            if len(done) and done["straggler_index"].notna().any()
            else math.nan
        )
        row["run_ids"] = ",".join(g["run_id"])
        row["busy_runs"] = busy.get(str(group), 0)  # complete runs started on a busy node
        rows.append(row)
    df = pd.DataFrame(rows)
    return df


# ------------------------------------------------------------------ scaling


def scaling_tables(configs: pd.DataFrame, settings: Settings):
    """Scaling series (configurations that differ only in scale) -> (points, series).

    A series fixes every field of :data:`~ddlbench.analyse.series.SERIES_FIELDS` and the
    batch that scaling keeps constant: the per-device batch for weak scaling, the global
    batch for strong scaling. Efficiency and speedup are relative to the series' smallest
    device count (its base).
    """
    # series_tables applies the busy-node rule itself (busy_counts of the configurations)
    return series_tables(configs, settings.efficiency_threshold, settings.verdicts())


# ------------------------------------------------------------------ stragglers


def straggler_table(runs: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Runs with a straggler index, worst first. The index is the compute-time one wherever
    the workload logs ``compute_s`` (``straggler_metric``), else the step-time one.

    ``straggler``: the index is above the threshold. ``beyond_noise``: it exceeds the
    threshold by more than the run's own step-to-step noise (``straggler_noise``: the
    step-time jitter over the median step time), the evidence the summary counts.
    ``suspect``: that is evidence against the slowest rank's node
    (docs/bad-nodes.md#stragglers): beyond the noise, in a run on more than one node."""
    if not len(runs) or "straggler_index" not in runs:
        return pd.DataFrame()
    s = runs[runs["straggler_index"].notna()].copy()
    s["straggler"] = s["straggler_index"] > settings.straggler_threshold
    s["straggler_noise"] = s["step_time_jitter_s"] / s["step_time_median_s"]
    hosts = s["n_hosts"] if "n_hosts" in s else pd.Series(np.nan, index=s.index)
    s["n_hosts"] = hosts.fillna(s["nodes"]) if "nodes" in s else hosts
    hosts = s["n_hosts"]
    s["beyond_noise"] = (
        s["straggler"]
        & (s["straggler_index"] > settings.straggler_threshold + s["straggler_noise"])
    ).fillna(False)
    s["suspect"] = (s["beyond_noise"] & (hosts > 1)).fillna(False)
    cols = [
        "run_id",
        "group",
        "framework",
        "world_size",
        "status",
        "straggler_index",
        "straggler_metric",
        "step_straggler_index",
        "compute_straggler_index",
        "straggler",
        "straggler_noise",
        "beyond_noise",
        "suspect",
        "n_hosts",
        "step_time_median_s",
        "step_time_jitter_s",
        "slowest_rank",
        "slowest_host",
        "slowest_ranks",
    ]
    s = s.sort_values(["straggler_index", "run_id"], ascending=[False, True])
    return s[cols].reset_index(drop=True)


def largest_run(runs: pd.DataFrame) -> Optional[str]:
    """The largest complete run with step data (ties: the highest straggler index)."""
    if not len(runs):
        return None
    c = runs[runs["straggler_index"].notna()]
    done = c[c["complete"]]
    c = done if len(done) else c
    if not len(c):
        return None
    c = c.assign(_si=c["straggler_index"].fillna(0))
    c = c.sort_values(["world_size", "_si", "run_id"], ascending=[False, False, True])
    return str(c["run_id"].iloc[0])


# ------------------------------------------------------------------ convergence


def _lowest_rank_curves(conv: pd.DataFrame, evals: pd.DataFrame) -> pd.DataFrame:
    """Eval records of the convergence runs; accuracy is global: one curve per run, from its
    lowest rank."""
    ev = evals[evals["run_id"].isin(set(conv["run_id"]))] if len(evals) else evals
    if len(ev):
        low = ev.groupby("run_id")["rank"].transform("min")
        ev = ev[ev["rank"] == low].sort_values(["run_id", "epoch"])
    return ev


def _run_accuracy(r: pd.Series, e: pd.DataFrame) -> dict:
    """A run's accuracy results: as it logged them, else from its curve ``e``."""
    final = r["final_accuracy"]
    best = r["best_accuracy"]
    tta = r["time_to_accuracy_s"]
    if missing(final) and len(e):
        final = float(e["accuracy"].iloc[-1])
    if missing(best) and len(e):
        best = float(e["accuracy"].max())
    target = r["target_accuracy"]
    if missing(tta) and not missing(target) and len(e):
        hit = e[e["accuracy"] >= target]
        tta = float(hit["elapsed_s"].iloc[0]) if len(hit) else math.nan
    return {
        "run_id": r["run_id"],
        "group": r["group"],
        "complete": r["complete"],
        "final_accuracy": final,
        "best_accuracy": best,
        "time_to_accuracy_s": tta,
    }


def _warmup_word(w) -> str:
    return "gradual warmup" if not missing(w) and w > 0 else "no warmup"


def _scheduler_nodes(runs: pd.DataFrame) -> List[str]:
    """The nodes the scheduler named for the runs (Slurm's node lists, expanded): emulated
    nodes may share one host name, which ``hosts`` holds."""
    from ddlbench.execute.hostlist import expand

    if not len(runs) or "nodelist" not in runs:
        return []
    return sorted({n for v in runs["nodelist"].dropna() for n in expand(str(v)) if n})


def _applied_batch(first: pd.Series) -> object:
    """The global batch whose gradient is applied per step: (ranks - b) x batch with b
    backup workers (docs/backup-workers.md), else the global batch."""
    b = backup_workers_of(first.get("framework_options"))
    ws, bs = first["world_size"], first["batch_size"]
    if b is None or missing(ws) or missing(bs):
        return first["global_batch_size"]
    return int(bs) * max(int(ws) - b, 0)


def _group_accuracy(group: str, g: pd.DataFrame, p: pd.DataFrame) -> dict:
    """A convergence configuration's row: its settings and the medians over the complete
    repeats ``p`` (time to accuracy: over those of them that reached the target,
    ``reached``)."""
    first = g.sort_values("repeat").iloc[0]
    w = first["warmup_epochs"]
    return {
        "group": group,
        **{f: first.get(f) for f in (*STUDY_FIELDS, "variant")},
        "world_size": first["world_size"],
        "batch_size": first["batch_size"],
        "global_batch_size": first["global_batch_size"],
        "backup_workers": backup_workers_of(first.get("framework_options")),
        "applied_batch_size": _applied_batch(first),
        "lr": first["lr"],
        "warmup_epochs": w,
        "warmup": _warmup_word(w),
        "epochs": first["epochs"],
        "target_accuracy": first["target_accuracy"],
        "repeats": len(p),
        "final_accuracy": float(p["final_accuracy"].median()) if len(p) else math.nan,
        **_accuracy_stats(p["final_accuracy"]),
        "best_accuracy": float(p["best_accuracy"].median()) if len(p) else math.nan,
        "time_to_accuracy_s": float(p["time_to_accuracy_s"].median())
        if len(p) and p["time_to_accuracy_s"].notna().any()
        else math.nan,
        "reached": int(p["time_to_accuracy_s"].notna().sum()) if len(p) else 0,
    }


def convergence_tables(runs: pd.DataFrame, evals: pd.DataFrame, settings: Settings):
    """Per-configuration accuracy results and training curves of convergence runs."""
    conv = runs[runs["mode"] == "convergence"] if len(runs) else runs
    if not len(conv):
        return pd.DataFrame(), pd.DataFrame()
    ev = _lowest_rank_curves(conv, evals)
    per_run = []
    for _, r in conv.iterrows():
        e = ev[ev["run_id"] == r["run_id"]] if len(ev) else ev
        per_run.append(_run_accuracy(r, e))
    pr = pd.DataFrame(per_run)
    rows = [
        _group_accuracy(group, g, pr[(pr["group"] == group) & pr["complete"]])
        for group, g in conv.groupby("group", sort=True)
    ]
    groups = study_keys(pd.DataFrame(rows))
    groups = groups.sort_values(["study_label", "warmup", "global_batch_size", "group"])
    if len(ev):
        meta = conv.set_index("run_id")[["group", "global_batch_size", "warmup_epochs"]]
        ev = ev.join(meta, on="run_id")
        ev["warmup"] = ev["warmup_epochs"].map(_warmup_word)
    return groups.reset_index(drop=True), ev.reset_index(drop=True)


def _accuracy_stats(acc: pd.Series) -> Dict[str, float]:
    """Mean, sd and 95 % t CI of the mean of the repeats' final accuracies (the interval
    clipped to [0, 1], where accuracies live)."""
    x = acc.to_numpy(dtype=float)
    st = summarize(x)
    lo, hi = t_ci_mean(x[~np.isnan(x)])  # accuracies are not ratios: the mean's t interval
    return {
        "final_accuracy_mean": st["mean"],
        "final_accuracy_std": st["std"],
        "final_accuracy_ci95_low": max(lo, 0.0) if st["n"] >= 2 else math.nan,
        "final_accuracy_ci95_high": min(hi, 1.0) if st["n"] >= 2 else math.nan,
    }


# ------------------------------------------------------------------ allreduce


def allreduce_table(runs: pd.DataFrame, ar: pd.DataFrame) -> pd.DataFrame:
    """Bandwidth per configuration and message size (median over complete repeats).

    Per run and size the collective's time is the slowest rank's median time; then
    ``algbw = bytes / time`` and ``busbw = algbw * 2(n-1)/n`` (nccl-tests definitions).
    """
    if not len(ar) or not len(runs):
        return pd.DataFrame()
    done = runs[runs["complete"]].set_index("run_id")
    a = ar[ar["run_id"].isin(done.index)]
    if not len(a):
        return pd.DataFrame()
    per = a.groupby(["run_id", "bytes"], as_index=False).agg(
        time_s=("time_s", "max"), ranks=("rank", "nunique")
    )
    per = per.join(done[["group", "world_size", "framework", "nodes", "workload"]], on="run_id")
    n = per["world_size"].astype(float)
    per["algbw_gbps"] = per["bytes"].astype(float) / per["time_s"] / 1e9
    per["busbw_gbps"] = per["algbw_gbps"] * 2 * (n - 1) / n
    # one rank communicates nothing: its "allreduce" is a local copy, not a bandwidth
    per.loc[n <= 1, ["algbw_gbps", "busbw_gbps"]] = math.nan
    out = per.groupby(["group", "bytes"], as_index=False).agg(
        framework=("framework", "first"),
        workload=("workload", "first"),
        world_size=("world_size", "first"),
        nodes=("nodes", "first"),
        repeats=("run_id", "nunique"),
        time_s=("time_s", "median"),
        algbw_gbps=("algbw_gbps", "median"),
        busbw_gbps=("busbw_gbps", "median"),
    )
    return out.sort_values(["group", "bytes"]).reset_index(drop=True)


# ------------------------------------------------------------------ problems, provenance


def problem_runs(runs: pd.DataFrame) -> pd.DataFrame:
    if not len(runs):
        return pd.DataFrame()
    bad = runs[(runs["status"] != "ok") | runs["problems"].notna()]
    cols = [
        "run_id",
        "status",
        "slurm_state",
        "exit_code",
        "attempts",
        "job_id",
        "world_size",
        "ranks_present",
        "ranks_with_summary",
        "missing_ranks",
        "ranks_without_summary",
        "error_ranks",
        "error_message",
        "training",
        "problems",
        "stderr_tail",
    ]
    cols = [c for c in cols if c in runs]  # data collected before the training column
    order = {"failed": 0, "hung": 1, "cancelled": 2, "incomplete": 3, "running": 4}
    order.update(pending=5, not_run=6, ok=7)
    bad = bad.assign(_o=bad["status"].map(order).fillna(9)).sort_values(["_o", "run_id"])
    return bad[cols].reset_index(drop=True)


def _job_key(job_id: str):
    """Job ids in numeric order (``9`` before ``10``; array ids ``12_3`` by job, then task);
    ids that are not numbers after the numeric ones."""
    parts = job_id.replace("+", "_").split("_")
    if all(p.isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), "")
    return (1, (), job_id)


def provenance(data, runs: pd.DataFrame, ranks: pd.DataFrame) -> Dict[str, object]:
    from ddlbench.campaign.manifest import scheduler_of
    from ddlbench.campaign.node_facts import node_summary

    m = data.manifest

    def uniq(df, col):
        if not len(df) or col not in df:
            return []
        vals = set()
        for v in df[col].dropna():
            vals.update(x for x in str(v).split(",") if x)
        return sorted(vals)

    fw_versions = []
    if len(ranks):
        fv = (
            ranks.dropna(subset=["framework_version"])
            .groupby("framework")["framework_version"]
            .unique()
        )
        fw_versions = [f"{fw} {', '.join(sorted(map(str, v)))}" for fw, v in fv.items()]
    devices = 0
    if len(runs):
        done = runs[runs["complete"]]
        devices = int(done["world_size"].max()) if len(done) else 0
    return {
        "campaign": data.name,
        "created": m.get("created"),
        "ddlbench_version_campaign": m.get("ddlbench_version"),
        "ddlbench_versions_logs": uniq(ranks, "ddlbench_version"),
        "ddlbench_version_collector": data.info.get("ddlbench_version"),
        "cluster": m.get("cluster") or {},
        "frameworks": fw_versions,
        "workloads": uniq(runs, "workload"),
        "backends": uniq(runs, "backend"),
        "device_names": uniq(runs, "device_name"),
        "python_versions": uniq(ranks, "python_version"),
        "hosts": uniq(runs, "hosts"),
        "scheduler_nodes": _scheduler_nodes(runs),
        "largest_run_devices": devices,
        "devices_per_node": sorted(
            {str(int(v)) for v in runs["tasks_per_node"].dropna()} if len(runs) else set(),
            key=int,
        ),
        "scheduler": scheduler_of(m.get("cluster") or {}),
        "job_ids": sorted(uniq(runs, "job_id"), key=_job_key),
        "runs": int(len(runs)),
        "runs_ok": int((runs["status"] == "ok").sum()) if len(runs) else 0,
        "nodes": node_summary(data.campaign_dir),
    }


def analyse(data, settings: Optional[Settings] = None) -> Analysis:
    """All tables of the report from collected campaign data."""
    settings = settings or Settings()
    runs = data.runs
    configs = config_stats(runs, settings)
    points, series = scaling_tables(configs, settings)
    big = largest_run(runs)
    big_ranks = (
        data.ranks[data.ranks["run_id"] == big].sort_values("rank").reset_index(drop=True)
        if big
        else pd.DataFrame()
    )
    conv, curves = convergence_tables(runs, data.evals, settings)
    return Analysis(
        settings=settings,
        runs=runs,
        configs=configs,
        points=points,
        series=series,
        stragglers=straggler_table(runs, settings),
        largest_run=big,
        largest_ranks=big_ranks,
        convergence=conv,
        curves=curves,
        allreduce=allreduce_table(runs, data.allreduce),
        problem_runs=problem_runs(runs),
        provenance=provenance(data, runs, data.ranks),
        lm_comparisons=lm_comparisons(runs, configs, CONFIG_FIELDS, settings.verdicts()),
    )
