"""The Slurm executor against the project's real local cluster (scripts/local-slurm.sh)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddlbench.execute import (
    campaign_status,
    cancel_campaign,
    retry_campaign,
    submit_campaign,
    wait_campaign,
)
from ddlbench.execute.slurm.commands import SlurmClient
from ddlbench.execute.slurm.executor import SlurmExecutor
from ddlbench.execute.store import CampaignStore
from tests.support.campaigns import ENV_DUMP, make_campaign
from tests.support.repo import wait_for

pytestmark = pytest.mark.slurm
SLURM = {"partition": "debug", "sacct": "no"}


def _quiet(_msg: str) -> None:
    pass


def _status(cdir):
    return {r["run_id"]: r for r in campaign_status(cdir, echo=_quiet)["runs"]}


def _env(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_two_nodes_failure_and_bad_partition(slurm_cluster, tmp_path):
    cdir = make_campaign(
        tmp_path,
        "s2",
        [
            {
                "run_id": "two",
                "nodes": 2,
                "body": [
                    "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 "
                    f"bash -c '{ENV_DUMP}'"
                ],
            },
            {"run_id": "bad", "body": ["exit 3"]},
            {"run_id": "nopart", "partition": "no-such-partition", "body": ["true"]},
            {"run_id": "after", "body": ["true"]},
        ],
        scheduler="slurm",
        slurm=SLURM,
    )
    said = []
    summary = submit_campaign(cdir, echo=said.append)
    assert [r for r, _ in summary.submitted] == ["two", "bad", "after"]
    assert summary.failed == 1 and "Invalid partition" in summary.rejected[0][1]
    assert any("Invalid partition name" in line for line in said)
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 1
    st = _status(cdir)
    assert st["two"]["state"] == "COMPLETED"
    assert st["bad"]["state"] == "FAILED" and st["bad"]["exit_code"] == 3
    assert st["nopart"]["state"] == "SUBMIT_FAILED"
    assert st["after"]["state"] == "COMPLETED"
    envs = [_env(cdir / "runs" / "two" / f"env.{i}") for i in range(2)]
    assert [e["SLURM_NODEID"] for e in envs] == ["0", "1"]
    assert {e["SLURM_JOB_ID"] for e in envs} == {st["two"]["job_id"]}
    assert [e["SLURMD_NODENAME"] for e in envs] == ["n1", "n2"]


def test_cancel_and_retry(slurm_cluster, tmp_path):
    cdir = make_campaign(
        tmp_path,
        "sc",
        [
            {"run_id": "long", "body": ["sleep 120"]},
            {
                "run_id": "flaky",
                "body": ["if [ ! -e ../once ]; then touch ../once; exit 4; fi"],
            },
        ],
        scheduler="slurm",
        slurm=SLURM,
    )
    submit_campaign(cdir, echo=_quiet)
    wait_for(lambda: _status(cdir)["long"]["state"] == "RUNNING", timeout=60, interval=0.5)
    assert cancel_campaign(cdir, run_ids=["long"], echo=_quiet) == ["long"]
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 1
    st = _status(cdir)
    assert st["long"]["state"] == "CANCELLED"
    assert st["flaky"]["state"] == "FAILED" and st["flaky"]["exit_code"] == 4
    summary = retry_campaign(cdir, echo=_quiet)
    assert sorted(r for r, _ in summary.submitted) == ["flaky", "long"]
    cancel_campaign(cdir, run_ids=["long"], echo=_quiet)
    wait_campaign(cdir, timeout=120, echo=_quiet)
    st = _status(cdir)
    assert st["flaky"]["state"] == "COMPLETED" and st["flaky"]["attempts"] == 2
    with CampaignStore.open(cdir) as store:
        assert [a.state for a in store.attempts("flaky")] == ["FAILED", "COMPLETED"]


def _fake_bin(tmp_path: Path, name: str, body: str) -> Path:
    bindir = tmp_path / "fakebin"
    bindir.mkdir(exist_ok=True)
    path = bindir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return bindir


def test_resume_after_sigkill_mid_submit_submits_each_run_once(slurm_cluster, tmp_path):
    runs = [{"run_id": f"r{i:02d}", "body": ["true"]} for i in range(20)]
    cdir = make_campaign(tmp_path, "resume", runs, scheduler="slurm", slurm=SLURM)
    real = subprocess.run(["bash", "-c", "command -v sbatch"], capture_output=True, text=True)
    # the 8th sbatch reaches the controller, then ddlbench dies before hearing the job id
    bindir = _fake_bin(
        tmp_path,
        "sbatch",
        f"n=$(( $(cat {tmp_path}/count 2>/dev/null || echo 0) + 1 )); echo $n > {tmp_path}/count\n"
        f'out=$({real.stdout.strip()} "$@"); rc=$?\n'
        'if [ "$n" -eq 8 ]; then kill -9 $PPID; sleep 2; fi\n'
        'echo "$out"; exit $rc\n',
    )
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    code = "import sys; from ddlbench.execute import submit_campaign; submit_campaign(sys.argv[1])"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(cdir)], env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == -9
    with CampaignStore.open(cdir) as store:
        states = [a.state for a in store.attempts()]
    assert states.count("SUBMITTING") == 1 and len(states) == 8
    summary = submit_campaign(cdir, resume=True, echo=_quiet)
    assert len(summary.adopted) == 1 and len(summary.submitted) == 12
    # the adopted run is not counted again as skipped: 7 + 1 + 12 = 20
    assert len(summary.skipped) == 7 and sum(summary.counts().values()) == 20
    again = submit_campaign(cdir, resume=True, echo=_quiet)
    assert again.submitted == [] and len(again.skipped) == 20
    assert wait_campaign(cdir, timeout=180, echo=_quiet) == 0
    with CampaignStore.open(cdir) as store:
        attempts = store.attempts()
    assert len(attempts) == 20 and len({a.run_id for a in attempts}) == 20
    tokens = {a.token for a in attempts}
    jobs = subprocess.run(
        ["squeue", "--me", "--states=all", "--noheader", "--format=%i|%k"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    ours = [line for line in jobs if line.split("|")[1].removeprefix("ddlbench:") in tokens]
    assert len(ours) == 20  # exactly one Slurm job per run


def test_status_with_and_without_sacct(slurm_cluster, tmp_path, monkeypatch):
    cdir = make_campaign(
        tmp_path, "acct", [{"run_id": "bad", "body": ["exit 3"]}], scheduler="slurm", slurm=SLURM
    )
    submit_campaign(cdir, echo=_quiet)
    # without sacct (forced): squeue, then the jobcomp file for the exit code
    monkeypatch.setenv("DDLBENCH_SLURM_SACCT", "no")
    wait_for(lambda: _status(cdir)["bad"]["state"] == "FAILED", timeout=60, interval=0.3)
    assert _status(cdir)["bad"]["exit_code"] == 3
    # without sacct and without the jobcomp file: squeue, then one scontrol for exit codes
    with CampaignStore.open(cdir) as store:
        a = store.attempts()[0]
        store.update_attempt(a.id, if_state_in=["FAILED"], state="RUNNING", exit_code=None)
    monkeypatch.setenv("DDLBENCH_JOBCOMP", "none")
    st = campaign_status(cdir, echo=_quiet)
    assert st["runs"][0]["exit_code"] == 3 and st["runs"][0]["state"] == "FAILED"
    assert st["scheduler_calls"] == 2
    monkeypatch.delenv("DDLBENCH_JOBCOMP")
    # with sacct: a stand-in sacct answers for the job (the local cluster has no slurmdbd)
    with CampaignStore.open(cdir) as store:
        a = store.attempts()[0]
        store.update_attempt(a.id, if_state_in=["FAILED"], state="RUNNING", exit_code=None)
    bindir = _fake_bin(
        tmp_path,
        "sacct",
        'ids=""; for a in "$@"; do case $a in --jobs=*) ids=${a#--jobs=};; esac; done\n'
        'echo "$ids" >> ' + str(tmp_path / "sacct-calls") + "\n"
        'echo "$ids|$ids|FAILED|9:0|2026-01-01T00:00:00|2026-01-01T00:00:01|'
        '2026-01-01T00:00:02|n1|x"\n',
    )
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("DDLBENCH_SLURM_SACCT", "yes")
    st = campaign_status(cdir, echo=_quiet)
    assert st["runs"][0]["exit_code"] == 9 and st["runs"][0]["state"] == "FAILED"
    assert st["scheduler_calls"] == 2  # one squeue + one sacct
    assert (tmp_path / "sacct-calls").read_text().split() == [a.job_id]


def _fake_sacct(tmp_path: Path, state: str, exit_code: str) -> Path:
    """A stand-in sacct that answers for the jobs asked about with ``state`` and ``exit_code``."""
    return _fake_bin(
        tmp_path,
        "sacct",
        'ids=""; for a in "$@"; do case $a in --jobs=*) ids=${a#--jobs=};; esac; done\n'
        f'echo "$ids|$ids|{state}|{exit_code}|2026-01-01T00:00:00|2026-01-01T00:00:01|'
        'Unknown|n1|x"\n',
    )


def test_a_job_that_just_ended_waits_for_its_accounting_record(
    slurm_cluster, tmp_path, monkeypatch
):
    """squeue lists a failed job as FAILED at once; slurmdbd may record its end (exit code,
    failing step) a moment later. While the end is recent, the attempt is not recorded from
    squeue alone: the next poll asks sacct again. Past the grace, squeue's word is taken."""
    from ddlbench.execute.slurm import poll

    cdir = make_campaign(
        tmp_path, "lag", [{"run_id": "bad", "body": ["exit 5"]}], scheduler="slurm", slurm=SLURM
    )
    submit_campaign(cdir, echo=_quiet)
    monkeypatch.setenv("DDLBENCH_SLURM_SACCT", "no")
    wait_for(lambda: _status(cdir)["bad"]["state"] == "FAILED", timeout=60, interval=0.3)

    def reset() -> None:
        with CampaignStore.open(cdir) as store:
            a = store.attempts()[0]
            store.update_attempt(a.id, if_state_in=["FAILED"], state="RUNNING", exit_code=None)

    reset()
    monkeypatch.setenv("DDLBENCH_SLURM_SACCT", "yes")
    monkeypatch.setenv("DDLBENCH_JOBCOMP", "none")
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{_fake_sacct(tmp_path, 'RUNNING', '0:0')}:{path}")
    lagging = _status(cdir)["bad"]
    assert (lagging["state"], lagging["exit_code"]) == ("RUNNING", None)
    _fake_sacct(tmp_path, "FAILED", "5:0")  # slurmdbd has the end now
    ended = _status(cdir)["bad"]
    assert (ended["state"], ended["exit_code"]) == ("FAILED", 5)
    reset()
    _fake_sacct(tmp_path, "RUNNING", "0:0")
    monkeypatch.setattr(poll, "ACCOUNTING_GRACE_S", 0.0)  # an end long past
    late = _status(cdir)["bad"]
    assert (late["state"], late["exit_code"]) == ("FAILED", None)


