"""A cancelled run is reported as cancelled, with how, by status and by the report; a queue
reason is never the cause of a run that ended (ddlbench/campaign/causes.py).

The store rows are those of a quickstart on the loopback Slurm cancelled with three runs
running and three pending: squeue kept the pending jobs' queue reason, srun said how the
running tasks took the SIGTERM."""

from __future__ import annotations

import pandas as pd
import pytest

from ddlbench.campaign import states as S
from ddlbench.campaign.causes import end_cause, is_queue_reason
from ddlbench.campaign.manifest import load_campaign
from ddlbench.campaign.restarts import attempts_sentence
from ddlbench.campaign.slurm_reasons import END_REASONS, QUEUE_REASONS
from ddlbench.collect.collector import collect_campaign
from ddlbench.collect.states import store_states
from ddlbench.execute.api import campaign_status
from ddlbench.execute.store import CampaignStore
from ddlbench.report.missing import nothing_to_report
from tests.support.campaigns import make_campaign
from tests.support.synth import SynthRun, run_states, write_campaign

T = 1_795_665_884.0
#: squeue's record of a job cancelled in the queue: its start time is its end, no nodes
PENDING_CANCEL = dict(state=S.CANCELLED, reason="Priority", start_time=T + 4, end_time=T + 4)
#: a running job cancelled: srun's line for rank 0, which exited 1 on the SIGTERM
RUNNING_CANCEL = dict(
    state=S.CANCELLED,
    nodelist="n1",
    start_time=T,
    end_time=T + 4,
    failed_task=0,
    cause="task 0 on n1: Exited with exit code 1",
    cause_source="srun",
)
#: a real failure whose squeue record still had the queue reason of its pending days
REAL_FAILURE = dict(
    state=S.FAILED,
    reason="Resources",
    nodelist="n2",
    exit_code=137,
    cause="task 1 on n2: Killed (SIGKILL)",
    cause_source="srun",
)


def test_a_job_cancelled_in_the_queue_says_so_not_its_queue_reason():
    why = end_cause({**PENDING_CANCEL, "cancel_requested": 1})
    assert why == "cancelled by the user while pending (it never started)"
    assert (
        end_cause(PENDING_CANCEL) == "cancelled in Slurm (scancel) while pending (it never started)"
    )


def test_a_job_cancelled_while_running_names_the_signal_not_the_tasks_exit():
    why = end_cause({**RUNNING_CANCEL, "cancel_requested": 1})
    assert (
        why
        == "cancelled by the user while running (its tasks were stopped with signal 15, SIGTERM)"
    )
    killed = end_cause({**RUNNING_CANCEL, "cancel_requested": 1, "failed_signal": 9})
    assert killed.endswith("(its tasks were stopped with signal 9, SIGKILL)")
    # ddlbench's own words, the local executor's and a PREEMPTED end stay as they are
    own = "cancelled before it was submitted"  # ddlbench cancel of a run never submitted
    assert end_cause({"state": S.CANCELLED, "reason": own}) == own
    preempted = end_cause({"state": S.CANCELLED, "slurm_state": "PREEMPTED", "nodelist": "n1"})
    assert preempted.startswith("preempted and not requeued")


def test_a_real_failure_keeps_its_cause_and_never_shows_a_queue_reason():
    assert end_cause(REAL_FAILURE) == "task 1 on n2: Killed (SIGKILL)"
    assert end_cause({**REAL_FAILURE, "cause": None}) is None  # status falls back to the exit code
    assert end_cause({"state": S.FAILED, "reason": "NonZeroExitCode"}) == "NonZeroExitCode"
    assert end_cause({"state": S.PENDING, "reason": "Priority"}) == "Priority"  # while it waits
    assert is_queue_reason("QOSMaxJobsPerUserLimit") and not is_queue_reason("TimeLimit")


def test_queue_reasons_are_slurms_waits_and_never_its_ends():
    """The reasons come from Slurm's source (campaign/slurm_reasons.py): every WAIT_* reason
    is a queue reason, no FAIL_* one is, and the free-text and newer limit forms are too."""
    assert not QUEUE_REASONS & END_REASONS
    for word in ("Priority", "Resources", "Dependency", "JobHeldUser", "Prolog", "MpiPortsBusy"):
        assert is_queue_reason(word), word
    for word in ("NonZeroExitCode", "TimeLimit", "NodeDown", "OutOfMemory", "PartitionDown"):
        assert not is_queue_reason(word), word  # how a job ended: kept as its cause
    assert is_queue_reason("ReqNodeNotAvail, UnavailableNodes:n2")
    assert is_queue_reason("Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved")
    assert is_queue_reason("QOSGrpSomethingNewLimit")  # a later Slurm's limit
    assert not is_queue_reason("") and not is_queue_reason(None)


