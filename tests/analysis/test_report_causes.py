"""The report names how a run that ended without data ended as ``status`` does: the store's
state and cause first, a rank's own error (a side effect: the rank srun stopped, a peer's
lost connection) only as detail; a run the scheduler refused for its profile gets a hint
that can work (docs/reports.md, "Nothing to report yet")."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd

from ddlbench.collect.collector import collect_campaign
from ddlbench.report.missing import ended_cause, ended_label, nothing_to_report
from tests.support.synth import SynthRun, run_states, write_campaign

KILLED = "task 1 on node1: Killed by signal 9 (SIGKILL)"
STOPPED = "Terminated: received signal 15"


def _data(tmp_path, rows):
    camp = tmp_path / "results" / "np"
    camp.mkdir(parents=True)
    runs = pd.DataFrame([{"complete": False, "problems": None, **r} for r in rows])
    return SimpleNamespace(runs=runs, campaign_dir=camp, name="np")


def test_a_killed_rank_and_a_timeout_are_named_by_the_store_not_the_stopped_rank(tmp_path):
    runs = [
        SynthRun(repeat=0, failed_ranks=(0,), slurm_state="FAILED"),
        SynthRun(repeat=1, failed_ranks=(0,), slurm_state="TIMEOUT"),
    ]
    camp = write_campaign(tmp_path, "killed", runs)
    states = run_states(runs)
    states.loc[0, "reason"] = KILLED
    states.loc[1, "reason"] = "TimeLimit"
    d = collect_campaign(camp, run_states=states)
    why = nothing_to_report(d)
    assert "2 run(s) planned: 1 failed, 1 timeout." in why
    # the rank's error (a synthetic NCCL error here) comes after the store's cause
    assert f"pytorch-resnet50-n1x1-b32-r0: FAILED ({KILLED}; a rank said: " in why
    assert "pytorch-resnet50-n1x1-b32-r1: TIMEOUT (TimeLimit; a rank said: " in why
    assert "NCCL error" in why
    labels = {r["run_id"][-2:]: ended_label(r) for _, r in d.runs.iterrows()}
    assert labels == {"r0": "failed", "r1": "timeout"}  # the report table's status column


def test_the_cause_comes_first_and_a_rank_error_alone_without_a_store():
    row = {"status": "failed", "slurm_reason": KILLED, "error_message": STOPPED}
    assert ended_cause(row) == f"{KILLED}; a rank said: {STOPPED}"
    assert ended_cause({**row, "slurm_reason": None}) == STOPPED  # no store: the rank's words
    assert ended_cause({**row, "error_message": KILLED}) == KILLED  # said once
    # a queued run's reason is why it waits, not an error
    assert (
        ended_cause({"status": "pending", "slurm_reason": "Priority", "error_message": None}) == ""
    )


def test_a_run_refused_for_its_profile_gets_a_resubmit_hint_not_retry(tmp_path):
    refused = {
        "status": "failed",
        "slurm_state": "SUBMIT_FAILED",
        "slurm_reason": "sbatch: error: invalid partition specified: nosuchpart",
        "error_message": None,
    }
    d = _data(tmp_path, [{"run_id": "a-r0", **refused}, {"run_id": "a-r1", **refused}])
    (d.campaign_dir / "campaign.json").write_text(
        json.dumps(
            {
                "format": "ddlbench-campaign/1",
                "spec_path": "/w/ts.yaml",
                "profile_path": "/w/my ls3.yaml",
                "runs": [],
            }
        )
    )
    why = nothing_to_report(d)
    assert "2 run(s) planned: 2 submit failed." in why
    assert "a-r0: SUBMIT_FAILED (sbatch: error: invalid partition specified" in why
    assert "ddlbench submit /w/ts.yaml --cluster '/w/my ls3.yaml' --campaign np-2" in why
    assert "fix what its message names in the profile" in why
    assert "retry np" not in why  # it would send the same scripts again
    # another failure beside them is still retried
    other = {"run_id": "a-r2", "status": "failed", "slurm_state": "FAILED",
             "slurm_reason": KILLED, "error_message": None}  # fmt: skip
    d = _data(tmp_path / "b", [{"run_id": "a-r0", **refused}, other])
    why = nothing_to_report(d)
    assert "ddlbench retry np" in why and "--campaign np-2" in why
    assert "submit SPEC --cluster PROFILE" in why  # manifest unreadable: the placeholders
