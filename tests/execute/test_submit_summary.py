"""The submit/resume summary: one outcome per run, and counts that add up to the runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddlbench.campaign import states as S
from ddlbench.campaign.manifest import RunInfo, load_campaign
from ddlbench.cli import main
from ddlbench.execute import submit_campaign, wait_campaign
from ddlbench.execute.api import select_runs
from ddlbench.execute.base import SubmitSummary
from ddlbench.execute.store import Attempt, CampaignStore
from ddlbench.execute.summary import counts_line, summary_lines
from tests.support.campaigns import make_campaign

COUNTS = re.compile(r"(\d+) runs: (.*)$", re.M)


def _quiet(_msg: str) -> None:
    pass


def _numbers(line: str):
    """(total, the numbers of the parts) of a counts line."""
    m = COUNTS.search(line)
    assert m, line
    return int(m.group(1)), [int(part.split()[0]) for part in m.group(2).split(", ")]


def _attempt(run_id: str, state: str) -> Attempt:
    return Attempt(
        id=0, run_id=run_id, number=1, token="t", batch_token="t", scheduler="slurm", state=state
    )


def test_an_adopted_run_is_counted_once():
    # 20 runs: 15 ended earlier, 1 adopted by reconciliation (now PENDING), 4 never submitted
    runs = [RunInfo(f"r{i:02d}", i, Path("s"), Path("d")) for i in range(20)]
    latest = {f"r{i:02d}": _attempt(f"r{i:02d}", S.COMPLETED) for i in range(15)}
    latest["r15"] = _attempt("r15", S.PENDING)
    summary = SubmitSummary("c", "slurm", total=20)
    summary.add_adopted("r15", "1015")
    todo = select_runs(runs, latest, summary, resume=True)
    assert [r.run_id for r in todo] == ["r16", "r17", "r18", "r19"]
    done = SubmitSummary("c", "slurm")
    for i, run in enumerate(todo):
        done.add_submitted(run.run_id, str(2000 + i))
    summary.merge(done)
    line = counts_line(summary)
    assert line == (
        "campaign c on Slurm: 20 runs: 4 submitted, 1 found already submitted by an "
        "interrupted submit, 15 already submitted earlier (skipped)"
    )
    total, parts = _numbers(line)
    assert sum(parts) == total == 20


def test_a_later_outcome_of_a_run_replaces_an_earlier_one():
    s = SubmitSummary("c", "local", total=3)
    s.add_failed("a", "Invalid partition")
    s.add_submitted("a", "7")  # resubmitted under the same token
    s.add_skipped("b")
    assert s.counts() == {
        "submitted": 1,
        "adopted": 0,
        "skipped": 1,
        "failed": 0,
        "not_submitted": 1,
    }
    with pytest.raises(TypeError, match="add_submitted"):
        s.submitted.append(("c", "8"))  # a read-only view: recording goes through add_*
    lines = summary_lines(s, verb="resubmitted")
    assert lines[0] == (
        "campaign c on this machine (local executor): 3 runs: 1 resubmitted, "
        "1 already submitted earlier (skipped), 1 not submitted"
    )


def test_resume_with_finished_and_rejected_runs_counts_each_run_once(tmp_path):
    # five runs ran to the end; then the campaign got three more runs, one of which an
    # earlier submit saw rejected: `submit --resume` submits the three and skips the five
    first = [{"run_id": f"r{i}", "body": ["true"]} for i in range(5)]
    cdir = make_campaign(tmp_path, "grow", first)
    assert len(submit_campaign(cdir, echo=_quiet).submitted) == 5
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 0
    make_campaign(
        tmp_path, "grow", first + [{"run_id": f"n{i}", "body": ["true"]} for i in range(3)]
    )
    with CampaignStore.open(cdir) as store:
        store.sync_runs(load_campaign(cdir).runs)
        store.new_attempt("n0", "local", S.SUBMIT_FAILED, reason="rejected by the scheduler")
    res = CliRunner().invoke(main, ["submit", "--resume", "grow", "--results", str(tmp_path)])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if " runs: " in x)
    assert line == (
        "campaign grow on this machine (local executor): 8 runs: 3 submitted, "
        "5 already submitted earlier (skipped)"
    )
    total, parts = _numbers(line)
    assert sum(parts) == total == 8
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 0
    with CampaignStore.open(cdir) as store:
        states = [(a.run_id, a.state) for a in store.attempts()]
    assert sorted(states) == sorted(
        [(f"r{i}", S.COMPLETED) for i in range(5)]
        + [("n0", S.SUBMIT_FAILED), ("n0", S.COMPLETED)]
        + [(f"n{i}", S.COMPLETED) for i in (1, 2)]
    )
