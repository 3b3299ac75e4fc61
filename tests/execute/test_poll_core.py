"""The decisions of a Slurm poll, without a cluster: the pure core (ddlbench/execute/slurm/
poll.py) on records parsed from what Slurm prints, and the executor driven by FakeSlurmClient.

The same behaviour on the real scheduler: test_slurm.py (the project's local Slurm cluster)."""

from __future__ import annotations

import time

import pytest

from ddlbench.campaign import states as S
from ddlbench.campaign.manifest import load_campaign
from ddlbench.execute import infra_retry
from ddlbench.execute.settings import ExecuteSettings
from ddlbench.execute.slurm import poll
from ddlbench.execute.slurm.commands import JobRecord, parse_sacct, parse_squeue
from ddlbench.execute.slurm.executor import SlurmExecutor
from ddlbench.execute.store import Attempt, CampaignStore
from tests.support.campaigns import make_campaign
from tests.support.fake_slurm import FakeJob, FakeSlurmClient

NOW = 1_800_000_000.0


def _attempt(**kw) -> Attempt:
    values = dict(id=1, run_id="r", number=1, token="t" * 12, batch_token="t" * 12)
    values.update(scheduler="slurm", state=S.RUNNING, job_id="100")
    values.update(kw)
    return Attempt(**values)  # type: ignore[arg-type]


def _squeue(job: FakeJob) -> JobRecord:
    (rec,) = parse_squeue(job.squeue_line())
    return rec


def _sacct(job: FakeJob) -> JobRecord:
    (rec,) = parse_sacct(job.sacct_line())
    return rec


def _job(state: str = "RUNNING", **kw) -> FakeJob:
    kw.setdefault("submit", NOW - 100)
    return FakeJob("100", "c.r~" + "t" * 12, "ddlbench:" + "t" * 12, state=state, **kw)


# -- the pure core --------------------------------------------------------------------------


def test_a_running_job_is_taken_from_squeue_alone():
    sq = _squeue(_job("RUNNING", start=NOW - 10, nodes="n1"))
    assert not poll.needs_accounting(sq)
    update = poll.decide(_attempt(state=S.PENDING), sq, None, NOW, sacct_answered=False)
    assert (update.action, update.record) == (poll.APPLY, sq)
    values = poll.record_values(_attempt(state=S.PENDING), sq)
    assert values["state"] == S.RUNNING and values["nodelist"] == "n1"
    assert values["reason"] is None  # a new state makes the old reason stale


def test_a_job_that_just_failed_waits_for_its_accounting_record_within_the_grace():
    ended = NOW - (poll.ACCOUNTING_GRACE_S - 5)
    sq = _squeue(_job("FAILED", start=NOW - 100, end=ended))
    assert poll.needs_accounting(sq)  # squeue has no exit code
    lagging = _sacct(_job("RUNNING", start=NOW - 100))  # slurmdbd has no end yet
    a = _attempt()
    assert poll.decide(a, sq, lagging, NOW, sacct_answered=True).action == poll.WAIT
    # without sacct, squeue's word is all there is
    assert poll.decide(a, sq, None, NOW, sacct_answered=False).record == sq
    # past the grace, squeue's word is taken
    late = NOW + 10
    assert poll.decide(a, sq, lagging, late, sacct_answered=True).record == sq
    # once slurmdbd has the end, its record (with the exit code) is taken
    done = _sacct(_job("FAILED", exit="5:0", start=NOW - 100, end=ended))
    update = poll.decide(a, sq, done, NOW, sacct_answered=True)
    assert update.action == poll.APPLY and update.record.exit_code == 5
    assert poll.record_values(a, update.record)["exit_code"] == 5
    assert poll.needs_cause(a, update.record)


def test_the_accounting_record_keeps_squeues_reason():
    sq = _squeue(_job("OUT_OF_MEMORY", reason="OutOfMemory", end=NOW - 1))
    acct = _sacct(_job("OUT_OF_MEMORY", exit="0:125", end=NOW - 1))
    update = poll.decide(_attempt(), sq, acct, NOW, sacct_answered=True)
    assert update.record.reason == "OutOfMemory" and acct.reason is None  # a copy is changed
    assert update.record.state == S.OUT_OF_MEMORY


def test_a_job_gone_everywhere_is_missing_then_lost():
    a = _attempt()
    first = poll.decide(a, None, None, NOW, sacct_answered=True, lost_after=60)
    assert (first.action, first.values) == (poll.MISSING, {"missing_since": NOW})
    seen = _attempt(missing_since=NOW)
    assert poll.decide(seen, None, None, NOW + 59, True, lost_after=60).action == poll.WAIT
    lost = poll.decide(seen, None, None, NOW + 61, True, lost_after=60)
    assert lost.action == poll.LOST
    assert lost.values == {"state": S.LOST, "end_time": NOW + 61, "message": poll.LOST_MESSAGE}
    # a job that left squeue but that accounting knows is taken from accounting, ended or not
    acct = _sacct(_job("COMPLETED", end=NOW - 1))
    assert poll.decide(seen, None, acct, NOW + 61, True).record == acct
    assert poll.record_values(seen, acct)["missing_since"] is None


