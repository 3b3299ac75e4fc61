"""The figures of docs/studies/backup-workers.md from collected campaigns of
configs/backup-workers-mini.yaml (convergence) and configs/backup-workers-sweep.yaml
(throughput), or any campaign with backup and plain configurations.

Per configuration (run group without the repeat): runs, median over runs of the median step
time, of the samples applied per second (``applied_samples_per_s``: dropped gradients train
nothing) and of the global throughput, the dropped share of samples, and in convergence mode
the time to accuracy as survival data: a run that never reached the target is **censored**
at its last evaluation, not dropped; the Kaplan-Meier median and the reached count are
printed. Then the pairs the study asks for, per variant: b=1 against b=0 on the same ranks
(like with like), b=1 against plain DDP with N = R - b ranks (the paper's comparison), b=0
against plain DDP with as many ranks (the mechanism's cost): the change of the medians, a
Welch test on the runs' steps per second and on their applied samples per second, and a
log-rank test on the censored times to accuracy.

    python docs/studies/backup_workers_study.py --submit        # both configs, then figures
    python docs/studies/backup_workers_study.py results/backup-workers-mini [...]

Runs on the login node's Python, in ddlbench's own environment (numpy, pandas, pyarrow: its
dependencies; no scipy): the Kaplan-Meier median and the log-rank test are those of the report
(:mod:`ddlbench.analyse.backups`), the Welch test is ddlbench's
(:func:`ddlbench.analyse.verdicts.welch_margin`).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# one Kaplan-Meier median and one log-rank test, shared with the report
from ddlbench.analyse.backups import km_median, logrank_p  # noqa: E402

CONFIGS = ("configs/backup-workers-mini.yaml", "configs/backup-workers-sweep.yaml")
GROUP = re.compile(r"^(?P<label>[^-]+)-(?P<model>[^-]+)-n(?P<nodes>\d+)x(?P<tasks>\d+)-b\d+")


def welch_p(a: np.ndarray, b: np.ndarray) -> Optional[float]:
    """Two-sided Welch t-test of two samples (Welch-Satterthwaite degrees of freedom; the
    p-value of ``scipy.stats.ttest_ind(a, b, equal_var=False)``), from ddlbench's own one-sided
    test (:func:`ddlbench.analyse.verdicts.welch_margin`): no scipy needed."""
    from ddlbench.analyse.verdicts import welch_margin

    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) < 2 or len(b) < 2:
        return None
    greater = float(
        welch_margin(b.mean(), b.std(ddof=1), len(b), a.mean(), a.std(ddof=1), len(a))[0][0]
    )
    if math.isnan(greater):
        return None
    return min(1.0, 2.0 * min(greater, 1.0 - greater))


def per_run(root: Path) -> pd.DataFrame:
    """One row per complete run: configuration, variant, ranks, b, figures, censored TTA."""
    from ddlbench.collect.collector import ensure_collected

    data = ensure_collected(root)
    runs = data.runs.copy()
    runs = runs[runs["throughput"].notna()]
    path = root / "data" / "evals.parquet"
    evals = pd.read_parquet(path) if path.exists() else None
    last_eval = (
        evals[evals["rank"] == 0].groupby("run_id")["elapsed_s"].max()
        if evals is not None and len(evals)
        else pd.Series(dtype=float)
    )
    rows = []
    for r in runs.itertuples(index=False):
        m = GROUP.match(r.run_id)
        if m is None:
            continue
        label = m["label"]
        variant = r.group[m.end() :].lstrip("-") or "-"
        reached = r.time_to_accuracy_s == r.time_to_accuracy_s and r.time_to_accuracy_s is not None
        rows.append(
            {
                "label": label,
                "variant": variant,
                "ranks": int(m["nodes"]) * int(m["tasks"]),
                "backups": int(label[6:]) if label.startswith("backup") else None,
                "config": f"{label}@{int(m['nodes']) * int(m['tasks'])}",
                "step_s": r.step_time_median_s,
                "applied": r.applied_samples_per_s,
                "throughput": r.throughput,
                "dropped": r.dropped_samples,
                "samples": r.samples_measured,
                "accuracy": r.final_accuracy,
                "reached": bool(reached),
                "tta": r.time_to_accuracy_s if reached else last_eval.get(r.run_id, np.nan),
            }
        )
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> None:
    print(
        "configuration  variant  runs  step ms  applied/s  samples/s  dropped  "
        "reached, KM median TTA s  final acc"
    )
    for (config, variant), g in sorted(df.groupby(["config", "variant"])):
        tta, acc = "-", "-"  # throughput mode: no target, no accuracy
        if g["tta"].notna().any():
            km = km_median(g["tta"].to_numpy(float), g["reached"].to_numpy(bool))
            tta = "not reached" if km is None else f"{km:.1f}"
            tta = f"{int(g['reached'].sum())}/{len(g)} {tta}"
        if g["accuracy"].notna().any():
            acc = f"{100 * g['accuracy'].mean():.2f}%"
        dropped = float(g["dropped"].sum() / g["samples"].sum()) if g["samples"].sum() else 0
        print(
            f"{config:<14} {variant:<8} {len(g):>4}  {1e3 * g['step_s'].median():7.1f}  "
            f"{g['applied'].median():9.0f}  {g['throughput'].median():9.0f}  "
            f"{100 * dropped:6.1f}%  {tta:>22}  {acc:>8}"
        )


def compare(df: pd.DataFrame, new: str, base: str, why: str) -> None:
    for variant in sorted(df["variant"].unique()):
        a = df[(df["config"] == new) & (df["variant"] == variant)]
        b = df[(df["config"] == base) & (df["variant"] == variant)]
        if a.empty or b.empty:
            continue
        step = a["step_s"].median() / b["step_s"].median() - 1
        appl = a["applied"].median() / b["applied"].median() - 1
        p_step = welch_p(1 / a["step_s"].to_numpy(float), 1 / b["step_s"].to_numpy(float))
        p_appl = welch_p(a["applied"].to_numpy(float), b["applied"].to_numpy(float))
        line = (
            f"{new} vs {base} ({why}), {variant}, {len(a)} vs {len(b)} runs: median step "
            f"{100 * step:+.1f} % (Welch p = {_p(p_step)}); applied samples/s "
            f"{100 * appl:+.1f} % (p = {_p(p_appl)})"
        )
        if a["tta"].notna().any() and b["tta"].notna().any():
            p_tta = logrank_p(
                a["tta"].to_numpy(float),
                a["reached"].to_numpy(bool),
                b["tta"].to_numpy(float),
                b["reached"].to_numpy(bool),
            )
            line += (
                f"; reached {int(a['reached'].sum())}/{len(a)} vs {int(b['reached'].sum())}/"
                f"{len(b)}, time to accuracy log-rank p = {_p(p_tta)} (censored runs kept)"
            )
        print(line)


def _p(p: Optional[float]) -> str:
    return "n/a" if p is None else f"{p:.3f}"


def pairs(df: pd.DataFrame) -> List[Tuple[str, str, str]]:
    """The comparisons of the study, as ``(new, base, why)``; a backup configuration that keeps
    fewer than 2 gradients (``N = R - b < 2``) is no data-parallel SGD and is left out."""
    out = []
    for ranks in sorted(df["ranks"].unique()):
        for b in sorted(x for x in df["backups"].dropna().unique() if 0 < x <= ranks - 2):
            out.append((f"backup{int(b)}@{ranks}", f"backup0@{ranks}", "same path, b = 0"))
            out.append((f"backup{int(b)}@{ranks}", f"sync@{ranks - int(b)}", "DDP with N ranks"))
        out.append((f"backup0@{ranks}", f"sync@{ranks}", "the mechanism's cost"))
    return out


def submit(results: Path) -> List[Path]:
    env = dict(os.environ, DDLBENCH_RESULTS=str(results), PYTHONPATH=str(ROOT))
    roots = []
    for config in CONFIGS:
        name = Path(config).stem
        subprocess.run(
            [sys.executable, "-m", "ddlbench", "submit", str(ROOT / config)], env=env, check=True
        )
        subprocess.run(
            [sys.executable, "-m", "ddlbench", "wait", name, "--timeout", "36000"],
            env=env,
            check=True,
        )
        roots.append(results / name)
    return roots


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaigns", nargs="*", help="collected campaign folders")
    ap.add_argument("--submit", action="store_true", help="submit and wait for both configs")
    ap.add_argument("--results", default="results", help="results folder for --submit")
    args = ap.parse_args()
    roots = submit(Path(args.results)) if args.submit else [Path(c) for c in args.campaigns]
    for root in roots:
        print(f"== {root.name}")
        df = per_run(root)
        if df.empty:
            print("no complete runs")
            continue
        summary(df)
        configs: Dict[str, bool] = {c: True for c in df["config"].unique()}
        for new, base, why in pairs(df):
            if new in configs and base in configs:
                compare(df, new, base, why)
    return 0


if __name__ == "__main__":
    sys.exit(main())
