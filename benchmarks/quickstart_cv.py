"""How much do the quickstart's repeats agree, per configuration and measured window?

Runs ``configs/quickstart.yaml`` (PyTorch DDP, LeNet on digits, 1 and 2 CPU ranks, gloo) on
the local executor once per measured window asked (``--windows``; ``0`` is the fixed 40
steps of the spec, with no time target), ``--repeats`` runs per configuration, and prints per
configuration: the coefficient of variation of the repeats' throughput (sample standard
deviation over mean), the largest repeat's distance from their median, the median measured
window, the median steps measured, the machine's load while it ran (the CPUs kept busy, read
from /proc/stat over the whole benchmark), and how many runs the pre-flight called busy. The
target is a CV and spread within 5 % with the spec's defaults on an idle 2-core machine.

``--bare`` adds the machine's own spread as a reference, measured in the same minutes: each
repeat is then a campaign of its own, followed by one process of a bare PyTorch loop of the
quickstart's 1-rank training (LeNet on the digits upsampled to 28 x 28, batches of 32 in
order, SGD, one thread as the ranks log, 5 warm-up steps) timed over the window, with no
ddlbench code around the steps. It feeds the quickstart's data: one random batch repeated
ran slower and spread more here (4,950-6,830 against 7,260-8,590 samples/s, 3 s each).
Repeats of ddlbench that spread no more than these spread only as much as the machine does.

    python benchmarks/quickstart_cv.py [--windows 0,2,5,10] [--repeats 3] [--bare] [--keep DIR]

Needs the torch environment (scripts/make-envs.sh torch). Each run takes about its window
plus 5-10 s of start-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from _torch_env import torch_python  # this folder: sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def ddlbench(results: Path, *args: str) -> None:
    env = dict(os.environ, DDLBENCH_RESULTS=str(results), PYTHONPATH=str(ROOT))
    subprocess.run(
        [sys.executable, "-m", "ddlbench", *args],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def spec_text(window: float, repeats: int) -> str:
    """The quickstart spec, with the window asked (0: steps only) and the repeats."""
    import yaml

    spec = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    spec["name"] = f"quickstart-w{window:g}"
    spec["repeats"] = repeats
    steps = dict(spec.get("steps") or {})
    steps["measure_seconds"] = window
    if window == 0:
        steps["measure"] = 40  # the quickstart before measure_seconds existed
    spec["steps"] = steps
    return yaml.safe_dump(spec, sort_keys=False)


def cpu_times() -> Tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    from ddlbench.workloads.node.preflight import read_proc_stat

    busy, total = read_proc_stat()
    return float(busy), float(total)


def spread_row(window: float, config: str, tput: List[float]) -> Dict[str, object]:
    """CV and the largest distance from the median of one configuration's throughputs."""
    med = statistics.median(tput)
    return {
        "window": window,
        "config": config,
        "n": len(tput),
        "cv": statistics.stdev(tput) / statistics.fmean(tput) if len(tput) > 1 else None,
        "spread": max(abs(v / med - 1) for v in tput),
        "median": med,
    }


def campaign_runs(results: Path, name: str, window: float, repeats: int):
    """Submit the quickstart as campaign ``name``, wait for it, return its runs table."""
    from ddlbench.collect.collector import ensure_collected

    spec = results / f"{name}.yaml"
    spec.write_text(spec_text(window, repeats))
    ddlbench(results, "submit", str(spec), "--campaign", name)
    ddlbench(results, "wait", name, "--timeout", "3600")
    return ensure_collected(results / name).runs


def measure(results: Path, window: float, repeats: int, bare: bool) -> List[Dict[str, object]]:
    """Rows per configuration; with ``bare``, one campaign per repeat, each followed by one
    bare-loop process, so that the reference shares the minutes the repeats ran in."""
    import pandas as pd

    name = f"quickstart-w{window:g}"
    bare_s = window or DEFAULT_BARE_S  # window 0: steps only; the bare loop still needs a time
    if not bare:
        runs = campaign_runs(results, name, window, repeats)
    else:
        parts, ref = [], []
        for r in range(repeats):
            parts.append(campaign_runs(results, f"{name}-r{r}", window, 1))
            ref.append(bare_run(bare_s))
        runs = pd.concat(parts, ignore_index=True)
        print_pairs(window, parts, ref)
    rows = []
    for (nodes, tpn), g in runs.groupby(["nodes", "tasks_per_node"]):
        row = spread_row(window, f"{nodes}x{tpn}", [float(v) for v in g["throughput"].dropna()])
        row["measured_s"] = statistics.median(float(v) for v in g["measure_time_s"])
        row["busy"] = int((g["preflight_busy"] == True).sum())  # noqa: E712 - NaN: no report
        row["steps"] = statistics.median(
            float(s) / float(b) for s, b in zip(g["samples_measured"], g["global_batch_size"])
        )
        rows.append(row)
    if bare:
        row = spread_row(window, "bare", ref)
        row.update(measured_s=bare_s, busy=0, steps=row["median"] * bare_s / 32)
        rows.append(row)
    return rows