def test_a_cancelled_pending_array_task_that_slurm_forgot_is_cancelled_not_lost():
    """scancel of a pending array task leaves no record anywhere (recorded squeue output): the
    cancel ddlbench asked for is recorded, in the documented words, at the first poll."""
    from ddlbench.campaign.causes import end_cause
    from tests.support.repo import ROOT

    text = (ROOT / "tests/fixtures/slurm/squeue_array_task_cancelled_pending.txt").read_text()
    keys = [line.split("|")[0] for line in text.splitlines()]
    assert "1_2" not in keys and "1_1" in keys  # squeue no longer lists the cancelled task
    a = _attempt(state=S.PENDING, job_id="1_2", cancel_requested=1)
    update = poll.decide(a, None, None, NOW, sacct_answered=False)
    assert update.action == poll.CANCELLED
    assert update.values["state"] == S.CANCELLED and update.values["end_time"] == NOW
    row = {**vars(a), **update.values}
    assert end_cause(row) == "cancelled by the user while pending (it never started)"
    # one ddlbench did not cancel is still LOST after the grace, as before
    assert poll.decide(_attempt(state=S.PENDING), None, None, NOW, False).action == poll.MISSING


def test_a_cancelled_job_that_sacct_may_still_record_waits_for_the_accounting_grace():
    """A job that ended on its own just as ddlbench cancelled it: where sacct answers, slurmdbd
    may record it (COMPLETED) a moment later, so it is not called cancelled before the grace;
    never LOST, whatever the LOST timeout; and taken from sacct when its record comes."""
    a = _attempt(state=S.RUNNING, job_id="7", cancel_requested=1)
    first = poll.decide(a, None, None, NOW, sacct_answered=True, lost_after=5)
    assert first.action == poll.MISSING and first.values == {"missing_since": NOW}
    seen = _attempt(state=S.RUNNING, job_id="7", cancel_requested=1, missing_since=NOW)
    assert poll.decide(seen, None, None, NOW + 30, True, lost_after=5).action == poll.WAIT
    done = _sacct(_job("COMPLETED", end=NOW - 1))
    assert poll.decide(seen, None, done, NOW + 30, True).record == done
    late = poll.decide(seen, None, None, NOW + poll.ACCOUNTING_GRACE_S + 1, True, lost_after=5)
    assert late.action == poll.CANCELLED and late.values["state"] == S.CANCELLED
    # sacct not asked or not answering (jobcomp clusters): nothing more will come, at once
    assert poll.decide(a, None, None, NOW, sacct_answered=False).action == poll.CANCELLED


def test_a_requeued_job_goes_back_to_pending_with_its_reason():
    client = FakeSlurmClient()
    client.jobs["100"] = _job("RUNNING", start=NOW - 50)
    client.requeue("100")
    sq = _squeue(client.job("100"))
    update = poll.decide(_attempt(state=S.RUNNING), sq, None, NOW, sacct_answered=True)
    values = poll.record_values(_attempt(state=S.RUNNING), update.record)
    assert (values["state"], values["reason"]) == (S.PENDING, "BeginTime")
    assert "start_time" not in values  # a pending job has no start


def test_an_array_task_is_named_by_its_array_and_task():
    task = FakeJob("105", "c.array~" + "a" * 12, "ddlbench:" + "a" * 12, array_job_id="104", task=1)
    sq = _squeue(task)
    assert (sq.key, sq.own_id, sq.array_job_id, sq.array_task_id) == ("104_1", "105", "104", 1)
    intent = _attempt(state=S.SUBMITTING, job_id=None, array_task_id=1)
    values = poll.record_values(intent, sq)
    assert (values["job_id"], values["array_job_id"], values["array_task_id"]) == (
        "104_1",
        "104",
        1,
    )
    # an attempt that already has its job keeps its id
    assert "job_id" not in poll.record_values(_attempt(job_id="104_1", state=S.PENDING), sq)


@pytest.mark.parametrize(
    "word, state, resubmitted",
    [
        ("NODE_FAIL", S.NODE_FAIL, True),
        ("BOOT_FAIL", S.NODE_FAIL, True),
        ("PREEMPTED", S.CANCELLED, True),  # ended: not coming back
        ("CANCELLED by 0", S.CANCELLED, False),
        ("FAILED", S.FAILED, False),
        ("TIMEOUT", S.TIMEOUT, False),
    ],
)
def test_which_ends_are_resubmitted(word, state, resubmitted):
    acct = _sacct(_job(word, exit="0:0", end=NOW - 1))
    a = _attempt()
    values = poll.record_values(a, poll.decide(a, None, acct, NOW, True).record)
    assert values["state"] == state
    ended = _attempt(state=values["state"], slurm_state=values["slurm_state"])
    assert infra_retry.is_infra_failure(ended) is resubmitted


