"""MXNet with ``workers: per-node`` on the loopback Slurm cluster: one worker per node driving
the node's two CPU "devices" as two contexts.

A copy of ``localslurm`` with 2 devices per node (cpus_per_task 1): the worker step runs one
task per node holding both CPUs, the kvstore has 2 workers, each splits its batch over
``[mx.cpu(0), mx.cpu(1)]``. The collected runs table counts the run's 4 devices.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ddlbench.campaign.paths import RunPaths
from tests.support.cli import ddlbench
from tests.support.e2e import SPEC, run_campaign
from tests.support.envs import require_envs
from tests.support.repo import ROOT

pytestmark = [pytest.mark.frameworks, pytest.mark.slurm, pytest.mark.slow]

MXNET = "  - {name: mxnet, kvstore: dist_sync, servers: 1, workers: per-node}"


def _profile(tmp_path):
    profile = (ROOT / "configs" / "clusters" / "localslurm.yaml").read_text()
    profile = profile.replace("name: localslurm", "name: localslurm-2dev")
    profile = profile.replace("gpus_per_node: 1 ", "gpus_per_node: 2 ")
    assert "gpus_per_node: 2 " in profile
    (tmp_path / "2dev.yaml").write_text(profile)
    return str(tmp_path / "2dev.yaml")


def test_mxnet_one_worker_per_node_over_two_contexts(tmp_path, slurm_cluster):
    require_envs("mxnet")
    spec = SPEC.format(frameworks=MXNET, point="2x2")
    root = run_campaign(spec, _profile(tmp_path), "mx-pernode", tmp_path)
    (run_dir,) = sorted((root / "runs").iterdir())
    script = next((root / "jobs").glob("mxnet-*.sh")).read_text()
    assert "--nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 --cpus-per-task=2" in (
        script
    )
    logs = list(RunPaths(run_dir).rank_logs())
    assert [p.name for p in logs] == ["rank-0.jsonl", "rank-1.jsonl"], run_dir
    records = [[json.loads(line) for line in p.read_text().splitlines()] for p in logs]
    metas = [r[0] for r in records]
    assert all(m["type"] == "meta" and m["devices_per_worker"] == 2 for m in metas), metas
    assert all(m["world_size"] == 2 and m["batch_size"] == 32 for m in metas), metas
    assert sorted(m["node_rank"] for m in metas) == [0, 1]
    summaries = [r[-1] for r in records]
    assert all(s["type"] == "summary" and s["throughput"] > 0 for s in summaries), summaries
    assert len({s["param_sha256"] for s in summaries}) == 1
    proc = ddlbench("collect", root.name, results=root.parent)
    assert proc.returncode == 0, proc.stderr
    row = pd.read_parquet(root / "data" / "runs.parquet").iloc[0]
    assert row["complete"] and row["status"] == "ok", row["problems"]
    assert int(row["world_size"]) == 4 and not row["problems"]
    assert row["throughput_per_device"] == pytest.approx(row["throughput"] / 4)
    assert row["samples_measured"] == 12 * 2 * 32  # 12 steps x 2 workers x 2 devices x 16
