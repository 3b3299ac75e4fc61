"""``network.transport`` through the project's real Slurm cluster (two emulated CPU nodes on
loopback, which has no RDMA): a tcp run completes and is collected with its transport; an
rdma run is refused by the pre-flight on the nodes, never run over another transport."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.cli import ddlbench
from tests.support.e2e import SPEC, run_campaign
from tests.support.envs import require_envs

TCP = "variants:\n  - label: tcp\n    network: {transport: tcp}\n"


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_tcp_runs_and_rdma_is_refused_on_loopback(tmp_path, slurm_cluster):
    require_envs("pytorch")
    spec = SPEC.format(frameworks="  - {name: pytorch, backend: gloo}", point="2x1") + TCP
    root = run_campaign(spec, "localslurm", "tcp", tmp_path)
    proc = ddlbench("collect", root.name, results=root.parent)
    assert proc.returncode == 0, proc.stderr
    row = pd.read_parquet(root / "data" / "runs.parquet").iloc[0]
    assert (row["status"], row["transport"], row["nodes"]) == ("ok", "tcp", 2)
    assert row["run_id"].endswith("-tcp-r0") and pd.isna(row["problems"])

    # rdma with a backend that could carry it (MPI): planned, then refused on the nodes
    results = tmp_path / "results"
    spec = tmp_path / "rdma.yaml"
    spec.write_text(
        SPEC.format(frameworks="  - {name: pytorch, backend: mpi}", point="2x1")
        + TCP.replace("tcp", "rdma")
    )
    sub = ddlbench("submit", str(spec), "--cluster", "localslurm", "--campaign", "rdma",
                   results=results)  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    waited = ddlbench("wait", "rdma", "--timeout", "300", results=results)
    assert waited.returncode != 0
    err = "".join(p.read_text() for p in (results / "rdma").glob("runs/*/slurm-*.err"))
    assert "network.transport rdma: n1 has no active RDMA port" in err
    assert "n2 has no active RDMA port" in err
    # the workload never started: no rank log
    assert not list((results / "rdma").glob("runs/*/logs/attempt-*/rank-*.jsonl"))
