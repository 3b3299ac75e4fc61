"""Runs and ranks tables of a backup-worker campaign, as the collector leaves them, for the
backup comparisons' tests: each configuration's repeats with a given step time."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import pandas as pd

BATCH = 32


def _run(label: str, ranks: int, b: Optional[int], i: int, step: float, **kw) -> Dict:
    group = f"{label}-lenet-n1x{ranks}-b{BATCH}"
    kept = ranks - (b or 0)
    row = {
        "run_id": f"{group}-r{i}",
        "group": group,
        "model": "lenet",
        "mode": "convergence",
        "nodes": 1,
        "tasks_per_node": ranks,
        "world_size": ranks,
        "status": "ok",
        "complete": True,
        "slowest_rank": 0,
        "straggler_index": 1.0,
        "straggler_metric": "compute",
        "step_time_median_s": step,
        "throughput": ranks * BATCH / step,
        "applied_samples_per_s": kept * BATCH / step,
        "target_accuracy": 0.9,
        "time_to_accuracy_s": kw.get("tta", 10 * step),
        "final_accuracy": kw.get("acc", 0.95 + 0.001 * i),
    }
    return row


def _ranks(run: Dict, b: Optional[int]) -> List[Dict]:
    return [
        {
            "run_id": run["run_id"],
            "rank": r,
            "summary_steps_measured": 10.0,
            "summary_injected_steps": 0.0,
            "summary_injected_s": 0.0,
            "summary_backup_workers": None if b is None else float(b),
            "summary_dropped_steps": None if b is None else 0.0,
        }
        for r in range(run["world_size"])
    ]


def backup_campaign(configs: Sequence[tuple]):
    """configs: (label, ranks, b, steps, extra per repeat or None)."""
    runs, ranks = [], []
    for label, n, b, steps, extra in configs:
        for i, step in enumerate(steps):
            runs.append(_run(label, n, b, i, step, **((extra or {}).get(i, {}))))
            ranks += _ranks(runs[-1], b)
    return pd.DataFrame(runs), pd.DataFrame(ranks)
