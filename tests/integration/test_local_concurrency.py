"""Two campaigns submitted at once to the local executor never share the machine.

``local.max_parallel`` (1 by default) holds for the user across campaigns, job numbers are
unique on the machine and ports are chosen free at job start: every run completes, and no
two measured windows overlap (read from the rank logs' step times).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddlbench.campaign.paths import CampaignPaths
from tests.support.cli import ddlbench
from tests.support.envs import require_envs

SPEC = """\
name: {name}
cluster: local
model: lenet
data: digits
frameworks:
  - {{name: pytorch, backend: gloo}}
batch_size: 16
steps: {{warmup: 2, measure: 8, measure_seconds: 0}}
optimizer: {{lr: 0.05, momentum: 0.9, weight_decay: 0.0}}
lr_scaling: {{rule: none}}
scale: {{points: [1x2]}}
repeats: 2
slurm: {{time: "00:05:00"}}
"""


def measured_window(run_dir: Path) -> tuple:
    """(first measured step's start, last measured step's end) over every rank of the run."""
    starts, ends = [], []
    logs = list(CampaignPaths(run_dir.parents[1]).run(run_dir.name).rank_logs())
    assert len(logs) == 2, run_dir
    for path in logs:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        assert records[-1]["type"] == "summary", path
        steps = [r for r in records if r["type"] == "step" and r["phase"] == "measure"]
        assert len(steps) == 8, path
        starts.append(min(r["t_start"] for r in steps))
        ends.append(max(r["t_end"] for r in steps))
    return min(starts), max(ends)


@pytest.mark.frameworks
@pytest.mark.slow
def test_two_campaigns_at_once_never_overlap(tmp_path):
    require_envs("pytorch")
    results = tmp_path / "results"
    procs = []
    for name in ("alpha", "beta"):
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(SPEC.format(name=name))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "ddlbench", "submit", str(spec), "--results", str(results)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    for name in ("alpha", "beta"):
        waited = ddlbench("wait", name, "--timeout", "600", results=results)
        assert waited.returncode == 0, waited.stdout + waited.stderr
    windows, job_ids = [], []
    for name in ("alpha", "beta"):
        root = CampaignPaths(results / name)
        runs = list(root.run_folders())
        assert len(runs) == 2
        for run in runs:
            windows.append((*measured_window(run.dir), f"{name}/{run.run_id}"))
            job = (run.provenance / "job.txt").read_text()
            job_ids.append(next(w for w in job.split() if w.startswith("job_id=")))
    assert len(set(job_ids)) == 4, job_ids  # job numbers unique across the two campaigns
    windows.sort()
    for (_, end, a), (start, _, b) in zip(windows, windows[1:]):
        assert start >= end, f"measured windows of {a} and {b} overlap by {end - start:.2f} s"
