"""Stragglers on purpose and backup workers: what was injected, who was dropped, and whether
backups paid off (docs/backup-workers.md, docs/metrics.md).

Per run (:func:`injection_table`): the ranks slowed on purpose (share of measured steps and
total delay), the straggler index and slowest rank beside them, whether the analysis found
the injected rank, and each rank's drop rate (measured steps whose gradient was dropped over
measured steps).

Per pair of configurations (:func:`backup_verdicts`) of the same mode, model, per-rank batch
and variant (:func:`pairings`, the comparisons of docs/studies/backup-workers.md):

- ``cost``: ``b = 0`` against plain DDP on as many ranks (what the mechanism costs);
- ``like``: ``b > 0`` against ``b = 0`` on the same ranks (what the backups buy, like with
  like); where the campaign has no ``b = 0`` there, against plain DDP on the same ranks
  (``same ranks``: the backups and the mechanism together);
- ``paper``: ``b > 0`` against plain DDP on ``N = R - b`` ranks (Chen et al.'s comparison).

Over the complete repeats, with ddlbench's one-sided Welch tests on the logs
(:func:`~ddlbench.analyse.verdicts.change_verdicts`, ``alpha``, ``min_gain``):

- applied samples per second (``applied_samples_per_s``: dropped gradients train nothing;
  plain runs' ``throughput`` where the column is missing): geometric means, their 95 %
  t-interval on the logs and that of the change (:mod:`ddlbench.analyse.stats`);
- step time: the runs' median step times (their geometric mean over repeats), tested as steps
  per second (faster = improved); it counts steps, not the samples they apply;
- time to accuracy (a target set): when every run of both sides reached it, the geometric
  means of ``time_to_accuracy_s``, tested as above; when some missed, the runs that missed are
  kept as **censored** at their last evaluation (the lowest rank's, as the collector times the
  target): Kaplan-Meier medians (:func:`km_median`) and a one-sided log-rank test
  (:func:`logrank_z`; no ``min_gain``); no comparison when a run that missed has no evaluation;
- accuracy: final accuracy, ``within`` / ``outside`` a margin (``accuracy_margin``, default
  1 point) below the baseline, as in the large-batch study.

The verdicts are stored as the tests name them (``improved``, ``regressed``, ...); the
sentences and the table say them in one vocabulary (:func:`verdict_words`: ``more`` /
``fewer`` applied samples, ``shorter`` / ``longer`` steps, ``sooner`` / ``later`` to the
target). A side with a complete run that started on a busy node (``busy``) makes the speed
verdicts inconclusive (:func:`~ddlbench.analyse.verdicts.busy_verdict`); the accuracy verdict
stays (interference changes how fast a run goes, not what a step computes).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from .stats import gmean_interval, log_stats
from .verdicts import (
    VerdictSettings,
    busy_note,
    busy_runs,
    busy_verdict,
    change_intervals,
    change_verdicts,
    welch_margin,
)

PLAIN = -1  # the backup count of a plain (DDP) configuration
COST, LIKE, SAME_RANKS, PAPER = "cost", "like", "same ranks", "paper"
#: what each pairing answers, as the sentences and the table say it
PAIRING = {
    COST: "the mechanism's cost",
    LIKE: "what the backups buy, like with like",
    SAME_RANKS: "no b = 0 on these ranks: the backups and the mechanism together",
    PAPER: "the paper's comparison, plain DDP with N = R - b ranks",
}
CENSORED = "censored"
#: the tests' verdicts in the words of each measure (the sentences and the table)
WORDS = {
    "applied": {"improved": "more", "regressed": "fewer"},
    "step": {"improved": "shorter", "regressed": "longer"},
    "tta": {"improved": "sooner", "regressed": "later"},
}
_DECISIVE = ("improved", "regressed", "unchanged")


def verdict_words(measure: str, verdict: Optional[str]) -> Optional[str]:
    """A verdict of ``measure`` (``applied``, ``step``, ``tta``) in the report's words."""
    return None if verdict is None else WORDS[measure].get(verdict, verdict)


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


def _col(g: pd.DataFrame, name: str) -> np.ndarray:
    if name not in g:
        return np.full(len(g), math.nan)
    return pd.to_numeric(g[name], errors="coerce").astype(float).to_numpy()


