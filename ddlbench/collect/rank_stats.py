"""Per-rank statistics of the measured step records, vectorised over ranks (docs/metrics.md)."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columns import RANK_STATS, names

RANK_STAT_COLUMNS = names(RANK_STATS)


def _quantile_sorted(d: np.ndarray, q: float) -> float:
    """Quantile of sorted ``d`` by linear interpolation (numpy's default, "type 7")."""
    pos = q * (len(d) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(d) - 1)
    return float(d[lo] + (d[hi] - d[lo]) * (pos - lo))


def _float_column_or_none(steps: pa.Table, name: str) -> Optional[np.ndarray]:
    """A column as floats, or None when no record has it."""
    col = steps.column(name)
    if col.null_count == len(col):
        return None
    return np.asarray(col.to_numpy(), dtype=float)


def _measured(steps: pa.Table) -> np.ndarray:
    """Mask of the rows of the ``measure`` phase."""
    return np.asarray(
        pc.fill_null(pc.equal(steps.column("phase"), "measure"), False).to_numpy(
            zero_copy_only=False
        ),
        dtype=bool,
    )


def _rank_quantiles(
    out: Dict[str, np.ndarray],
    has: np.ndarray,
    mb: np.ndarray,
    mdt: np.ndarray,
    mcomp: Optional[np.ndarray],
    mcomm: Optional[np.ndarray],
) -> None:
    """Step-time quantiles and MAD, and compute/comm medians, of each rank with measured
    steps; rank r's measured rows are mb[r]:mb[r+1]."""
    cols = [out[c] for c in ("step_time_p5_s", "step_time_p25_s", "step_time_median_s")]
    cols += [out["step_time_p75_s"], out["step_time_p95_s"]]
    qs = (0.05, 0.25, 0.5, 0.75, 0.95)
    for r in np.flatnonzero(has):
        a, b = mb[r], mb[r + 1]
        d = np.sort(mdt[a:b])
        for col, q in zip(cols, qs):
            col[r] = _quantile_sorted(d, q)
        mad = _quantile_sorted(np.sort(np.abs(d - out["step_time_median_s"][r])), 0.5)
        out["step_time_mad_s"][r] = mad
        for name, arr in (("compute_median_s", mcomp), ("comm_median_s", mcomm)):
            if arr is not None:
                v = arr[a:b]
                v = v[~np.isnan(v)]
                if len(v):
                    out[name][r] = float(np.median(v))


def rank_stats(steps: pa.Table, bounds: np.ndarray) -> Dict[str, np.ndarray]:
    """Per-rank statistics of the measured steps; rows of rank k are bounds[k]:bounds[k+1]."""
    k = len(bounds) - 1
    out = {c: np.full(k, np.nan) for c in RANK_STAT_COLUMNS}
    if steps.num_rows == 0 or k == 0:
        out["steps"] = np.diff(bounds).astype(float)
        out["steps_measured"] = np.zeros(k)
        out["samples_measured"] = np.zeros(k)
        return out
    ts = steps.column("t_start").to_numpy()
    te = steps.column("t_end").to_numpy()
    samples = steps.column("samples").to_numpy()
    meas = _measured(steps)
    comp = _float_column_or_none(steps, "compute_s")
    comm = _float_column_or_none(steps, "comm_s")
    dt_all = te - ts
    out["steps"] = np.diff(bounds).astype(float)
    # sums and extremes over the measured steps, vectorised over ranks
    idx = np.repeat(np.arange(k), np.diff(bounds))
    midx = idx[meas]
    nmeas = np.bincount(midx, minlength=k)
    out["steps_measured"] = nmeas.astype(float)
    out["samples_measured"] = np.bincount(midx, weights=samples[meas], minlength=k)
    mts, mte = ts[meas], te[meas]
    mb = np.concatenate(([0], np.cumsum(nmeas)))
    has = nmeas > 0
    starts = mb[:-1][has]
    if len(starts):
        out["t_first"][has] = np.minimum.reduceat(mts, starts)
        out["t_last"][has] = np.maximum.reduceat(mte, starts)
    out["measure_time_s"] = out["t_last"] - out["t_first"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["throughput"] = np.where(
            out["measure_time_s"] > 0, out["samples_measured"] / out["measure_time_s"], np.nan
        )
    mdt = dt_all[meas]
    mcomp = comp[meas] if comp is not None else None
    mcomm = comm[meas] if comm is not None else None
    if len(starts):
        out["step_time_mean_s"][has] = np.add.reduceat(mdt, starts) / nmeas[has]
    _rank_quantiles(out, has, mb, mdt, mcomp, mcomm)
    out["step_time_jitter_s"] = 1.4826 * out["step_time_mad_s"]
    return out


def run_losses(
    steps: pa.Table, bounds: np.ndarray, run_keys: Sequence[str]
) -> Dict[str, List[np.ndarray]]:
    """Each run's loss series per rank, ranks in order: every step record's ``loss`` (warmup
    and measured), NaN where a record has none. Rows of rank file k are bounds[k]:bounds[k+1]
    and ``run_keys[k]`` names its run (for ddlbench/analyse/training_health.py)."""
    out: Dict[str, List[np.ndarray]] = {}
    loss = _float_column_or_none(steps, "loss") if steps.num_rows else None
    for k, key in enumerate(run_keys):
        a, b = int(bounds[k]), int(bounds[k + 1])
        out.setdefault(key, []).append(loss[a:b] if loss is not None else np.full(b - a, np.nan))
    return out
