"""How much do the quickstart's repeats agree, per configuration and measured window?

Runs ``configs/quickstart.yaml`` (PyTorch DDP, LeNet on digits, 1 and 2 CPU ranks, gloo) on
the local executor once per measured window asked (``--windows``; ``0`` is the fixed 40
steps of the spec, with no time target), ``--repeats`` runs per configuration, and prints per
configuration: the coefficient of variation of the repeats' throughput (sample standard
deviation over mean), the largest repeat's distance from their median, the median measured
window, the median steps measured, the machine's load while it ran (the CPUs kept busy, read
from /proc/stat over the whole benchmark), and how many runs the pre-flight called busy. The
target is a CV and spread within 5 % with the spec's defaults on an idle 2-core machine.

    python benchmarks/quickstart_cv.py [--windows 0,2,5,10] [--repeats 3] [--keep DIR]

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


def measure(results: Path, window: float, repeats: int) -> List[Dict[str, object]]:
    from ddlbench.collect.collector import ensure_collected

    name = f"quickstart-w{window:g}"
    spec = results / f"{name}.yaml"
    spec.write_text(spec_text(window, repeats))
    ddlbench(results, "submit", str(spec), "--campaign", name)
    ddlbench(results, "wait", name, "--timeout", "3600")
    runs = ensure_collected(results / name).runs
    rows = []
    for (nodes, tpn), g in runs.groupby(["nodes", "tasks_per_node"]):
        tput = [float(v) for v in g["throughput"].dropna()]
        med = statistics.median(tput)
        rows.append(
            {
                "window": window,
                "config": f"{nodes}x{tpn}",
                "n": len(tput),
                "cv": statistics.stdev(tput) / statistics.fmean(tput) if len(tput) > 1 else None,
                "spread": max(abs(v / med - 1) for v in tput),
                "median": med,
                "measured_s": statistics.median(float(v) for v in g["measure_time_s"]),
                "busy": int((g["preflight_busy"] == True).sum()),  # noqa: E712 - NaN: no report
                "steps": statistics.median(
                    float(s) / float(b)
                    for s, b in zip(g["samples_measured"], g["global_batch_size"])
                ),
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", default="0,2,5,10", help="measure_seconds values, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
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
            got = measure(results, window, args.repeats)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
