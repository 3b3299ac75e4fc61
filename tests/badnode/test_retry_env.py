"""``retry --exclude-bad-nodes``/``--comm-debug``: the environment the new attempts get."""

from __future__ import annotations

import json

from ddlbench.campaign.paths import CampaignPaths, RunPaths
from ddlbench.cli.retry_env import retry_environment
from ddlbench.execute.settings import ExecuteSettings, exclude_args


def _report(root, run_id: str, node: str, status: str) -> None:
    folder = RunPaths(CampaignPaths.of(root).run_dir(run_id)).preflight
    folder.mkdir(parents=True)
    checks = [{"check": "gpu_count", "status": status, "detail": "3 GPU(s), the profile expects 4"}]
    (folder / f"{node}.json").write_text(json.dumps({"node": node, "health": {"checks": checks}}))


def test_bad_nodes_are_excluded_and_debug_switched_on(tmp_path, monkeypatch):
    monkeypatch.setenv("DDLBENCH_EXCLUDE_NODES", "n9")
    # set first, so that the variables the code sets are undone after the test
    monkeypatch.setenv("DDLBENCH_COMM_DEBUG", "0")
    monkeypatch.setenv("TORCH_CPP_LOG_LEVEL", "WARNING")
    _report(tmp_path, "a-r0", "n3", "fail")
    _report(tmp_path, "b-r0", "n1", "ok")
    said = []
    assert retry_environment(tmp_path, True, True, said.append) == ["n3"]
    settings = ExecuteSettings.from_env()
    assert exclude_args(settings.exclude_nodes) == ["--exclude=n9,n3"]
    assert said == ["excluding node(s) that failed the pre-flight health check: n3"]
    import os

    assert os.environ["DDLBENCH_COMM_DEBUG"] == "1"
    assert os.environ["TORCH_CPP_LOG_LEVEL"] == "WARNING"  # a value already set is kept


def test_nothing_to_exclude(tmp_path, monkeypatch):
    monkeypatch.setenv("DDLBENCH_EXCLUDE_NODES", "")
    said = []
    assert retry_environment(tmp_path, True, False, said.append) == []
    assert ExecuteSettings.from_env().exclude_nodes is None and exclude_args(None) == []
    assert "nothing to exclude" in said[0]
