"""The local executor's job environment has USER and LOGNAME as a Slurm job's does
(Charliecloud's ch-run refuses to start without USER)."""

from __future__ import annotations

import os
import pwd

from ddlbench.execute import submit_campaign, wait_campaign
from ddlbench.execute.local.job import job_environment
from tests.support.campaigns import make_campaign

ME = pwd.getpwuid(os.getuid()).pw_name


def _env(tmp_path, base):
    return job_environment(
        job_id="1",
        job_name="c.r",
        nodes=1,
        tasks_per_node=1,
        ntasks=1,
        cpus_per_task=None,
        gpus_per_node=0,
        submit_dir=str(tmp_path),
        bin_dir=tmp_path,
        jdir=tmp_path,
        base=base,
    )


def test_user_and_logname_come_from_the_password_database_when_unset(tmp_path):
    env = _env(tmp_path, {"PATH": "/usr/bin:/bin"})
    assert env["USER"] == ME and env["LOGNAME"] == ME
    empty = _env(tmp_path, {"PATH": "/usr/bin", "USER": "", "LOGNAME": ""})
    assert empty["USER"] == ME and empty["LOGNAME"] == ME


def test_a_set_user_or_logname_is_kept(tmp_path):
    env = _env(tmp_path, {"PATH": "/usr/bin", "USER": "alice", "LOGNAME": "bob"})
    assert env["USER"] == "alice" and env["LOGNAME"] == "bob"
    only_user = _env(tmp_path, {"PATH": "/usr/bin", "USER": "alice"})
    assert only_user["LOGNAME"] == "alice"


def test_a_local_job_started_without_user_has_it(tmp_path, monkeypatch):
    monkeypatch.delenv("USER", raising=False)
    monkeypatch.delenv("LOGNAME", raising=False)
    monkeypatch.setenv("DDLBENCH_LOCAL_KILL_WAIT", "1")
    body = ['echo "$USER $LOGNAME" > who']
    cdir = make_campaign(tmp_path, "c", [{"run_id": "r", "body": body}])
    submit_campaign(cdir, echo=lambda _m: None)
    assert wait_campaign(cdir, timeout=60, echo=lambda _m: None) == 0
    assert (cdir / "runs" / "r" / "who").read_text().split() == [ME, ME]
