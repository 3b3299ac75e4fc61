"""A Slurm client that cannot work here (a bad SLURM_CONF): submit stops at the first call,
with one line and exit 75, instead of calling sbatch once per run; nothing is left half-done.

The clients are stand-ins on PATH that print what Slurm 22.05 prints then
(tests/fixtures/slurm/sbatch_bad_slurm_conf.txt) and count their calls."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ddlbench.cli import main
from ddlbench.execute import campaign_status, submit_campaign
from ddlbench.execute.base import EXIT_UNREACHABLE, SchedulerUnreachable
from ddlbench.execute.slurm.commands import SlurmClient, is_client_trouble, is_transient
from ddlbench.execute.store import CampaignStore
from tests.support.campaigns import make_campaign
from tests.support.repo import ROOT

RECORDED = (ROOT / "tests/fixtures/slurm/sbatch_bad_slurm_conf.txt").read_text()
RUNS = [{"run_id": f"r{i}", "body": ["true"]} for i in range(3)]


@pytest.fixture
def broken_slurm(tmp_path, monkeypatch):
    """sbatch, scontrol and squeue that fail as with SLURM_CONF=/nonexistent; calls.log
    lists each call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "scontrol", "squeue"):
        text = RECORDED.replace("sbatch:", f"{name}:")
        script = bin_dir / name
        script.write_text(
            f'#!/bin/bash\necho "{name} $*" >> {tmp_path}/calls.log\ncat >&2 <<"EOF"\n{text}EOF\n'
            "exit 1\n"
        )
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return tmp_path / "calls.log"


def _calls(log) -> list:
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def test_the_recorded_message_is_client_trouble_not_a_rejection():
    assert is_client_trouble(RECORDED) and not is_transient(RECORDED)
    assert not is_client_trouble("sbatch: error: Batch job submission failed: Invalid partition")


def test_a_broken_client_stops_submit_before_any_run(broken_slurm, tmp_path):
    cdir = make_campaign(tmp_path, "nc", RUNS, scheduler="slurm", slurm={"sacct": "no"})
    with pytest.raises(SchedulerUnreachable) as err:
        submit_campaign(cdir, echo=lambda m: None)
    assert err.value.exit_code == EXIT_UNREACHABLE == 75
    text = str(err.value)
    assert "`scontrol show config` failed before reaching the Slurm controller" in text
    assert "Unable to process configuration file" in text and "\n" not in text
    assert f"ddlbench submit --resume {cdir.name}" in text
    assert _calls(broken_slurm) == ["scontrol"]  # no sbatch at all
    with CampaignStore.open(cdir) as store:
        assert store.attempts() == []  # every run stays NOT_SUBMITTED: resumable


def test_sbatch_failing_so_stops_at_the_first_run_and_keeps_it_unsubmitted(broken_slurm, tmp_path):
    cdir = make_campaign(tmp_path, "nc2", RUNS, scheduler="slurm", slurm={"sacct": "no"})
    with CampaignStore.open(cdir) as store:
        store.set_meta("slurm_config", {})  # read by an earlier submit: no scontrol call
    said = []
    with pytest.raises(SchedulerUnreachable, match="`sbatch` failed before reaching"):
        submit_campaign(cdir, echo=said.append)
    assert _calls(broken_slurm) == ["sbatch"]  # once, not once per run
    assert said == [f"campaign {cdir.name} on Slurm: 3 runs: 0 submitted, 3 not submitted"]
    with CampaignStore.open(cdir) as store:
        assert store.attempts() == []
    st = campaign_status(cdir, poll=False, echo=lambda m: None)
    assert st["counts"] == {"NOT_SUBMITTED": 3}


def test_the_cli_says_it_in_one_line_with_exit_75(broken_slurm, tmp_path):
    make_campaign(tmp_path, "nc3", RUNS, scheduler="slurm", slurm={"sacct": "no"})
    res = CliRunner().invoke(main, ["submit", "--resume", "nc3", "--results", str(tmp_path)])
    assert res.exit_code == 75, res.output
    errors = [line for line in res.output.splitlines() if "failed before reaching" in line]
    assert len(errors) == 1 and errors[0].startswith("ddlbench: ")


def test_a_slow_call_is_said_while_it_runs():
    said = []
    client = SlurmClient(retries=0)
    client.notice, client.slow_after_s = said.append, 0.2
    res = client.run(["sleep", "0.6"])
    assert res.ok
    assert said == ["waiting for `sleep 0.6`: no answer after 0 s (it gives up after 120 s)"]
    client.notice = None
    said.clear()
    assert client.run(["sleep", "0.3"]).ok and said == []  # only where submit asks for it


def test_a_warning_beside_an_accepted_job_keeps_the_job(tmp_path, monkeypatch):
    """sbatch that prints the client's complaint on stderr but accepts the job (a slurm.conf
    on slow NFS: "retrying in 1sec") submitted it: the run keeps its job, nothing stops, and a
    later submit cannot submit it twice."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "sbatch"
    script.write_text(
        f'#!/bin/bash\necho "sbatch $*" >> {tmp_path}/calls.log\ncat >&2 <<"EOF"\n'
        f'{RECORDED}EOF\necho "$(wc -l < {tmp_path}/calls.log)"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    cdir = make_campaign(tmp_path, "warned", RUNS, scheduler="slurm", slurm={"sacct": "no"})
    with CampaignStore.open(cdir) as store:
        store.set_meta("slurm_config", {})
    summary = submit_campaign(cdir, echo=lambda m: None, progress=False)
    assert len(summary.submitted) == 3 and _calls(tmp_path / "calls.log") == ["sbatch"] * 3
    with CampaignStore.open(cdir) as store:
        assert sorted(a.job_id for a in store.attempts()) == ["1", "2", "3"]
