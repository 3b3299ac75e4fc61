"""`ddlbench doctor` runs each framework's real set-up and imports the framework there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.envs import envs_root
from tests.support.repo import ROOT


def doctor(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddlbench", "doctor", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def test_doctor_reports_usable_and_broken_environments(tmp_path):
    envs = envs_root()
    if not (envs / "torch" / "bin" / "python").exists():
        if os.environ.get("CI"):
            pytest.fail("the torch environment is missing (scripts/test.sh builds it)")
        pytest.skip("the torch environment is not built (scripts/make-envs.sh torch)")
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "here.yaml").write_text(
        f"""
name: here
scheduler: local
device: cpu
environments:
  pytorch: {{venv: {envs / "torch"}}}
  mxnet: {{venv: {tmp_path / "no-such-venv"}}}
"""
    )
    (tmp_path / "spec.yaml").write_text(
        "name: d\ncluster: here\nmodel: lenet\nframeworks: [pytorch, mxnet]\n"
        "scale: {points: [1x1]}\n"
    )
    proc = doctor(str(tmp_path / "spec.yaml"), "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert {"pytorch", "mxnet"} <= set(checks) and checks["results"]["ok"]
    assert checks["pytorch"]["ok"] and checks["pytorch"]["versions"]["torch"].startswith("2.")
    assert not checks["mxnet"]["ok"]
    assert "no-such-venv/bin/activate: No such file or directory" in checks["mxnet"]["detail"]

    text = doctor(str(tmp_path / "spec.yaml"), cwd=tmp_path)
    assert "ok   pytorch" in text.stdout and "FAIL mxnet" in text.stdout
    assert "not usable: mxnet" in text.stdout


def test_doctor_checks_the_scheduler_of_slurm_profiles(tmp_path):
    """Without sbatch on PATH, a Slurm profile is reported unusable, with the reason."""
    bin_dir = tmp_path / "bin"  # bash alone: no Slurm client
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to("/bin/bash")
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "doctor", "--cluster", "iris", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=dict(os.environ, PATH=str(bin_dir)),
    )
    assert proc.returncode == 1
    checks = json.loads(proc.stdout)["checks"]
    assert checks[0] == {
        "name": "slurm",
        "ok": False,
        "versions": {},
        "seconds": 0.0,
        "detail": "sbatch is not on PATH (use a 'local' profile here)",
        "state": "fail",
        "docs": "cluster-profiles",
    }
    text = subprocess.run(
        [sys.executable, "-m", "ddlbench", "doctor", "--cluster", "iris"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=dict(os.environ, PATH=str(bin_dir)),
    ).stdout
    # each failure points at the page that says how to fix it: Slurm is not an environment
    assert "not usable: slurm (see 'ddlbench docs cluster-profiles'); " in text, text


def test_a_cpu_only_torch_on_a_gpu_profile_is_a_failure(tmp_path):
    """The torch environment is the CPU build: on a GPU profile every rank would refuse."""
    envs = envs_root()
    if not (envs / "torch" / "bin" / "python").exists():
        pytest.skip("the torch environment is not built (scripts/make-envs.sh torch)")
    profile = tmp_path / "gpuhere.yaml"
    profile.write_text(
        f"name: gpuhere\nscheduler: local\ndevice: gpu\n"
        f"environments:\n  pytorch: {{venv: {envs / 'torch'}}}\n"
    )
    spec = tmp_path / "s.yaml"
    spec.write_text("name: d\nmodel: lenet\nframeworks: [pytorch]\nscale: {points: [1x1]}\n")
    proc = doctor(str(spec), "--cluster", str(profile), "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    check = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["pytorch"]
    assert check["state"] == "fail" and check["docs"] == "install"
    assert check["versions"]["cuda"] == "none (CPU-only build)"
    assert "a CPU-only PyTorch on GPU profile 'gpuhere'; install a CUDA build" in check["detail"]
    # the same environment on a CPU profile is fine
    profile.write_text(profile.read_text().replace("device: gpu", "device: cpu"))
    proc = doctor(str(spec), "--cluster", str(profile), "--json", cwd=tmp_path)
    check = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["pytorch"]
    assert check["state"] == "ok", check