def _last_evals(evals: Optional[pd.DataFrame]) -> Dict[str, float]:
    """Per run: the elapsed time of the lowest rank's last evaluation (where a run that missed
    the target is censored; the collector times the target on the lowest rank too)."""
    if evals is None or not len(evals) or not {"run_id", "rank", "elapsed_s"} <= set(evals):
        return {}
    low = evals[evals["rank"] == evals.groupby("run_id")["rank"].transform("min")]
    return low.groupby("run_id")["elapsed_s"].max().astype(float).to_dict()


def _configs(
    runs: pd.DataFrame, per: pd.DataFrame, last: Dict[str, float]
) -> Dict[str, Dict[str, Any]]:
    """Per configuration: its key, ranks, backup count and per-repeat figures."""
    done = runs[runs["complete"].fillna(False).astype(bool)] if "complete" in runs else runs
    b = dict(zip(per["run_id"], per["backup_workers"])) if len(per) else {}
    out: Dict[str, Dict[str, Any]] = {}
    for group, g in done.groupby("group", sort=True):
        first = g.iloc[0]
        backups = int(b.get(first["run_id"], PLAIN))
        applied = _col(g, "applied_samples_per_s")
        if backups == PLAIN:  # plain DDP applies every sample
            applied = np.where(np.isnan(applied), _col(g, "throughput"), applied)
        tta = _col(g, "time_to_accuracy_s")
        ends = np.array([last.get(r, math.nan) for r in g["run_id"]], dtype=float)
        out[str(group)] = {
            "key": _config_key(first),
            "world": int(first["world_size"]),
            "b": backups,
            "step": _col(g, "step_time_median_s"),
            "applied": applied,
            "tta": tta,
            "ends": np.where(np.isnan(tta), ends, tta),
            "target": bool(np.isfinite(_col(g, "target_accuracy")).any() or np.isfinite(tta).any()),
            "acc": _col(g, "final_accuracy"),
        }
    return out


def pairings(configs: Dict[str, Dict[str, Any]]) -> List[Tuple[str, str, str]]:
    """``(configuration, baseline, kind)`` for every comparison the module describes."""

    def find(c: Dict[str, Any], world: int, b: int) -> List[str]:
        return [
            g
            for g, o in configs.items()
            if o["key"] == c["key"] and (o["world"], o["b"]) == (world, b)
        ]

    out: List[Tuple[str, str, str]] = []
    for group, c in configs.items():
        if c["b"] == 0:
            out += [(group, g, COST) for g in find(c, c["world"], PLAIN)]
        elif c["b"] > 0:
            like = find(c, c["world"], 0)
            out += [(group, g, LIKE) for g in like]
            out += [] if like else [(group, g, SAME_RANKS) for g in find(c, c["world"], PLAIN)]
            out += [(group, g, PAPER) for g in find(c, c["world"] - c["b"], PLAIN)]
    return out


def km_median(times: np.ndarray, reached: np.ndarray) -> Optional[float]:
    """Kaplan-Meier median time to accuracy: runs that never reached the target stay at risk
    until their (censoring) time; None when the survival curve stays above one half. Where the
    curve sits at exactly one half between two events, the midpoint of the two times (the
    convention of R's survival package): without censoring this is the ordinary median of the
    times, the figure the convergence table gives (with 2 runs their mean, not the shorter)."""
    times, reached = np.asarray(times, float), np.asarray(reached, bool)
    surv = 1.0
    events = np.unique(times[reached])
    for i, t in enumerate(events):
        at_risk = int((times >= t).sum())
        surv *= 1.0 - int(((times == t) & reached).sum()) / at_risk
        if abs(surv - 0.5) < 1e-9 and i + 1 < len(events):
            return float(0.5 * (t + events[i + 1]))
        if surv <= 0.5 + 1e-9:
            return float(t)
    return None


def logrank_z(t1: np.ndarray, e1: np.ndarray, t2: np.ndarray, e2: np.ndarray) -> Optional[float]:
    """The log-rank statistic ``(O1 - E1) / sqrt(V)`` of sample 1 against sample 2 (times,
    reached flags; censored where not reached): positive when sample 1 reaches the target
    sooner. None when no event leaves a variance."""
    t1, t2 = np.asarray(t1, float), np.asarray(t2, float)
    e1, e2 = np.asarray(e1, bool), np.asarray(e2, bool)
    o_minus_e, var = 0.0, 0.0
    for t in np.unique(np.concatenate([t1[e1], t2[e2]])):
        n1, n2 = int((t1 >= t).sum()), int((t2 >= t).sum())
        d1, d2 = int(((t1 == t) & e1).sum()), int(((t2 == t) & e2).sum())
        n, d = n1 + n2, d1 + d2
        if n < 2:
            continue
        o_minus_e += d1 - d * n1 / n
        var += d * (n1 / n) * (n2 / n) * (n - d) / (n - 1)
    return o_minus_e / math.sqrt(var) if var > 0 else None


