"""``ddlbench compare``: throughput of the configurations two campaigns have in common.

A configuration (``group``: the run id without its ``-r<repeat>`` suffix) regressed when its
median throughput over complete repeats dropped by more than the threshold:
``(new - base) / base < -threshold``. Whether the two 95 % confidence intervals of the mean
overlap is reported next to it, as a hint of significance; it does not change the verdict.
"""

from __future__ import annotations

import math
from typing import Optional

import pandas as pd

from .analysis import Settings, config_stats
from .stats import intervals_overlap


def parse_threshold(text: str) -> float:
    """'5%' or '5' -> 0.05 (always percent); raises ValueError for anything else."""
    s = str(text).strip()
    if s.endswith("%"):
        s = s[:-1].strip()
    v = float(s)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"threshold must be a non-negative percentage, got {text!r}")
    return v / 100.0


def compare(
    base, new, threshold: float = 0.05, settings: Optional[Settings] = None
) -> pd.DataFrame:
    """One row per configuration of either campaign, with a ``verdict``:

    ``regressed``, ``improved`` (beyond the threshold either way), ``unchanged``,
    ``no data`` (no complete repeat in one of the two), ``only in base``, ``only in new``.
    """
    settings = settings or Settings()
    cb = config_stats(base.runs, settings)
    cn = config_stats(new.runs, settings)
    cb = cb[cb["mode"] != "allreduce"] if len(cb) else cb
    cn = cn[cn["mode"] != "allreduce"] if len(cn) else cn
    b = cb.set_index("group") if len(cb) else pd.DataFrame()
    n = cn.set_index("group") if len(cn) else pd.DataFrame()
    rows = []
    for g in sorted(set(b.index) | set(n.index)):
        row = {"group": g}
        rb = b.loc[g] if g in b.index else None
        rn = n.loc[g] if g in n.index else None
        for tag, r in (("base", rb), ("new", rn)):
            row[f"{tag}_repeats"] = int(r["repeats"]) if r is not None else 0
            for k in ("median", "ci95_low", "ci95_high", "cv"):
                row[f"{tag}_{k}"] = float(r[f"throughput_{k}"]) if r is not None else math.nan
        row["world_size"] = (rb if rb is not None else rn)["world_size"]
        row["change"] = math.nan
        row["ci_overlap"] = None
        if rb is None:
            row["verdict"] = "only in new"
        elif rn is None:
            row["verdict"] = "only in base"
        elif math.isnan(row["base_median"]) or math.isnan(row["new_median"]):
            row["verdict"] = "no data"
        else:
            change = (row["new_median"] - row["base_median"]) / row["base_median"]
            row["change"] = change
            row["ci_overlap"] = intervals_overlap(
                (row["base_ci95_low"], row["base_ci95_high"]),
                (row["new_ci95_low"], row["new_ci95_high"]),
            )
            if change < -threshold:
                row["verdict"] = "regressed"
            elif change > threshold:
                row["verdict"] = "improved"
            else:
                row["verdict"] = "unchanged"
        rows.append(row)
    cols = [
        "group",
        "world_size",
        "verdict",
        "change",
        "base_median",
        "new_median",
        "base_ci95_low",
        "base_ci95_high",
        "new_ci95_low",
        "new_ci95_high",
        "ci_overlap",
        "base_repeats",
        "new_repeats",
        "base_cv",
        "new_cv",
    ]
    return pd.DataFrame(rows, columns=cols)
