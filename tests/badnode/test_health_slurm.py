"""A node made bad by the test hook fails the pre-flight health check on the real Slurm
cluster (preflight: fail): status names it as seen on a one-node run (no suspect), and
``retry --exclude-bad-nodes`` runs the new attempt on the other node."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.cli import ddlbench
from tests.support.envs import require_envs
from tests.support.repo import ROOT

SPEC = """\
name: health
model: lenet
data: synthetic
frameworks: [{name: pytorch, backend: gloo}]
batch_size: 8
steps: {warmup: 1, measure: 2, measure_seconds: 0}
scale: {points: [1x1]}
slurm: {time: "00:10:00"}
env: {DDLBENCH_TEST_BAD_NODE: n1, DDLBENCH_PREFLIGHT_LOAD_FRACTION: "1000"}  # load: other users
"""


@pytest.mark.frameworks
@pytest.mark.slurm
def test_bad_node_named_and_excluded(tmp_path, slurm_cluster, monkeypatch):
    require_envs("pytorch")
    text = (ROOT / "configs" / "clusters" / "localslurm.yaml").read_text()
    profile = tmp_path / "strict.yaml"
    profile.write_text(text.replace("name: localslurm", "name: strict") + "preflight: fail\n")
    spec = tmp_path / "health.yaml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    monkeypatch.setenv("DDLBENCH_EXCLUDE_NODES", "n2")  # the first attempt lands on the bad node
    sub = ddlbench(
        "submit", str(spec), "--cluster", str(profile), "--campaign", "health", results=results
    )
    assert sub.returncode == 0, sub.stderr
    ddlbench("wait", "health", "--timeout", "400", results=results)
    status = json.loads(ddlbench("status", "health", "--json", results=results).stdout)
    (row,) = status["runs"]
    assert row["state"] == "FAILED" and row["nodelist"] == "n1"
    (bad,) = row["bad_nodes"]
    assert bad["node"] == "n1" and bad["failed"][0]["check"] == "gpu_count"
    # a run on one node: the failed check is seen on n1, which is no suspect (nothing to
    # compare with), and still excluded on request
    assert status["suspects"] == []
    assert status["seen_on_one_node"][0]["node"] == "n1"
    assert status["seen_on_one_node"][0]["evidence"][0]["kind"] == "health"
    assert (
        "seen on node n1 (a run on one node" in ddlbench("status", "health", results=results).stdout
    )
    monkeypatch.delenv("DDLBENCH_EXCLUDE_NODES")
    retried = ddlbench("retry", "health", "--exclude-bad-nodes", results=results)
    assert retried.returncode == 0, retried.stderr
    assert "excluding node(s) that failed the pre-flight health check: n1" in retried.stdout
    waited = ddlbench("wait", "health", "--timeout", "400", results=results)
    assert waited.returncode == 0, waited.stdout + _errors(results)
    status = json.loads(ddlbench("status", "health", "--json", results=results).stdout)
    (row,) = status["runs"]
    assert row["state"] == "COMPLETED" and row["nodelist"] == "n2" and row["attempts"] == 2
    assert "DDLBENCH_EXCLUDE_NODES" not in os.environ


def _errors(results) -> str:
    return "\n".join(p.read_text()[-2000:] for p in results.glob("health/runs/*/slurm-*.err"))
