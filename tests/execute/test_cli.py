"""The user's path through the CLI: ddlbench submit (rendered by ddlbench), wait, status,
cancel, retry, on the local executor and on the local Slurm cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddlbench.cli import main
from tests.execute.campaigns import make_campaign
from tests.execute.conftest import ROOT

QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
# like configs/clusters/local.yaml and localslurm.yaml, with a workload "interpreter" that
# does nothing, so the rendered job.sh runs end to end without the framework environments
TRIVIAL_LOCAL = """\
name: triv-local
scheduler: local
device: cpu
gpus_per_node: 2
slurm: {time_limit: "00:05:00", mpi: none}
local: {max_parallel: 2}
environments:
  default: {python: "true"}
"""
TRIVIAL_SLURM = """\
name: triv-slurm
scheduler: slurm
device: cpu
gpus_per_node: 1
max_nodes: 2
slurm: {time_limit: "00:05:00", mpi: none, partition: debug, gpu_request: none, sacct: "no"}
environments:
  default: {python: "true"}
"""


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
