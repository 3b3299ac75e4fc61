"""MXNet samples/s on the loopback Slurm cluster: one worker per device against one per node.

LeNet on digits, 2 nodes x 2 CPU "devices" (a copy of ``localslurm`` with ``gpus_per_node: 2``),
one scheduler and one server, per-device batch 16, ``--repeats`` times each; the repeats of the
two modes alternate (repeats are the plan's outer loop). Prints each run's samples/s (the sum
of its workers' throughput) per mode.

    python benchmarks/mxnet_per_node.py --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _slurm_campaign import ROOT, ensure_cluster, release_cluster
from mxnet_ps_placement import _ddlbench, _throughputs

SPEC = """\
name: mxpn
model: lenet
data: digits
frameworks:
  - {name: mxnet, kvstore: dist_sync, servers: 1}
  - {name: mxnet, kvstore: dist_sync, servers: 1, workers: per-node, label: mxnet-pernode}
batch_size: 16
steps: {warmup: 5, measure: 60}
lr_scaling: {rule: none}
scale: {points: [2x2]}
repeats: %d
slurm: {time: "00:05:00"}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    started = ensure_cluster()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            prof = (ROOT / "configs" / "clusters" / "localslurm.yaml").read_text()
            prof = prof.replace("name: localslurm", "name: localslurm-2dev")
            prof = prof.replace("gpus_per_node: 1 ", "gpus_per_node: 2 ")
            (t / "2dev.yaml").write_text(prof)
            (t / "spec.yaml").write_text(SPEC % a.repeats)
            res = t / "results"
            sub = _ddlbench(ROOT, "submit", str(t / "spec.yaml"), "--cluster",
                            str(t / "2dev.yaml"), "--campaign", "mxpn", results=res)  # fmt: skip
            if sub.returncode != 0:
                print(sub.stderr, file=sys.stderr)
                return 1
            _ddlbench(ROOT, "wait", "mxpn", "--timeout", "1200", results=res)
            runs = sorted((res / "mxpn" / "runs").iterdir())
            got = dict(zip([r.name for r in runs], _throughputs(res / "mxpn")))
            for mode in ("mxnet-lenet", "mxnet-pernode-lenet"):
                vals = [v for k, v in sorted(got.items()) if k.startswith(mode + "-")]
                print(f"{mode}: samples/s per repeat {vals}, median {statistics.median(vals)}")
    finally:
        if started:
            release_cluster(started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
