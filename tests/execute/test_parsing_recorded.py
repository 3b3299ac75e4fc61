"""The Slurm parsers on real output of Slurm 22.05 (tests/fixtures/slurm/, see its README).

One recording holds one job of each kind (completed, two nodes, failed, dependency never
satisfied, array, cancelled, failed step, timeout, held, running): every value asserted here is
what Slurm printed for it.
"""

from __future__ import annotations

from ddlbench.campaign import states as S
from ddlbench.execute.slurm.commands import (
    Result,
    is_no_accounting,
    is_transient,
    parse_jobcomp,
    parse_scontrol_jobs,
    parse_time,
)
from tests.support.repo import ROOT

RECORDED = ROOT / "tests" / "fixtures" / "slurm"

#: job key: (own job id, state, reason, exit code, signal, node list) as Slurm recorded them
SCONTROL = {
    "1": ("1", S.COMPLETED, None, 0, 0, "n1"),
    "2": ("2", S.COMPLETED, None, 0, 0, "n[1-2]"),
    "3": ("3", S.FAILED, "NonZeroExitCode", 3, 0, "n2"),
    "4": ("4", S.COMPLETED, None, 0, 0, "n1"),
    "5": ("5", S.CANCELLED, "DependencyNeverSatisfied", 0, 0, None),
    # array 6: task 3 keeps the array's id, tasks 0-2 got their own (12-14)
    "6_0": ("12", S.COMPLETED, None, 0, 0, "n1"),
    "6_1": ("13", S.COMPLETED, None, 0, 0, "n2"),
    "6_2": ("14", S.COMPLETED, None, 0, 0, "n2"),
    "6_3": ("6", S.COMPLETED, None, 0, 0, "n1"),
    "7": ("7", S.CANCELLED, None, 0, 15, "n1"),
    # a failed step (exit 5) does not fail the job whose batch script exits 0
    "8": ("8", S.COMPLETED, None, 0, 0, "n2"),
    "9": ("9", S.TIMEOUT, "TimeLimit", 0, 15, "n2"),
    "10": ("10", S.PENDING, "JobHeldUser", 0, 0, None),
    "11": ("11", S.RUNNING, None, 0, 0, "n1"),
}


def read(name: str) -> str:
    return (RECORDED / name).read_text()


def fields(record) -> tuple:
    return (
        record.own_id,
        record.state,
        record.reason,
        record.exit_code,
        record.signal,
        record.nodelist,
    )


def test_scontrol_oneliner_every_kind_of_job():
    records = parse_scontrol_jobs(read("scontrol_show_job_oneliner.txt"))
    got = {r.key: r for r in records}
    assert len(records) == len(got) == 14
    assert {key: fields(r) for key, r in got.items()} == SCONTROL
    assert [got[f"6_{i}"].array_task_id for i in range(4)] == [0, 1, 2, 3]
    assert {got[f"6_{i}"].array_job_id for i in range(4)} == {"6"}
    assert got["3"].name == "exit3" and got["9"].name == "timeout"
    assert all(r.source == "scontrol" for r in records)


def test_scontrol_times_of_ended_pending_and_running_jobs():
    got = {r.key: r for r in parse_scontrol_jobs(read("scontrol_show_job_oneliner.txt"))}
    timeout = got["9"]
    assert timeout.submit_time == parse_time("2026-11-22T11:50:12")
    assert timeout.start_time == parse_time("2026-11-22T11:50:16")
    assert timeout.end_time == parse_time("2026-11-22T11:51:41")
    # --time=1 is one minute; Slurm's timer checks at intervals, so it ended 85 s in
    assert timeout.end_time - timeout.start_time == 85
    assert got["10"].start_time is None and got["10"].end_time is None  # held: never started
    assert got["11"].start_time is not None and got["11"].end_time is None  # still running


def test_jobcomp_has_the_ended_jobs_in_order_of_completion():
    records = parse_jobcomp(read("jobcomp.txt"))
    assert [r.key for r in records] == [
        "3", "1", "2", "5", "6_1", "4", "6_0", "6_2", "6_3", "8", "7", "9",
    ]  # fmt: skip
    expected = {key: SCONTROL[key][:2] for key in SCONTROL if key not in ("10", "11")}
    assert {r.key: (r.own_id, r.state) for r in records} == expected
    got = {r.key: r for r in records}
    assert got["3"].exit_code == 3
    # jobcomp/filetxt writes 0:0 for cancelled and timed-out jobs: scontrol has the signal
    assert (got["7"].exit_code, got["7"].signal) == (0, 0)
    assert (got["9"].exit_code, got["9"].signal) == (0, 0)
    assert all(r.reason is None and r.end_time is not None for r in records)


def test_sacct_without_accounting_storage():
    text = read("sacct_disabled.txt")
    assert text.splitlines()[-1] == "exit code: 1"
    assert is_no_accounting(text)
    assert not is_transient(text)


def test_sbatch_invalid_partition_is_a_permanent_error():
    text = read("sbatch_invalid_partition.txt")
    stderr, code = text.rsplit("exit code: ", 1)
    result = Result(["sbatch"], int(code), "", stderr)
    assert not result.ok
    assert not is_transient(stderr)
    assert result.message == "Batch job submission failed: Invalid partition name specified"


def test_sacct_step_records_name_the_failed_step_or_leave_it_to_srun():
    from ddlbench.execute.slurm.commands import parse_sacct, parse_sacct_steps
    from ddlbench.execute.task_failure import find_cause

    text = read("sacct_steps.txt")
    steps = parse_sacct_steps(text)
    assert [s.step for s in steps["1"]] == ["1.batch", "1.0", "1.1"]
    assert (steps["3"][-1].state, steps["3"][-1].signal) == ("CANCELLED", 9)
    assert {r.key for r in parse_sacct(text)} == {"1", "2", "3"}  # the jobs, not the steps
    causes = {}
    for job in ("1", "2", "3"):
        failure, source = find_cause(steps[job], [RECORDED / f"sacct_steps-{job}.err"])
        causes[job] = (failure.describe(), failure.task, failure.signal, source)
    # 1.1 ended by srun's clean-up (SIGTERM): srun's own line names the cause
    assert causes["1"] == ("task 1 on n2: Killed (SIGKILL)", 1, 9, "srun")
    assert causes["2"] == ("task 1 on n2: Exited with exit code 3, step 2.0", 1, None, "sacct")
    assert causes["3"] == ("task 1 on n2: Killed (SIGKILL), step 3.0", 1, 9, "sacct")
    # without the job's stderr, the step record alone
    failure, source = find_cause(steps["3"], [])
    assert (failure.describe(), failure.task, source) == (
        "step 3.0 on n[1-2]: CANCELLED (SIGKILL)",
        None,
        "sacct",
    )