@pytest.fixture
def cancelled_store(tmp_path):
    runs = [{"run_id": r, "body": ["true"]} for r in ("pending", "running", "broken")]
    campaign = load_campaign(make_campaign(tmp_path, "qs", runs, scheduler="slurm"))
    with CampaignStore.open(campaign.dir) as store:
        store.sync_runs(campaign.runs)
        for run_id, job, values in (
            ("pending", "12", dict(PENDING_CANCEL, cancel_requested=1)),
            ("running", "7", dict(RUNNING_CANCEL, cancel_requested=1)),
            ("broken", "8", dict(REAL_FAILURE)),
        ):
            store.new_attempt(run_id, "slurm", values.pop("state"), job_id=job, **values)
        again = store.new_attempt("running", "slurm", S.PENDING, job_id="13")
        store.update_attempt(again.id, state=S.PENDING, reason="Priority")
    return campaign.dir


def test_status_and_the_report_give_one_cause(cancelled_store):
    st = campaign_status(cancelled_store, poll=False, echo=lambda _m: None)
    got = {r["run_id"]: (r["state"], r["reason"]) for r in st["runs"]}
    assert got == {
        "pending": (S.CANCELLED, "cancelled by the user while pending (it never started)"),
        "running": (S.PENDING, "Priority"),  # the retry waits: its queue reason is right
        "broken": (S.FAILED, "task 1 on n2: Killed (SIGKILL)"),
    }
    first = st["runs"][1]["history"][0]
    assert first["cause"].startswith("cancelled by the user while running (its tasks were")
    states = store_states(cancelled_store).set_index(["run_id", "attempt"])["reason"]
    assert states[("pending", 1)] == got["pending"][1]
    assert states[("running", 1)] == first["cause"]
    sentence = attempts_sentence(cancelled_store)
    assert "job 7 CANCELLED, cancelled by the user while running" in sentence
    assert "Exited with exit code 1" not in sentence


def test_the_runs_table_counts_cancelled_runs_apart_without_missing_ranks(tmp_path):
    runs = [
        SynthRun(repeat=0, not_run=True, slurm_state="CANCELLED"),
        SynthRun(repeat=1, killed_ranks=(0,), slurm_state="CANCELLED"),
        SynthRun(repeat=2, killed_ranks=(0,), slurm_state="FAILED"),
    ]
    camp = write_campaign(tmp_path, "cancels", runs)
    states = run_states(runs)
    states.loc[0, ["nodelist", "reason"]] = [None, "Priority"]
    states.loc[2, "reason"] = "Resources"
    d = collect_campaign(camp, run_states=states)
    got = d.runs.set_index("run_id")
    r0, r1, r2 = (got.loc[f"pytorch-resnet50-n1x1-b32-r{i}"] for i in range(3))
    assert (r0["status"], r1["status"], r2["status"]) == ("cancelled", "cancelled", "failed")
    assert r0["error_message"] == "cancelled in Slurm (scancel) while pending (it never started)"
    assert pd.isna(r0["missing_ranks"])  # it never started: no rank is missing
    assert r1["error_message"].startswith("cancelled in Slurm (scancel) while running")
    assert "Resources" not in str(r2["error_message"]) and "Priority" not in str(
        d.runs["error_message"].tolist()
    )
    why = nothing_to_report(d)
    assert "3 run(s) planned: 2 cancelled, 1 failed." in why
    assert "pytorch-resnet50-n1x1-b32-r0: cancelled in Slurm (scancel) while pending" in why
    assert "--failed   # run the failed and cancelled ones again" in why


def test_the_task_cause_of_a_cancelled_attempt_and_an_unreadable_signal():
    from ddlbench.campaign.causes import task_cause

    running = {"state": S.CANCELLED, "nodelist": "n1", "cancel_requested": 1,
               "cause": "task 0 on n1: Exited with exit code 1", "signal": "?"}  # fmt: skip
    words = "cancelled by the user while running (its tasks were stopped with signal 15"
    assert task_cause(running).startswith(words)  # a signal that is not a number: SIGTERM
    assert task_cause({**running, "failed_signal": 9}).endswith("signal 9, SIGKILL)")
    failed = {"state": S.FAILED, "cause": " task 1 on n2: Killed ", "reason": "Resources"}
    assert task_cause(failed) == "task 1 on n2: Killed"
    assert task_cause({"state": S.COMPLETED, "cause": ""}) is None


def test_a_hung_run_is_counted_hung_with_the_watchdogs_words(tmp_path):
    runs = [
        SynthRun(repeat=0, killed_ranks=(0,), slurm_state="HUNG"),
        SynthRun(repeat=1, killed_ranks=(0,), slurm_state="FAILED"),
    ]
    camp = write_campaign(tmp_path, "hangs", runs)
    states = run_states(runs)
    states.loc[0, "reason"] = "hung: rank 1 on n1 (in prepare, before its first step) never arrived"
    d = collect_campaign(camp, run_states=states)
    got = d.runs.set_index("run_id")
    hung, failed = (got.loc[f"pytorch-resnet50-n1x1-b32-r{i}"] for i in range(2))
    assert (hung["status"], failed["status"]) == ("hung", "failed")
    assert hung["error_message"].startswith("hung: rank 1 on n1")  # not the stopped ranks' error
    why = nothing_to_report(d)
    assert "2 run(s) planned: 1 failed, 1 hung." in why
    assert "--failed   # run the failed and hung ones again" in why