def test_sacct_disabled_falls_back(slurm_cluster, tmp_path, monkeypatch):
    cdir = make_campaign(
        tmp_path, "acct2", [{"run_id": "bad", "body": ["exit 6"]}], scheduler="slurm", slurm={}
    )
    submit_campaign(cdir, echo=_quiet)
    monkeypatch.setenv("DDLBENCH_SLURM_SACCT", "yes")  # the real sacct says: disabled
    wait_for(lambda: _status(cdir)["bad"]["state"] == "FAILED", timeout=60, interval=0.3)
    assert _status(cdir)["bad"]["exit_code"] == 6


def test_no_sbatch_on_path_suggests_local(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from ddlbench.cli import main

    cdir = make_campaign(tmp_path, "nosb", [{"run_id": "a", "body": ["true"]}], scheduler="slurm")
    monkeypatch.setenv("PATH", str(tmp_path))
    res = CliRunner().invoke(main, ["submit", "--resume", "nosb", "--results", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert "--cluster local" in res.output
    assert cdir.exists()


def test_controller_unreachable(slurm_cluster, tmp_path, monkeypatch):
    conf = Path(slurm_cluster["SLURM_CONF"]).read_text()
    bad = tmp_path / "slurm.conf"
    bad.write_text(
        "\n".join(
            "SlurmctldPort=1"
            if line.startswith("SlurmctldPort=")
            else "MessageTimeout=1"
            if line.startswith("MessageTimeout=")
            else line
            for line in conf.splitlines()
        )
    )
    cdir = make_campaign(tmp_path, "down", [{"run_id": "a", "body": ["true"]}], scheduler="slurm")
    monkeypatch.setenv("SLURM_CONF", str(bad))
    monkeypatch.setenv("DDLBENCH_SLURM_RETRIES", "1")
    from ddlbench.campaign.manifest import load_campaign
    from ddlbench.execute.base import SchedulerUnreachable

    campaign = load_campaign(cdir)
    with CampaignStore.open(cdir) as store:
        store.sync_runs(campaign.runs)
        a = store.new_attempt("a", "slurm", "PENDING", job_id="999999")
        ex = SlurmExecutor(campaign, store, client=SlurmClient(retries=1, backoff=0.1))
        with pytest.raises(SchedulerUnreachable, match="did not answer"):
            ex.refresh()
        assert store.get_attempt(a.id).state == "PENDING"


@pytest.mark.slow
def test_time_limit_gives_timeout(slurm_cluster, tmp_path):
    cdir = make_campaign(
        tmp_path,
        "tl",
        [{"run_id": "slow", "time": "1", "partition": "short", "body": ["sleep 300"]}],
        scheduler="slurm",
        slurm=SLURM,
    )
    submit_campaign(cdir, echo=_quiet)
    assert wait_campaign(cdir, timeout=240, echo=_quiet) == 1
    assert _status(cdir)["slow"]["state"] == "TIMEOUT"


def test_job_arrays_map_tasks_to_runs(slurm_cluster, tmp_path):
    runs = [
        {"run_id": f"a{i}", "body": ['echo "$SLURM_JOB_ID $SLURM_ARRAY_TASK_ID" > where']}
        for i in range(3)
    ]
    runs.append({"run_id": "wide", "nodes": 2, "body": ["true"]})
    cdir = make_campaign(tmp_path, "arr", runs, scheduler="slurm", slurm=SLURM)
    summary = submit_campaign(cdir, array=True, serial=True, echo=_quiet)
    assert len(summary.array_jobs) == 1 and len(summary.submitted) == 4
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 0
    st = _status(cdir)
    for i in range(3):
        job, task = (cdir / "runs" / f"a{i}" / "where").read_text().split()
        assert task == str(i)
        assert st[f"a{i}"]["job_id"] == f"{summary.array_jobs[0]}_{i}"
        assert (cdir / "runs" / f"a{i}" / f"slurm-{job}.out").exists()


def test_cancel_of_a_pending_array_task_is_cancelled_not_lost(slurm_cluster, tmp_path):
    """Slurm keeps no record of a cancelled pending array task: ddlbench asked for the cancel,
    so the run is CANCELLED at the next poll (not LOST a minute later)."""
    runs = [{"run_id": f"p{i}", "body": ["sleep 30"]} for i in range(2)]
    cdir = make_campaign(tmp_path, "arrc", runs, scheduler="slurm", slurm=SLURM)
    summary = submit_campaign(cdir, array=True, serial=True, echo=_quiet)  # %1: p1 waits
    assert len(summary.array_jobs) == 1
    wait_for(lambda: _status(cdir)["p0"]["state"] == "RUNNING", timeout=60)
    assert _status(cdir)["p1"]["state"] == "PENDING"
    cancel_campaign(cdir, run_ids=["p1"], echo=_quiet)
    wait_for(lambda: _status(cdir)["p1"]["state"] != "PENDING", timeout=20)
    st = _status(cdir)["p1"]
    assert st["state"] == "CANCELLED", st
    assert st["reason"] == "cancelled by the user while pending (it never started)"
    cancel_campaign(cdir, echo=_quiet)
    wait_campaign(cdir, timeout=120, echo=_quiet)


def test_ended_jobs_are_read_through_sacct_on_a_cluster_with_accounting(slurm_cluster, tmp_path):
    """On `local-slurm.sh up --accounting` (scripts/test.sh runs the Slurm tests there too),
    how jobs ended comes from sacct, not from the jobcomp fallback."""
    conf = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    if "accounting_storage/slurmdbd" not in conf:
        if os.environ.get("DDLBENCH_SLURM_ACCOUNTING", "0") not in ("", "0"):
            pytest.fail("DDLBENCH_SLURM_ACCOUNTING is set but the cluster has no slurmdbd")
        pytest.skip("the cluster has no accounting (scripts/local-slurm.sh up --accounting)")
    cdir = make_campaign(
        tmp_path,
        "viasacct",
        [{"run_id": "bad", "body": ["exit 3"]}, {"run_id": "good", "body": ["true"]}],
        scheduler="slurm",
        slurm={"partition": "debug", "sacct": "auto"},
    )
    submit_campaign(cdir, echo=_quiet)
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 1
    with CampaignStore.open(cdir) as store:
        bad = store.attempts("bad")[0]
        assert store.get_meta("sacct_works") is not False
        conf_seen = store.get_meta("slurm_config")
    assert conf_seen["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert (bad.state, bad.exit_code, bad.source) == ("FAILED", 3, "sacct")
    sacct = subprocess.run(
        ["sacct", "--noheader", "--parsable2", "-X", f"--jobs={bad.job_id}", "--format=State"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sacct.stdout.split() == ["FAILED"]


def test_failed_task_from_sacct_steps_where_accounting_is_kept(slurm_cluster, tmp_path):
    """With accounting, the failing step is read from sacct's step records (srun's line adds
    the task); without it, from srun's lines in the job's stderr. The store says which."""
    conf = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    accounting = "accounting_storage/slurmdbd" in conf
    kill_rank_1 = (
        "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=0 bash -c "
        "'if [ \"$SLURM_PROCID\" = 1 ]; then kill -9 $$; fi; sleep 2'"
    )
    cdir = make_campaign(
        tmp_path,
        "steps",
        [
            {"run_id": "killed", "nodes": 2, "body": [kill_rank_1]},
            {"run_id": "quiet", "nodes": 2, "body": [kill_rank_1 + " 2>/dev/null"]},
        ],
        scheduler="slurm",
        slurm={"partition": "debug", "sacct": "auto"},
    )
    submit_campaign(cdir, serial=True, echo=_quiet)
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 1
    with CampaignStore.open(cdir) as store:
        killed, quiet = store.attempts("killed")[0], store.attempts("quiet")[0]
    assert (killed.state, killed.failed_task, killed.failed_signal) == ("FAILED", 1, 9)
    if accounting:
        assert (killed.source, killed.cause_source) == ("sacct", "sacct")
        assert killed.cause == f"task 1 on n2: Killed (SIGKILL), step {killed.job_id}.0"
        # srun's lines went to /dev/null: the step record alone still names it
        assert quiet.cause_source == "sacct" and quiet.failed_task is None
        assert quiet.cause == f"step {quiet.job_id}.0 on n[1-2]: CANCELLED (SIGKILL)"
    else:
        assert killed.cause_source == "srun" and killed.cause == "task 1 on n2: Killed (SIGKILL)"
        assert quiet.cause is None and quiet.cause_source is None
    row = {r["run_id"]: r for r in campaign_status(cdir, echo=_quiet)["runs"]}["killed"]
    assert row["cause_source"] == killed.cause_source


def test_recover_maps_job_array_tasks_back_to_their_runs(slurm_cluster, tmp_path):
    """A lost store of a campaign submitted --array --serial: recover names each run's job
    `<array>_<task>` again (ended, running and still pending tasks), never by the task's own
    job id, and the campaign goes on with one attempt per run."""
    from ddlbench.execute.recover import recover_campaign

    gate = tmp_path / "gate"
    runs = [
        {"run_id": "a0", "body": ["true"]},
        {"run_id": "a1", "body": [f"while [ ! -e {gate} ]; do sleep 0.2; done"]},
        {"run_id": "a2", "body": ["true"]},
    ]
    cdir = make_campaign(tmp_path, "arec", runs, scheduler="slurm", slurm=SLURM)
    summary = submit_campaign(cdir, array=True, serial=True, echo=_quiet)
    array = summary.array_jobs[0]
    wait_for(lambda: _status(cdir)["a1"]["state"] == "RUNNING", timeout=60, interval=0.3)
    assert _status(cdir)["a2"]["state"] == "PENDING"  # throttled to one task at a time
    for p in CampaignStore.open(cdir).path.parent.glob("state.sqlite*"):
        p.write_bytes(b"") if p.name == "state.sqlite" else p.unlink()
    found = recover_campaign(cdir, echo=_quiet)
    assert found.unknown == []
    got = {a["run_id"]: (a["job_id"], a["state"]) for a in found.attempts}
    assert got == {
        "a0": (f"{array}_0", "COMPLETED"),
        "a1": (f"{array}_1", "RUNNING"),
        "a2": (f"{array}_2", "PENDING"),
    }
    gate.touch()
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 0
    st = _status(cdir)
    assert all(st[r]["attempts"] == 1 and st[r]["job_id"] == f"{array}_{r[1]}" for r in st)
    assert submit_campaign(cdir, resume=True, echo=_quiet).submitted == []


@pytest.mark.slow
def test_a_requeued_array_task_counts_its_restart(slurm_cluster, tmp_path):
    """A requeue of one task of a job array: the store's attempt (`<array>_<task>`) counts
    the restart that the run folder shows under the task's own job id."""
    start = (
        "k=1; while [ -e logs/attempt-$k ]; do k=$((k + 1)); done; mkdir -p logs/attempt-$k; "
        'echo "job_id=$SLURM_JOB_ID restarts=${SLURM_RESTART_COUNT:-0} '
        'start=$(date -u +%Y-%m-%dT%H:%M:%SZ)" > logs/attempt-$k/job.txt'
    )
    body = [start, 'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then touch went; sleep 120; fi']
    runs = [{"run_id": "t0", "body": body}, {"run_id": "t1", "body": ["true"]}]
    cdir = make_campaign(tmp_path, "areq", runs, scheduler="slurm", slurm=SLURM)
    summary = submit_campaign(cdir, array=True, echo=_quiet)
    wait_for(lambda: (cdir / "runs" / "t0" / "went").exists(), timeout=60, interval=0.3)
    subprocess.run(["scontrol", "requeue", f"{summary.array_jobs[0]}_0"], check=True)
    assert wait_campaign(cdir, timeout=300, echo=_quiet) == 0
    st = _status(cdir)
    assert (st["t0"]["restarts"], st["t1"]["restarts"]) == (1, 0)
    assert st["t0"]["job_id"] == f"{summary.array_jobs[0]}_0" and st["t0"]["attempts"] == 1


def test_an_interrupted_resubmission_of_a_serial_run_stays_chained(slurm_cluster, tmp_path):
    """A poll claimed a serial run's resubmission (infra_retry) and stopped before sbatch:
    `submit --resume`, even without --serial, chains it after the newest live job."""
    gate = tmp_path / "gate"
    runs = [
        {"run_id": "a", "body": [f"while [ ! -e {gate} ]; do sleep 0.2; done"]},
        {"run_id": "c", "body": ["true"]},
    ]
    cdir = make_campaign(tmp_path, "chain", runs, scheduler="slurm", slurm=SLURM)
    submit_campaign(cdir, serial=True, echo=_quiet)
    wait_for(lambda: _status(cdir)["a"]["state"] == "RUNNING", timeout=60, interval=0.3)
    cancel_campaign(cdir, run_ids=["c"], echo=_quiet)
    wait_for(lambda: _status(cdir)["c"]["state"] == "CANCELLED", timeout=60, interval=0.3)
    with CampaignStore.open(cdir) as store:  # what infra_retry.claim leaves behind
        store.new_attempt("c", "slurm", "SUBMITTING", serial=1, message="resubmitted: ...")
        a = store.attempts("a")[0]
    submit_campaign(cdir, resume=True, echo=_quiet)
    with CampaignStore.open(cdir) as store:
        again = store.attempts("c")[-1]
    assert (again.number, again.state, again.serial, again.depends_on) == (
        2,
        "PENDING",
        1,
        a.job_id,
    )
    gate.touch()
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 0
    with CampaignStore.open(cdir) as store:
        a, again = store.attempts("a")[0], store.attempts("c")[-1]
    assert again.start_time >= a.end_time
