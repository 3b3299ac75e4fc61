"""Do the fast ranks keep their pace when a rank is slowed by work no check can interrupt?

Runs a throughput campaign on the local executor: 3 PyTorch ranks over gloo, LeNet at 128
samples per rank on digits, ``backup_workers: 1`` (N = 2) and ``backup_workers: 0`` (the same
code path, nothing dropped), with no straggler and with rank 2 slowed 5x by each ``--kinds``
(docs/stragglers.md), ``--repeats`` runs of each, interleaved. Prints, per kind, the median
step time of the fast ranks (0 and 1; the median of their per-run medians) and the two
ratios against the targets of issue 25 (docs/backup-workers.md):

- b=1 with the straggler / b=1 without one: at most 1.25 (the fast ranks keep their pace);
- b=1 with the straggler / b=0 with the straggler: at most 0.6 (backups pay off).

    python benchmarks/backup_stragglers.py [--repeats 3] [--steps 30] [--kinds compute,data]
    python benchmarks/backup_stragglers.py --pin 0,0,1     # ranks 0 and 1 on CPU 0, rank 2 on 1

``--pin`` binds each rank's process (all its threads, as they appear) to the CPU listed at its
rank, in every run, the ones without a straggler too: on a machine with fewer cores than ranks
a ``compute`` straggler otherwise takes CPU time from the fast ranks, which a straggler on a
node (or device) of its own does not. Other processes on the machine are not moved.

Needs the torch environment. About 15 s per run on a busy 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = """\
name: backup-stragglers
cluster: local
model: lenet
data: digits
frameworks:
  - {{name: pytorch, label: b0, backend: gloo, threads: 1, backup_workers: 0}}
  - {{name: pytorch, label: b1, backend: gloo, threads: 1, backup_workers: 1}}
batch_size: 128
steps: {{warmup: 5, measure: {steps}}}
optimizer: {{lr: 0.05, momentum: 0.9, weight_decay: 0.0}}
lr_scaling: {{rule: none}}
scale: {{points: [1x3]}}
variants:
  - {{label: clean, inject: {{}}}}
{variants}
repeats: {repeats}
"""

VARIANT = "  - {{label: {kind}, inject: {{straggler: {{kind: {kind}, ranks: [2], slowdown: 5}}}}}}"


def ddlbench(results: Path, *args: str) -> None:
    env = dict(os.environ, DDLBENCH_RESULTS=str(results), PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "ddlbench", *args], env=env, check=True)


def _rank_of(pid: str, results: Path) -> Optional[int]:
    """The rank of a workload process of this benchmark (``SLURM_PROCID``), else None."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"ddlbench.workloads" not in cmd or str(results).encode() not in cmd:
            return None
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"SLURM_PROCID="):
            return int(item.split(b"=", 1)[1])
    return None


def pin_ranks(results: Path, cpus: List[int], stop: threading.Event) -> None:
    """Until ``stop``: bind every thread of each rank's processes to ``cpus[rank]``."""
    while not stop.wait(0.05):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            rank = _rank_of(pid, results)
            if rank is None or rank >= len(cpus):
                continue
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    if os.sched_getaffinity(int(tid)) != {cpus[rank]}:
                        os.sched_setaffinity(int(tid), {cpus[rank]})
            except OSError:
                continue  # the process or thread ended


def fast_medians(ranks, column: str = "step_time_median_s") -> Dict[tuple, float]:
    """``(label, variant) -> median`` over runs of the fast ranks' ``column``."""
    per: Dict[tuple, List[float]] = {}
    fast = ranks[ranks["rank"].isin([0, 1])]
    for (run_id, _rank), g in fast.groupby(["run_id", "rank"]):
        label = run_id.split("-")[0]  # b0-lenet-n1x3-b128-<variant>-r<k>
        variant = run_id.split("-b128-", 1)[1].rsplit("-r", 1)[0]
        per.setdefault((label, variant), []).append(float(g[column].iloc[0]))
    return {k: statistics.median(v) for k, v in per.items()}


def report(ranks, kinds: List[str]) -> None:
    med = fast_medians(ranks)
    clean = med[("b1", "clean")]
    print(f"fast ranks' median step, b=1, no straggler: {1e3 * clean:.1f} ms")
    print(f"fast ranks' median step, b=0, no straggler: {1e3 * med[('b0', 'clean')]:.1f} ms")
    for kind in kinds:
        b1, b0 = med[("b1", kind)], med[("b0", kind)]
        r_clean, r_b0 = b1 / clean, b1 / b0
        print(
            f"{kind} 5x on rank 2: b=1 {1e3 * b1:.1f} ms, b=0 {1e3 * b0:.1f} ms; "
            f"b=1 / b=1 clean = {r_clean:.2f} (target <= 1.25: "
            f"{'met' if r_clean <= 1.25 else 'MISSED'}); b=1 / b=0 = {r_b0:.2f} "
            f"(target <= 0.6: {'met' if r_b0 <= 0.6 else 'MISSED'})"
        )
    # where the fast ranks' step goes: their own compute, or the exchange (waiting included)
    compute, comm = fast_medians(ranks, "compute_median_s"), fast_medians(ranks, "comm_median_s")
    for key in sorted(med):
        print(
            f"  {key[0]} {key[1]:<8} fast ranks' median step {1e3 * med[key]:6.1f} ms: "
            f"compute {1e3 * compute[key]:6.1f} ms, exchange {1e3 * comm[key]:6.1f} ms"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--kinds", default="compute,data", help="comma-separated straggler kinds")
    ap.add_argument("--keep", help="results folder to keep (default: a temporary one)")
    ap.add_argument("--pin", help="CPU of each rank, comma-separated (e.g. 0,0,1)")
    args = ap.parse_args()
    from ddlbench.collect.collector import ensure_collected

    kinds = [k for k in args.kinds.split(",") if k]
    variants = "\n".join(VARIANT.format(kind=k) for k in kinds)
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(args.keep or tmp)
        results.mkdir(parents=True, exist_ok=True)
        spec = results / "backup-stragglers.yaml"
        spec.write_text(SPEC.format(steps=args.steps, repeats=args.repeats, variants=variants))
        stop = threading.Event()
        if args.pin:
            cpus = [int(c) for c in args.pin.split(",")]
            threading.Thread(target=pin_ranks, args=(results, cpus, stop), daemon=True).start()
        try:
            ddlbench(results, "submit", str(spec), "--campaign", "backup-stragglers")
            ddlbench(results, "wait", "backup-stragglers", "--timeout", "3600")
        finally:
            stop.set()
        data = ensure_collected(results / "backup-stragglers")
        report(data.ranks, kinds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
