"""Status of a 500-job campaign: target at most 1 s and at most 2 scheduler calls per poll.

    python benchmarks/status_poll.py [--runs 500]

Brings scripts/local-slurm.sh up if needed, submits 500 held jobs, then times
``campaign_status`` (poll + store update + table data) in three situations: the first poll
(every run changes), a steady poll (nothing changes), and the poll after all jobs were
cancelled (every run ends). Scheduler calls are counted by ddlbench's Slurm client.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _slurm_campaign import ensure_cluster, make_campaign, release_cluster


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    started = ensure_cluster()
    from ddlbench.execute import campaign_status, submit_campaign
    from ddlbench.execute.slurm.commands import SlurmClient

    quiet = lambda m: None  # noqa: E731
    ok = True
    with tempfile.TemporaryDirectory(prefix="ddlbench-bench-") as tmp:
        cdir = make_campaign(Path(tmp), "status500", args.runs)
        submit_campaign(cdir, echo=quiet)

        def timed(label: str, repeat: int = 1):
            nonlocal ok
            times, calls = [], []
            for _ in range(repeat):
                t0 = time.perf_counter()
                st = campaign_status(cdir, echo=quiet)
                times.append(time.perf_counter() - t0)
                calls.append(st["scheduler_calls"])
            worst = max(times)
            good = worst <= 1.0 and max(calls) <= 2
            ok &= good
            print(
                f"  {label:<28} median {statistics.median(times) * 1000:6.0f} ms, "
                f"worst {worst * 1000:6.0f} ms, scheduler calls {max(calls)} "
                f"{'OK' if good else 'FAIL'}  {st['counts']}"
            )

        print(f"status_poll: campaign of {args.runs} Slurm jobs (target <= 1 s, <= 2 calls)")
        timed("first poll (all change)")
        timed("steady poll (no change)", args.repeat)
        client = SlurmClient()
        jobs = sorted(
            {r["job_id"].split("_")[0] for r in campaign_status(cdir, echo=quiet)["runs"]}
        )
        client.run(["scancel", *jobs])
        time.sleep(1.0)
        timed("poll after all ended")
        timed("poll of an ended campaign", args.repeat)
    print(f"status_poll: {'OK' if ok else 'FAIL'}")
    release_cluster(started)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
