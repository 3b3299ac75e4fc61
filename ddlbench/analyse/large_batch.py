"""The large-batch study's verdict: does gradual warmup keep the accuracy of large global
batches within a margin of the small-batch baseline? (``docs/metrics.md``, Convergence)

Per framework and model, the **baseline** is the configuration with the smallest global
batch, taken from the no-warmup arm when there is one (at the smallest batch warmup makes no
difference by design of the linear rule). For every other configuration of each arm, with
``margin`` in accuracy points (default 0.01 = 1 point) and one-sided Welch tests at
``alpha`` over the repeats' final accuracies:

- ``within``: ``H0: acc <= baseline - margin`` is rejected;
- ``outside``: ``H0: acc >= baseline - margin`` is rejected;
- ``undetermined`` otherwise (or fewer than 2 repeats on either side).
"""

from __future__ import annotations

import math
from typing import Dict, List

import numpy as np
import pandas as pd

from .verdicts import welch_margin

WITHIN, OUTSIDE, UNDETERMINED = "within", "outside", "undetermined"
NO_WARMUP = "no warmup"


def margin_table(conv: pd.DataFrame, margin: float, alpha: float) -> pd.DataFrame:
    """One row per convergence configuration that is not a baseline: its class against the
    baseline of its framework and model (columns: framework, model, warmup,
    global_batch_size, baseline_group, baseline_accuracy, difference, p_within, p_outside,
    verdict)."""
    need = {"final_accuracy_mean", "final_accuracy_std", "repeats"}
    if not len(conv) or not need <= set(conv.columns):
        return pd.DataFrame()
    rows: List[Dict[str, object]] = []
    for (fw, model), g in conv.groupby(["framework", "model"], sort=True):
        base = _baseline(g)
        if base is None:
            continue
        others = g[(g["group"] != base["group"]) & g["final_accuracy_mean"].notna()]
        if not len(others):
            continue
        ma, sa, na = (
            float(base[k]) for k in ("final_accuracy_mean", "final_accuracy_std", "repeats")
        )
        mb = others["final_accuracy_mean"].to_numpy(dtype=float)
        sb = others["final_accuracy_std"].to_numpy(dtype=float)
        nb = others["repeats"].to_numpy(dtype=float)
        p_in, _, _ = welch_margin(ma - margin, sa, na, mb, sb, nb)
        p_out, _, _ = welch_margin(mb, sb, nb, np.full_like(mb, ma - margin), sa, na)
        for i, (_, r) in enumerate(others.iterrows()):
            rows.append(
                {
                    "framework": fw,
                    "model": model,
                    "warmup": r["warmup"],
                    "global_batch_size": r["global_batch_size"],
                    "group": r["group"],
                    "baseline_group": base["group"],
                    "baseline_batch": base["global_batch_size"],
                    "baseline_accuracy": ma,
                    "accuracy": mb[i],
                    "difference": mb[i] - ma,
                    "p_within": p_in[i],
                    "p_outside": p_out[i],
                    "verdict": _class(p_in[i], p_out[i], alpha),
                }
            )
    return pd.DataFrame(rows)


def _baseline(g: pd.DataFrame):
    ok = g[g["final_accuracy_mean"].notna()]
    if not len(ok):
        return None
    small = ok[ok["global_batch_size"] == ok["global_batch_size"].min()]
    plain = small[small["warmup"] == NO_WARMUP]
    return (plain if len(plain) else small).iloc[0]


def _class(p_in: float, p_out: float, alpha: float) -> str:
    if not math.isnan(p_in) and p_in < alpha:
        return WITHIN
    if not math.isnan(p_out) and p_out < alpha:
        return OUTSIDE
    return UNDETERMINED


def sentences(table: pd.DataFrame, margin: float, confidence: float) -> List[str]:
    """One sentence per framework and model: how far each arm keeps within the margin."""
    out = []
    if not len(table):
        return out
    pts = f"{100 * margin:g} point" + ("" if margin == 0.01 else "s")
    for (fw, model), g in table.groupby(["framework", "model"], sort=True):
        first = g.iloc[0]
        parts = [_arm_text(a, g[g["warmup"] == a]) for a in sorted(g["warmup"].unique())]
        out.append(
            f"{fw} {model}, within {pts} of the small-batch baseline "
            f"(mean {100 * first['baseline_accuracy']:.2f} % at global batch "
            f"{int(first['baseline_batch'])}; one-sided Welch tests, "
            f"{100 * confidence:g} % confidence): " + "; ".join(parts) + "."
        )
    return out


def _arm_text(arm: str, g: pd.DataFrame) -> str:
    rows = list(g.sort_values("global_batch_size").itertuples(index=False))
    prefix = []
    for r in rows:
        if r.verdict != WITHIN:
            break
        prefix.append(int(r.global_batch_size))
    rest = rows[len(prefix) :]
    if not rest:
        return f"{arm}: within at every global batch up to {prefix[-1]}"
    head = f"{arm}: within up to global batch {prefix[-1]}; " if prefix else f"{arm}: "
    return head + ", ".join(
        f"{int(r.global_batch_size)} {r.verdict} ({100 * r.difference:+.2f} points)" for r in rest
    )
