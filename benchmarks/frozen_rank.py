"""A rank frozen with SIGSTOP on the loopback Slurm cluster, N trials at varied steps: how
often ddlbench names the frozen rank and its Slurm node, and only them (docs/bad-nodes.md).

Needs the torch environment and scripts/local-slurm.sh up. Prints one line per trial and the
count of right answers; exit 0 only when every trial was right.

    python benchmarks/frozen_rank.py --trials 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._frozen import freeze_trial  # noqa: E402
from benchmarks._slurm_campaign import ensure_cluster, release_cluster  # noqa: E402

#: where rank 1 is stopped: the first steps, mid-run, later, cycling
STEPS = (3, 8, 20, 40, 60, 90, 130, 180, 250, 330)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    started = ensure_cluster()
    right, took = 0, []
    try:
        with tempfile.TemporaryDirectory(prefix="ddlbench-frozen-") as tmp:
            for i in range(args.trials):
                step = STEPS[i % len(STEPS)]
                t = freeze_trial(Path(tmp), step, f"frozen{i}")
                right += t.right
                took.append(t.seconds_to_end)
                lates = ", ".join(f"rank {r}: {s:+.1f} s" for r, s in sorted(t.late.items()))
                named = ", ".join(
                    f"rank {n.get('rank')} on {n.get('host')} ({n.get('why')})" for n in t.named
                )
                print(
                    f"trial {i + 1}: stopped after step {step} on {t.frozen_node}: {t.state}, "
                    f"named {named or 'nobody'}; ended {t.seconds_to_end:.1f} s after the stop"
                    f"; late by {lates}"
                    f" -> {'right' if t.right else 'WRONG'}",
                    flush=True,
                )
    finally:
        release_cluster(started)
    print(
        f"{right} of {args.trials} trials named the frozen rank and its node, and only them; "
        f"median {statistics.median(took):.1f} s from the stop to the job's end"
    )
    return 0 if right == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
