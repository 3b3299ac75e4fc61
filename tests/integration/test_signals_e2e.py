"""Slurm's ``--signal=USR1@T`` warning on the real Slurm cluster: the ranks stop with a record
and the run ends TIMEOUT, not FAILED (docs/launching.md#signals)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from ddlbench.workloads.common.runner import STOPPED_MESSAGE
from tests.support.cli import ddlbench, diagnose
from tests.support.e2e import SPEC
from tests.support.envs import require_envs

TORCH = "  - {name: pytorch, backend: gloo}"


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _measuring(root, ranks: int) -> bool:
    logs = sorted(root.glob("runs/*/logs/attempt-1/rank-*.jsonl"))
    return len(logs) == ranks and all('"measure"' in p.read_text() for p in logs)


def _status(root) -> dict:
    proc = ddlbench("status", root.name, "--json", results=root.parent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["runs"][0]


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_sigusr1_to_a_running_job_ends_it_with_a_record_not_failed(tmp_path, slurm_cluster):
    require_envs("pytorch")
    spec = tmp_path / "signal.yaml"
    text = SPEC.format(frameworks=TORCH, point="2x1")
    spec.write_text(text.replace("measure: 12", "measure: 100000"))
    results = tmp_path / "results"
    sub = ddlbench("submit", str(spec), "--cluster", "localslurm", "--campaign", "sig",
                   results=results)  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    root = results / "sig"
    deadline = time.time() + 600
    while time.time() < deadline and not _measuring(root, 2):
        time.sleep(1)
    assert _measuring(root, 2), diagnose(root, "the ranks never measured")
    job = _status(root)["job_id"]
    # what --signal=USR1@60 does at the time limit: signal every step (not the batch shell)
    sent = time.time()
    subprocess.run(["scancel", "--signal=USR1", str(job)], check=True, timeout=60)
    waited = ddlbench("wait", "sig", "--timeout", "300", results=results)
    took = time.time() - sent
    row = _status(root)
    assert row["state"] == "TIMEOUT", diagnose(root, waited.stdout + json.dumps(row))
    assert took < 120, took
    logs = sorted(root.glob("runs/*/logs/attempt-1/rank-*.jsonl"))
    for log in logs:
        records = _records(log)
        assert records[-1]["type"] == "error", (log, records[-3:])
        assert records[-1]["message"] == STOPPED_MESSAGE
        assert sum(r["type"] == "step" for r in records) >= 1
    assert "SIGUSR1" in (row.get("cause") or "") + (row.get("reason") or ""), row
