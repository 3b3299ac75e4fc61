"""Does ddlbench's PyTorch workload reach what a bare PyTorch loop reaches on the same GPU?

For every combination of the performance knobs (precision fp32|tf32|amp|bf16, layout
default|channels_last, compile off|on) it runs, interleaved round by round:

* **ddlbench**: the pytorch workload's own code on one rank, in process: ``apply_knobs``, the
  workload's model, ``make_optimizer``, ``make_step_fn`` and ``run_training`` with a real rank
  log; the figure is the workload's ``summary.throughput`` (measured samples over the measured
  window);
* **bare**: a plain torchvision-style training loop (torchvision's model when installed, else
  the same definition) with the same knobs applied directly: TF32 switches, ``torch.autocast``
  (+ ``GradScaler`` for amp), channels-last weights and inputs, ``torch.compile``.

Both use the same synthetic batch, SGD with momentum, warmup and measured step counts. Per
combination it prints the medians over the rounds and the ratio ddlbench / bare (target
>= 0.97), and the ratio of the shipped ResNet-50 PyTorch settings (configs/resnet50.yaml)
to the fastest bare configuration (target >= 0.95). Exits 1 when a target is missed on a GPU.

    python benchmarks/gpu_vs_bare.py [--batch 256] [--warmup 30] [--steps 100] [--rounds 3]
    python benchmarks/gpu_vs_bare.py --device cpu --model lenet --steps 3   # CPU smoke mode

It needs one CUDA GPU (refused clearly otherwise) and torch: run it with the torch
environment's python, or let it re-run itself with ``$DDLBENCH_ENVS/torch/bin/python``. The
CPU smoke mode checks that every combination runs; its ratios mean nothing (fallbacks, noise).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from _torch_env import reexec_in_torch_env  # this folder: sys.path[0]

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(ROOT))
SIDES = {"resnet50": 224, "vgg16": 224, "vgg19": 224, "lenet": 28}
TARGET_EACH = 0.97
TARGET_SHIPPED = 0.95
EXIT_NO_GPU = 2
EXIT_INCOMPLETE = 3


def combos(args: argparse.Namespace) -> List[Tuple[str, str, bool]]:
    compiles = [c == "on" for c in args.compile.split(",")]
    return list(itertools.product(args.precisions.split(","), args.layouts.split(","), compiles))


def run_config(args: argparse.Namespace, combo: Tuple[str, str, bool], log_dir: str) -> dict:
    precision, layout, compiled = combo
    return {
        "run_id": "gpu-vs-bare",
        "campaign": "benchmarks",
        "workload": "pytorch",
        "framework_options": {"compile_mode": args.compile_mode},
        "mode": "throughput",
        "model": args.model,
        "data": {"kind": "synthetic", "path": None, "samples": 1_281_167},
        "image_size": SIDES[args.model],
        "num_classes": 10 if args.model == "lenet" else 1000,
        "device": "gpu" if args.device == "cuda" else "cpu",
        "precision": precision,
        "layout": layout,
        "compile": compiled,
        "batch_size": args.batch,
        "steps": {"warmup": args.warmup, "measure": args.steps},
        "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},
        "log_dir": log_dir,
    }


def ddlbench_run(args: argparse.Namespace, combo: Tuple[str, str, bool], tmp: str) -> Dict:
    """The pytorch workload's code path on one rank; returns throughput and what it applied."""
    import torch

    from ddlbench.workloads.common import (
        LRSchedule,
        Measurement,
        RankLogger,
        input_channels,
        normalize_run_config,
        run_training,
        synthetic_batch,
    )
    from ddlbench.workloads.pytorch.models_torch import build_model
    from ddlbench.workloads.pytorch.torch_main import apply_knobs, make_optimizer, make_step_fn

    # a fresh log folder per measurement: ddlbench never reopens a rank log
    log_dir = tempfile.mkdtemp(prefix="logs-", dir=tmp)
    cfg = normalize_run_config(run_config(args, combo, log_dir))
    device = torch.device(args.device)
    knobs = apply_knobs(cfg, device)
    model = build_model(cfg["model"], cfg["num_classes"], cfg["image_size"], seed=0)
    model = knobs.prepare_model(model.to(device))
    x, y = synthetic_batch(
        args.batch, cfg["image_size"], cfg["num_classes"], input_channels(cfg["model"]),
        "NCHW", seed=1,
    )  # fmt: skip
    fixed = (torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
    step_fn = make_step_fn(
        knobs.compiled(model), make_optimizer(cfg, model), device, knobs.precision, fixed,
        channels_last=knobs.channels_last,
    )  # fmt: skip
    logger = RankLogger(cfg["log_dir"], 0)
    try:
        measurement = Measurement(logger, compiled=bool(cfg["compile"]))
        run_training(cfg, measurement, step_fn, LRSchedule.from_config(cfg, 1e9))
        summary = measurement.summary_fields()
    finally:
        logger.close()
    return {
        "throughput": summary["throughput"],
        "compile_s": summary["compile_s"],
        "applied": knobs.precision,
        "fallbacks": knobs.knobs.fallbacks,
    }


def bare_model(model: str, classes: int) -> Any:
    if model == "resnet50":
        try:
            import torchvision

            return torchvision.models.resnet50(num_classes=classes)
        except ImportError:
            pass
    from ddlbench.workloads.pytorch.models_torch import build_model

    return build_model(model, classes, SIDES[model], seed=0)


def bare_run(args: argparse.Namespace, combo: Tuple[str, str, bool], precision: str, warmup: int):
    """A plain training loop with the same knobs (``precision``: the one ddlbench applied)."""
    import torch

    _, layout, compiled = combo
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        tf32 = precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    classes = 10 if args.model == "lenet" else 1000
    side = SIDES[args.model]
    cl = layout == "channels_last"
    model = bare_model(args.model, classes).to(device)
    if cl:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    fwd = torch.compile(model, mode=args.compile_mode) if compiled else model
    chans = 1 if args.model == "lenet" else 3
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, chans, side, side, generator=gen).to(device)
    y = torch.randint(0, classes, (args.batch,), generator=gen).to(device)
    if cl:
        x = x.contiguous(memory_format=torch.channels_last)
    dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(precision)
    scaler = torch.amp.GradScaler(device.type) if precision == "amp" else None
    crit = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = crit(fwd(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    return args.steps * args.batch / (time.perf_counter() - t0)


def shipped_combo() -> Tuple[str, str, bool]:
    """The top-level knobs of configs/resnet50.yaml (its PyTorch entry sets none of its own);
    read with a regular expression, as the torch environment need not have a YAML parser."""
    text = (ROOT / "configs" / "resnet50.yaml").read_text()

    def key(name: str, default: str) -> str:
        m = re.search(rf"^{name}:\s*([A-Za-z0-9_]+)", text, re.MULTILINE)
        return m.group(1) if m else default

    return key("precision", "fp32"), key("layout", "default"), key("compile", "false") == "true"


def label(combo: Tuple[str, str, bool]) -> str:
    precision, layout, compiled = combo
    return f"{precision} {layout}{' compile' if compiled else ''}"


Combo = Tuple[str, str, bool]


def setting(args: argparse.Namespace, device_name: str, torch_version: str) -> Dict[str, Any]:
    """What makes two measurements comparable: a results file only resumes the same setting."""
    return {"device": device_name, "torch": torch_version, "model": args.model,
            "batch": args.batch, "warmup": args.warmup, "steps": args.steps,
            "compile_mode": args.compile_mode}  # fmt: skip


def load_results(path: Optional[Path], same: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The measurements already in ``path`` (JSON Lines) made with the same setting."""
    if path is None or not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut short by a killed run
        if all(rec.get(k) == v for k, v in same.items()):
            records.append(rec)
    return records


def applied_knobs(args: argparse.Namespace, combo: Combo, tmp: str) -> Tuple[str, List[str], int]:
    """The precision the workload runs for ``combo`` on this device, its fallbacks and its
    warmup steps (raised for compiled runs), from the workload's own ``apply_knobs``, so that
    the bare loop runs the same even when it goes first."""
    import torch

    from ddlbench.workloads.common import normalize_run_config
    from ddlbench.workloads.pytorch.torch_main import apply_knobs

    cfg = normalize_run_config(run_config(args, combo, tmp))
    knobs = apply_knobs(cfg, torch.device(args.device))
    return knobs.precision, list(knobs.knobs.fallbacks), int(cfg["steps"]["warmup"])


def measure_one(args: argparse.Namespace, combo: Combo, side: str, tmp: str) -> Dict[str, Any]:
    """One measurement of one side; compiled code starts from a clean slate each time, so no
    side reuses the other's graphs and dynamo's recompile limit is never reached (past it,
    torch.compile runs eager with no more than a logged warning)."""
    import torch

    if combo[2]:
        torch._dynamo.reset()
    if side == "ddlbench":
        out = ddlbench_run(args, combo, tmp)
        return {"throughput": out["throughput"], "compile_s": out["compile_s"],
                "applied": out["applied"], "fallbacks": out["fallbacks"]}  # fmt: skip
    precision, fallbacks, warmup = applied_knobs(args, combo, tmp)
    return {"throughput": bare_run(args, combo, precision, warmup), "applied": precision,
            "fallbacks": fallbacks}  # fmt: skip


def schedule(args: argparse.Namespace) -> List[Tuple[int, Combo, str]]:
    """Every measurement, round by round, alternating which side of a combination goes first."""
    out = []
    for r in range(args.rounds):
        for i, combo in enumerate(combos(args)):
            sides = ("ddlbench", "bare") if (r + i) % 2 == 0 else ("bare", "ddlbench")
            out.extend((r, combo, side) for side in sides)
    return out


def measure(args: argparse.Namespace, same: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Run what the results file does not hold yet, appending each measurement as it ends;
    stop starting new ones once ``--budget-s`` has passed. The first one always runs, so every
    call makes progress however small the budget."""
    path = Path(args.results) if args.results else None
    records = load_results(path, same)
    done = {(r["round"], tuple(r["combo"]), r["side"]) for r in records}
    todo = [m for m in schedule(args) if m not in done]
    print(f"{len(done)} measurements resumed from {path}, {len(todo)} to run", file=sys.stderr)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-vs-bare-") as tmp:
        for n, (r, combo, side) in enumerate(todo):
            if n and args.budget_s and time.monotonic() - t0 > args.budget_s:
                print(f"budget of {args.budget_s} s spent: {len(todo) - n} measurements left "
                      f"(run again with --results {path} to go on)", file=sys.stderr)  # fmt: skip
                break
            rec = dict(same, round=r, combo=list(combo), side=side, t=time.time())
            rec.update(measure_one(args, combo, side, tmp))
            records.append(rec)
            if path is not None:
                with path.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
            print(f"round {r + 1}/{args.rounds} {label(combo)} {side}: "
                  f"{rec['throughput']:.1f}/s", file=sys.stderr)  # fmt: skip
    return records


def summarise(records: List[Dict[str, Any]]) -> Dict[Combo, Dict[str, Any]]:
    """Per combination: the throughputs of each side and what ran."""
    results: Dict[Combo, Dict[str, Any]] = {}
    for rec in records:
        res = results.setdefault(tuple(rec["combo"]), {"ddlbench": [], "bare": [],
                                                       "compile_s": None})  # fmt: skip
        res[rec["side"]].append(rec["throughput"])
        res["applied"], res["fallbacks"] = rec["applied"], rec["fallbacks"]
        if rec["side"] == "ddlbench":
            res["compile_s"] = rec["compile_s"]
    return results


def report(args: argparse.Namespace, results: Dict[Combo, Dict[str, Any]]) -> int:
    rows, failed = [], []
    print(f"{'configuration':34} {'applied':8} {'n':>3} {'ddlbench':>10} {'bare':>10} {'ratio':>7}")
    for combo, res in results.items():
        if not (res["ddlbench"] and res["bare"]):
            print(f"{label(combo):34} incomplete: one side not measured yet")
            continue
        d, b = statistics.median(res["ddlbench"]), statistics.median(res["bare"])
        n = min(len(res["ddlbench"]), len(res["bare"]))
        ratio = d / b if b else float("nan")
        rows.append({"combo": label(combo), "applied": res["applied"], "rounds": n,
                     "ddlbench": d, "bare": b, "ratio": ratio, "fallbacks": res["fallbacks"],
                     "compile_s": res["compile_s"]})  # fmt: skip
        if ratio < TARGET_EACH:
            failed.append(label(combo))
        mark = "" if ratio >= TARGET_EACH else "  < target"
        print(f"{label(combo):34} {res['applied']:8} {n:3d} {d:10.1f} {b:10.1f} {ratio:7.3f}{mark}")
    shipped_ratio = shipped_vs_fastest(results)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"rows": rows, "shipped_vs_fastest_bare": shipped_ratio}, indent=1)
        )
    if args.device == "cpu":
        print("CPU smoke mode: every combination ran; ratios are not checked on the CPU")
        return 0
    if len(rows) < len(combos(args)):
        print("incomplete: not every combination has both sides measured", file=sys.stderr)
        return EXIT_INCOMPLETE
    missed = bool(failed) or (shipped_ratio is not None and shipped_ratio < TARGET_SHIPPED)
    return 1 if missed else 0


