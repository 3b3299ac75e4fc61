"""``report`` on a campaign without a complete run says what is missing and what to run and
exits 3; it writes nothing unless some runs ended without data (then it shows what they
left). A report with some complete runs never has empty base lines."""

from __future__ import annotations

import pytest

from ddlbench.campaign.resolve import mark_dry_run
from ddlbench.report.missing import NO_COMPLETE_RUN, NothingToReport
from ddlbench.report.render import build_report
from tests.support.cli import invoke
from tests.support.sweeps import exact_run
from tests.support.synth import SynthRun, write_campaign


def _refused(camp) -> str:
    with pytest.raises(NothingToReport) as exc:
        build_report(camp)
    assert not (camp / "report" / "report.html").exists()
    assert not (camp / "report" / "report.md").exists()
    return str(exc.value)


def test_no_complete_run_says_what_is_missing(results):
    empty = write_campaign(results, "empty", [])
    msg = _refused(empty)
    assert "campaign 'empty' has no complete run" in msg and "0 run(s) planned" in msg
    pending = write_campaign(
        results, "pending", [exact_run(repeat=r, not_run=True) for r in (0, 1)]
    )
    msg = _refused(pending)
    assert "2 run(s) planned: 2 not run" in msg
    assert "ddlbench submit --resume pending --results" in msg and "ddlbench report" in msg


def test_runs_that_failed_get_a_report_of_what_they_left(results):
    # every run failed: the report shows the failures (and would show suspected nodes), no
    # scaling, no empty base line; it says what is missing, and the command exits 3
    runs = [exact_run(nodes=1, tasks_per_node=2, repeat=r, failed_ranks=(0,)) for r in (0, 1)]
    failed = write_campaign(results, "failed", runs)
    res = build_report(failed)
    msg = res.missing
    assert "no complete run: the report shows only what the runs" in msg
    assert "2 failed" in msg and "NCCL error" in msg and runs[0].run_id in msg
    assert "ddlbench retry failed --results" in msg and "--failed" in msg
    html = res.files["html"].read_text()
    assert "Failed and incomplete runs" in html and "NCCL error" in html
    assert "Efficiency base" not in html and "Throughput and scaling" not in html
    assert set(res.figures) <= {"ranks"}  # the per-rank step times of a failed run, if any
    r = invoke(["report", "--results", results, "failed", "--format", "md"])
    assert r.exit_code == NO_COMPLETE_RUN, r.output
    assert "report: " in r.stdout and "NCCL error" in r.stderr and "Traceback" not in r.output


def test_dry_run_and_the_cli_exit_code(results):
    dry = write_campaign(results, "dry", [exact_run(repeat=r, not_run=True) for r in (0, 1)])
    mark_dry_run(dry)
    r = invoke(["report", "--results", results, "dry"])
    assert r.exit_code == NO_COMPLETE_RUN == 3, r.output
    assert "a dry run" in r.stderr and "submit --resume dry" in r.stderr
    assert "Traceback" not in r.output
    assert not (dry / "report" / "report.html").exists()


def test_partial_campaign_states_its_bases(results):
    # a 4-point series in which only N=1 and N=2 completed; N=4 and N=8 failed
    runs = []
    for nodes, tpn in ((1, 1), (1, 2), (1, 4), (2, 4)):
        for r in range(2):
            bad = (0,) if nodes * tpn >= 4 else ()
            runs.append(SynthRun(nodes=nodes, tasks_per_node=tpn, repeat=r, failed_ranks=bad))
    camp = write_campaign(results, "partial", runs)
    md = build_report(camp, formats=("md",)).files["md"].read_text()
    assert "Efficiency base per series (smallest scale with a complete run): pytorch" in md
    assert ": ." not in md and "(one N)" not in md
    # a series none of whose scales completed: its reason says so, no empty base
    runs = [
        SynthRun(nodes=1, tasks_per_node=tpn, repeat=0, failed_ranks=(0,) if tpn > 1 else ())
        for tpn in (1, 2, 4)
    ]
    runs += [
        SynthRun("horovod", nodes=1, tasks_per_node=t, repeat=0, failed_ranks=(0,)) for t in (1, 2)
    ]
    camp = write_campaign(results, "half", runs)
    md = build_report(camp, formats=("md",)).files["md"].read_text()
    assert "no complete run at any scale" in md
    assert "complete runs at one of its 3 device counts only" in md
    assert ": ." not in md and "(one N)" not in md
