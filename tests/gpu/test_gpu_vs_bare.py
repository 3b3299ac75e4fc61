"""benchmarks/gpu_vs_bare.py: refused clearly without a GPU; its CPU smoke mode runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.envs import require_envs
from tests.support.repo import ROOT

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


def test_results_file_resumes_and_budget_stops_early(tmp_path):
    """A GPU session is cut into calls of a few minutes: each measurement is appended as it
    ends, a second call runs only what is missing, and --budget-s stops starting new ones."""
    require_envs("pytorch")
    results = tmp_path / "measurements.jsonl"
    common = (
        "--device", "cpu", "--model", "lenet", "--batch", "8", "--warmup", "1", "--steps", "2",
        "--precisions", "fp32", "--compile", "off", "--results", str(results),
    )  # fmt: skip
    first = run(*common, "--rounds", "1", "--budget-s", "0.001")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "budget of 0.001 s spent: 3 measurements left" in first.stderr
    assert len(results.read_text().splitlines()) == 1  # the budget is checked between runs
    second = run(*common, "--rounds", "2", "--json", str(tmp_path / "f.json"))
    assert second.returncode == 0, second.stderr[-2000:]
    assert "1 measurements resumed" in second.stderr and "7 to run" in second.stderr
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert sorted((r["round"], r["combo"][1], r["side"]) for r in lines) == sorted(
        (r, layout, side)
        for r in (0, 1)
        for layout in ("default", "channels_last")
        for side in ("ddlbench", "bare")
    )
    rows = json.loads((tmp_path / "f.json").read_text())["rows"]
    assert [r["rounds"] for r in rows] == [2, 2]
    again = run(*common, "--rounds", "2", "--report-only")
    assert again.returncode == 0 and "to run" not in again.stderr
    assert "fp32 channels_last" in again.stdout
