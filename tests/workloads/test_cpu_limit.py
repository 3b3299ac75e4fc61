"""``cpu-share`` by a cgroup CPU limit (common/cpu_limit.py), no ranks needed.

cgroup v1 is exercised on the real ``cpu`` controller where this process may make a child
cgroup (root on the development machine; skipped elsewhere). cgroup v2's ``cpu.max`` is
checked on a directory tree laid out like a delegated cgroup (the development machine's v2
mount has no cpu controller), and its refusal on the real v2 mount."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from ddlbench.workloads.common.cpu_limit import ENV_DIR, CgroupLimit, Unavailable
from ddlbench.workloads.common.inject import CpuShare, cpu_share

ROOT = Path(__file__).resolve().parents[2]
V1 = Path("/sys/fs/cgroup/cpu")
V2_WITHOUT_CPU = Path("/sys/fs/cgroup/unified")


def _v1_parent() -> Path:
    """A fresh cgroup v1 directory under the cpu controller, or skip."""
    parent = V1 / f"pytest-cpu-limit-{os.getpid()}-{time.monotonic_ns()}"
    try:
        parent.mkdir()
    except OSError as exc:
        pytest.skip(f"no writable cgroup v1 cpu controller here: {exc}")
    return parent


@pytest.fixture
def v1_home(monkeypatch) -> Iterator[Path]:
    parent = _v1_parent()
    monkeypatch.setenv(ENV_DIR, str(parent))
    yield parent
    for child in parent.glob("ddlbench-*"):
        child.rmdir()
    parent.rmdir()


def _cpu_cgroup(task: str = "self") -> str:
    lines = Path(f"/proc/{task}/cgroup").read_text().splitlines()
    return next(line.split(":", 2)[2] for line in lines if "cpu" in line.split(":")[1].split(","))


def test_v1_quota_is_written_per_step_and_restored(v1_home):
    (v1_home / "cpu.cfs_period_us").write_text("100000")
    (v1_home / "cpu.cfs_quota_us").write_text("150000")  # the home allows 1.5 cores
    done = threading.Event()
    worker = threading.Thread(target=done.wait)  # a thread started before the move
    worker.start()
    before = _cpu_cgroup()
    limit = CgroupLimit(4)
    try:
        child = v1_home / f"ddlbench-{os.getpid()}"
        assert limit.dir == child and limit.by == "cgroup-v1"
        assert limit.cores == pytest.approx(min(1.5, len(os.sched_getaffinity(0))))
        tasks = [t.name for t in Path("/proc/self/task").iterdir()]
        assert len(tasks) >= 2
        assert {_cpu_cgroup(f"self/task/{t}") for t in tasks} == {f"/{v1_home.name}/{child.name}"}
        assert (child / "cpu.cfs_quota_us").read_text().strip() == "-1"
        period = int((child / "cpu.cfs_period_us").read_text())
        assert (child / "cpu.shares").read_text().strip() == "2048"  # 1.5 cores: 2 threads
        limit.set(4)
        quota = int((child / "cpu.cfs_quota_us").read_text())
        assert quota == int(limit.cores * period / 4)
        assert (child / "cpu.shares").read_text().strip() == "512"  # 2048 / 4
        t0, c0 = time.perf_counter(), time.process_time()
        while time.perf_counter() - t0 < 0.5:
            pass
        rate = (time.process_time() - c0) / (time.perf_counter() - t0)
        assert rate < 1.3 * quota / period  # the kernel holds the process to its quota
        limit.set(1)
        assert (child / "cpu.cfs_quota_us").read_text().strip() == "-1"
        assert (child / "cpu.shares").read_text().strip() == "2048"
    finally:
        limit.close()
        done.set()
        worker.join()
    assert not child.exists()
    assert _cpu_cgroup() == before  # back where it came from


SCRIPT = """
import os, signal, sys
from ddlbench.workloads.common.cpu_limit import CgroupLimit
limit = CgroupLimit(3)
limit.set(3)
print(limit.dir, flush=True)
how = sys.argv[1]
if how == "end_process":
    from ddlbench.workloads.common.runner import end_process
    end_process(0)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _child_run(how: str) -> tuple:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, how],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, Path(proc.stdout.strip())


