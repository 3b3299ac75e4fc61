"""What does the backup-worker code path cost against plain DDP when nothing is dropped?

Runs a throughput campaign on the local executor (LeNet on digits, gloo, no stragglers):
plain DDP (``sync``) against ``backup_workers: 0`` (``backup0``: the arrival tickets, the
masked allreduce after backward, no overlap; nothing is ever dropped), at 2 and 3 ranks,
``--repeats`` runs each, then prints the median step time of each configuration and the
change with ddlbench's verdict (one-sided Welch tests, docs/backup-workers.md).

    python benchmarks/backup_overhead.py [--repeats 3] [--steps 60] [--keep DIR]

Needs the torch environment (scripts/make-envs.sh torch). Takes about 1 minute per run on a
busy 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = """\
name: backup-overhead
cluster: local
model: lenet
data: digits
frameworks:
  - {{name: pytorch, label: sync, backend: gloo, threads: 1}}
  - {{name: pytorch, label: backup0, backend: gloo, threads: 1, backup_workers: 0}}
batch_size: 32
steps: {{warmup: 5, measure: {steps}}}
optimizer: {{lr: 0.05, momentum: 0.9, weight_decay: 0.0}}
lr_scaling: {{rule: none}}
scale: {{points: [1x2, 1x3]}}
repeats: {repeats}
"""


def ddlbench(results: Path, *args: str) -> None:
    env = dict(os.environ, DDLBENCH_RESULTS=str(results), PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "ddlbench", *args], env=env, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--keep", help="results folder to keep (default: a temporary one)")
    args = ap.parse_args()
    from ddlbench.analyse.analysis import Settings
    from ddlbench.analyse.backups import backup_verdicts
    from ddlbench.collect.collector import ensure_collected

    with tempfile.TemporaryDirectory() as tmp:
        results = Path(args.keep or tmp)
        spec = results / "backup-overhead.yaml"
        results.mkdir(parents=True, exist_ok=True)
        spec.write_text(SPEC.format(steps=args.steps, repeats=args.repeats))
        ddlbench(results, "submit", str(spec), "--campaign", "backup-overhead")
        ddlbench(results, "wait", "backup-overhead", "--timeout", "3600")
        data = ensure_collected(results / "backup-overhead")
        st = Settings()
        table = backup_verdicts(data.runs, data.ranks, st.verdicts(), st.accuracy_margin)
        for r in table.itertuples(index=False):
            print(
                f"{r.group} vs {r.baseline}: median step {1e3 * r.step_new:.2f} ms vs "
                f"{1e3 * r.step_base:.2f} ms ({100 * r.step_change:+.1f} %, {r.step_verdict}; "
                f"{r.step_reason}; {r.repeats} repeats)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
