"""Parsers of Slurm's outputs (recorded from the local cluster; sacct written to its format).

The files are in tests/fixtures/slurm/ (see its README): ``odd_*`` recordings of arrays with
throttles and odd job names, ``handwritten_sacct_parsable2.txt``.
"""

from __future__ import annotations

import pytest

from ddlbench.campaign import states as S
from ddlbench.execute.hostlist import compress, expand
from ddlbench.execute.sbatchfile import (
    JobScript,
    directives,
    expand_pattern,
    parse_time_seconds,
    pattern_to_shell,
)
from ddlbench.execute.slurm.commands import (
    expand_task_ids,
    is_no_accounting,
    is_transient,
    parse_config,
    parse_jobcomp,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_jobs,
    parse_squeue,
)
from ddlbench.execute.slurm.executor import token_of
from tests.support.repo import ROOT

FIX = ROOT / "tests" / "fixtures" / "slurm"


def test_squeue_format_with_arrays_and_odd_names():
    recs = {r.key: r for r in parse_squeue((FIX / "odd_squeue_format.txt").read_text())}
    assert set(recs) == {"75", "73_0", "73_1", "73_2", "73_3", "74"}
    assert recs["75"].state == S.FAILED and recs["75"].name == "has space"
    assert recs["75"].reason == "NonZeroExitCode" and recs["75"].exit_code is None
    pend = recs["73_2"]
    assert pend.state == S.PENDING and pend.array_job_id == "73" and pend.array_task_id == 2
    assert pend.start_time is None and pend.nodelist is None
    assert pend.name == "odd|name~aaaaaaaaaaaa"
    assert token_of(pend.comment, pend.name) == "aaaaaaaaaaaa"
    assert recs["74"].state == S.RUNNING and recs["74"].nodelist == "n1"
    assert recs["74"].start_time and recs["74"].end_time is None
    assert token_of(recs["74"].comment, recs["74"].name) == "bbbbbbbbbbbb"


def test_sacct_states_exit_codes_and_pending_array_tasks():
    recs = {r.key: r for r in parse_sacct((FIX / "handwritten_sacct_parsable2.txt").read_text())}
    assert "121.batch" not in recs
    assert recs["121"].state == S.FAILED and recs["121"].exit_code == 3
    assert recs["122"].state == S.CANCELLED and recs["122"].reason == "CANCELLED by 0"
    assert recs["123"].state == S.TIMEOUT
    assert recs["124"].state == S.OUT_OF_MEMORY
    assert recs["127"].state == S.NODE_FAIL
    assert recs["128"].state == S.CANCELLED  # ended preempted, not requeued
    assert recs["125_0"].state == S.COMPLETED and recs["125_0"].own_id == "126"
    assert [recs[f"125_{i}"].state for i in (1, 2, 3)] == [S.PENDING] * 3
    assert recs["120"].nodelist == "n[1-2]" and recs["125_1"].nodelist is None
    assert token_of(None, recs["121"].name) == "aaaaaaaaaaaa"


def test_scontrol_and_jobcomp():
    recs = {r.key: r for r in parse_scontrol_jobs((FIX / "odd_scontrol_oneliner.txt").read_text())}
    assert recs["75"].state == S.FAILED and recs["75"].exit_code == 2
    assert recs["75"].name == "has space"
    assert [recs[f"73_{i}"].state for i in range(4)] == [S.PENDING] * 4
    assert recs["73_0"].comment == "ddlbench:aaaaaaaaaaaa"
    comp = {r.key: r for r in parse_jobcomp((FIX / "odd_jobcomp.txt").read_text())}
    assert comp["75"].exit_code == 2 and comp["75"].state == S.FAILED
    assert comp["74"].state == S.CANCELLED
    assert comp["6_0"].own_id == "11" and comp["6_0"].state == S.COMPLETED


def test_messages_and_small_formats():
    assert parse_sbatch_parsable("1234\n") == "1234"
    assert parse_sbatch_parsable("1234;cluster2\n") == "1234"
    assert parse_sbatch_parsable("") is None
    assert is_transient(
        "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
    )
    assert not is_transient("sbatch: error: Batch job submission failed: Invalid partition name")
    assert is_no_accounting((FIX / "sacct_disabled_stderr.txt").read_text())
    assert "Invalid job id" in (FIX / "squeue_invalid_job.txt").read_text()
    conf = parse_config("JobCompLoc              = /tmp/x/jobcomp.txt\nMinJobAge = 300 sec\n")
    assert conf["JobCompLoc"] == "/tmp/x/jobcomp.txt"
    assert expand_task_ids("[1-3,7%2]") == [1, 2, 3, 7]
    assert expand_task_ids("0-6:3") == [0, 3, 6]


@pytest.mark.parametrize(
    "text, state",
    [
        ("PD", S.PENDING),
        ("COMPLETING", S.RUNNING),
        ("CANCELLED by 1000", S.CANCELLED),
        ("BOOT_FAIL", S.NODE_FAIL),
        ("DEADLINE", S.TIMEOUT),
        ("REQUEUE_HOLD", S.REQUEUED),
        ("PREEMPTED", S.PREEMPTED),
        ("SOMETHING_NEW", S.RUNNING),
    ],
)
def test_slurm_state_names(text, state):
    assert S.from_slurm(text) == state


def test_hostlists_round_trip():
    assert expand("n[1-3,7],gpu[08-11],login") == [
        "n1",
        "n2",
        "n3",
        "n7",
        "gpu08",
        "gpu09",
        "gpu10",
        "gpu11",
        "login",
    ]
    assert compress(["node1", "node2", "node3", "node5"]) == "node[1-3,5]"
    assert compress(expand("gpu[08-11]")) == "gpu[08-11]"
    assert compress(["a"]) == "a"


def test_sbatch_directives(tmp_path):
    text = (
        "#!/bin/bash\n#SBATCH --job-name=x\n#SBATCH -N 2 --ntasks-per-node=4\n"
        "#SBATCH -t 0:30 # comment\n#SBATCH --exclusive\n\necho\n#SBATCH --late=1\n"
    )
    assert directives(text) == [
        ("--job-name", "x"),
        ("--nodes", "2"),
        ("--ntasks-per-node", "4"),
        ("--time", "0:30"),
        ("--exclusive", None),
    ]
    path = tmp_path / "job.sh"
    path.write_text(text)
    js = JobScript.read(path)
    assert js.time_limit_s == 30.0 and js.get_int("--nodes") == 2
    other = tmp_path / "other.sh"
    other.write_text(text.replace("--job-name=x", "--job-name=y"))
    assert JobScript.read(other).shape_key() == js.shape_key()
    assert [parse_time_seconds(t) for t in ("5", "1:00:00", "1-0", "UNLIMITED")] == [
        300.0,
        3600.0,
        86400.0,
        None,
    ]
    assert expand_pattern("/r/slurm-%j-%x.%4a", job_id="7", job_name="n", array_task_id="3") == (
        "/r/slurm-7-n.0003"
    )
    assert pattern_to_shell("/a b/slurm-%j.out") == "'/a b/slurm-'\"${SLURM_JOB_ID}\".out"
