#!/usr/bin/env python3
"""Benchmark: ``ddlbench report`` (collect + analyse + plots + HTML/MD) on ~1,000,000 steps.

Generates a synthetic campaign in the documented log format (512 ranks x ~1,954 steps
= ~1,000,000 step records, ~200 MB of JSON Lines), then measures, each in a fresh Python
process so that imports count and memory is the process's own:

- ``report``: ``python -m ddlbench report --results ROOT bench`` with no collected data, i.e.
  collect + report as a user runs it (target: <= 5 s wall, <= 1 GiB peak RSS);
- ``collect`` alone and ``report`` alone (data already collected), for the breakdown;
- the floor: pyarrow's JSON reader alone parsing the same files (one call over all bytes with
  the step schema, as the collector does; and naive per-file calls with inferred schemas).

Files are read from the page cache (they were just written). ddlbench is measured with its
modules' bytecode compiled, as ``pip install`` leaves a package (``compileall`` before the
first round: with ``PYTHONDONTWRITEBYTECODE`` set, as on some machines, every run of a
checkout would otherwise compile about 60 modules from source, 0.08 s). Wall and CPU
(user+sys) times are printed: on a shared machine CPU time is the steadier figure. The
measurements take turns (one of each per round), so that a machine whose speed drifts affects
them alike; the closing lines give ``report`` from scratch over the one-call floor, medians of
the same run (target: 1.5x), the median of the two's ratio within each round (drift between
rounds moves both medians, not a round's ratio), and the least CPU time of ``report`` from
scratch spread over every core: the shortest wall time that work could take on this machine.
``--baseline DIR`` also measures
``ddlbench report`` of another checkout (e.g. ``git archive <commit> | tar -x -C DIR``) in the
same rounds, for a before/after ratio. ``--no-figures`` also measures the report from scratch
with no figure to draw and no figure worker: the main process's own path (docs/reports.md).

    python benchmarks/collect_report.py [--dir DIR] [--ranks 512] [--steps 1954] [--repeat 3]
                                        [--baseline DIR] [--no-figures]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 5.0
TARGET_MIB = 1024.0
TARGET_RATIO = 1.5  # report from scratch / the pyarrow one-call floor

FLOOR_BULK = r"""
import glob, sys, pyarrow as pa, pyarrow.json as pj
from ddlbench.collect.reader import PARSE_SCHEMA
files = sorted(glob.glob(sys.argv[1] + "/runs/*/logs/rank-*.jsonl"))
buf = b"".join(open(f, "rb").read() for f in files)
t = pj.read_json(pa.py_buffer(buf), read_options=pj.ReadOptions(block_size=16 << 20),
                 parse_options=pj.ParseOptions(explicit_schema=PARSE_SCHEMA,
                                               unexpected_field_behavior="ignore"))
print(t.num_rows)
"""
#: ``ddlbench report`` with no figure to draw and no figure worker (``--no-figures``): what the
#: main process alone costs, the path the figures, drawn beside it, do not lengthen. The
#: figures' module is replaced before anything imports it, so that matplotlib, which only the
#: figure worker imports, is not imported here either.
NO_FIGURES = r"""
import sys, types
sys.argv = ["ddlbench", "report", "bench", "-q"]
figures = types.ModuleType("ddlbench.report.figures")
figures.figure_plan = lambda analysis: []
figures.make_figures = lambda fig_input, out: {}
sys.modules["ddlbench.report.figures"] = figures
from ddlbench.cli import run
run()
"""
FLOOR_NAIVE = r"""
import glob, sys, pyarrow.json as pj
n = 0
for f in sorted(glob.glob(sys.argv[1] + "/runs/*/logs/rank-*.jsonl")):
    n += pj.read_json(f).num_rows
