"""The figure of docs/studies/backup-workers.md from a collected campaign of
configs/backup-workers-mini.yaml: left, the step times of rank 0 over all measured steps of
all repeats, per configuration (box: quartiles, whiskers: 5th and 95th percentiles); right,
validation accuracy against training time, one line per run.

    python docs/studies/backup_workers_figure.py results/backup-workers-mini out.png
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def main(campaign: str, out: str) -> None:
    data = Path(campaign) / "data"
    steps = pd.read_parquet(data / "steps.parquet")
    evals = pd.read_parquet(data / "evals.parquet")
    steps = steps[(steps["rank"] == 0) & (steps["phase"] == "measure")]
    steps = steps.assign(config=steps["run_id"].str.split("-").str[0])
    configs = sorted(steps["config"].unique(), key=lambda c: (c != "sync", c))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    times = [
        1e3 * (g["t_end"] - g["t_start"]) for c in configs for g in [steps[steps["config"] == c]]
    ]
    ax1.boxplot(times, tick_labels=configs, whis=(5, 95), showfliers=False)
    ax1.set_ylabel("step time, rank 0 (ms)")
    ax1.set_title("Step time under injected stragglers")
    colours = dict(zip(configs, ["tab:red", "tab:grey", "tab:blue", "tab:green"]))
    evals = evals[evals["rank"] == 0]
    for run_id, g in evals.groupby("run_id"):
        c = run_id.split("-")[0]
        ax2.plot(g["elapsed_s"], g["accuracy"], color=colours[c], alpha=0.6, marker=".")
    for c in configs:
        ax2.plot([], [], color=colours[c], label=c)
    ax2.set_xlabel("training time (s)")
    ax2.set_ylabel("validation accuracy")
    ax2.set_title("Accuracy against time, every run")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
