"""Does the PyTorch workload's harness slow training down?

Compares, in one process and alternating several times, the throughput the pytorch
workload reports (its ``summary.throughput``: measured samples over the measured window)
with a bare PyTorch training loop of the same model, batch, optimizer and synthetic data
(forward, loss, backward, SGD step; nothing else). Both run on the CPU, 1 rank, with
the same intra-op thread count, each round building its model afresh. Many short rounds
(default 6 of 2 warmup + 4 measured steps each, the order swapped every round) so that
the load of a shared machine drifts over both alike. Prints both medians, their ratio
and the median of the per-round ratios.

On a shared, busy machine whole-program rounds are too noisy to resolve 1 %, so a second
measurement ("interleaved") alternates single steps on one model: a step exactly as the
workload's loop runs it (learning-rate schedule, ``Measurement.step`` with the pytorch
workload's step function, a real rank log) and a bare step; the median of the per-pair
ratios is robust to load drift. Exits 1 when a ratio is below the threshold (0.99).

    python benchmarks/harness_overhead.py [--mode both|program|interleaved] [--rounds 6]

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

from _torch_env import reexec_in_torch_env  # this folder: sys.path[0]

ROOT = Path(__file__).resolve().parents[1]


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


LOOP_COST: list = []  # seconds per step of the harness around a no-op step function
GAPS: list = []  # per round: the window's share spent between steps (the harness's own time)


def workload_throughput(args: argparse.Namespace, tmp: str, i: int) -> float:
    from ddlbench.workloads.common import workload_main
    from ddlbench.workloads.pytorch.torch_main import body

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


def _channels(args: argparse.Namespace) -> int:
    """The model's input channels (1 for lenet)."""
    from ddlbench.workloads.common.config import input_channels

    return input_channels(args.model)


