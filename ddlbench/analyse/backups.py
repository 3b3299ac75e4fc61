"""Stragglers on purpose and backup workers: what was injected, who was dropped, and whether
backups paid off (docs/backup-workers.md, docs/metrics.md).

Per run (:func:`injection_table`): the ranks slowed on purpose (share of measured steps and
total delay), the straggler index and slowest rank beside them, whether the analysis found
the injected rank, and each rank's drop rate (measured steps whose gradient was dropped over
measured steps).

Per pair of configurations (:func:`backup_verdicts`): every configuration with backup workers
against each plain one (no ``backup_workers``) of the same mode, model, per-rank batch and
variant, with the same number of ranks or with as many ranks as it keeps gradients
(``N = ranks - b``). Over the complete repeats, with ddlbench's one-sided Welch tests
(:func:`~ddlbench.analyse.verdicts.change_verdicts`, ``alpha``, ``min_gain``):

- step time: the runs' median step times (their geometric mean over repeats), tested as steps
  per second (faster = improved);
- time to accuracy: the runs' ``time_to_accuracy_s`` (convergence mode, runs that reached
  the target), tested as its inverse;
- accuracy: final accuracy, ``within`` / ``outside`` a margin (``accuracy_margin``, default
  1 point) below the plain configuration, as in the large-batch study.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy as np
import pandas as pd

from .stats import log_stats
from .verdicts import VerdictSettings, change_verdicts, welch_margin

PLAIN = -1  # the backup count of a plain (DDP) configuration


def _per_run(ranks: pd.DataFrame) -> pd.DataFrame:
    """Per run: backup count, injected ranks and drop rates from the ranks table."""
    need = {"summary_injected_steps", "summary_backup_workers", "summary_steps_measured"}
    if not len(ranks) or not need <= set(ranks.columns):
        return pd.DataFrame()
    rows = []
    for run_id, g in ranks.groupby("run_id", sort=True):
        g = g.sort_values("rank")
        inj = g["summary_injected_steps"].astype(float)
        bw = g["summary_backup_workers"].astype(float)
        if inj.isna().all() and bw.isna().all():
            continue
        steps = g["summary_steps_measured"].astype(float).to_numpy()
        rk = g["rank"].astype(int).to_numpy()
        injected_s = g["summary_injected_s"].astype(float).fillna(0).to_numpy()
        share = np.where(steps > 0, inj.fillna(0).to_numpy() / np.maximum(steps, 1), np.nan)
        drops = g["summary_dropped_steps"].astype(float).to_numpy()
        rate = np.where(steps > 0, drops / np.maximum(steps, 1), np.nan)
        hit = [i for i in range(len(rk)) if share[i] > 0]
        rows.append(
            {
                "run_id": run_id,
                "backup_workers": PLAIN if bw.isna().all() else int(bw.dropna().iloc[0]),
                "injected": "; ".join(
                    f"{rk[i]}: {100 * share[i]:.0f} % of steps, {injected_s[i]:.2f} s" for i in hit
                )
                or None,
                # "found" is asked only of a run whose injection hit one rank
                "most_injected_rank": int(rk[hit[0]]) if len(hit) == 1 else None,
                "drop_rates": "; ".join(f"{rk[i]}: {100 * rate[i]:.0f} %" for i in range(len(rk)))
                if not bw.isna().all()
                else None,
                "drop_rate_max": float(np.nanmax(rate)) if not np.isnan(rate).all() else None,
            }
        )
    return pd.DataFrame(rows)


def injection_table(runs: pd.DataFrame, ranks: pd.DataFrame) -> pd.DataFrame:
    """One row per run that injected stragglers or kept backup workers (see the module)."""
    per = _per_run(ranks)
    if not len(per) or not len(runs):
        return pd.DataFrame()
    cols = ["run_id", "group", "world_size", "status", "straggler_index", "straggler_metric"]
    cols += ["slowest_rank", "step_time_median_s"]
    t = per.merge(runs[[c for c in cols if c in runs]], on="run_id", how="left")
    t["found"] = [
        None if _nan(m) else (not _nan(s) and int(s) == int(m))
        for m, s in zip(t["most_injected_rank"], t["slowest_rank"])
    ]
    return t.sort_values("run_id").reset_index(drop=True)


def _nan(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _config_key(r: pd.Series) -> tuple:
    """(mode, model, the group's words after the scale: batch and variant)."""
    marker = f"-{r['model']}-n{int(r['nodes'])}x{int(r['tasks_per_node'])}"
    tail = str(r["group"]).split(marker, 1)[-1]
    return (r["mode"], r["model"], tail)


def _configs(runs: pd.DataFrame, per: pd.DataFrame) -> Dict[str, Dict[str, Any]]:
    """Per configuration: its key, ranks, backup count and per-repeat figures."""
    done = runs[runs["complete"]] if "complete" in runs else runs
    b = dict(zip(per["run_id"], per["backup_workers"])) if len(per) else {}
    out: Dict[str, Dict[str, Any]] = {}
    for group, g in done.groupby("group", sort=True):
        first = g.iloc[0]
        out[group] = {
            "key": _config_key(first),
            "world": int(first["world_size"]),
            "b": int(b.get(first["run_id"], PLAIN)),
            "step": g["step_time_median_s"].astype(float).to_numpy(),
            "tta": g["time_to_accuracy_s"].astype(float).to_numpy(),
            "acc": g["final_accuracy"].astype(float).to_numpy(),
        }
    return out


def _stats(x: np.ndarray) -> tuple:
    x = x[~np.isnan(x)]
    if not len(x):
        return math.nan, math.nan, 0
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else math.nan, len(x)


def _faster(base: np.ndarray, new: np.ndarray, vs: VerdictSettings) -> Dict[str, Any]:
    """Verdict on a time (lower is better) through its inverse (the rate), and the change of
    the geometric means of the times: the one rule of :mod:`ddlbench.analyse.stats`, where
    the log of a rate is minus the log of its time."""
    la, sa, na = log_stats(base)
    lb, sb, nb = log_stats(new)
    out = {"base": math.exp(la) if na else math.nan, "new": math.exp(lb) if nb else math.nan}
    out.update(change=math.nan, verdict=None, p=math.nan)
    out["reason"] = "no complete repeat with a value on one side"
    if not na or not nb:
        return out
    out["change"] = out["new"] / out["base"] - 1.0
    v = change_verdicts(-la, sa, na, -lb, sb, nb, vs)[0]
    out.update(verdict=v.verdict, p=v.p_value, reason=v.reason)
    return out


def _accuracy(base: np.ndarray, new: np.ndarray, margin: float, alpha: float) -> Dict[str, Any]:
    ma, sa, na = _stats(base)
    mb, sb, nb = _stats(new)
    out = {"base": ma, "new": mb, "difference": mb - ma, "verdict": None}
    if na < 2 or nb < 2:
        return out
    p_in = float(welch_margin(ma - margin, sa, na, mb, sb, nb)[0][0])
    p_out = float(welch_margin(mb, sb, nb, ma - margin, sa, na)[0][0])
    out["verdict"] = "within" if p_in < alpha else ("outside" if p_out < alpha else "undetermined")
    return out


def backup_verdicts(
    runs: pd.DataFrame, ranks: pd.DataFrame, vs: VerdictSettings, margin: float
) -> pd.DataFrame:
    """One row per (configuration with backups, plain configuration it is compared with)."""
    per = _per_run(ranks)
    need = {"group", "complete", "step_time_median_s", "time_to_accuracy_s", "final_accuracy"}
    if not len(per) or not len(runs) or not need <= set(runs.columns):
        return pd.DataFrame()
    configs = _configs(runs, per)
    rows: List[Dict[str, Any]] = []
    for group, c in configs.items():
        if c["b"] < 0:  # b = 0 too: the cost of the mechanism
            continue
        for base_group, base in configs.items():
            if base["b"] != PLAIN or base["key"] != c["key"]:
                continue
            if base["world"] not in (c["world"], c["world"] - c["b"]):
                continue
            rows.append(_pair_row(group, c, base_group, base, vs, margin))
    return pd.DataFrame(rows)


def _pair_row(
    group: str, c: Dict[str, Any], base_group: str, base: Dict[str, Any], vs, margin: float
) -> Dict[str, Any]:
    step = _faster(base["step"], c["step"], vs)
    tta = _faster(base["tta"], c["tta"], vs)
    acc = _accuracy(base["acc"], c["acc"], margin, vs.alpha)
    row: Dict[str, Any] = {
        "group": group,
        "backup_workers": c["b"],
        "world_size": c["world"],
        "baseline": base_group,
        "baseline_world_size": base["world"],
        "repeats": int(min(np.sum(~np.isnan(c["step"])), np.sum(~np.isnan(base["step"])))),
    }
    for name, d in (("step", step), ("tta", tta)):
        for k, v in d.items():
            row[f"{name}_{k}"] = v
    for k, v in acc.items():
        row[f"accuracy_{k}"] = v
    return row


def sentences(table: pd.DataFrame, vs: VerdictSettings, margin: float) -> List[str]:
    """The report's answers, one sentence per compared pair."""
    out = []
    for r in table.itertuples(index=False) if len(table) else []:
        parts = [_time_text("step time", r.step_change, r.step_verdict, r.step_reason)]
        if r.tta_verdict is not None or not _nan(r.tta_base) or not _nan(r.tta_new):
            parts.append(_time_text("time to accuracy", r.tta_change, r.tta_verdict, r.tta_reason))
        if not _nan(r.accuracy_difference):
            verdict = r.accuracy_verdict or "undetermined (fewer than 2 repeats)"
            parts.append(
                f"final accuracy {100 * r.accuracy_new:.2f} % vs {100 * r.accuracy_base:.2f} % "
                f"({100 * r.accuracy_difference:+.2f} points; {verdict} "
                f"{100 * margin:g} point(s) of the plain run)"
            )
        out.append(
            f"Backup workers: {r.group} ({r.world_size} ranks, b = {r.backup_workers}) against "
            f"{r.baseline} ({r.baseline_world_size} ranks, plain synchronous SGD), "
            f"{r.repeats} repeat(s), one-sided Welch tests at alpha {vs.alpha:g}: "
            + "; ".join(parts)
            + "."
        )
    return out


def _time_text(what: str, change: float, verdict: Optional[str], reason: str) -> str:
    if _nan(change):
        return f"{what}: no data ({reason})"
    word = {"improved": "shorter", "regressed": "longer"}.get(verdict or "", verdict or "")
    return f"{what} {100 * change:+.1f} % ({word}; {reason})"