@pytest.mark.parametrize("how", ["exit", "end_process"])
def test_the_child_cgroup_is_removed_at_exit(v1_home, how):
    """At interpreter exit (atexit) and at the workloads' ``os._exit`` (end_process, which a
    SIGTERM or an exception in the rank also reaches)."""
    rc, child = _child_run(how)
    assert rc == 0 and child.parent == v1_home
    assert not child.exists()


def test_a_killed_ranks_leftover_does_not_break_the_next_run(v1_home):
    rc, left = _child_run("kill")
    assert rc == -signal.SIGKILL
    assert left.is_dir()  # SIGKILL: nothing could clean up; the cgroup is empty
    limit = CgroupLimit(2)
    try:
        assert not left.exists()  # swept: its process is gone
    finally:
        limit.close()
    assert list(v1_home.glob("ddlbench-*")) == []


@pytest.mark.parametrize(
    "where,why",
    [
        ("/nonexistent/cgroup", "is not a cgroup directory"),
        (str(V2_WITHOUT_CPU), "the cpu controller is not available"),
    ],
)
def test_falls_back_to_competitors_where_no_cgroup_can_be_made(monkeypatch, capfd, where, why):
    if where == str(V2_WITHOUT_CPU) and not (V2_WITHOUT_CPU / "cgroup.controllers").is_file():
        pytest.skip("no cgroup v2 mount at /sys/fs/cgroup/unified")
    monkeypatch.setenv(ENV_DIR, where)
    share = cpu_share(2.0, "auto", threads=1, rank=2)
    try:
        assert isinstance(share, CpuShare) and share.by == "competitors"
        assert len(share.procs) == 1  # one competitor per core
    finally:
        share.close()
    assert why in capfd.readouterr().err
    with pytest.raises(RuntimeError, match=f"cpu_share_by is cgroup, but .*{why}"):
        cpu_share(2.0, "cgroup")
    if where == str(V2_WITHOUT_CPU):
        assert not (V2_WITHOUT_CPU / f"ddlbench-{os.getpid()}").exists()  # nothing left
    assert cpu_share(1.0, "auto") is None  # a rank never slowed gets neither


def _fake_v2(tmp_path: Path, controllers: str) -> Path:
    home = tmp_path / "task_2"
    home.mkdir()
    (home / "cgroup.controllers").write_text(controllers + "\n")
    (home / "cgroup.subtree_control").write_text("\n")
    (home / "cgroup.procs").write_text(f"{os.getpid()}\n")
    (home / "cpu.max").write_text("100000 100000\n")  # the home allows 1 core
    return home


def test_v2_writes_cpu_max_on_a_delegated_tree(tmp_path, monkeypatch):
    """The writes of cgroup v2, on a directory tree laid out as a delegated cgroup."""
    home = _fake_v2(tmp_path, "cpuset cpu io memory pids")
    monkeypatch.setenv(ENV_DIR, str(home))
    limit = CgroupLimit(5)
    child = home / f"ddlbench-{os.getpid()}"
    assert limit.by == "cgroup-v2" and limit.cores == 1.0
    assert (child / "cgroup.procs").read_text() == str(os.getpid())  # moved first,
    assert (home / "cgroup.subtree_control").read_text() == "+cpu"  # then cpu enabled
    assert (child / "cpu.max").read_text() == f"max {limit.period}"
    assert (child / "cpu.weight").read_text() == "100"
    limit.set(5)
    assert (child / "cpu.max").read_text() == f"{limit.period // 5} {limit.period}"
    assert (child / "cpu.weight").read_text() == "20"
    limit.set(1.2)  # rounds to 1: no limit
    assert (child / "cpu.max").read_text() == f"max {limit.period}"
    assert (child / "cpu.weight").read_text() == "100"
    limit.close()
    assert (home / "cgroup.subtree_control").read_text() == "-cpu"
    assert (home / "cgroup.procs").read_text() == str(os.getpid())  # back home
    # (a real cgroupfs removes the child here; a plain directory with files cannot be)
    assert limit.closed


def test_v2_without_the_cpu_controller_makes_nothing(tmp_path, monkeypatch):
    home = _fake_v2(tmp_path, "memory pids")
    monkeypatch.setenv(ENV_DIR, str(home))
    with pytest.raises(Unavailable, match="cgroup.controllers: memory pids"):
        CgroupLimit(3)
    assert sorted(p.name for p in home.iterdir()) == [
        "cgroup.controllers",
        "cgroup.procs",
        "cgroup.subtree_control",
        "cpu.max",
    ]
