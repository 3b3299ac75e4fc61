"""The script of a job array (``submit --array``), run by bash without Slurm."""

from __future__ import annotations

import os
import subprocess

from ddlbench.campaign.manifest import load_campaign
from ddlbench.execute.slurm.arrays import write_array_script
from tests.support.campaigns import make_campaign


def _run_task(script, task: int, job_id: str) -> None:
    env = dict(os.environ, SLURM_JOB_ID=job_id, SLURM_ARRAY_TASK_ID=str(task))
    subprocess.run(["bash", str(script)], env=env, check=True, timeout=30)


def test_a_requeued_array_task_appends_to_its_runs_output(tmp_path):
    """A requeued task keeps its job id: its second start appends to the run's
    slurm-<job>.out/.err (as the runs' own --open-mode=append does) instead of truncating."""
    runs = [
        {"run_id": f"r{i}", "body": ['echo "start of $SLURM_ARRAY_TASK_ID"', "echo oops >&2"]}
        for i in range(2)
    ]
    cdir = make_campaign(tmp_path, "arr", runs, scheduler="slurm")
    campaign = load_campaign(cdir)
    for run in campaign.runs:
        run.run_dir.mkdir(parents=True)
    script = write_array_script(campaign, "tok", campaign.runs)
    text = script.read_text()
    assert " >'" not in text and " 2>'" not in text  # no truncating redirection
    _run_task(script, 1, "77")
    _run_task(script, 1, "77")  # the requeued start, same job id
    out = cdir / "runs" / "r1" / "slurm-77.out"
    err = cdir / "runs" / "r1" / "slurm-77.err"
    assert out.read_text() == "start of 1\nstart of 1\n"
    assert err.read_text() == "oops\noops\n"
    assert not (cdir / "runs" / "r0" / "slurm-77.out").exists()


def test_a_run_without_its_own_error_file_gets_both_streams_in_its_output(tmp_path):
    cdir = make_campaign(tmp_path, "arr", [{"run_id": "r0", "body": ["echo a; echo b >&2"]}])
    job = cdir / "jobs" / "r0.sh"
    job.write_text("".join(ln for ln in job.read_text().splitlines(True) if "--error" not in ln))
    campaign = load_campaign(cdir)
    campaign.runs[0].run_dir.mkdir(parents=True)
    script = write_array_script(campaign, "tok", campaign.runs)
    _run_task(script, 0, "5")
    _run_task(script, 0, "5")
    lines = (cdir / "runs" / "r0" / "slurm-5.out").read_text().splitlines()
    assert sorted(lines) == ["a", "a", "b", "b"]
