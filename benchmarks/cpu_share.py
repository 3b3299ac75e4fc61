"""Does ``cpu-share`` slow only the rank it targets? The cgroup form against competitors.

Runs a throughput campaign on the local executor: 3 PyTorch ranks over gloo (1 thread each),
LeNet at 128 samples per rank on digits, on the backup-worker path with ``backup_workers: 0``
(so a rank's ``compute_s`` is its own forward and backward, without waiting for the others),
with no straggler and with rank 2 slowed ``--slowdown`` times by ``kind: cpu-share`` made by a
cgroup CPU quota (``cpu_share_by: cgroup``) and by competing processes
(``cpu_share_by: competitors``), ``--repeats`` runs of each, interleaved. Prints, per form,
the median compute time of rank 2 and of the other ranks (the median over runs of each
rank's median ``compute_s``) and their ratios to the run without a straggler (docs/stragglers.md):

- the target's ratio should be about the slowdown;
- the others' ratio about 1 with the cgroup form; on a machine where the ranks share cores,
  the competitors slow them too.

    python benchmarks/cpu_share.py [--repeats 2] [--steps 20] [--slowdown 5]

Needs the torch environment and a cgroup the ranks may make a child in (root with cgroup
v1's cpu controller, or a delegated cgroup v2 subtree); without one the cgroup runs fail
with the reason. About 15 s per run on a busy 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = """\
name: cpu-share
cluster: local
model: lenet
data: digits
frameworks:
  - {{name: pytorch, label: b0, backend: gloo, threads: 1, backup_workers: 0}}
batch_size: 128
steps: {{warmup: 5, measure: {steps}}}
optimizer: {{lr: 0.05, momentum: 0.9, weight_decay: 0.0}}
lr_scaling: {{rule: none}}
scale: {{points: [1x3]}}
variants:
  - {{label: clean, inject: {{}}}}
  - {{label: cgroup, inject: {{straggler: {{kind: cpu-share, cpu_share_by: cgroup, ranks: [2], slowdown: {slowdown}}}}}}}
  - {{label: competitors, inject: {{straggler: {{kind: cpu-share, cpu_share_by: competitors, ranks: [2], slowdown: {slowdown}}}}}}}
repeats: {repeats}
"""  # noqa: E501
FORMS = ("cgroup", "competitors")


def ddlbench(results: Path, *args: str) -> None:
    env = dict(os.environ, DDLBENCH_RESULTS=str(results), PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "ddlbench", *args], env=env, check=True)


def compute_medians(ranks) -> Dict[tuple, float]:
    """``(variant, "target"|"others") -> median`` over runs and ranks of the median compute_s."""
    per: Dict[tuple, List[float]] = {}
    for run_id, g in ranks.groupby("run_id"):
        variant = run_id.split("-b128-", 1)[1].rsplit("-r", 1)[0]  # b0-lenet-n1x3-b128-<v>-r<k>
        for rank, value in zip(g["rank"], g["compute_median_s"]):
            who = "target" if int(rank) == 2 else "others"
            per.setdefault((variant, who), []).append(float(value))
    return {k: statistics.median(v) for k, v in per.items()}


def report(med: Dict[tuple, float], slowdown: float, by: Dict[str, List[str]]) -> None:
    print(os.popen("uptime").read().strip())
    t0, o0 = med[("clean", "target")], med[("clean", "others")]
    print(f"no straggler: rank 2 {1e3 * t0:.1f} ms, ranks 0-1 {1e3 * o0:.1f} ms median compute")
    for form in FORMS:
        t, o = med[(form, "target")], med[(form, "others")]
        print(
            f"{form} ({', '.join(sorted(set(by.get(form, []))))}), {slowdown:g}x on rank 2: "
            f"rank 2 {1e3 * t:.1f} ms ({t / t0:.2f}x), ranks 0-1 {1e3 * o:.1f} ms ({o / o0:.2f}x)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--slowdown", type=int, default=5)
    ap.add_argument("--keep", help="results folder to keep (default: a temporary one)")
    args = ap.parse_args()
    from ddlbench.collect.collector import ensure_collected

    with tempfile.TemporaryDirectory() as tmp:
        results = Path(args.keep or tmp)
        results.mkdir(parents=True, exist_ok=True)
        spec = results / "cpu-share.yaml"
        text = SPEC.format(steps=args.steps, repeats=args.repeats, slowdown=args.slowdown)
        spec.write_text(text)
        ddlbench(results, "submit", str(spec), "--campaign", "cpu-share")
        ddlbench(results, "wait", "cpu-share", "--timeout", "1200")
        data = ensure_collected(results / "cpu-share")
        ranks = data.ranks
        target = ranks[ranks["rank"] == 2]
        by: Dict[str, List[str]] = {}
        for run_id, value in zip(target["run_id"], target["summary_cpu_share_by"]):
            if isinstance(value, str):
                by.setdefault(run_id.split("-b128-", 1)[1].rsplit("-r", 1)[0], []).append(value)
        report(compute_medians(ranks), args.slowdown, by)
    return 0


if __name__ == "__main__":
    sys.exit(main())
