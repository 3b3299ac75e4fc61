"""benchmarks/gpu_vs_bare.py: refused clearly without a GPU; its CPU smoke mode runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.integration.test_e2e import require_envs

pytestmark = pytest.mark.frameworks
SCRIPT = str(ROOT / "benchmarks" / "gpu_vs_bare.py")


def run(*args: str) -> subprocess.CompletedProcess:
    # the script re-runs itself with the torch environment's python when torch is missing
    return subprocess.run(
        [sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=900
    )


def test_without_a_gpu_it_says_so_and_exits_2():
    require_envs("pytorch")
    proc = run("--steps", "1")
    assert proc.returncode == 2
    assert "no CUDA GPU is visible" in proc.stderr and "--device cpu" in proc.stderr


def test_cpu_smoke_mode_runs_every_combination(tmp_path):
    require_envs("pytorch")
    out = tmp_path / "figures.json"
    proc = run(
        "--device", "cpu", "--model", "lenet", "--batch", "8", "--warmup", "1", "--steps", "3",
        "--rounds", "1", "--precisions", "fp32,amp,bf16", "--compile", "off",
        "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["combo"] for r in rows] == [
        "fp32 default", "fp32 channels_last", "amp default", "amp channels_last",
        "bf16 default", "bf16 channels_last",
    ]  # fmt: skip
    assert all(r["ddlbench"] > 0 and r["bare"] > 0 and r["ratio"] > 0 for r in rows)
    amp = next(r for r in rows if r["combo"] == "amp default")
    assert amp["applied"] == "fp32" and amp["fallbacks"]  # the CPU fallback is labelled
    assert "CPU smoke mode" in proc.stdout
