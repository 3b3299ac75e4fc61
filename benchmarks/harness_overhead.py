"""Does the PyTorch workload's harness slow training down?

Compares, in one process and alternating several times, the throughput the pytorch
workload reports (its ``summary.throughput``: measured samples over the measured window)
with a bare PyTorch training loop of the same model, batch, optimizer and synthetic data
(forward, loss, backward, SGD step; nothing else). Both run on the CPU, 1 rank, with
the same intra-op thread count, each round building its model afresh. Many short rounds
(default 10 of 2 warmup + 4 measured steps each, the order swapped every round) so that
the load of a shared machine drifts over both alike. Prints both medians, their ratio
and the median of the per-round ratios; exits 1 when the ratio of the medians is below
the threshold (default 0.99).

    python benchmarks/harness_overhead.py [--model resnet50] [--batch 8] [--rounds 10]

It needs torch: run it with the torch environment's python, or let it re-run itself
with ``$DDLBENCH_ENVS/torch/bin/python`` (default ``~/.cache/ddlbench/envs``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _reexec_in_torch_env() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        envs = Path(os.environ.get("DDLBENCH_ENVS") or Path.home() / ".cache/ddlbench/envs")
        python = envs / "torch" / "bin" / "python"
        if not python.exists():
            sys.exit(f"torch is not importable and {python} does not exist")
        os.execv(str(python), [str(python), *sys.argv])


def run_config(args: argparse.Namespace, log_dir: str) -> dict:
    return {
        "format": "ddlbench-run/1",
        "run_id": "harness-overhead",
        "campaign": "benchmarks",
        "framework": "pytorch",
        "workload": "pytorch",
        "framework_options": {"backend": "gloo"},
        "mode": "throughput",
        "model": args.model,
        "data": {"kind": "synthetic", "path": None, "samples": 1_281_167},
        "image_size": args.image_size,
        "num_classes": 1000,
        "device": "cpu",
        "precision": "fp32",
        "nodes": 1,
        "tasks_per_node": 1,
        "world_size": 1,
        "batch_size": args.batch,
        "global_batch_size": args.batch,
        "steps": {"warmup": args.warmup, "measure": args.steps},
        "optimizer": {"name": "sgd", "lr": 0.01, "base_lr": 0.01, "momentum": 0.9,
                      "weight_decay": 5e-5, "nesterov": False},
        "lr_schedule": {"scaling": "none", "base_batch_size": args.batch, "warmup_epochs": 0,
                        "decay_epochs": [], "decay_factor": 0.1},
        "seed": 0,
        "repeat": 0,
        "log_dir": log_dir,
        "mllog": False,
    }  # fmt: skip


GAPS: list = []  # per round: the window's share spent between steps (the harness's own time)


def workload_throughput(args: argparse.Namespace, tmp: str, i: int) -> float:
    from ddlbench.workloads.common import workload_main
    from ddlbench.workloads.pytorch import body

    log_dir = os.path.join(tmp, f"w{i}")
    path = os.path.join(tmp, f"run-{i}.json")
    with open(path, "w") as f:
        json.dump(run_config(args, log_dir), f)
    if workload_main(body, [path]) != 0:
        sys.exit("the workload failed")
    with open(os.path.join(log_dir, "rank-0.jsonl")) as f:
        records = [json.loads(line) for line in f]
    summary = records[-1]
    steps = [r for r in records if r["type"] == "step" and r["phase"] == "measure"]
    gaps = sum(b["t_start"] - a["t_end"] for a, b in zip(steps, steps[1:]))
    GAPS.append(gaps / summary["measure_time_s"])
    return float(summary["throughput"])


def bare_throughput(args: argparse.Namespace) -> float:
    import torch
    from torch import nn

    from ddlbench.workloads.common import synthetic_batch
    from ddlbench.workloads.models_torch import build_model

    model = build_model(args.model, 1000, args.image_size, seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    crit = nn.CrossEntropyLoss()
    x, y = synthetic_batch(args.batch, args.image_size, 1000, 3, "NCHW", seed=1)
    x, y = torch.from_numpy(x), torch.from_numpy(y)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    t0 = time.time()
    for _ in range(args.steps):
        loss = step()
    loss.item()  # the CPU ran synchronously anyway
    return args.steps * args.batch / (time.time() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threshold", type=float, default=0.99)
    args = parser.parse_args()
    _reexec_in_torch_env()
    sys.path.insert(0, str(ROOT))
    import torch

    from ddlbench.workloads.common import cpu_name

    threads = torch.get_num_threads()
    print(
        f"torch {torch.__version__}, {cpu_name()}, {threads} threads; {args.model}, "
        f"batch {args.batch}, {args.warmup} warmup + {args.steps} measured steps, "
        f"{args.rounds} rounds"
    )
    workload, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            order = ("workload", "bare") if i % 2 == 0 else ("bare", "workload")
            for kind in order:
                if kind == "workload":
                    workload.append(workload_throughput(args, tmp, i))
                    torch.set_num_threads(threads)  # the workload sets the same count
                else:
                    bare.append(bare_throughput(args))
            print(
                f"round {i}: workload {workload[-1]:.3f}  bare {bare[-1]:.3f} samples/s", flush=True
            )
    w, b = statistics.median(workload), statistics.median(bare)
    ratio = w / b
    print(
        f"median workload {w:.3f} samples/s, median bare loop {b:.3f} samples/s, ratio {ratio:.4f}"
    )
    paired = statistics.median(x / y for x, y in zip(workload, bare))
    print(f"median of the per-round ratios {paired:.4f}")
    print(
        f"time between the workload's measured steps (logging, loop): median "
        f"{100 * statistics.median(GAPS):.4f}% of its window"
    )
    ok = ratio >= args.threshold
    print(
        ("PASS" if ok else "FAIL") + f": ratio {ratio:.4f} {'>=' if ok else '<'} {args.threshold}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
