"""The local executor: the same user paths as on Slurm, with no scheduler at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddlbench.execute import (
    campaign_status,
    cancel_campaign,
    retry_campaign,
    submit_campaign,
    wait_campaign,
)
from ddlbench.execute.store import CampaignStore
from tests.support.campaigns import ENV_DUMP, make_campaign
from tests.support.repo import wait_for


def _quiet(_msg: str) -> None:
    pass


def _status(cdir):
    return {r["run_id"]: r for r in campaign_status(cdir, echo=_quiet)["runs"]}


def _env(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_two_emulated_nodes_and_a_failure(tmp_path):
    srun = "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --kill-on-bad-exit=1 --cpus-per-task=1"
    cdir = make_campaign(
        tmp_path,
        "c",
        [
            {
                "run_id": "two",
                "nodes": 2,
                "tasks_per_node": 2,
                "body": [
                    f"{srun} bash -c '{ENV_DUMP}'",
                    'scontrol show hostnames "$SLURM_JOB_NODELIST" > hosts',
                    'scontrol -o show node "$SLURM_JOB_NODELIST" > nodes',
                    "echo done",
                ],
            },
            {"run_id": "bad", "body": ["echo failing >&2", "exit 3"]},
        ],
    )
    summary = submit_campaign(cdir, echo=_quiet)
    assert len(summary.submitted) == 2 and summary.exit_code == 0
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 1
    st = _status(cdir)
    assert st["two"]["state"] == "COMPLETED" and st["two"]["exit_code"] == 0
    assert st["bad"]["state"] == "FAILED" and st["bad"]["exit_code"] == 3
    rdir = cdir / "runs" / "two"
    envs = [_env(rdir / f"env.{i}") for i in range(4)]
    assert [e["SLURM_NODEID"] for e in envs] == ["0", "0", "1", "1"]
    assert [e["SLURM_LOCALID"] for e in envs] == ["0", "1", "0", "1"]
    assert [e["SLURMD_NODENAME"] for e in envs] == ["node1", "node1", "node2", "node2"]
    assert {e["SLURM_NTASKS"] for e in envs} == {"4"}
    assert {e["SLURM_JOB_NODELIST"] for e in envs} == {"node[1-2]"}
    assert envs[0]["SLURM_JOB_ID"] == st["two"]["job_id"]
    assert (rdir / "hosts").read_text().split() == ["node1", "node2"]
    assert (rdir / "nodes").read_text().count("NodeAddr=127.0.0.1") == 2
    job = st["two"]["job_id"]
    assert (rdir / f"slurm-{job}.out").read_text().strip() == "done"
    bad_err = cdir / "runs" / "bad" / f"slurm-{st['bad']['job_id']}.err"
    assert bad_err.read_text().strip() == "failing"
    # job ids never repeat within the store
    assert st["two"]["job_id"] != st["bad"]["job_id"]


def test_kill_on_bad_exit_and_unknown_srun_flag(tmp_path):
    cdir = make_campaign(
        tmp_path,
        "k",
        [
            {
                "run_id": "kobe",
                "nodes": 2,
                "body": [
                    "start=$SECONDS",
                    "rc=0; srun --nodes=2 --ntasks=2 --kill-on-bad-exit=1 bash -c "
                    "'if [ $SLURM_PROCID = 1 ]; then exit 7; fi; sleep 30' || rc=$?",
                    'echo "rc=$rc took=$((SECONDS-start))"',
                ],
            },
            {"run_id": "flag", "body": ["srun --distribution=cyclic true"]},
        ],
    )
    submit_campaign(cdir, echo=_quiet)
    wait_campaign(cdir, timeout=60, echo=_quiet)
    st = _status(cdir)
    out = (cdir / "runs" / "kobe" / f"slurm-{st['kobe']['job_id']}.out").read_text()
    rc, took = (int(p.split("=")[1]) for p in out.split())
    assert rc == 7 and took < 10
    err = (cdir / "runs" / "flag" / f"slurm-{st['flag']['job_id']}.err").read_text()
    assert "--distribution=cyclic: only block is emulated" in err
    assert st["flag"]["state"] == "FAILED" and st["flag"]["exit_code"] == 1


def test_cancel_timeout_and_retry(tmp_path):
    cdir = make_campaign(
        tmp_path,
        "t",
        [
            {"run_id": "slow", "time": "0:02", "body": ["sleep 60"]},
            {
                "run_id": "flaky",
                "body": ["if [ ! -e ../once ]; then touch ../once; exit 5; fi", "echo ok"],
            },
            {"run_id": "long", "body": ["srun sleep 60"]},
        ],
        local={"max_parallel": 2},
    )
    submit_campaign(cdir, echo=_quiet)
    wait_for(lambda: _status(cdir)["long"]["state"] == "RUNNING", timeout=30)
    cancel_campaign(cdir, run_ids=["long"], echo=_quiet)
    # cancel returns once the supervisor has stopped the job: status reads it at once
    assert _status(cdir)["long"]["state"] == "CANCELLED"
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 1
    st = _status(cdir)
    assert st["slow"]["state"] == "TIMEOUT"
    assert st["long"]["state"] == "CANCELLED"
    assert st["flaky"]["state"] == "FAILED" and st["flaky"]["exit_code"] == 5
    err = (cdir / "runs" / "slow" / f"slurm-{st['slow']['job_id']}.err").read_text()
    assert "DUE TO TIME LIMIT" in err
    # nothing of the cancelled job is left running
    assert subprocess.run(["pgrep", "-f", f"{cdir}.*sleep"], capture_output=True).stdout == b""

    summary = retry_campaign(cdir, states={"FAILED"}, echo=_quiet)
    assert [r for r, _ in summary.submitted] == ["flaky"]
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 1
    st = _status(cdir)
    assert st["flaky"]["state"] == "COMPLETED" and st["flaky"]["attempts"] == 2
    with CampaignStore.open(cdir) as store:
        old = store.attempts("flaky")
    assert [a.state for a in old] == ["FAILED", "COMPLETED"]
    _recover_says_what_status_said(cdir)


def _rows(cdir) -> dict:
    keep = ("state", "reason", "exit_code", "signal", "job_id", "nodelist")
    return {
        rid: [{k: h.get(k) for k in keep if k in h} for h in row["history"]]
        + [{k: row[k] for k in ("state", "reason", "exit_code")}]
        for rid, row in _status(cdir).items()
    }


def _recover_says_what_status_said(cdir) -> None:
    """recover rebuilds a local store from the executor's own records: TIMEOUT stays TIMEOUT,
    a run cancelled while running says so in the words status used, exit codes are kept."""
    from ddlbench.execute.local.records import end_record_path
    from ddlbench.execute.recover import recover_campaign

    before = _rows(cdir)
    assert before["long"][-1]["reason"].startswith("cancelled by the user while running")
    assert before["slow"][-1] == {"state": "TIMEOUT", "reason": "TimeLimit", "exit_code": 0}
    out = recover_campaign(cdir, force=True, echo=_quiet)
    assert out.unknown == []
    assert _rows(cdir) == before
    # without the executor's record, the run folder: the time-limit line, no Slurm wording
    end_record_path(cdir, before["slow"][0]["job_id"]).unlink()
    recover_campaign(cdir, force=True, echo=_quiet)
    slow = _status(cdir)["slow"]
    assert slow["state"] == "TIMEOUT" and "TimeLimit (from the job's output)" in slow["reason"]


def test_submit_twice_never_runs_twice_and_runs_one_at_a_time(tmp_path):
    runs = [{"run_id": f"r{i}", "body": ["sleep 0.3"]} for i in range(4)]
    cdir = make_campaign(tmp_path, "twice", runs)
    first = submit_campaign(cdir, echo=_quiet)
    second = submit_campaign(cdir, echo=_quiet)
    assert len(first.submitted) == 4
    assert second.submitted == [] and len(second.skipped) == 4
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 0
    with CampaignStore.open(cdir) as store:
        attempts = store.attempts()
    assert len(attempts) == 4
    spans = sorted((a.start_time, a.end_time) for a in attempts)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end  # max_parallel 1: never two at once


def test_dead_runner_is_detected_and_resumed(tmp_path):
    runs = [
        {"run_id": f"r{i}", "body": ["sleep 1", "echo $SLURM_JOB_ID >> ../ran"]} for i in range(3)
    ]
    cdir = make_campaign(tmp_path, "stale", runs)
    submit_campaign(cdir, echo=_quiet)
    with CampaignStore.open(cdir) as store:
        wait_for(lambda: store.attempts(states=["RUNNING"]), timeout=30)
        pid = store.get_meta("local_runner")["pid"]
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)
    # status notices the dead runner and starts a new one; every run runs exactly once
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 0
    ran = (cdir / "runs" / "ran").read_text().split()
    assert sorted(ran) == ["1", "2", "3"]
    with CampaignStore.open(cdir) as store:
        assert store.get_meta("local_runner")["pid"] != pid


def test_concurrent_status_and_submit_keep_the_store_intact(tmp_path):
    runs = [{"run_id": f"r{i:03d}", "body": ["true"]} for i in range(30)]
    cdir = make_campaign(tmp_path, "conc", runs, local={"max_parallel": 3})
    code = (
        "import sys\n"
        "from ddlbench.execute import campaign_status\n"
        "for _ in range(40):\n"
        "    campaign_status(sys.argv[1], echo=lambda m: None)\n"
    )
    readers = [
        subprocess.Popen([sys.executable, "-c", code, str(cdir)], stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    summary = submit_campaign(cdir, echo=_quiet)
    for p in readers:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    assert len(summary.submitted) == 30
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 0
    with CampaignStore.open(cdir) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert store.journal_mode == "wal"
        assert len(store.attempts()) == 30
        assert len({a.job_id for a in store.attempts()}) == 30


@pytest.mark.parametrize("flag", ["--mpi=pmix", "--container-image=x"])
def test_srun_refuses_what_it_cannot_emulate(tmp_path, flag):
    from ddlbench.execute.local.shims import srun

    env = {"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "1"}
    old = dict(os.environ)
    os.environ.update(env)
    try:
        assert srun.main([flag, "--ntasks=2", "true"]) == 1
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_resume_after_sigkill_mid_submit_queues_each_run_once(tmp_path):
    runs = [{"run_id": f"r{i:03d}", "body": ["true"]} for i in range(300)]
    cdir = make_campaign(tmp_path, "kill", runs)
    code = "import sys; from ddlbench.execute import submit_campaign; submit_campaign(sys.argv[1])"
    proc = subprocess.Popen([sys.executable, "-c", code, str(cdir)], stdout=subprocess.DEVNULL)
    count = 0
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if (cdir / "state.sqlite").exists():
                with CampaignStore.open(cdir) as store:
                    count = len(store.attempts())
                if count >= 20:
                    break
            time.sleep(0.005)
    finally:
        proc.kill()
        proc.wait()
    with CampaignStore.open(cdir) as store:
        before = len(store.attempts())
    assert 20 <= before < 300
    summary = submit_campaign(cdir, resume=True, echo=_quiet)
    cancel_campaign(cdir, echo=_quiet)
    assert len(summary.submitted) == 300 - before and len(summary.skipped) == before
    with CampaignStore.open(cdir) as store:
        attempts = store.attempts()
    assert len(attempts) == 300 and len({a.run_id for a in attempts}) == 300
    assert wait_campaign(cdir, timeout=60, echo=_quiet) in (0, 1)


def test_two_campaigns_share_the_machine_wide_limit_and_job_numbers(tmp_path):
    """max_parallel holds across campaigns of the user; job numbers never repeat."""
    import threading

    dirs = [
        make_campaign(
            tmp_path, name, [{"run_id": f"r{i}", "body": ["sleep 0.4"]} for i in range(3)]
        )
        for name in ("one", "two")
    ]
    threads = [
        threading.Thread(target=submit_campaign, args=(d,), kwargs={"echo": _quiet}) for d in dirs
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for d in dirs:
        assert wait_campaign(d, timeout=90, echo=_quiet) == 0
    attempts = []
    for d in dirs:
        with CampaignStore.open(d) as store:
            attempts += store.attempts()
    assert len(attempts) == 6 and all(a.state == "COMPLETED" for a in attempts)
    assert len({a.job_id for a in attempts}) == 6  # unique on the machine
    spans = sorted((a.start_time, a.end_time) for a in attempts)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end  # one job at a time on the machine, whichever campaign
    slots = list((Path(os.environ["DDLBENCH_LOCAL_HOME"]) / "slots").iterdir())
    assert [p.name for p in slots] == ["slot-0"]


def test_a_job_waiting_for_a_slot_says_so_and_can_be_cancelled(tmp_path):
    from ddlbench.execute.local.machine import try_slot

    held = try_slot(1, "a test holding the only slot")
    assert held is not None
    cdir = make_campaign(tmp_path, "blocked", [{"run_id": "r", "body": ["echo ran > ran"]}])
    submit_campaign(cdir, echo=_quiet)
    wait_for(lambda: (_status(cdir)["r"].get("reason") or "").startswith("waiting"))
    reason = _status(cdir)["r"]["reason"]
    assert "a test holding the only slot" in reason
    assert _status(cdir)["r"]["state"] == "PENDING"
    cancel_campaign(cdir, echo=_quiet)
    held.release()
    assert wait_campaign(cdir, timeout=30, echo=_quiet) != 0
    assert _status(cdir)["r"]["state"] == "CANCELLED"
    assert not (cdir / "runs" / "r" / "ran").exists()
