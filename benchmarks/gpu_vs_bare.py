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
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SIDES = {"resnet50": 224, "vgg16": 224, "vgg19": 224, "lenet": 28}
TARGET_EACH = 0.97
TARGET_SHIPPED = 0.95
EXIT_NO_GPU = 2


def _reexec_in_torch_env() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        envs = Path(os.environ.get("DDLBENCH_ENVS") or Path.home() / ".cache/ddlbench/envs")
        python = envs / "torch" / "bin" / "python"
        if not python.exists():
            sys.exit(f"gpu_vs_bare: torch is not importable and {python} does not exist")
        os.execv(str(python), [str(python), *sys.argv])


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
    from ddlbench.workloads.models_torch import build_model
    from ddlbench.workloads.pytorch import apply_knobs, make_optimizer, make_step_fn

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
        "warmup": cfg["steps"]["warmup"],
    }


def bare_model(model: str, classes: int) -> Any:
    if model == "resnet50":
        try:
            import torchvision

            return torchvision.models.resnet50(num_classes=classes)
        except ImportError:
            pass
    from ddlbench.workloads.models_torch import build_model

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


def measure(args: argparse.Namespace) -> Dict[Tuple[str, str, bool], Dict[str, Any]]:
    results: Dict[Tuple[str, str, bool], Dict[str, Any]] = {}
    all_combos = combos(args)
    with tempfile.TemporaryDirectory(prefix="gpu-vs-bare-") as tmp:
        for r in range(args.rounds):
            for i, combo in enumerate(all_combos):
                res = results.setdefault(combo, {"ddlbench": [], "bare": []})
                first_ddlbench = (r + i) % 2 == 0  # alternate which side goes first
                for side in ("ddlbench", "bare") if first_ddlbench else ("bare", "ddlbench"):
                    if side == "ddlbench":
                        out = ddlbench_run(args, combo, tmp)
                        res["ddlbench"].append(out["throughput"])
                        res.update(applied=out["applied"], fallbacks=out["fallbacks"])
                        res["warmup"], res["compile_s"] = out["warmup"], out["compile_s"]
                    else:
                        applied = res.get("applied") or combo[0]
                        warm = res.get("warmup") or args.warmup
                        res["bare"].append(bare_run(args, combo, applied, warm))
                print(f"round {r + 1}/{args.rounds} {label(combo)}: done", file=sys.stderr)
    return results


def report(args: argparse.Namespace, results: Dict) -> int:
    rows, failed = [], []
    print(f"{'configuration':34} {'applied':8} {'ddlbench':>10} {'bare':>10} {'ratio':>7}")
    for combo, res in results.items():
        d, b = statistics.median(res["ddlbench"]), statistics.median(res["bare"])
        ratio = d / b if b else float("nan")
        rows.append({"combo": label(combo), "applied": res["applied"], "ddlbench": d,
                     "bare": b, "ratio": ratio, "fallbacks": res["fallbacks"],
                     "compile_s": res["compile_s"]})  # fmt: skip
        mark = "" if ratio >= TARGET_EACH else "  < target"
        if ratio < TARGET_EACH:
            failed.append(label(combo))
        print(f"{label(combo):34} {res['applied']:8} {d:10.1f} {b:10.1f} {ratio:7.3f}{mark}")
    best_combo = max(results, key=lambda c: statistics.median(results[c]["bare"]))
    best = statistics.median(results[best_combo]["bare"])
    shipped = shipped_combo()
    shipped_ratio = None
    if shipped in results:
        shipped_ratio = statistics.median(results[shipped]["ddlbench"]) / best
        print(
            f"shipped ResNet-50 settings ({label(shipped)}) / fastest bare "
            f"({label(best_combo)}): {shipped_ratio:.3f} (target {TARGET_SHIPPED})"
        )
    else:
        print(f"shipped settings {shipped} not among the combinations measured")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"rows": rows, "shipped_vs_fastest_bare": shipped_ratio}, indent=1)
        )
    if args.device == "cpu":
        print("CPU smoke mode: every combination ran; ratios are not checked on the CPU")
        return 0
    missed = bool(failed) or (shipped_ratio is not None and shipped_ratio < TARGET_SHIPPED)
    return 1 if missed else 0


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
    args = parser.parse_args(argv)
    _reexec_in_torch_env()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.stderr.write(
            "gpu_vs_bare: no CUDA GPU is visible (torch.cuda.is_available() is False); this "
            "benchmark needs one GPU. CPU smoke mode: --device cpu --model lenet --steps 3\n"
        )
        return EXIT_NO_GPU
    if args.device == "cuda":
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    return report(args, measure(args))


if __name__ == "__main__":
    raise SystemExit(main())
