"""The local executor when a job's supervisor dies, and its own records of how jobs ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ddlbench.execute import (
    campaign_status,
    cancel_campaign,
    retry_campaign,
    submit_campaign,
    wait_campaign,
)
from ddlbench.execute.local.job import read_pgid
from ddlbench.execute.local.records import read_end_record
from ddlbench.execute.local.watchdog import group_members
from ddlbench.execute.store import CampaignStore
from tests.support.campaigns import make_campaign
from tests.support.repo import wait_for

WATCHDOG = Path(__file__).resolve().parents[2] / "ddlbench/execute/local/watchdog.py"


def _quiet(_msg: str) -> None:
    pass


def _status(cdir):
    return {r["run_id"]: r for r in campaign_status(cdir, echo=_quiet)["runs"]}


# a stand-in for a job's supervisor: starts the watchdog, then a child in its group, as job.py
FAKE_SUPERVISOR = """
import os, subprocess, sys, time
dog = subprocess.Popen([sys.executable, "-Es", sys.argv[1], str(os.getpid()), "1"],
                       preexec_fn=os.setpgrp)
time.sleep(0.3)  # the watchdog blocks its signals first
child = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: os.setpgid(0, dog.pid))
print(dog.pid, child.pid, flush=True)
time.sleep(60)
"""


def test_the_watchdog_stops_the_job_when_its_supervisor_is_killed():
    sup = subprocess.Popen(
        [sys.executable, "-c", FAKE_SUPERVISOR, str(WATCHDOG)], stdout=subprocess.PIPE, text=True
    )
    pgid, child = (int(x) for x in sup.stdout.readline().split())
    assert set(group_members(pgid)) == {pgid, child}
    sup.kill()
    sup.wait()
    wait_for(lambda: not group_members(pgid), timeout=10)  # SIGTERM: the sleep ends at once


def test_the_watchdog_leaves_when_the_supervisor_stops_the_job():
    dog = subprocess.Popen(
        [sys.executable, "-Es", str(WATCHDOG), str(os.getpid()), "30"], preexec_fn=os.setpgrp
    )
    time.sleep(0.3)
    os.killpg(dog.pid, signal.SIGTERM)  # what job.py does at the end of a job
    assert dog.wait(timeout=5) == 0  # alone in its group: it leaves at once, not after 30 s


def test_a_killed_supervisor_leaves_nothing_running_and_the_run_is_lost(tmp_path):
    """kill -9 of a running job's supervisor: its ranks are stopped, the run is LOST (not
    FAILED while its ranks run on), retry runs it again, and no two copies ever overlap."""
    body = ["srun --ntasks=2 bash -c 'sleep 30; echo late >> late'", "echo done"]
    cdir = make_campaign(tmp_path, "orphan", [{"run_id": "r", "tasks_per_node": 2, "body": body}])
    submit_campaign(cdir, echo=_quiet)
    with CampaignStore.open(cdir) as store:
        wait_for(lambda: store.attempts(states=["RUNNING"]), timeout=30)
        first = store.attempts("r")[0]
    pgid = wait_for(lambda: read_pgid(cdir, first.job_id), timeout=30)
    wait_for(lambda: len(group_members(pgid)) >= 5, timeout=30)  # dog, bash, srun, 2 tasks
    os.kill(first.pid, signal.SIGKILL)
    # retry refuses while the run is RUNNING; it becomes LOST only once its job is gone
    assert retry_campaign(cdir, echo=_quiet).submitted == []
    wait_for(lambda: _status(cdir)["r"]["state"] == "LOST", timeout=30)
    assert group_members(pgid) == []
    st = _status(cdir)["r"]
    assert "supervisor was killed by signal 9 (SIGKILL)" in st["reason"], st["reason"]
    assert read_end_record(cdir, first.job_id)["state"] == "LOST"
    err = (cdir / "runs" / "r" / f"slurm-{first.job_id}.err").read_text()
    assert f"the job's supervisor (pid {first.pid}) died; stopping the job" in err

    summary = retry_campaign(cdir, echo=_quiet)
    assert [r for r, _ in summary.submitted] == ["r"]
    wait_for(lambda: _status(cdir)["r"]["state"] == "RUNNING", timeout=30)
    cancel_campaign(cdir, echo=_quiet)
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 1
    assert not (cdir / "runs" / "r" / "late").exists()  # the first copy never went on
    with CampaignStore.open(cdir) as store:
        a1, a2 = store.attempts("r")
    assert (a1.state, a2.state) == ("LOST", "CANCELLED")
    assert a1.end_time <= a2.start_time  # never two copies at once
    reason = _status(cdir)["r"]["reason"]
    assert (
        reason
        == "cancelled by the user while running (its tasks were stopped with signal 15, SIGTERM)"
    )


def test_a_pending_local_run_cancelled_reads_as_documented(tmp_path):
    runs = [{"run_id": "a", "body": ["sleep 30"]}, {"run_id": "b", "body": ["true"]}]
    cdir = make_campaign(tmp_path, "pend", runs)
    submit_campaign(cdir, echo=_quiet)
    wait_for(lambda: _status(cdir)["a"]["state"] == "RUNNING", timeout=30)
    cancel_campaign(cdir, run_ids=["b"], echo=_quiet)
    st = _status(cdir)
    assert st["b"]["state"] == "CANCELLED"
    assert st["b"]["reason"] == "cancelled by the user while pending (it never started)"
    cancel_campaign(cdir, echo=_quiet)
    wait_campaign(cdir, timeout=60, echo=_quiet)


def test_a_recorded_group_whose_id_now_names_another_group_is_not_touched(tmp_path):
    """After a reboot, or once a job's processes are gone, its group id can name another group
    (a shell's, another user's): the runner must neither stop that group nor wait for it. The
    recorded identity (boot id, the leader's start time) says whether it is still the job's."""
    import subprocess
    import sys

    from ddlbench.execute.local.job import job_dir, read_pgid
    from ddlbench.execute.local.watchdog import identity

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        jdir = job_dir(tmp_path, "7")
        jdir.mkdir(parents=True)
        (jdir / "pgid").write_text(f"{other.pid} {identity(other.pid)}")
        assert read_pgid(tmp_path, "7") == other.pid  # the same process: the job's group
        boot, start = identity(other.pid).split(" ")
        (jdir / "pgid").write_text(f"{other.pid} {boot} {int(start) + 1}")
        assert read_pgid(tmp_path, "7") is None  # same id, another process: not the job's
        (jdir / "pgid").write_text(f"{other.pid} another-boot {start}")
        assert read_pgid(tmp_path, "7") is None
        (jdir / "pgid").write_text(str(other.pid))  # recorded by an older ddlbench: trusted
        assert read_pgid(tmp_path, "7") == other.pid
    finally:
        other.kill()
        other.wait()
    (jdir / "pgid").write_text(f"999999999 {boot} {start}")  # gone, same boot: no group left
    assert read_pgid(tmp_path, "7") == 999999999
