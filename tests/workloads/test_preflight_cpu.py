"""The pre-flight's CPU part: other processes' CPU use from /proc/stat over a short window,
less the pre-flight's own time; not the load average (docs/telemetry.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ddlbench.workloads.node import preflight


def test_proc_stat_busy_and_total(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 5 20 800 50 3 2 0 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    assert preflight.read_proc_stat(str(stat)) == (130, 980)  # guest is inside user
    stat.write_text("intr 1 2 3\n")
    with pytest.raises(OSError):
        preflight.read_proc_stat(str(stat))


def test_the_window_leaves_out_the_pre_flights_own_time(monkeypatch):
    reads = iter([(1000, 10000), (1150, 10200)])  # 2 CPUs, 1 s: 200 ticks, 150 busy
    own = iter([1.0, 1.2])  # the pre-flight itself used 0.2 CPU-seconds = 20 ticks
    monkeypatch.setattr(preflight, "read_proc_stat", lambda: next(reads))
    monkeypatch.setattr(preflight, "_own_cpu_s", lambda: next(own))
    monkeypatch.setattr(preflight.time, "sleep", lambda s: None)
    busy = preflight.others_busy_cpus(1.0, 2)
    assert busy == pytest.approx((150 - 20) / 200 * 2)


def test_a_busy_process_is_seen_and_the_load_average_does_not_decide(monkeypatch):
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        cpu = preflight.cpu_state({"DDLBENCH_PREFLIGHT_CPU_WINDOW": "0.5"})
    finally:
        spin.kill()
        spin.wait()
    assert cpu["others_busy_cpus"] >= 0.5 and cpu["cpu_window_s"] == 0.5
    assert cpu["cpu_busy"] is (cpu["others_busy_cpus"] > 0.25 * cpu["node_cpus"])
    # a load average inflated by steps that ended (an image import) changes nothing
    monkeypatch.setattr(preflight.os, "getloadavg", lambda: (999.0, 999.0, 999.0))
    monkeypatch.setattr(preflight, "others_busy_cpus", lambda w, c: 0.0)
    quiet = preflight.cpu_state({})
    assert quiet["load1"] == 999.0 and quiet["cpu_busy"] is False


def test_the_local_executor_is_no_schedulers_node():
    """On the local executor fewer job CPUs than the machine has is not a shared node: the
    machine is the user's, and only the CPU window says whether something else runs."""
    few = {"job_cpus": 1, "node_cpus": 2}
    assert preflight.node_shared(few, None, local=True) is None
    assert preflight.node_shared(few, None) is True  # on a Slurm node without squeue
    assert preflight.node_shared(few, ["77"], local=True) is True
