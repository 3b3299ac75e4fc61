"""Per-run figures over a run's ranks: global throughput, step time, stragglers (docs/metrics.md).

The collector calls :func:`run_metrics` for every run while it builds the runs table; the
inputs are the per-rank columns of that run (rows in rank order). Numpy only.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

#: per-run columns this module fills (see ddlbench/collect/columns.py)
METRIC_COLUMNS = (
    "samples_measured",
    "window_start",
    "window_end",
    "measure_time_s",
    "throughput",
    "throughput_per_device",
    "applied_samples_per_s",
    "dropped_samples",
    "throughput_rank0_x_n",
    "step_time_median_s",
    "step_time_jitter_s",
    "straggler_index",
    "straggler_metric",
    "step_straggler_index",
    "compute_straggler_index",
    "slowest_rank",
    "slowest_host",
    "slowest_ranks",
    "params_consistent",
    "final_accuracy",
    "best_accuracy",
    "time_to_accuracy_s",
    "final_loss",
)
#: how the slowest ranks are listed
SLOWEST_LISTED = 3


def straggler_index(values: np.ndarray) -> Optional[float]:
    """``max / median`` over ranks of a per-rank figure (NaN ranks left out); None if no value."""
    ok = values[~np.isnan(values)]
    if not len(ok):
        return None
    centre = float(np.median(ok))
    return float(ok.max() / centre) if centre > 0 else None


def slowest(values: np.ndarray, ranks: np.ndarray, hosts: np.ndarray, unit: float = 1e3):
    """``(slowest rank, its host, listing)`` by a per-rank figure (higher is slower).

    Ranks tied at the maximum are not named (the slowest rank is then None): under a
    synchronous allreduce every rank's step time evens out, and naming one of the tied ranks
    would point at a rank that is not slower than the others. The listing names up to three
    ranks above the median rank, slowest first, as ``rank@host value ms``.
    """
    ok = ~np.isnan(values)
    v, rk, host = values[ok], ranks[ok], hosts[ok]
    if not len(v):
        return None, None, None
    order = np.lexsort((rk, -v))  # slowest first, ties by rank
    top = v[order[0]]
    unique_max = len(v) == 1 or v[order[1]] < top
    centre = float(np.median(v))
    above = [i for i in order[:SLOWEST_LISTED] if v[i] > centre]
    listing = "; ".join(f"{int(rk[i])}@{host[i]} {v[i] * unit:.1f} ms" for i in above)
    if not unique_max or len(v) == 1:
        return None, None, listing or None
    return int(rk[order[0]]), host[order[0]], listing or None


def _stragglers(row: Dict[str, Any], g) -> None:
    med = np.asarray(g["step_time_median_s"], dtype=float)
    comp = np.asarray(g["compute_median_s"], dtype=float)
    ok = ~np.isnan(med)
    if ok.any():
        row["step_time_median_s"] = float(np.median(med[ok]))
        row["step_time_jitter_s"] = float(np.nanmedian(np.asarray(g["step_time_jitter_s"], float)))
    row["step_straggler_index"] = straggler_index(med)
    row["compute_straggler_index"] = straggler_index(comp)
    # synchronous training evens out step times: the compute time shows the slow rank itself
    use_compute = row["compute_straggler_index"] is not None
    by = comp if use_compute else med
    row["straggler_metric"] = "compute" if use_compute else ("step" if ok.any() else None)
    row["straggler_index"] = (
        row["compute_straggler_index"] if use_compute else row["step_straggler_index"]
    )
    if row["straggler_metric"] is not None:
        rank, host, listing = slowest(by, np.asarray(g["rank"]), np.asarray(g["host"]))
        row["slowest_rank"], row["slowest_host"], row["slowest_ranks"] = rank, host, listing


def _global_throughput(row: Dict[str, Any], g, ws: Optional[int], problems: List[str]) -> None:
    """All measured samples over the union of the ranks' measured windows."""
    samples = float(np.asarray(g["samples_measured"], dtype=float).sum())
    t_first = np.asarray(g["t_first"], dtype=float)
    t_last = np.asarray(g["t_last"], dtype=float)
    start = float(np.nanmin(t_first)) if (~np.isnan(t_first)).any() else None
    end = float(np.nanmax(t_last)) if (~np.isnan(t_last)).any() else None
    row["samples_measured"] = samples
    if start is None or end is None:
        if row.get("mode") != "allreduce":
            problems.append("no measured steps")
        return
    row["window_start"] = start
    row["window_end"] = end
    row["measure_time_s"] = end - start
    if end > start and samples > 0:
        row["throughput"] = samples / (end - start)
        devices = row.get("world_size") or ws  # ranks x devices_per_worker
        row["throughput_per_device"] = row["throughput"] / devices if devices else None
    r0 = np.asarray(g["throughput"], dtype=float)[np.asarray(g["rank"]) == 0]
    if len(r0) and not np.isnan(r0[0]) and ws:
        row["throughput_rank0_x_n"] = float(r0[0]) * ws
    _applied(row, g)
    logged = np.asarray(g["summary_samples_measured"], dtype=float)
    if not np.isnan(logged).any() and float(logged.sum()) != samples:
        problems.append(
            f"summaries report {int(logged.sum())} measured samples, step records {int(samples)}"
        )


