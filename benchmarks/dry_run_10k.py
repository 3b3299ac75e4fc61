"""How long `ddlbench submit --dry-run` takes for a sweep of 10,000 runs.

Target: at most 3 s on a 2-core machine (templates compiled once, no per-run subprocesses).
Prints the median of several end-to-end runs of the real command (Python start-up included)
and the time per run.

    python benchmarks/dry_run_10k.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
name: sweep10k
cluster: iris
model: resnet50
frameworks:
  - {name: pytorch, backend: nccl}
  - {name: tensorflow, communication: nccl}
  - {name: keras}
  - {name: horovod, wraps: pytorch, controller: mpi}
  - {name: mxnet}
batch_size: [8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
scale:
  nodes: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
  gpus_per_node: 4
repeats: 10
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    times, cpus = [], []
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "sweep10k.yaml"
        spec.write_text(SPEC)
        root = Path(__file__).resolve().parents[1]
        env_clusters = str(root / "configs" / "clusters")
        for i in range(args.repeats):
            out = Path(tmp) / f"out{i}"
            # start every repetition from the same state: the previous one's 65 MB of scripts
            # are written back first, not while this one creates its files
            os.sync()
            t0 = time.perf_counter()
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ddlbench",
                    "submit",
                    str(spec),
                    "--dry-run",
                    "--results",
                    str(out),
                ],
                check=True,
                capture_output=True,
                env={"DDLBENCH_CLUSTERS": env_clusters, "PATH": "/usr/bin:/bin"},
            )
            times.append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
        runs = len(list((out / "sweep10k" / "jobs").glob("*.sh")))
    med = statistics.median(times)
    print(f"runs rendered:           {runs}")
    print(
        f"dry-run, median of {len(times)}:  {med:.2f} s   "
        f"(min {min(times):.2f}, max {max(times):.2f})"
    )
    print(f"CPU time (user+sys):     {statistics.median(cpus):.2f} s median")
    print(f"per run:                 {med / runs * 1e6:.0f} us")
    print(
        f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
        "(wall time is only meaningful on an idle machine)"
    )
    print(f"target:                  <= 3.00 s  -> {'met' if med <= 3.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