def logrank_p(t1: np.ndarray, e1: np.ndarray, t2: np.ndarray, e2: np.ndarray) -> Optional[float]:
    """Two-sided log-rank test of two censored samples (chi-square, 1 degree of freedom)."""
    z = logrank_z(t1, e1, t2, e2)
    return None if z is None else math.erfc(abs(z) / math.sqrt(2.0))


def _pfmt(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


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


def _rate(base: np.ndarray, new: np.ndarray, vs: VerdictSettings) -> Dict[str, Any]:
    """A rate (higher is better): geometric means, the new side's 95 % interval, the change
    with the interval the one-sided tests read (Welch, on the logs; 90 % at alpha 0.05, as
    ``compare`` shows it: the verdict and the interval never disagree) and the verdict."""
    la, sa, na = log_stats(base)
    lb, sb, nb = log_stats(new)
    _, lo, hi = gmean_interval(lb, sb, nb, vs.confidence)
    out = {"base": math.exp(la) if na else math.nan, "new": math.exp(lb) if nb else math.nan}
    out.update(new_low=float(lo[0]), new_high=float(hi[0]), change=math.nan)
    out.update(change_low=math.nan, change_high=math.nan, verdict=None, p=math.nan)
    out["reason"] = "no complete repeat with a value on one side"
    if not na or not nb:
        return out
    ci = change_intervals((lb, sb, nb), (la, sa, na), vs)
    out.update(change=out["new"] / out["base"] - 1.0)
    out.update(change_low=ci["change_test_ci_low"], change_high=ci["change_test_ci_high"])
    out["change_level"] = ci["test_ci_level"]
    v = change_verdicts(la, sa, na, lb, sb, nb, vs)[0]
    out.update(verdict=v.verdict, p=v.p_value, reason=v.reason)
    return out


def _tta(base: Dict[str, Any], new: Dict[str, Any], vs: VerdictSettings) -> Dict[str, Any]:
    """Time to accuracy: geometric means when every run reached the target, else the runs that
    missed censored at their last evaluation (Kaplan-Meier medians, one-sided log-rank)."""
    hit_b, hit_n = np.isfinite(base["tta"]), np.isfinite(new["tta"])
    out: Dict[str, Any] = {"reached_new": int(hit_n.sum()), "runs_new": len(hit_n)}
    out.update(reached_base=int(hit_b.sum()), runs_base=len(hit_b), method=None)
    out.update(base=math.nan, new=math.nan, change=math.nan, verdict=None, p=math.nan)
    if not (base["target"] and new["target"]):
        return dict(out, reason="no target accuracy")
    if hit_b.all() and hit_n.all():
        return dict(out, method="all reached", **_faster(base["tta"], new["tta"], vs))
    if np.isnan(base["ends"]).any() or np.isnan(new["ends"]).any():
        why = "a run that missed the target has no evaluation to censor it at"
        return dict(out, reason=f"{why}: no comparison")
    km_b, km_n = km_median(base["ends"], hit_b), km_median(new["ends"], hit_n)
    out.update(method=CENSORED, base=km_b if km_b is not None else math.nan)
    out["new"] = km_n if km_n is not None else math.nan
    out["change"] = out["new"] / out["base"] - 1.0 if km_b and km_n else math.nan
    z = logrank_z(new["ends"], hit_n, base["ends"], hit_b)
    if z is None:
        return dict(out, verdict="inconclusive", reason="no run reached the target")
    sooner, later = 0.5 * math.erfc(z / math.sqrt(2)), 0.5 * math.erfc(-z / math.sqrt(2))
    p = min(sooner, later)
    verdict = "improved" if sooner < vs.alpha else "regressed" if later < vs.alpha else None
    why = f"one-sided log-rank {_pfmt(p)}"
    return dict(out, verdict=verdict or "inconclusive", p=p, reason=why)


def _stats(x: np.ndarray) -> tuple:
    x = x[~np.isnan(x)]
    if not len(x):
        return math.nan, math.nan, 0
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else math.nan, len(x)


def _accuracy(base: np.ndarray, new: np.ndarray, margin: float, alpha: float) -> Dict[str, Any]:
    ma, sa, na = _stats(base)
    mb, sb, nb = _stats(new)
    out = {"base": ma, "new": mb, "difference": mb - ma, "verdict": None, "p": math.nan}
    if na < 2 or nb < 2:
        return out
    p_in = float(welch_margin(ma - margin, sa, na, mb, sb, nb)[0][0])
    p_out = float(welch_margin(mb, sb, nb, ma - margin, sa, na)[0][0])
    out["verdict"] = "within" if p_in < alpha else ("outside" if p_out < alpha else "undetermined")
    out["p"] = p_in if p_in < alpha else p_out if p_out < alpha else min(p_in, p_out)
    return out


def backup_verdicts(
    runs: pd.DataFrame,
    ranks: pd.DataFrame,
    vs: VerdictSettings,
    margin: float,
    evals: Optional[pd.DataFrame] = None,
) -> pd.DataFrame:
    """One row per compared pair (:func:`pairings`); ``evals`` gives the time at which a run
    that missed the target is censored (without it such a run leaves no comparison)."""
    per = _per_run(ranks)
    need = {"group", "step_time_median_s", "time_to_accuracy_s", "final_accuracy"}
    if not len(per) or not len(runs) or not need <= set(runs.columns):
        return pd.DataFrame()
    configs = _configs(runs, per, _last_evals(evals))
    busy = busy_runs(runs)
    rows = [
        _pair_row(group, configs[group], base, configs[base], kind, vs, margin)
        for group, base, kind in pairings(configs)
    ]
    for r in rows:
        _busy(r, configs, busy)
    return pd.DataFrame(rows)


def _busy(row: Dict[str, Any], configs: Dict[str, Dict[str, Any]], busy: Dict[str, int]) -> None:
    """The busy-node note of a pair (``busy``) and the speed verdicts it allows (the one rule
    of :func:`~ddlbench.analyse.verdicts.busy_verdict`); the accuracy verdict stays."""
    sides = [
        (name, busy.get(g, 0), int(np.sum(~np.isnan(configs[g]["step"]))))
        for name, g in (("configuration", row["group"]), ("baseline", row["baseline"]))
    ]
    row["busy"] = busy_note(sides)
    for m in ("applied", "step", "tta"):
        if row[f"{m}_verdict"] not in _DECISIVE:  # the sentence's head says busy already
            continue
        v, why = busy_verdict(
            row[f"{m}_verdict"],
            row[f"{m}_reason"],
            row["busy"] and "busy node",
            _DECISIVE,
            WORDS[m],
        )
        row[f"{m}_verdict"], row[f"{m}_reason"] = v, why


def _pair_row(
    group: str,
    c: Dict[str, Any],
    base_group: str,
    base: Dict[str, Any],
    kind: str,
    vs: VerdictSettings,
    margin: float,
) -> Dict[str, Any]:
    row: Dict[str, Any] = {
        "comparison": kind,
        "group": group,
        "backup_workers": c["b"],
        "world_size": c["world"],
        "baseline": base_group,
        "baseline_backup_workers": base["b"],
        "baseline_world_size": base["world"],
        "repeats": int(min(np.sum(~np.isnan(c["step"])), np.sum(~np.isnan(base["step"])))),
    }
    parts = (
        ("applied", _rate(base["applied"], c["applied"], vs)),
        ("step", _faster(base["step"], c["step"], vs)),
        ("tta", _tta(base, c, vs)),
        ("accuracy", _accuracy(base["acc"], c["acc"], margin, vs.alpha)),
    )
    for name, d in parts:
        row.update({f"{name}_{k}": v for k, v in d.items()})
    return row


def sentences(table: pd.DataFrame, vs: VerdictSettings, margin: float) -> List[str]:
    """The report's answers, one sentence per compared pair: the applied samples per second
    first, the step time beside them (never alone), time to accuracy with the runs that
    reached the target on each side, and the final accuracy."""
    out = []
    for r in table.to_dict("records") if len(table) else []:
        parts = [_applied_text(r), _step_text(r)]
        tta = _tta_text(r)
        parts += [tta] if tta else []
        parts.append(_accuracy_text(r, margin))
        b0 = r["baseline_backup_workers"]
        base = "plain DDP" if b0 < 0 else f"b = {b0}"
        out.append(
            f"Backup workers: {r['group']} ({r['world_size']} ranks, b = {r['backup_workers']}) "
            f"against {r['baseline']} ({r['baseline_world_size']} ranks, {base}; "
            f"{PAIRING[r['comparison']]}), {r['repeats']} repeat(s)"
            + ("" if _nan(r.get("busy")) else f", {r['busy']}")
            + f", one-sided Welch tests at alpha {vs.alpha:g}: "
            + "; ".join(parts)
            + "."
        )
    return out


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _applied_text(r: Dict[str, Any]) -> str:
    if _nan(r["applied_change"]):
        return f"applied samples/s: no data ({r['applied_reason']})"
    verdict = r["applied_verdict"]
    word = verdict_words("applied", verdict)
    ci = ""
    if not _nan(r["applied_change_low"]):
        lo, hi = 100 * r["applied_change_low"], 100 * r["applied_change_high"]
        level = r.get("applied_change_level")
        level = 100 * (0.9 if level is None or _nan(level) else float(level))
        ci = f", {level:g} % CI {lo:+.1f} % to {hi:+.1f} %"
    return (
        f"applied samples/s {_num(r['applied_new'])} vs {_num(r['applied_base'])} "
        f"({100 * r['applied_change']:+.1f} %{ci}; {word}; {r['applied_reason']})"
    )


def _step_text(r: Dict[str, Any]) -> str:
    text = _time_text("step", r["step_change"], r["step_verdict"], r["step_reason"])
    if r["step_verdict"] == "improved" and r["applied_verdict"] != "improved":
        kept, ranks = r["world_size"] - r["backup_workers"], r["world_size"]
        each = f"each step applies {kept} of {ranks} ranks' batches, and " if kept < ranks else ""
        text += (
            f", which counts steps, not samples: {each}the applied samples per second did not "
            "rise significantly"
        )
    return text


def _tta_text(r: Dict[str, Any]) -> Optional[str]:
    if r["tta_method"] is None and r["tta_reason"] == "no target accuracy":
        return None
    reached = (
        f"time to the target: reached in {r['tta_reached_new']} of {r['tta_runs_new']} runs "
        f"vs {r['tta_reached_base']} of {r['tta_runs_base']}"
    )
    if r["tta_method"] is None:
        return f"{reached}; {r['tta_reason']}"
    if r["tta_method"] != CENSORED:
        return f"{reached}, " + _time_text(
            "tta", r["tta_change"], r["tta_verdict"], r["tta_reason"]
        )
    new = "not reached by half the runs" if _nan(r["tta_new"]) else f"{r['tta_new']:.3g} s"
    base = "not reached by half the runs" if _nan(r["tta_base"]) else f"{r['tta_base']:.3g} s"
    word = verdict_words("tta", r["tta_verdict"])
    return (
        f"{reached}, so the runs that missed count as censored at their last evaluation, not "
        f"dropped: Kaplan-Meier median {new} vs {base}, {r['tta_reason']} ({word})"
    )


def _accuracy_text(r: Dict[str, Any], margin: float) -> str:
    if _nan(r["accuracy_difference"]):
        return "final accuracy: not measured"
    m = f"{100 * margin:g} point{'' if 100 * margin == 1 else 's'}"
    verdict = r["accuracy_verdict"]
    if verdict == "within":
        said = f"within {m} of the baseline ({_pfmt(r['accuracy_p'])})"
    elif verdict == "outside":
        said = f"more than {m} below the baseline ({_pfmt(r['accuracy_p'])})"
    elif verdict == "undetermined":
        said = f"the repeats cannot tell whether it is within {m} of the baseline"
    else:
        said = f"too few repeats (fewer than 2 on a side) to test it against the {m} margin"
    return (
        f"final accuracy {100 * r['accuracy_new']:.2f} % vs {100 * r['accuracy_base']:.2f} % "
        f"({100 * r['accuracy_difference']:+.2f} points): {said}"
    )


def _time_text(measure: str, change: float, verdict: Optional[str], reason: str) -> str:
    what = {"step": "median step time", "tta": "geometric mean"}[measure]
    if _nan(change):
        return f"{what}: no data ({reason})"
    return f"{what} {100 * change:+.1f} % ({verdict_words(measure, verdict) or ''}; {reason})"
