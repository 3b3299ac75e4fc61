"""Per-rank step-time quantiles, MAD and medians, checked against numpy rank by rank."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ddlbench.collect.rank_stats import rank_stats


def _steps(counts, seed=0):
    """Ragged ranks of skewed step times, some warmup rows, NaN compute times, one rank with
    no measured step."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, n in enumerate(counts):
        t = 100.0 * k
        for i in range(n):
            dt = float(rng.lognormal(-3, 0.6))
            phase = "warmup" if i < 2 or k == len(counts) - 1 else "measure"
            comp = float("nan") if rng.random() < 0.2 else dt * 0.7
            comm = float("nan") if k == 1 else dt * 0.2  # rank 1 has no comm time at all
            rows.append((t, t + dt, 32, phase, comp, comm))
            t += dt
    names = ["t_start", "t_end", "samples", "phase", "compute_s", "comm_s"]
    cols = list(zip(*rows))
    table = pa.table({n: pa.array(c) for n, c in zip(names, cols)})
    return table, np.concatenate(([0], np.cumsum(counts)))


def test_each_ranks_statistics_are_numpys_of_its_measured_steps():
    counts = [40, 40, 17, 40, 9, 17, 5]  # shared and unique counts; the last rank: warmup only
    table, bounds = _steps(counts)
    out = rank_stats(table, bounds)
    d = table.to_pandas()
    d["dt"] = d["t_end"] - d["t_start"]
    for k in range(len(counts)):
        r = d.iloc[bounds[k] : bounds[k + 1]]
        r = r[r["phase"] == "measure"]
        if not len(r):
            assert np.isnan(out["step_time_median_s"][k])
            assert np.isnan(out["compute_median_s"][k])
            continue
        dt = r["dt"].to_numpy()
        for name, q in (("p5", 5), ("p25", 25), ("median", 50), ("p75", 75), ("p95", 95)):
            got = out[f"step_time_{name}_s"][k]
            assert np.isclose(got, np.percentile(dt, q), rtol=1e-12, atol=0)
        mad = np.median(np.abs(dt - np.median(dt)))
        assert np.isclose(out["step_time_mad_s"][k], mad, rtol=1e-12, atol=0)
        assert out["compute_median_s"][k] == np.nanmedian(r["compute_s"])
        if k == 1:
            assert np.isnan(out["comm_median_s"][k])
        else:
            assert out["comm_median_s"][k] == np.median(r["comm_s"])
        assert out["steps_measured"][k] == len(r)
