"""MXNet samples/s on the loopback Slurm cluster with a given ddlbench tree's job scripts.

Runs LeNet on digits, 2 nodes x 1 worker, one scheduler and one server, ``--repeats`` times,
on an exclusive copy of the ``localslurm`` profile (each node's 2 CPUs held by the job, so one
is spare for the scheduler and server). Point ``--tree`` at a checkout without the spare-core
placement to compare; both print the run's samples/s (the sum of its workers' throughput).

    python benchmarks/mxnet_ps_placement.py --tree /path/to/other/checkout --repeats 3
    python benchmarks/mxnet_ps_placement.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _slurm_campaign import ROOT, ensure_cluster, release_cluster

SPEC = """\
name: mxps
model: lenet
data: digits
frameworks:
  - {name: mxnet, kvstore: dist_sync, servers: 1}
batch_size: 16
steps: {warmup: 5, measure: 60}
lr_scaling: {rule: none}
scale: {points: [2x1]}
repeats: %d
slurm: {time: "00:05:00"}
"""


def _ddlbench(tree: Path, *args: str, results: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree), "DDLBENCH_RESULTS": str(results)}
    cmd = [sys.executable, "-m", "ddlbench", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True)


def _throughputs(campaign: Path) -> list:
    out = []
    for run in sorted((campaign / "runs").iterdir()):
        total = 0.0
        for log in sorted(run.glob("logs/attempt-*/rank-*.jsonl")):
            last = json.loads(log.read_text().splitlines()[-1])
            total += last["throughput"] if last.get("type") == "summary" else 0.0
        out.append(round(total, 1))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, default=ROOT, help="ddlbench checkout rendering the jobs")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    started = ensure_cluster()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            prof = (ROOT / "configs" / "clusters" / "localslurm.yaml").read_text()
            prof = prof.replace("name: localslurm", "name: localslurm-excl")
            prof = prof.replace("  cpus_per_task: 1\n", "  cpus_per_task: 1\n  exclusive: true\n")
            (t / "excl.yaml").write_text(prof)
            (t / "spec.yaml").write_text(SPEC % a.repeats)
            res = t / "results"
            sub = _ddlbench(a.tree, "submit", str(t / "spec.yaml"), "--cluster",
                            str(t / "excl.yaml"), "--campaign", "mxps", results=res)  # fmt: skip
            if sub.returncode != 0:
                print(sub.stderr, file=sys.stderr)
                return 1
            _ddlbench(a.tree, "wait", "mxps", "--timeout", "1200", results=res)
            got = _throughputs(res / "mxps")
            print(f"tree {a.tree}: samples/s per repeat {got}, median {statistics.median(got)}")
    finally:
        if started:
            release_cluster(started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
