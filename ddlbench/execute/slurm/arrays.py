"""The sbatch script of a job array: ``submit --array`` groups runs of one shape into one job."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import List

from ddlbench.campaign.manifest import Campaign, RunInfo
from ddlbench.campaign.paths import SLURM_OUTPUT_PATTERN
from ddlbench.execute.sbatchfile import JobScript, pattern_to_shell

#: options of the runs' scripts that the array script sets itself (or must not carry)
_OWN_OPTIONS = ("--job-name", "--output", "--error", "--array", "--comment")


def write_array_script(campaign: Campaign, token: str, runs: List[RunInfo]) -> Path:
    """One sbatch script for a group of same-shape runs; task i runs the i-th job script.

    The group's #SBATCH lines are those of its runs (identical but for names and output
    files); each task appends its output where the run's own job would have.
    """
    first = JobScript.read(runs[0].script)
    lines = ["#!/bin/bash"]
    for opt, val in first.options:
        if opt in _OWN_OPTIONS:
            continue
        lines.append(f"#SBATCH {opt}" + (f"={val}" if val is not None else ""))
    paths = campaign.paths
    paths.arrays.mkdir(parents=True, exist_ok=True)
    lines.append(f"#SBATCH --output={paths.array_output(token)}")
    lines.append("#")
    lines.append(f"# ddlbench job array for campaign {campaign.name}: task i runs the")
    lines.append("# i-th run's job script, with its output where that run's own job puts it.")
    lines.append('case "${SLURM_ARRAY_TASK_ID}" in')
    for i, run in enumerate(runs):
        js = JobScript.read(run.script)
        out = js.get("--output") or str(run.run_dir / SLURM_OUTPUT_PATTERN)
        err = js.get("--error") or out
        # append, as the runs' own --open-mode=append does: a requeued task keeps its job
        # id, and its second start must not wipe the first start's output
        to_err = "2>&1" if err == out else f"2>>{pattern_to_shell(err)}"
        lines.append(
            f"  {i}) cd {shlex.quote(str(run.run_dir))} && exec bash "
            f"{shlex.quote(str(run.script))} >>{pattern_to_shell(out)} {to_err} ;;"
        )
    lines.append(
        '  *) echo "ddlbench: no run for array task ${SLURM_ARRAY_TASK_ID}" >&2; exit 1 ;;'
    )
    lines.append("esac")
    path = paths.array_script(token)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path