print(n)
"""


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants (KiB), from /proc."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return total


def _compile_bytecode(py: str, checkout: Path) -> None:
    """Write the bytecode of ``checkout``'s ddlbench modules (``__pycache__``, ignored by
    git), as installing the package does: the timed runs then load it instead of compiling
    the sources, which they would do every time where ``PYTHONDONTWRITEBYTECODE`` is set."""
    subprocess.run(
        [py, "-m", "compileall", "-q", str(checkout / "ddlbench")],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def measure(cmd, env=None, cwd=None):
    """Run ``cmd`` in a child; returns (wall s, cpu s incl. its children, peak MiB).

    Peak memory: the largest sum of resident memory over the child's process tree, sampled
    every 10 ms (the report's figure worker is a second process)."""
    import threading

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss_kib(proc.pid))
            time.sleep(0.01)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    if proc.wait() != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    wall = time.perf_counter() - t0
    th.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, peak[0] / 1024.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="work folder (default: a temporary one, removed afterwards)")
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--steps", type=int, default=1954, help="steps per rank (incl. 10 warmup)")
    ap.add_argument("--repeat", type=int, default=3, help="measurements of each figure")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--baseline", help="another ddlbench checkout to measure in the same rounds")
    ap.add_argument(
        "--no-figures",
        action="store_true",
        help="also time the report from scratch with no figure and no figure worker",
    )
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))  # the checkout's ddlbench
    from _synth import benchmark_campaign  # this folder: sys.path[0]

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="ddlbench-bench-"))
    root = work / "results"
    camp = root / "bench"
    try:
        if not (camp / "campaign.json").is_file():
            t0 = time.perf_counter()
            benchmark_campaign(root, "bench", ranks=args.ranks, steps=args.steps)
            print(f"generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        logs = sorted(camp.glob("runs/*/logs/rank-*.jsonl"))
        size = sum(p.stat().st_size for p in logs)
        steps = args.ranks * args.steps
        print(
            f"campaign: {len(logs)} rank logs, {steps:,} step records, {size / 1e6:.0f} MB; "
            f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}"
        )
        py = sys.executable
        for checkout in [ROOT] + ([Path(args.baseline)] if args.baseline else []):
            _compile_bytecode(py, checkout)
        # the subprocesses run in the work folder: the checkout on PYTHONPATH is the one used
        env = dict(os.environ, DDLBENCH_RESULTS=str(root), PYTHONPATH=str(ROOT))
        base_env = (
            dict(env, PYTHONPATH=str(Path(args.baseline).resolve())) if args.baseline else None
        )
        report_cmd = [py, "-m", "ddlbench", "report", "bench", "-q"]
        collect_cmd = [py, "-m", "ddlbench", "collect", "bench", "-q"]
        figures = {}

        def fresh_report(e=env, cmd=report_cmd):
            shutil.rmtree(camp / "data", ignore_errors=True)
            shutil.rmtree(camp / "report", ignore_errors=True)
            return measure(cmd, e, work)

        rows = [
            ("collect + report (ddlbench report, no data yet)", fresh_report),
            ("collect alone (ddlbench collect)", lambda: measure(collect_cmd, env, work)),
            ("report alone (data up to date)", lambda: measure(report_cmd, env, work)),
            (
                "floor: pyarrow, one call, step schema",
                lambda: measure([py, "-c", FLOOR_BULK, str(camp)], env, work),
            ),
            (
                "floor: pyarrow, per file, inferred",
                lambda: measure([py, "-c", FLOOR_NAIVE, str(camp)], env, work),
            ),
        ]
        if base_env is not None:
            rows.insert(1, ("baseline: collect + report", lambda: fresh_report(base_env)))
        if args.no_figures:
            bare_env = dict(env, DDLBENCH_REPORT_WORKER="0")
            no_figs = [py, "-c", NO_FIGURES]
            rows.insert(
                1,
                (
                    "no figures, no worker: collect + report",
                    lambda: fresh_report(bare_env, no_figs),
                ),
            )
        for name, _ in rows:
            figures[name] = ([], [], [])
        for i in range(args.repeat):  # rounds: one of each, in turn
            # the order reversed every other round: whichever row runs first in a round was
            # measured 0.28-0.39 s of CPU dearer, whatever its code (docs/reports.md#performance)
            for name, fn in rows if i % 2 == 0 else rows[::-1]:
                for store, value in zip(figures[name], fn()):
                    store.append(value)

        print(f"{'':50s} {'wall min':>9s} {'wall med':>9s} {'cpu min':>9s} {'peak MiB':>9s}")
        for name, (walls, cpus, peaks) in figures.items():
            print(
                f"{name:50s} {min(walls):8.2f}s {statistics.median(walls):8.2f}s "
                f"{min(cpus):8.2f}s {max(peaks):9.0f}"
            )
        peak = max(figures[rows[0][0]][2])
        main_wall = statistics.median(figures[rows[0][0]][0])  # medians are quoted
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        floor = statistics.median(figures["floor: pyarrow, one call, step schema"][0])
        ratio = main_wall / floor
        line = f"report from scratch / floor (medians): {ratio:.2f}x (target {TARGET_RATIO}x)"
        if base_env is not None:
            base = statistics.median(figures["baseline: collect + report"][0])
            line += f"; baseline {base / floor:.2f}x; new / baseline {main_wall / base:.2f}"
        print(line)
        # each round measures both: their ratio within a round is not moved by a machine whose
        # speed drifts between rounds (the floor's median moved 1.22-1.43 s between idle runs)
        paired = [
            r / f
            for r, f in zip(
                figures[rows[0][0]][0], figures["floor: pyarrow, one call, step schema"][0]
            )
        ]
        print(
            f"report from scratch / floor, the same round (median of {len(paired)}): "
            f"{statistics.median(paired):.2f}x (rounds {min(paired):.2f}-{max(paired):.2f}x)"
        )
        # the least CPU time of the runs, spread over every core for the whole run, is the
        # shortest wall time this work could take here: a ratio no overlap can beat
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        bound = min(figures[rows[0][0]][1]) / (cores or 1)
        print(
            f"CPU-time bound: {min(figures[rows[0][0]][1]):.2f} s of CPU over {cores} core(s) "
            f"= {bound:.2f} s at the least, {bound / floor:.2f}x the floor"
        )
        ok_t = main_wall <= TARGET_S
        ok_m = peak <= TARGET_MIB
        print(
            f"targets: time {main_wall:.2f} s <= {TARGET_S} s: {'met' if ok_t else 'MISSED'}; "
            f"memory {peak:.0f} MiB <= {TARGET_MIB:.0f} MiB: {'met' if ok_m else 'MISSED'}"
        )
        return 0 if (ok_t and ok_m) or not args.check else 1
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
