"""A 2-rank PyTorch job inside a real Charliecloud container (``ch-run``), through the local
executor and through the project's real Slurm cluster.

The image is Debian's minbase plus python3, built from Debian packages by
``scripts/make-image.sh`` and cached (``~/.cache/ddlbench/images``). It holds no framework: the
profile binds the torch environment (built for Python 3.11, like the image's python3) at
``/mnt/0``, whose site-packages the image's Python finds through a ``.pth`` file.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddlbench.campaign.paths import RunPaths
from tests.support.repo import ROOT, require_tool

IMAGES = Path(os.environ.get("DDLBENCH_IMAGES") or Path.home() / ".cache/ddlbench/images")
IMAGE = IMAGES / "debian-python3"
ENVS = Path(os.environ.get("DDLBENCH_ENVS") or Path.home() / ".cache/ddlbench/envs")

SPEC = """\
name: ch
model: lenet
data: digits
frameworks:
  - {{name: pytorch, backend: gloo}}
batch_size: 16
steps: {{warmup: 2, measure: 8, measure_seconds: 0}}
optimizer: {{lr: 0.05, momentum: 0.9}}
lr_scaling: {{rule: none}}
scale: {{points: [{point}]}}
"""

CONTAINER = f"""\
environments:
  pytorch:
    container:
      runtime: charliecloud
      image: {IMAGE}
      bind: ["{ENVS / "torch"}:/mnt/0"]
    python: python3
env:
  OMP_NUM_THREADS: "1"
"""

LOCAL = "name: ch-local\nscheduler: local\ndevice: cpu\ngpus_per_node: 2\n" + CONTAINER
SLURM = (
    "name: ch-slurm\nscheduler: slurm\ndevice: cpu\ngpus_per_node: 1\nmax_nodes: 2\n"
    "slurm: {partition: debug, time_limit: '00:10:00', cpus_per_task: 1, gpu_request: none,"
    " mpi: none, sacct: 'no'}\n" + CONTAINER
)


@pytest.fixture(scope="module")
def image() -> Path:
    """The image, built (or found up to date) by the project's script."""
    require_tool("ch-run")
    if not (ENVS / "torch" / "bin" / "python").exists():
        pytest.skip("the torch environment is not built (scripts/make-envs.sh torch)")
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "make-image.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return IMAGE


def ddlbench(*args: str, results: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    # ch-run needs $USER; login shells and Slurm jobs set it
    env = dict(os.environ, DDLBENCH_RESULTS=str(results), USER=getpass.getuser())
    return subprocess.run(
        [sys.executable, "-m", "ddlbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(results.parent),
    )


def run_in_container(tmp: Path, profile_text: str, point: str) -> Path:
    (tmp / "profile.yaml").write_text(profile_text)
    (tmp / "spec.yaml").write_text(SPEC.format(point=point))
    results = tmp / "results"
    sub = ddlbench("submit", "spec.yaml", "--cluster", str(tmp / "profile.yaml"), results=results)
    assert sub.returncode == 0, sub.stderr
    waited = ddlbench("wait", "ch", "--timeout", "600", results=results)
    errors = "\n".join(p.read_text()[-2000:] for p in results.glob("ch/runs/*/slurm-*.err"))
    assert waited.returncode == 0, waited.stdout + waited.stderr + errors
    (run_dir,) = (results / "ch" / "runs").iterdir()
    return run_dir


def check_container_run(run_dir: Path, world: int) -> list:
    script = next((run_dir.parent.parent / "jobs").glob("*.sh")).read_text()
    assert f"ch-run -b {ENVS / 'torch'}:/mnt/0" in script and f"{IMAGE} -- python3" in script
    logs = list(RunPaths(run_dir).rank_logs())
    assert len(logs) == world
    metas, sums = [], set()
    for path in logs:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        assert records[0]["type"] == "meta" and records[-1]["type"] == "summary"
        assert records[-1]["steps_measured"] == 8 and records[-1]["status"] == "ok"
        metas.append(records[0])
        sums.add(records[-1]["param_sha256"])
    assert len(sums) == 1  # the two ranks averaged their gradients
    # the ranks ran the image's Debian python3, not the environment's own interpreter
    packages = (run_dir / "provenance" / "packages.txt").read_text().splitlines()
    version = "import platform; print(platform.python_version())"
    host = subprocess.run(
        [str(ENVS / "torch" / "bin" / "python"), "-c", version],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert packages[0].startswith("# python ") and host not in packages[0], packages[0]
    assert any(line.startswith("torch==") for line in packages)
    return metas


@pytest.mark.frameworks
@pytest.mark.slow
def test_two_ranks_in_charliecloud_on_the_local_executor(image, tmp_path):
    run_dir = run_in_container(tmp_path, LOCAL, "1x2")
    metas = check_container_run(run_dir, 2)
    assert sorted(m["rank"] for m in metas) == [0, 1]


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_two_ranks_in_charliecloud_through_slurm(image, tmp_path, slurm_cluster):
    run_dir = run_in_container(tmp_path, SLURM, "2x1")
    metas = check_container_run(run_dir, 2)
    assert sorted(m["node_rank"] for m in metas) == [0, 1] and all(m["slurm_job_id"] for m in metas)
