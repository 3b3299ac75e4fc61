"""benchmarks/backup_stragglers.py --pin: each rank's process, threads included, lands on the
CPU listed at its rank, and nothing else is moved."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time

import pytest

from tests.support.repo import ROOT

# a stand-in for a rank: its command line names a workload and the results folder
RANK = (
    "import sys, threading, time\n"
    "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
    "time.sleep(30)\n"
)


@pytest.fixture(scope="module")
def bench():
    path = ROOT / "benchmarks" / "backup_stragglers.py"
    spec = importlib.util.spec_from_file_location("backup_stragglers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _start(tmp_path, procid: int, mark: str) -> subprocess.Popen:
    env = dict(os.environ, SLURM_PROCID=str(procid))
    return subprocess.Popen(
        [sys.executable, "-c", RANK, mark, str(tmp_path / "runs" / "x" / "run.json")], env=env
    )


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_pin_ranks_binds_every_thread_of_each_rank(bench, tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    ranks = [_start(tmp_path, r, "ddlbench.workloads.node.rank_start") for r in range(3)]
    other = _start(tmp_path, 2, "not-a-workload")  # same folder, no workload: left alone
    started = time.monotonic() + 20
    while time.monotonic() < started and not all(
        len(os.listdir(f"/proc/{p.pid}/task")) >= 2 for p in ranks
    ):
        time.sleep(0.05)  # each stand-in runs its second thread
    assert all(len(os.listdir(f"/proc/{p.pid}/task")) >= 2 for p in ranks)
    stop = threading.Event()
    pinner = threading.Thread(
        target=bench.pin_ranks, args=(tmp_path, [cpus[0], cpus[0], cpus[1]], stop)
    )
    pinner.start()
    try:
        deadline = time.monotonic() + 20
        want = {ranks[0].pid: {cpus[0]}, ranks[1].pid: {cpus[0]}, ranks[2].pid: {cpus[1]}}

        def placed() -> dict:
            return {
                pid: {
                    frozenset(os.sched_getaffinity(int(t))) for t in os.listdir(f"/proc/{pid}/task")
                }
                for pid in want
            }

        while time.monotonic() < deadline:
            got = placed()
            if all(got[pid] == {frozenset(c)} for pid, c in want.items()):
                break
            time.sleep(0.1)
        assert placed() == {pid: {frozenset(c)} for pid, c in want.items()}
        assert os.sched_getaffinity(other.pid) == set(os.sched_getaffinity(0))
    finally:
        stop.set()
        pinner.join()
        for proc in [*ranks, other]:
            proc.kill()
            proc.wait()
