"""The job script's launch line for each container runtime of a profile (rendered for real
with ``submit --dry-run``): Apptainer/Singularity ``exec``, Pyxis srun options, Charliecloud
``ch-run``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import invoke

SPEC = """\
name: ct
model: lenet
data: digits
frameworks: [{name: pytorch, backend: gloo}]
scale: {points: [1x2]}
"""

PROFILE = """\
name: ct-{runtime}
scheduler: slurm
device: {device}
gpus_per_node: 2
slurm: {{partition: gpu, mpi: none}}
environments:
  pytorch:
    container:
      runtime: {runtime}
      image: {image}
      bind: ["/scratch/data:/data:ro"]
      options: {options}
    python: python3
"""


def render(tmp_path: Path, runtime: str, image: str, device: str = "gpu", options="[]") -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    profile = tmp_path / f"{runtime}.yaml"
    profile.write_text(PROFILE.format(runtime=runtime, image=image, device=device, options=options))
    (tmp_path / "spec.yaml").write_text(SPEC)
    results = tmp_path / "results"
    res = invoke(
        ["submit", str(tmp_path / "spec.yaml"), "--cluster", str(profile), "--dry-run",
         "--results", str(results), "--campaign", runtime]
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (script,) = (results / runtime / "jobs").glob("*.sh")
    return script.read_text()


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
def test_apptainer_and_singularity_exec(tmp_path, runtime):
    text = render(tmp_path, runtime, "/images/torch.sif", options="[--contain]")
    results = tmp_path / "results"
    pkg = results / runtime / "pkg"
    want = (
        f"{runtime} exec --nv --bind /scratch/data:/data:ro --bind {results} --bind {pkg} "
        f"--env PYTHONPATH={pkg},PYTHONNOUSERSITE=1 --contain /images/torch.sif python3 -m "
        "ddlbench.workloads.node.rank_start pytorch"
    )
    assert want in text
    assert "--cleanenv" not in text
    cpu = render(tmp_path / "cpu", runtime, "/images/torch.sif", device="cpu")
    assert f"{runtime} exec --bind" in cpu  # no --nv without GPUs


def test_pyxis_srun_options(tmp_path):
    text = render(tmp_path, "pyxis", "nvcr.io/nvidia/pytorch:24.03-py3")
    results = tmp_path / "results"
    assert "--container-image=nvcr.io/nvidia/pytorch:24.03-py3" in text
    mounts = f"--container-mounts=/scratch/data:/data:ro,{results}:{results},"
    assert mounts + f"{results / 'pyxis' / 'pkg'}:{results / 'pyxis' / 'pkg'}" in text
    # the interpreter is the container's: nothing wraps it on the srun line
    (launch,) = [ln for ln in text.splitlines() if "ddlbench.workloads.node.rank_start" in ln]
    assert launch.strip().startswith("python3 -m ddlbench.workloads.node.rank_start pytorch"), (
        launch
    )


def test_charliecloud_ch_run(tmp_path):
    text = render(tmp_path, "charliecloud", "/images/debian-python3", device="cpu")
    results = tmp_path / "results"
    want = (
        f"ch-run -b /scratch/data:/data:ro -b {results} -b {results / 'charliecloud' / 'pkg'} "
        "/images/debian-python3 -- python3 -m ddlbench.workloads.node.rank_start pytorch"
    )
    assert want in text