def _applied(row: Dict[str, Any], g) -> None:
    """Samples applied per second and samples dropped: with backup workers from the ranks'
    summaries (a dropped rank's samples train nothing), else every sample is applied.

    Backup-worker logs written before the summaries counted samples (2026-11-24) have each
    rank's dropped steps only: a rank's dropped samples are then its measured samples times
    its share of measured steps that were dropped (what the workload counts, steps x batch,
    for a batch that is the same every step)."""
    if row.get("throughput") is None:
        return
    applied = np.asarray(g["summary_applied_samples"], dtype=float)
    if not np.isnan(applied).all():
        dropped = np.asarray(g["summary_dropped_samples"], float)
        row["applied_samples_per_s"] = float(np.nansum(applied)) / row["measure_time_s"]
        row["dropped_samples"] = float(np.nansum(dropped))
        return
    drops = np.asarray(g["summary_dropped_steps"], dtype=float)
    if np.isnan(drops).all():  # no backup workers: every sample is applied
        row["applied_samples_per_s"], row["dropped_samples"] = row["throughput"], 0.0
        return
    samples = np.asarray(g["samples_measured"], dtype=float)
    steps = np.asarray(g["steps_measured"], dtype=float)
    dropped = np.where(steps > 0, samples * np.nan_to_num(drops) / np.maximum(steps, 1), 0.0)
    row["dropped_samples"] = float(dropped.sum())
    row["applied_samples_per_s"] = (float(samples.sum()) - row["dropped_samples"]) / row[
        "measure_time_s"
    ]


def run_metrics(
    row: Dict[str, Any], g, ws: Optional[int], complete: bool, problems: List[str]
) -> None:
    """Fill ``row``'s :data:`METRIC_COLUMNS` from the run's ranks ``g`` (None: no ranks).

    ``g[name]`` gives a per-rank column in rank order and ``g.values(name)`` its non-missing
    values; throughput figures need a ``complete`` run. Suspicious findings go to ``problems``.
    """
    for k in METRIC_COLUMNS:
        row[k] = None
    if g is None or not len(g):
        return
    hashes = set(g.values("summary_param_sha256"))
    if hashes:
        row["params_consistent"] = len(hashes) == 1
        if len(hashes) > 1:
            problems.append(f"ranks disagree on param_sha256 ({len(hashes)} distinct values)")
    # convergence results are global: take them from the lowest rank that has them
    for c in ("final_accuracy", "best_accuracy", "time_to_accuracy_s", "final_loss"):
        v = g.values("summary_" + c)
        row[c] = float(v[0]) if v else None
    _stragglers(row, g)
    if complete:
        _global_throughput(row, g, ws, problems)