def bare_throughput(args: argparse.Namespace) -> float:
    import torch
    from torch import nn

    from ddlbench.workloads.common import synthetic_batch
    from ddlbench.workloads.pytorch.models_torch import build_model

    model = build_model(args.model, 1000, args.image_size, seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    crit = nn.CrossEntropyLoss()
    x, y = synthetic_batch(args.batch, args.image_size, 1000, _channels(args), "NCHW", seed=1)
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


def interleaved(args: argparse.Namespace, tmp: str) -> tuple[list, list]:
    """Step by step, alternating on one model: a step as the workload runs it (its
    ``run_training`` loop body: schedule, ``Measurement.step`` with the pytorch workload's
    ``make_step_fn`` and a real rank log) and a bare step. Returns both step-time lists."""
    import torch

    from ddlbench.workloads.common import LRSchedule, Measurement, RankLogger, synthetic_batch
    from ddlbench.workloads.pytorch.models_torch import build_model
    from ddlbench.workloads.pytorch.torch_main import make_optimizer, make_step_fn

    cfg = run_config(args, os.path.join(tmp, "interleaved"))
    model = build_model(args.model, 1000, args.image_size, seed=0)
    optimizer = make_optimizer(cfg, model)
    crit = torch.nn.CrossEntropyLoss()
    x, y = synthetic_batch(args.batch, args.image_size, 1000, _channels(args), "NCHW", seed=1)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    step_fn = make_step_fn(model, optimizer, torch.device("cpu"), False, fixed=(x, y))
    schedule = LRSchedule.from_config(cfg, 1_281_167 / args.batch)
    logger = RankLogger(cfg["log_dir"], 0)
    measurement = Measurement(logger)

    def bare_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = crit(model(x), y)
        loss.backward()
        optimizer.step()
        loss.item()

    def harness_step(step: int) -> None:  # what run_training does for one step
        epoch = schedule.epoch_of(step)
        phase = "warmup" if step < args.warmup else "measure"
        measurement.step(step_fn, step, epoch, phase, args.batch, schedule(step), None)

    for step in range(args.warmup):
        harness_step(step)
        bare_step()
    # the loop's own cost, without training: the same calls around a step function that
    # only sets the learning rate and returns a loss (what make_step_fn adds to a bare step)
    null = Measurement(logger)

    def null_step(_batch: object, lr: float) -> float:
        for group in optimizer.param_groups:
            group["lr"] = lr
        return float(torch.zeros(()).item())

    n_null = 2000
    t0 = time.perf_counter()
    for step in range(n_null):
        null.step(null_step, step, schedule.epoch_of(step), "measure", args.batch, schedule(step))
    LOOP_COST.append((time.perf_counter() - t0) / n_null)
    harness, bare = [], []
    for i in range(args.pairs):
        for kind in ("harness", "bare") if i % 2 == 0 else ("bare", "harness"):
            t0 = time.perf_counter()
            if kind == "harness":
                harness_step(args.warmup + i)
                harness.append(time.perf_counter() - t0)
            else:
                bare_step()
                bare.append(time.perf_counter() - t0)
    logger.close()
    return harness, bare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4, help="measured steps per program round")
    parser.add_argument("--rounds", type=int, default=6, help="program rounds")
    parser.add_argument("--pairs", type=int, default=20, help="interleaved step pairs")
    parser.add_argument("--mode", choices=("both", "program", "interleaved"), default="both")
    parser.add_argument("--threshold", type=float, default=0.99)
    args = parser.parse_args()
    reexec_in_torch_env("harness_overhead")
    sys.path.insert(0, str(ROOT))
    import torch

    from ddlbench.workloads.common import cpu_name

    threads = torch.get_num_threads()
    print(
        f"torch {torch.__version__}, {cpu_name()}, {threads} threads; {args.model} "
        f"{args.image_size}px, batch {args.batch}"
    )
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        if args.mode in ("both", "interleaved"):
            harness, bare = interleaved(args, tmp)
            torch.set_num_threads(threads)
            pair_ratios = [b / h for h, b in zip(harness, bare)]
            ratio = statistics.median(pair_ratios)
            print(
                f"interleaved ({args.pairs} step pairs): median step workload "
                f"{statistics.median(harness):.4f} s, bare {statistics.median(bare):.4f} s; "
                f"throughput ratio (median of pairs) {ratio:.4f}"
            )
            cost = LOOP_COST[0]
            print(
                f"harness cost per step with a no-op step function (schedule, timing, rank log "
                f"line, lr setting, loss read): {cost * 1e6:.1f} us = "
                f"{100 * cost / statistics.median(bare):.4f}% of a bare step"
            )
            ok = _verdict("interleaved", ratio, args.threshold) and ok
        if args.mode in ("both", "program"):
            workload, bare_runs = [], []
            for i in range(args.rounds):
                for kind in ("workload", "bare") if i % 2 == 0 else ("bare", "workload"):
                    if kind == "workload":
                        workload.append(workload_throughput(args, tmp, i))
                        torch.set_num_threads(threads)  # the workload sets the same count
                    else:
                        bare_runs.append(bare_throughput(args))
                print(f"round {i}: workload {workload[-1]:.3f}  bare {bare_runs[-1]:.3f} samples/s")
                sys.stdout.flush()
            w, b = statistics.median(workload), statistics.median(bare_runs)
            paired = statistics.median(x / y for x, y in zip(workload, bare_runs))
            print(
                f"program ({args.rounds} rounds of {args.warmup} + {args.steps} steps): median "
                f"workload {w:.3f} samples/s, bare loop {b:.3f} samples/s, ratio {w / b:.4f} "
                f"(median of per-round ratios {paired:.4f})"
            )
            print(
                "time between the workload's measured steps (logging, loop): median "
                f"{100 * statistics.median(GAPS):.4f}% of its window"
            )
            ok = _verdict("program", w / b, args.threshold) and ok
    return 0 if ok else 1


def _verdict(name: str, ratio: float, threshold: float) -> bool:
    ok = ratio >= threshold
    print(f"{'PASS' if ok else 'FAIL'} {name}: ratio {ratio:.4f} {'>=' if ok else '<'} {threshold}")
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
