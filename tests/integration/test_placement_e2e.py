"""Placement end to end: recorded binding, refused shared devices, a clean job environment.

On the local executor and on the project's real Slurm cluster (two emulated CPU nodes). Two
ranks driving one device are simulated with the documented test hook ``DDLBENCH_TEST_DEVICE``
(every CPU rank records the device ``test:<name>``), so the collector's real check runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from ddlbench.campaign.paths import RunPaths
from tests.support.cli import ddlbench
from tests.support.e2e import SPEC, run_campaign
from tests.support.envs import require_envs

TORCH = "  - {name: pytorch, backend: gloo}"


def _spec(point: str, env: str = "") -> str:
    return SPEC.format(frameworks=TORCH, point=point) + env


def _collected(root):
    proc = ddlbench("collect", root.name, results=root.parent)
    assert proc.returncode == 0, proc.stderr
    return pd.read_parquet(root / "data" / "runs.parquet").iloc[0]


def _placements(root):
    run_dir = next(root.glob("runs/*"))
    folder = RunPaths(run_dir).attempt(1) / "placement"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("rank-*.json"))]


@pytest.mark.frameworks
@pytest.mark.slow
def test_shared_device_fails_the_run_on_the_local_executor(tmp_path):
    require_envs("pytorch")
    env = 'env: {DDLBENCH_TEST_DEVICE: "one"}\n'
    root = run_campaign(_spec("1x2", env), "local", "shared", tmp_path)
    recs = _placements(root)
    assert [r["device"]["uuid"] for r in recs] == ["test:one", "test:one"]
    assert all(r["binding"]["policy"] == "slurm" and r["binding"]["cpus"] for r in recs)
    row = _collected(root)
    assert row["status"] == "failed" and not row["complete"]
    assert row["shared_device"] == "ranks 0, 1 on node1 shared device test:one"


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_on_slurm_binding_recorded_shared_device_refused(tmp_path, slurm_cluster):
    require_envs("pytorch")
    root = run_campaign(_spec("2x1"), "localslurm", "placed", tmp_path)
    recs = _placements(root)
    assert [(r["rank"], r["host"]) for r in recs] == [(0, "n1"), (1, "n2")]
    assert all(r["binding"]["cpus"] and r["device"]["kind"] == "cpu" for r in recs)
    assert _collected(root)["status"] == "ok"
    # two ranks of one node on one device
    env = 'env: {DDLBENCH_TEST_DEVICE: "one"}\n'
    root = run_campaign(_spec("1x2", env), "localslurm", "shared", tmp_path)
    row = _collected(root)
    assert row["status"] == "failed"
    assert "ranks 0, 1 on" in row["shared_device"]


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_job_submitted_from_inside_salloc_with_gpu_and_sbatch_variables_runs(
    tmp_path, slurm_cluster
):
    """sbatch hands the job its own environment and reads SBATCH_* as options: from inside an
    ``salloc --gpus-per-node=1`` (SLURM_GPUS_PER_NODE, SLURM_GRES, ...) every srun of the job
    would ask for a GPU per node, which this GPU-less cluster refuses; an salloc's
    SLURM_MEM_PER_CPU beside the job's SLURM_MEM_PER_NODE makes every srun stop ("mutually
    exclusive"); a user's SBATCH_PARTITION would override the script's #SBATCH line (here
    with a partition that does not exist). ddlbench runs sbatch without them
    (execute/slurm/commands.py sbatch_env), so the job sees none and runs."""
    require_envs("pytorch")
    spec = tmp_path / "inside.yaml"
    spec.write_text(_spec("2x1"))
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "ddlbench", "submit", str(spec), "--cluster", "localslurm"]
    cmd += ["--campaign", "inside"]
    leaked = (
        "SLURM_DISTRIBUTION=cyclic SLURM_MEM_PER_NODE=100 SLURM_GPUS_PER_NODE=1 SLURM_GPUS=2 "
        "SLURM_GRES=gpu:1 SLURM_TRES_BIND=gpu:closest SBATCH_PARTITION=nowhere"
    )
    inner = f"export {leaked}; exec " + " ".join(cmd)
    proc = subprocess.run(
        ["salloc", "--nodes=1", "--ntasks=1", "--mem-per-cpu=50", "bash", "-c", inner],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DDLBENCH_RESULTS": str(results)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    waited = ddlbench("wait", "inside", "--timeout", "600", results=results)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    root = results / "inside"
    env = next(root.glob("runs/*/provenance/env.txt")).read_text()
    names = {line.split("=", 1)[0] for line in env.splitlines()}
    for name in ("SLURM_MEM_PER_CPU", "SLURM_GPUS_PER_NODE", "SLURM_GRES", "SLURM_GPUS",
                 "SLURM_TRES_BIND", "SLURM_DISTRIBUTION"):  # fmt: skip
        assert name not in names, name
    assert "SLURM_JOB_PARTITION=debug" in env.splitlines()
    assert _collected(root)["status"] == "ok"


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_network_interface_gives_every_framework_its_addresses(tmp_path, slurm_cluster):
    require_envs("pytorch")
    from tests.support.repo import ROOT

    text = (ROOT / "configs" / "clusters" / "localslurm.yaml").read_text()
    profile = tmp_path / "lo.yaml"
    network = "network: {interface: lo, nccl: IB}\n"
    profile.write_text(text.replace("name: localslurm", "name: localslurm-lo") + network)
    root = run_campaign(_spec("2x1"), str(profile), "iface", tmp_path)
    env = next(root.glob("runs/*/provenance/env.txt")).read_text().splitlines()
    assert "DDLBENCH_ADDRS=127.0.0.1,127.0.0.1" in env
    assert {"GLOO_SOCKET_IFNAME=lo", "NCCL_SOCKET_IFNAME=lo", "DMLC_INTERFACE=lo"} <= set(env)
    assert _collected(root)["status"] == "ok"
    # NCCL's INIT/NET lines of a run that fell back to sockets (recorded on a GPU cluster; the
    # CPU ranks here use Gloo): the run is flagged, in the run table and in the report
    attempt = RunPaths(next(root.glob("runs/*"))).attempt(1)
    (attempt / "nccl").mkdir()
    recorded = ROOT / "tests" / "fixtures" / "placement" / "nccl-socket.log"
    (attempt / "nccl" / "rank-0.n1.321.log").write_text(recorded.read_text())
    proc = ddlbench("report", root.name, "--recollect", "--format", "md", results=root.parent)
    assert proc.returncode == 0, proc.stderr
    row = pd.read_parquet(root / "data" / "runs.parquet").iloc[0]
    assert row["nccl_net"] == "Socket" and row["status"] == "ok"
    assert "NCCL used network Socket, not IB" in row["problems"]
    report = next((root / "report").glob("*.md")).read_text()
    assert "NCCL used network Socket, not IB" in report
