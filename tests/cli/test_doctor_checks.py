"""doctor's checks beside the framework probes: frameworks the profile does not set up, GPUs
(parsed from recorded nvidia-smi output; skipped with a reason on this GPU-less machine), the
results folder, and environments stale against their pins (the real make-envs.sh --hash)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ddlbench.doctor_checks import (
    gpu_checks,
    nccl_check,
    nvml_check,
    parse_cuda_version,
    results_check,
    stale_env_checks,
)
from tests.support.repo import ROOT

# recorded on a node with 4 A100s (driver 535.129.03)
QUERY = (
    "0, NVIDIA A100-SXM4-80GB, 535.129.03, 81920 MiB\n"
    "1, NVIDIA A100-SXM4-80GB, 535.129.03, 81920 MiB\n"
    "2, NVIDIA A100-SXM4-80GB, 535.129.03, 81920 MiB\n"
    "3, NVIDIA A100-SXM4-80GB, 535.129.03, 81920 MiB\n"
)
BANNER = """\
Tue Nov 21 10:02:11 2023
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
"""


def recorded(args):
    return QUERY if any(a.startswith("--query-gpu") for a in args) else BANNER


def test_gpu_checks_from_recorded_nvidia_smi():
    checks = {c.name: c for c in gpu_checks(4, run=recorded)}
    assert checks["gpus"].ok and checks["gpus"].detail.startswith("4 x NVIDIA A100-SXM4-80GB")
    assert checks["driver"].detail == "NVIDIA driver 535.129.03"
    assert checks["cuda"].detail == "driver supports CUDA 12.2"
    short = {c.name: c for c in gpu_checks(8, run=recorded)}["gpus"]
    assert not short.ok and short.state == "fail" and "fewer GPUs than the profile" in short.detail
    assert parse_cuda_version("no banner") is None


def test_gpu_checks_are_skipped_with_a_reason_without_gpus():
    checks = gpu_checks(4, run=lambda args: None)
    assert [c.state for c in checks] == ["skip"] * 3
    assert all("no nvidia-smi here" in c.detail for c in checks)
    assert "no usable PyTorch" in nccl_check({}).detail
    assert nccl_check({"torch": "2.3.0", "nccl": "2.20.5"}).detail == "NCCL 2.20.5 (PyTorch 2.3.0)"
    nvml = nvml_check()  # the real bindings, on a machine without a GPU driver
    assert nvml.ok and nvml.state == "skip", nvml


def test_results_folder_check(tmp_path):
    assert results_check(tmp_path).ok
    assert "created on first submit" in results_check(tmp_path / "results").detail
    blocker = tmp_path / "file"
    blocker.write_text("")
    bad = results_check(blocker / "results")
    assert not bad.ok and "not writable" in bad.detail


def test_stale_environment_against_its_pins(tmp_path):
    script = ROOT / "scripts" / "make-envs.sh"
    want = subprocess.run(
        ["bash", str(script), "--hash", "torch"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    env = tmp_path / "envs" / "torch"
    env.mkdir(parents=True)
    (env / ".ddlbench-stamp").write_text(want + "\n")
    (fresh,) = stale_env_checks([str(env)], script)
    assert fresh.ok and want in fresh.detail
    (env / ".ddlbench-stamp").write_text("0123456789abcdef\n")
    (stale,) = stale_env_checks([str(env)], script)
    assert not stale.ok and "run ddlbench envs build torch" in stale.detail
    (skipped,) = stale_env_checks([str(env)], None)
    assert skipped.state == "skip"
    assert stale_env_checks([str(tmp_path / "no-stamp")], script) == []


def test_frameworks_the_profile_does_not_set_up_are_not_configured(tmp_path):
    (tmp_path / "only.yaml").write_text(
        "name: only\nscheduler: local\ndevice: cpu\n"
        f"environments:\n  mxnet: {{venv: {tmp_path / 'no-such-venv'}}}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "doctor", "--cluster", str(tmp_path / "only.yaml"),
         "--json", "--results", str(tmp_path / "results")],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # mxnet's venv is missing
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["mxnet"]["state"] == "fail"
    for name in ("pytorch", "tensorflow", "keras", "horovod-torch"):
        assert checks[name]["state"] == "not configured" and checks[name]["ok"], checks[name]
        assert "ModuleNotFoundError" not in checks[name]["detail"]
    assert checks["results"]["ok"] and "gpus" not in checks  # a CPU profile
    assert Path(tmp_path / "results").exists() is False  # doctor creates nothing
