"""A Slurm client that cannot work here after the jobs went out (a broken SLURM_CONF in the
shell that polls): `status`, `wait` and `cancel` stop at once with one line and exit 75, as
`submit` does; `wait` does not poll through its patience; nothing in the store changes, and
with the client working again every command answers as before. On the real loopback cluster:
an empty slurm.conf fails Slurm 22.05's clients at once (a missing file makes them retry
reading it for 60 s first)."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from ddlbench.cli import main
from ddlbench.execute import submit_campaign
from ddlbench.execute.store import CampaignStore
from tests.support.campaigns import make_campaign


def _ddlbench(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.slurm
def test_status_wait_and_cancel_stop_with_75_while_the_client_cannot_work(
    slurm_cluster, tmp_path, monkeypatch
):
    runs = [{"run_id": "long", "body": ["sleep 120"]}]
    cdir = make_campaign(tmp_path, "ct", runs, scheduler="slurm")
    submit_campaign(cdir, echo=lambda m: None, progress=False)
    res = tmp_path
    with CampaignStore.open(cdir) as store:
        before = [(a.state, a.job_id) for a in store.attempts()]

    empty = tmp_path / "slurm.conf"
    empty.write_text("")
    monkeypatch.setenv("SLURM_CONF", str(empty))
    for args in (("status", "ct"), ("wait", "ct", "--patience", "300"), ("cancel", "ct")):
        started = time.monotonic()
        out = _ddlbench(*args, "--results", res)
        assert out.exit_code == 75, (args, out.output)
        assert time.monotonic() - started < 30, args  # not the wait's patience of 300 s
        said = [ln for ln in out.output.splitlines() if "failed before reaching" in ln]
        assert len(said) == 1 and "Unable to process configuration file" in said[0], out.output
        assert "cannot work here" in said[0] and "unreachable" not in out.output
    assert "nothing was cancelled: run `ddlbench cancel ct" in out.output
    with CampaignStore.open(cdir) as store:
        assert [(a.state, a.job_id) for a in store.attempts()] == before
        assert not any(a.cancel_requested for a in store.attempts())
        assert store.get_meta("cancel_requested") is None  # polls still retry node failures

    monkeypatch.setenv("SLURM_CONF", slurm_cluster["SLURM_CONF"])
    st = json.loads(_ddlbench("status", "ct", "--json", "--results", res).stdout)
    assert st["counts"] in ({"PENDING": 1}, {"RUNNING": 1})
    assert _ddlbench("cancel", "ct", "--results", res).exit_code == 0
    assert "long: CANCELLED" in _ddlbench("wait", "ct", "--results", res, "--timeout", "60").output


@pytest.mark.parametrize("child", ["exec sleep 30", "sleep 30 & wait"])
def test_a_call_cut_off_while_the_client_retries_its_configuration_names_it(tmp_path, child):
    """squeue with a missing slurm.conf says so at once, then retries reading it for 60 s:
    a poll's deadline that cuts it off keeps what it said (also when a child of it holds the
    pipes open) and names it; it may still be a slow file system, so it is not lasting."""
    from ddlbench.execute.base import SchedulerUnreachable, poll_deadline
    from ddlbench.execute.slurm.commands import SlurmClient

    squeue = tmp_path / "squeue"
    squeue.write_text(
        "#!/bin/bash\necho 'squeue: error: s_p_parse_file: cannot stat file /x/slurm.conf: "
        f"No such file or directory, retrying in 1sec up to 60sec' >&2\n{child}\n"
    )
    squeue.chmod(0o755)
    started = time.monotonic()
    with poll_deadline(time.monotonic() + 1.0), pytest.raises(SchedulerUnreachable) as err:
        SlurmClient(retries=2, backoff=0.1).run([str(squeue), "--noheader"])
    assert time.monotonic() - started < 10
    assert not err.value.lasting and err.value.exit_code == 75
    text = str(err.value)
    assert (
        "cannot stat file /x/slurm.conf" in text and "still retrying its own configuration" in text
    )
