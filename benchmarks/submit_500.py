"""Submitting 500 runs to the local Slurm cluster: target at most 30 s.

    python benchmarks/submit_500.py [--runs 500] [--array]

Brings scripts/local-slurm.sh up if needed. The jobs are submitted held (#SBATCH --hold) so
the benchmark measures submission, not 500 jobs running, and are cancelled afterwards.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _slurm_campaign import ensure_cluster, make_campaign, release_cluster


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--array", action="store_true", help="group the runs into job arrays")
    ap.add_argument("--target", type=float, default=30.0)
    args = ap.parse_args()
    started = ensure_cluster()
    from ddlbench.execute import cancel_campaign, submit_campaign
    from ddlbench.execute.store import CampaignStore

    with tempfile.TemporaryDirectory(prefix="ddlbench-bench-") as tmp:
        cdir = make_campaign(Path(tmp), "submit500", args.runs)
        t0 = time.perf_counter()
        summary = submit_campaign(cdir, array=args.array, echo=lambda m: None)
        took = time.perf_counter() - t0
        with CampaignStore.open(cdir) as store:
            jobs = {a.job_id for a in store.attempts()}
        cancel_campaign(cdir, echo=lambda m: None)
    ok = len(summary.submitted) == args.runs and len(jobs) == args.runs and took <= args.target
    print(
        f"submit_500: {len(summary.submitted)} runs submitted in {took:.2f} s "
        f"({took / max(1, args.runs) * 1000:.1f} ms per run; target {args.target:.0f} s"
        f"{', as job arrays' if args.array else ''}): {'OK' if ok else 'FAIL'}"
    )
    release_cluster(started)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