def shipped_vs_fastest(results: Dict[Combo, Dict[str, Any]]) -> Optional[float]:
    """The shipped ResNet-50 settings' ddlbench median over the fastest bare median."""
    bare = {c: statistics.median(r["bare"]) for c, r in results.items() if r["bare"]}
    shipped = shipped_combo()
    if not bare or not results.get(shipped, {}).get("ddlbench"):
        print(f"shipped settings {label(shipped)} not measured (or no bare figure yet)")
        return None
    best_combo = max(bare, key=bare.__getitem__)
    ratio = statistics.median(results[shipped]["ddlbench"]) / bare[best_combo]
    print(
        f"shipped ResNet-50 settings ({label(shipped)}) / fastest bare "
        f"({label(best_combo)}): {ratio:.3f} (target {TARGET_SHIPPED})"
    )
    return ratio


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--model", choices=sorted(SIDES), default="resnet50")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precisions", default="fp32,tf32,amp,bf16")
    parser.add_argument("--layouts", default="default,channels_last")
    parser.add_argument("--compile", default="off,on", help="off, on, or off,on")
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--results",
        help="JSON Lines file of single measurements: appended to as each one ends, and "
        "measurements already in it (same device, model and steps) are not run again",
    )
    parser.add_argument(
        "--budget-s", type=float, default=0.0,
        help="start no new measurement after this many seconds, the first one always runs "
        "(0: no limit)",
    )  # fmt: skip
    parser.add_argument(
        "--report-only", action="store_true", help="print the figures of --results, run nothing"
    )
    args = parser.parse_args(argv)
    reexec_in_torch_env("gpu_vs_bare")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.stderr.write(
            "gpu_vs_bare: no CUDA GPU is visible (torch.cuda.is_available() is False); this "
            "benchmark needs one GPU. CPU smoke mode: --device cpu --model lenet --steps 3\n"
        )
        return EXIT_NO_GPU
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"device: {name}, torch {torch.__version__}")
    same = setting(args, name, torch.__version__)
    if args.report_only:
        records = load_results(Path(args.results) if args.results else None, same)
    else:
        records = measure(args, same)
    return report(args, summarise(records))


if __name__ == "__main__":
    raise SystemExit(main())
