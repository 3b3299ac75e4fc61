"""Stragglers on purpose and backup workers end to end: `submit` -> real PyTorch ranks ->
`wait` -> `collect` -> the analysis and the report, on the local executor and on the project's
real Slurm cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddlbench.analyse.backups import injection_table
from ddlbench.campaign.paths import RunPaths
from ddlbench.collect.collector import ensure_collected
from tests.support.cli import ddlbench
from tests.support.e2e import run_campaign
from tests.support.envs import require_envs

SPEC = """\
name: bw-e2e
model: lenet
data: digits
frameworks:
  - {{name: pytorch, label: sync, backend: gloo, threads: 1}}
  - {{name: pytorch, label: backup1, backend: gloo, threads: 1, backup_workers: 1}}
batch_size: 128
steps: {{warmup: 2, measure: 12, measure_seconds: 0}}
optimizer: {{lr: 0.05, momentum: 0.9, weight_decay: 0.0}}
lr_scaling: {{rule: none}}
scale: {{points: [{point}]}}
inject:
  straggler: {{kind: compute, ranks: [1], slowdown: 5}}
slurm: {{time: "00:05:00"}}
"""


def _check(root) -> None:
    data = ensure_collected(root)
    runs = data.runs.set_index("run_id")
    assert runs["params_consistent"].all()  # every rank ends with the same parameters
    sync = runs.loc[next(i for i in runs.index if i.startswith("sync-"))]
    # the straggler analysis finds the injected rank (compute-time index)
    assert sync["straggler_metric"] == "compute" and sync["slowest_rank"] == 1
    table = injection_table(data.runs, data.ranks).set_index("run_id")
    assert bool(table.loc[sync.name, "found"]) and table.loc[sync.name, "most_injected_rank"] == 1
    backup = table.loc[next(i for i in runs.index if i.startswith("backup1-"))]
    rates = dict(x.split(": ") for x in backup["drop_rates"].split("; "))
    assert backup["backup_workers"] == 1 and int(rates["1"].rstrip(" %")) >= 80  # rank 1, 5x
    # the throughput that trains: every sample in plain DDP, the kept ranks' with backups
    assert sync["dropped_samples"] == 0
    assert sync["applied_samples_per_s"] == pytest.approx(sync["throughput"])
    b1 = runs.loc[backup.name]
    assert b1["dropped_samples"] == 12 * 128  # one gradient of 128 samples dropped per step
    world = int(b1["world_size"])
    kept = (world - 1) / world
    assert b1["applied_samples_per_s"] == pytest.approx(kept * b1["throughput"], rel=1e-6)
    for run_dir in sorted((root / "runs").iterdir()):
        for path in RunPaths(run_dir).rank_logs():
            steps = [json.loads(x) for x in path.read_text().splitlines()[1:-1]]
            assert all(
                s["slowdown"] == (5.0 if path.name == "rank-1.jsonl" else 1.0) for s in steps
            )
            if run_dir.name.startswith("backup1-"):
                assert all(len(s["dropped"]) == 1 for s in steps)


@pytest.mark.frameworks
@pytest.mark.slow
def test_injected_straggler_and_backup_on_the_local_executor(tmp_path):
    require_envs("pytorch")
    root = run_campaign(SPEC.format(point="1x3"), "local", "bw-local", tmp_path)
    _check(root)
    rep = ddlbench("report", root.name, results=tmp_path / "results")
    assert rep.returncode == 0, rep.stderr
    md = (root / "report" / "report.md").read_text()
    assert "Injected stragglers and dropped gradients per run" in md
    assert "Backup workers: paired comparisons" in md
    assert "- Backup workers: backup1-lenet-n1x3-b128 (3 ranks, b = 1) against sync-" in md


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_backup_workers_on_real_slurm_two_nodes(tmp_path, slurm_cluster):
    require_envs("pytorch")
    root = run_campaign(SPEC.format(point="2x1"), "localslurm", "bw-slurm", tmp_path)
    _check(root)


CPU_SHARE = SPEC.replace(
    "straggler: {{kind: compute, ranks: [1], slowdown: 5}}",
    "straggler: {{kind: cpu-share, ranks: [1], slowdown: 2}}",
).replace("measure: 12", "measure: 4")


def _cgroup_v1_writable() -> bool:
    probe = Path("/sys/fs/cgroup/cpu") / f"pytest-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_cpu_share_on_real_slurm_two_nodes(tmp_path, slurm_cluster):
    """``cpu_share_by: auto`` in a Slurm job step: a cgroup quota where the rank may make one
    (root, cgroup v1, no task/cgroup plugin on the project's cluster), else competitors; the
    child cgroup is gone after the run."""
    require_envs("pytorch")
    lines = CPU_SHARE.format(point="2x1").splitlines(keepends=True)
    spec = "".join(line for line in lines if "label: backup1" not in line)  # plain DDP only
    root = run_campaign(spec, "localslurm", "cpu-share-slurm", tmp_path)
    data = ensure_collected(root)
    assert data.runs["params_consistent"].all()
    slowed, other = (data.ranks[data.ranks["rank"] == r] for r in (1, 0))
    expected = "cgroup-v1" if _cgroup_v1_writable() else "competitors"
    assert list(slowed["summary_cpu_share_by"]) == [expected]
    assert list(slowed["summary_injected_steps"]) == [4]
    assert other["summary_cpu_share_by"].isna().all()  # never slowed: nothing made
    (run_dir,) = (root / "runs").iterdir()
    logs = {p.name: p for p in RunPaths(run_dir).rank_logs()}
    pid = json.loads(logs["rank-1.jsonl"].read_text().splitlines()[0])["pid"]
    assert not (Path("/sys/fs/cgroup/cpu") / f"ddlbench-{pid}").exists()
