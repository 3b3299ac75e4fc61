"""The user's path through the CLI: ddlbench submit (rendered by ddlbench), wait, status,
cancel, retry, on the local executor and on the local Slurm cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddlbench.cli import main
from ddlbench.execute.store import CampaignStore
from tests.support.campaigns import QUICKSTART, TRIVIAL_LOCAL, TRIVIAL_SLURM, make_campaign


def ddlbench(*args: str, ok: bool = True):
    res = CliRunner().invoke(main, [str(a) for a in args])
    if ok:
        assert res.exit_code == 0, res.output
    return res


def _user_path(tmp_path: Path, profile_text: str, extra=()):
    profile = tmp_path / "profile.yaml"
    profile.write_text(profile_text)
    res = tmp_path / "results"
    ddlbench(
        "submit", QUICKSTART, "--cluster", profile, "--results", res, "--campaign", "qs", *extra
    )
    out = ddlbench("wait", "qs", "--results", res, "--timeout", "180")
    assert "6 COMPLETED" in out.stdout
    st = json.loads(ddlbench("status", "--json", "--results", res).stdout)  # newest campaign
    assert st["campaign"] == "qs" and st["counts"] == {"COMPLETED": 6} and st["final"]
    job = st["runs"][0]["job_id"]
    out = (res / "qs" / "runs" / st["runs"][0]["run_id"] / f"slurm-{job}.out").read_text()
    assert "finished" in out
    again = ddlbench("submit", "--resume", "qs", "--results", res)
    assert "0 submitted" in again.stdout and "6 already submitted" in again.stdout
    assert "nothing to cancel" in ddlbench("cancel", "qs", "--results", res).stdout
    assert "no run to retry" in ddlbench("retry", "qs", "--failed", "--results", res).stdout
    table = ddlbench("status", "qs", "--results", res).stdout
    assert table.count("COMPLETED") == 7  # six rows and the counts line


def test_user_path_on_the_local_executor(tmp_path):
    _user_path(tmp_path, TRIVIAL_LOCAL)


@pytest.mark.slurm
def test_user_path_on_slurm(slurm_cluster, tmp_path):
    _user_path(tmp_path, TRIVIAL_SLURM, extra=("--serial",))


def test_wait_exit_codes_and_cancel(tmp_path):
    make_campaign(
        tmp_path,
        "w",
        [{"run_id": "bad", "body": ["exit 2"]}, {"run_id": "slow", "body": ["sleep 60"]}],
    )
    ddlbench("submit", "--resume", "w", "--results", tmp_path)
    res = ddlbench("wait", "w", "--results", tmp_path, "--timeout", "3", ok=False)
    assert res.exit_code == 124
    ddlbench("cancel", "w", "--results", tmp_path)
    res = ddlbench("wait", "w", "--results", tmp_path, "--timeout", "60", ok=False)
    assert res.exit_code == 1
    assert "bad: FAILED" in res.stdout and "slow: CANCELLED" in res.stdout
    res = ddlbench("retry", "w", "--state", "RUNNING", "--results", tmp_path, ok=False)
    assert res.exit_code == 2 and "not a state a run ends in" in res.output
    res = ddlbench("status", "nope", "--results", tmp_path, ok=False)
    assert res.exit_code == 2


def test_help_has_examples():
    for cmd in ("status", "wait", "cancel", "retry"):
        assert "Examples:" in ddlbench(cmd, "--help").stdout


def _files(root: Path) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_emptied_store_is_refused_then_recovered_and_nothing_runs_twice(tmp_path):
    """A 0-byte state.sqlite is not silently replaced: status and submit --resume refuse (exit
    2), `ddlbench recover` rebuilds it from the run folders, and resume submits nothing."""
    _lost_store(tmp_path, TRIVIAL_LOCAL)


@pytest.mark.slurm
def test_an_emptied_store_on_slurm_is_recovered_from_the_scheduler(slurm_cluster, tmp_path):
    """The same on real Slurm: the job states come back from the scheduler (jobcomp)."""
    found = _lost_store(tmp_path, TRIVIAL_SLURM, ("--serial",))
    assert not any("Slurm has no record" in (a["message"] or "") for a in found["attempts"])


def _runner_gone(campaign: Path, timeout_s: float = 60.0) -> None:
    """Wait until the local runner has let go of its lock (it has closed the store), so
    that emptying the store is not undone by the runner's own last writes through the
    connection it still holds open."""
    import time

    from ddlbench.execute.local.executor import runner_lock

    lock = runner_lock(campaign)
    deadline = time.monotonic() + timeout_s
    while lock.is_held():
        assert time.monotonic() < deadline, "the local runner still holds its lock"
        time.sleep(0.1)


def _store_closed(store: Path, timeout_s: float = 60.0) -> None:
    """Wait until no process holds the store open: a job's supervisor records its end, writes
    its end record and closes the store after the run reads as ended, and SQLite's last
    writes at close must not land in the file the test empties."""
    import os
    import time

    names = {str(store), f"{store}-wal", f"{store}-journal"}

    def held() -> bool:
        for fd_dir in Path("/proc").glob("[0-9]*/fd"):
            try:
                if any(os.readlink(fd) in names for fd in fd_dir.iterdir()):
                    return True
            except OSError:
                continue
        return False

    deadline = time.monotonic() + timeout_s
    while held():
        assert time.monotonic() < deadline, f"{store} is still open"
        time.sleep(0.1)


def _lost_store(tmp_path: Path, profile_text: str, extra=()) -> dict:
    profile = tmp_path / "profile.yaml"
    profile.write_text(profile_text)
    res = tmp_path / "results"
    ddlbench(
        "submit", QUICKSTART, "--cluster", profile, "--results", res, "--campaign", "qs", *extra
    )
    ddlbench("wait", "qs", "--results", res, "--timeout", "180")
    _runner_gone(res / "qs")  # its last writes to the store come after the runs have ended
    if Path("/proc/self/fd").is_dir():
        _store_closed(res / "qs" / "state.sqlite")  # and the jobs' supervisors' too
    runs = res / "qs" / "runs"
    before = _files(runs)
    assert any(p.parts[-2:] == ("attempt-1", "job.txt") for p in map(Path, before))
    (res / "qs" / "state.sqlite").write_bytes(b"")  # emptied

    for args in (("status", "qs"), ("submit", "--resume", "qs")):
        out = ddlbench(*args, "--results", res, ok=False)
        assert out.exit_code == 2, out.output
        # the hint names the campaign as the command line must: with its --results
        assert f"{runs}/" in out.output and f"ddlbench recover qs --results {res}" in out.output
        assert "NOT_SUBMITTED" not in out.output
    assert (res / "qs" / "state.sqlite").stat().st_size == 0  # nothing was created over it

    rec = ddlbench("recover", "qs", "--results", res, "--json")
    found = json.loads(rec.stdout)
    assert found["unknown"] == [] and len(found["attempts"]) == 6
    assert all(a["state"] == "COMPLETED" for a in found["attempts"])
    assert any(".lost-" in p for p in found["moved_aside"])  # the old file is kept
    st = json.loads(ddlbench("status", "qs", "--json", "--results", res).stdout)
    assert st["counts"] == {"COMPLETED": 6}
    again = ddlbench("submit", "--resume", "qs", "--results", res)
    assert "0 submitted" in again.output
    ddlbench("wait", "qs", "--results", res, "--timeout", "60")
    assert _files(runs) == before  # no log lost, none rewritten, no run started again
    assert "intact" in ddlbench("recover", "qs", "--results", res).stdout
    forced = ddlbench("recover", "qs", "--results", res, "--force").stdout
    assert f"next: `ddlbench status qs --results {res}`" in forced, forced
    return found


# A workload "interpreter" that writes a rank log as the workloads do (into DDLBENCH_LOG_DIR,
# never over an existing file) and waits on its first start, so that the job can be requeued
# mid-run; the port helper runs for real.
FAKE_PYTHON = """\
#!/bin/bash
if [[ " $* " == *" ddlbench.workloads.node.ports "* ]]; then exec {python} "$@"; fi
set -o noclobber
log="$DDLBENCH_LOG_DIR/rank-$SLURM_PROCID.jsonl"
echo '{{"type": "meta", "restart": '"${{SLURM_RESTART_COUNT:-0}}"'}}' > "$log"
if [[ "${{SLURM_RESTART_COUNT:-0}}" == 0 ]]; then exec sleep 120; fi
echo '{{"type": "summary", "status": "ok"}}' >> "$log"
"""


@pytest.mark.slurm
@pytest.mark.slow
def test_a_requeue_on_slurm_keeps_the_first_attempts_logs(slurm_cluster, tmp_path):
    import subprocess
    import sys
    import time

    fake = tmp_path / "fakepy"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    profile = tmp_path / "profile.yaml"
    profile.write_text(TRIVIAL_SLURM.replace('python: "true"', f"python: {fake}"))
    spec = tmp_path / "one.yaml"
    spec.write_text(
        Path(QUICKSTART)
        .read_text()
        .replace("[1x1, 1x2]", "[1x1]")
        .replace("repeats: 3", "repeats: 1")
    )
    res = tmp_path / "results"
    ddlbench("submit", spec, "--cluster", profile, "--results", res, "--campaign", "rq")
    run = next((res / "rq" / "runs").iterdir())
    first = run / "logs" / "attempt-1" / "rank-0.jsonl"
    deadline = time.monotonic() + 120
    while not first.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert first.exists(), "the job never started"
    kept = first.read_bytes()
    job = json.loads(ddlbench("status", "rq", "--json", "--results", res).stdout)["runs"][0]
    subprocess.run(["scontrol", "requeue", job["job_id"]], check=True)
    out = ddlbench("wait", "rq", "--results", res, "--timeout", "240", ok=False)
    assert out.exit_code == 0, out.output
    st = json.loads(ddlbench("status", "rq", "--json", "--results", res).stdout)["runs"][0]
    assert st["state"] == "COMPLETED" and st["job_id"] == job["job_id"]
    assert st["restarts"] == 1  # recorded in the store
    assert first.read_bytes() == kept  # the first attempt's log is untouched
    second = (run / "logs" / "attempt-2" / "rank-0.jsonl").read_text()
    assert '"restart": 1' in second and '"summary"' in second
    output = (run / f"slurm-{job['job_id']}.out").read_text()  # appended, not truncated
    assert "attempt 1 of" in output and "attempt 2 of" in output
    with CampaignStore.open(res / "rq") as store:
        a = store.attempts()[0]
        events = [e["state"] for e in store.history(a.id)]
    # the state history: the requeue, in time order (restart dated by its attempt's start)
    assert events.index("RUNNING") < events.index("RESTARTED") and events[-1] == "COMPLETED"
    from ddlbench.campaign.restarts import restarts_sentence

    assert "1 run(s) started more than once (1 requeued" in restarts_sentence(res / "rq")