def test_settings_are_read_once_from_the_environment():
    env = {
        "DDLBENCH_LOST_AFTER": "5",
        "DDLBENCH_SLURM_SACCT": " NO ",
        "DDLBENCH_JOBCOMP": "none",
        "DDLBENCH_INFRA_RETRIES": "0",
        "DDLBENCH_SLURM_RETRIES": "2",
        "DDLBENCH_SLURM_BACKOFF": "0.5",
    }
    s = ExecuteSettings.from_env(env)
    assert (s.lost_after_s, s.sacct, s.jobcomp, s.infra_retries) == (5.0, "no", "none", "0")
    assert (s.slurm_retries, s.slurm_backoff) == (2, 0.5)
    assert ExecuteSettings.from_env({}) == ExecuteSettings()


# -- the executor on FakeSlurmClient, with a real store ----------------------------------------


def _executor(tmp_path, runs, client, **settings):
    jobs = [{"run_id": r, "body": ["true"]} for r in runs]
    campaign = load_campaign(make_campaign(tmp_path, "fake", jobs, scheduler="slurm"))
    store = CampaignStore.open(campaign.dir)
    store.sync_runs(campaign.runs)
    settings.setdefault("jobcomp", "none")
    quiet = ExecuteSettings(**settings)
    ex = SlurmExecutor(campaign, store, echo=lambda _m: None, client=client, settings=quiet)
    return campaign, store, ex


def test_a_poll_follows_jobs_to_their_end_in_two_calls(tmp_path):
    client = FakeSlurmClient()
    campaign, store, ex = _executor(tmp_path, ["ok", "bad"], client)
    with store:
        summary = ex.submit(campaign.runs)
        assert [o.job_id for o in summary.outcomes.values()] == ["100", "101"]
        client.start("100")
        client.start("101")
        assert infra_retry.refresh(ex).calls == 1  # one squeue
        assert {a.state for a in store.latest().values()} == {S.RUNNING}
        client.finish("100", "COMPLETED", when=time.time() - 300)
        client.finish("101", "FAILED", "3:0", when=time.time() - 300)
        client.job("100").in_squeue = False
        result = infra_retry.refresh(ex)
        assert result.calls == 2  # one squeue + one sacct
        latest = store.latest()
        assert (latest["ok"].state, latest["ok"].exit_code) == (S.COMPLETED, 0)
        assert (latest["bad"].state, latest["bad"].exit_code) == (S.FAILED, 3)
        assert [a[0] for a in client.log] == [
            "scontrol",
            "sbatch",
            "sbatch",
            "squeue",
            "squeue",
            "sacct",
        ]


def test_a_job_without_any_record_is_lost_after_the_setting(tmp_path):
    client = FakeSlurmClient(accounting=False)
    campaign, store, ex = _executor(tmp_path, ["gone"], client, sacct="no", lost_after_s=0.2)
    with store:
        ex.submit(campaign.runs)
        client.job("100").in_squeue = False
        infra_retry.refresh(ex)
        assert store.latest()["gone"].missing_since is not None
        time.sleep(0.3)
        infra_retry.refresh(ex)
        lost = store.latest()["gone"]
        assert (lost.state, lost.message) == (S.LOST, poll.LOST_MESSAGE)


def test_node_fail_is_resubmitted_up_to_the_limit_and_a_user_cancel_never(tmp_path):
    client = FakeSlurmClient()
    campaign, store, ex = _executor(tmp_path, ["node", "user"], client, infra_retries="1")
    with store:
        ex.submit(campaign.runs)
        client.finish("100", "NODE_FAIL", "0:0", when=time.time() - 300)
        client.finish("101", "CANCELLED by 0", "0:15", when=time.time() - 300)
        notes = infra_retry.refresh(ex).notes
        assert notes == ["node: job 100 ended NODE_FAIL; resubmitted as job 102"]
        assert [a.state for a in store.attempts("node")] == [S.NODE_FAIL, S.PENDING]
        assert [a.state for a in store.attempts("user")] == [S.CANCELLED]
        client.finish("102", "NODE_FAIL", "0:0", when=time.time() - 300)
        assert infra_retry.refresh(ex).notes == []  # its one resubmission is spent
        assert [a.job_id for a in store.attempts("node")] == ["100", "102"]


def test_an_array_is_followed_task_by_task(tmp_path):
    client = FakeSlurmClient()
    campaign, store, ex = _executor(tmp_path, ["a", "b"], client)
    with store:
        summary = ex.submit(campaign.runs, array=True)
        assert summary.array_jobs == ["100"]
        client.finish("100_0", "COMPLETED", when=time.time() - 300)
        client.finish("100_1", "FAILED", "2:0", when=time.time() - 300)
        infra_retry.refresh(ex)
        latest = store.latest()
        assert (latest["a"].job_id, latest["a"].state) == ("100_0", S.COMPLETED)
        assert (latest["b"].job_id, latest["b"].state, latest["b"].exit_code) == (
            "100_1",
            S.FAILED,
            2,
        )
        assert client.log[-1] == [
            "sacct",
            "--noheader",
            "--parsable2",
            client.log[-1][3],
            "--jobs=100",
        ]
