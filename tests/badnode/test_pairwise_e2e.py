"""Per-node and pairwise allreduce tests with a node slowed by the test hook: the slow node is
named, through the local executor and through the real two-node Slurm cluster."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import ddlbench
from tests.support.envs import require_envs

pytestmark = pytest.mark.frameworks

SPEC = """\
name: {name}
mode: allreduce
frameworks: [{{name: pytorch, backend: gloo}}]
allreduce: {{max_bytes: 65536, iters: 5, warmup: 1, pairwise: log}}
scale: {{points: [2x1]}}
slurm: {{time: "00:10:00"}}
env: {{DDLBENCH_TEST_SLOW_NODE: {slow}, DDLBENCH_TEST_SLOW_S: "0.05"}}
"""


def _run(tmp_path, name: str, cluster: str, slow: str) -> dict:
    require_envs("pytorch")
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name, slow=slow))
    results = tmp_path / "results"
    sub = ddlbench("submit", str(spec), "--cluster", cluster, "--campaign", name, results=results)
    assert sub.returncode == 0, sub.stderr
    waited = ddlbench("wait", name, "--timeout", "500", results=results)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    status = json.loads(ddlbench("status", name, "--json", results=results).stdout)
    table = ddlbench("status", name, results=results).stdout
    assert f"suspect node {slow}" in table
    rep = ddlbench("report", name, "--format", "md", "-q", results=results)
    assert rep.returncode == 0, rep.stderr
    text = (results / name / "report" / "report.md").read_text()
    section = text.split("## Suspected nodes", 1)[1].split("\n## ", 1)[0]
    assert f"| {slow} | pairwise |" in section and "nodes alone, best first" in section
    assert "outlier threshold" in section
    return status


def _check(status: dict, slow: str, other: str) -> None:
    (row,) = status["runs"]
    found = row["pairwise"]
    assert [n["node"] for n in found["nodes"]] == [other, slow]  # ranked, best first
    assert found["slow_alone"] == [slow]
    assert [n["node"] for n in found["named"]] == [slow]
    assert [p["pair"] for p in found["pairs"]] == [sorted([slow, other])]
    (suspect,) = status["suspects"]
    assert suspect["node"] == slow and suspect["evidence"][0]["kind"] == "pairwise"


def test_slow_node_named_local(tmp_path):
    _check(_run(tmp_path, "pairs", "local", "node2"), "node2", "node1")


@pytest.mark.slurm
def test_slow_node_named_on_slurm(tmp_path, slurm_cluster):
    _check(_run(tmp_path, "spairs", "localslurm", "n1"), "n1", "n2")
