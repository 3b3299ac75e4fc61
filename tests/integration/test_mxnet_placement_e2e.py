"""MXNet on the loopback Slurm cluster: the scheduler and servers on the cores the workers leave.

Each emulated node has 2 CPUs. With ``exclusive: true`` the job holds both and the one worker
per node uses one, so the scheduler and server find the other spare, but leave it alone: on a
CPU profile ddlbench does not bind the workers, so a worker may run there (on a GPU profile,
``gpu-socket`` binding, they bind to it); without it the job holds one CPU per node and they
say that none is spare. Both are read back from
``provenance/mxnet-ps/`` and the workers' placement records.
"""

from __future__ import annotations

import json

import pytest

from ddlbench.campaign.paths import RunPaths
from tests.support.e2e import SPEC, run_campaign
from tests.support.envs import require_envs
from tests.support.repo import ROOT

pytestmark = [pytest.mark.frameworks, pytest.mark.slurm, pytest.mark.slow]

MXNET = "  - {name: mxnet, kvstore: dist_sync, servers: 1}"


def check_run(run_dir, world: int) -> None:
    """Every worker trained to the end, and all ended with the same parameters."""
    logs = list(RunPaths(run_dir).rank_logs())
    assert [p.name for p in logs] == [f"rank-{k}.jsonl" for k in range(world)], run_dir
    summaries = [json.loads(p.read_text().splitlines()[-1]) for p in logs]
    assert all(s["type"] == "summary" and s["throughput"] > 0 for s in summaries), summaries
    assert len({s["param_sha256"] for s in summaries}) == 1


def _ps_records(run_dir):
    return [json.loads(p.read_text()) for p in (run_dir / "provenance" / "mxnet-ps").glob("*.json")]


def test_mxnet_ps_roles_on_spare_cores_of_exclusive_nodes(tmp_path, slurm_cluster):
    require_envs("mxnet")
    profile = (ROOT / "configs" / "clusters" / "localslurm.yaml").read_text()
    profile = profile.replace("name: localslurm", "name: localslurm-excl")
    profile = profile.replace("  cpus_per_task: 1\n", "  cpus_per_task: 1\n  exclusive: true\n")
    (tmp_path / "excl.yaml").write_text(profile)
    spec = SPEC.format(frameworks=MXNET, point="2x1")
    root = run_campaign(spec, str(tmp_path / "excl.yaml"), "mx-excl", tmp_path)
    (run_dir,) = sorted((root / "runs").iterdir())
    check_run(run_dir, world=2)
    recs = _ps_records(run_dir)
    assert sorted(r["role"] for r in recs) == ["scheduler", "server"], recs
    # a CPU profile: the workers are bound by Slurm's policy, not by ddlbench (and the emulated
    # nodes share the machine's CPUs), so the spare core is found but not taken
    for rec in recs:
        assert rec["spare"] is False and rec["why"].startswith("1 spare core(s)"), rec
        assert "not placed there" in rec["why"], rec
    out = "".join(p.read_text() for p in run_dir.glob("slurm-*.err"))
    assert "ddlbench: mxnet server on " in out and "1 spare core(s)" in out


def test_mxnet_ps_roles_say_when_no_core_is_spare(tmp_path, slurm_cluster):
    require_envs("mxnet")
    spec = SPEC.format(frameworks=MXNET, point="2x1")
    root = run_campaign(spec, "localslurm", "mx-shared", tmp_path)
    (run_dir,) = sorted((root / "runs").iterdir())
    check_run(run_dir, world=2)
    recs = _ps_records(run_dir)
    assert sorted(r["role"] for r in recs) == ["scheduler", "server"], recs
    assert all(r["spare"] is False and r["why"].startswith("no spare cores") for r in recs)
    placement = sorted(RunPaths(run_dir).attempt(1).glob("placement/rank-*.json"))
    assert len(placement) == 2