#: the bare loop's measured seconds where the window asked is 0 (steps only)
DEFAULT_BARE_S = 10.0
#: one bare process: LeNet training steps timed over argv[1] seconds, samples/s printed
BARE_LOOP = r"""
import sys, time
import torch
from torch import nn
from ddlbench.workloads.common.data import load_digits_split
from ddlbench.workloads.pytorch.models_torch import build_model
torch.set_num_threads(1)  # the quickstart's ranks log threads: 1
model = build_model("lenet", 10, 28, seed=0)
# the quickstart's optimizer (configs/quickstart.yaml)
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
crit = nn.CrossEntropyLoss()
d = load_digits_split(28)
x, y = torch.from_numpy(d.x_train), torch.from_numpy(d.y_train)
batches = [(x[i : i + 32], y[i : i + 32]) for i in range(0, len(y) - 31, 32)]
def step(i):
    xb, yb = batches[i % len(batches)]
    opt.zero_grad(set_to_none=True)
    crit(model(xb), yb).backward()
    opt.step()
for i in range(5):
    step(i)
window, n, t0 = float(sys.argv[1]), 0, time.time()
while time.time() - t0 < window:
    step(n)
    n += 1
print(32 * n / (time.time() - t0))
"""


def print_pairs(window: float, parts, ref: List[float]) -> None:
    """Each repeat's throughputs beside the bare loop's that followed it, and the spread of
    their ratio: a ratio steadier than the throughputs means the repeats moved with the
    machine."""
    print(f"window {window:g} s, per repeat: samples/s of each configuration, then the bare loop")
    ratios: Dict[str, List[float]] = {}
    for r, (runs, b) in enumerate(zip(parts, ref)):
        cells = []
        for _, run in runs.sort_values(["nodes", "tasks_per_node"]).iterrows():
            key = f"{int(run['nodes'])}x{int(run['tasks_per_node'])}"
            cells.append(f"{key} {float(run['throughput']):8.1f}")
            ratios.setdefault(key, []).append(float(run["throughput"]) / b)
        print(f"  repeat {r}: " + "  ".join(cells) + f"  bare {b:8.1f}")
    for key, vals in ratios.items():
        cv = statistics.stdev(vals) / statistics.fmean(vals) if len(vals) > 1 else float("nan")
        print(f"  {key} / bare: median {statistics.median(vals):.3f}, CV {100 * cv:.1f} %")


def bare_run(seconds: float) -> float:
    """One bare-loop process's samples/s over ``seconds`` (the torch environment's python)."""
    out = subprocess.run(
        [str(torch_python()), "-c", BARE_LOOP, str(seconds)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", default="0,2,5,10", help="measure_seconds values, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--bare", action="store_true", help="a bare-loop process after each repeat, the reference"
    )
    ap.add_argument("--keep", help="results folder to keep (default: a temporary one)")
    args = ap.parse_args()
    windows = [float(w) for w in args.windows.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(args.keep or tmp)
        results.mkdir(parents=True, exist_ok=True)
        rows = []
        for window in windows:
            busy0, total0 = cpu_times()
            t0 = time.time()
            got = measure(results, window, args.repeats, args.bare)
            busy1, total1 = cpu_times()
            load = (busy1 - busy0) / max(total1 - total0, 1.0) * (os.cpu_count() or 1)
            for r in got:
                r["machine_busy_cpus"] = load
                r["wall_s"] = time.time() - t0
            rows.extend(got)
    print(f"{os.cpu_count()} CPUs; load1 at the end {os.getloadavg()[0]:.2f}")
    print(
        "window_s config repeats      CV  max|x/median-1|  samples/s  measured_s  steps"
        "  busy_cpus  preflight_busy"
    )
    for r in rows:
        cv = "-" if r["cv"] is None else f"{100 * r['cv']:5.1f} %"
        print(
            f"{r['window']:8g} {r['config']:>6} {r['n']:7d} {cv:>7} {100 * r['spread']:13.1f} % "
            f"{r['median']:10.1f} {r['measured_s']:11.2f} {r['steps']:6.0f} "
            f"{r['machine_busy_cpus']:10.2f}  {r['busy']}/{r['n']}"
        )
    print("busy_cpus: CPUs busy on the whole machine (this benchmark included) while it ran")
    print("preflight_busy: runs whose pre-flight found other processes busy at their start")
    if args.bare:
        print("bare: the same 1-rank training with no ddlbench around it, the machine's own spread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
