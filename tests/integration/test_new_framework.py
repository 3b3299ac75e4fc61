"""Adding a framework takes three files and nothing else (docs/launching.md#adding-a-framework).

A copy of the package gets a launcher module, a template and a workload for a framework
ddlbench does not ship (``numpyref``: numpy softmax regression, from ``newframework/``), and
nothing else. That copy then validates, plans, renders, runs 1 and 2 ranks on the local
executor, collects and reports it like any shipped framework.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.support.repo import ROOT

HERE = Path(__file__).resolve().parent / "newframework"
NEW_FILES = {
    "launcher.py": "ddlbench/frameworks/numpyref.py",
    "template.sh.j2": "slurm_templates/numpyref.sh.j2",
    "workload.py": "ddlbench/workloads/numpyref.py",
}
SPEC = """\
name: numpyref-scaling
model: lenet
data: synthetic
frameworks: [numpyref]
batch_size: 64
steps: {warmup: 2, measure: 20, measure_seconds: 0}
optimizer: {lr: 0.1}
scale: {points: [1x1, 1x2]}
repeats: 1
slurm: {time: "00:05:00"}
"""
PROFILE = """\
name: here
scheduler: local
device: cpu
gpus_per_node: 2
environments:
  numpyref: {{venv: "{venv}"}}
"""


def copy_with_new_framework(dest: Path) -> Path:
    """A source checkout (the package, its templates and configs, pyproject.toml) plus the
    three new files; returns its root."""
    skip = shutil.ignore_patterns("__pycache__", "_data", "*.pyc")
    for part in ("ddlbench", "slurm_templates", "configs"):
        shutil.copytree(ROOT / part, dest / part, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", dest)
    for source, target in NEW_FILES.items():
        assert not (ROOT / target).exists()
        shutil.copy(HERE / source, dest / target)
    return dest


def test_a_new_framework_needs_three_files_and_nothing_else(tmp_path):
    root = copy_with_new_framework(tmp_path / "copy")
    work = tmp_path / "work"
    work.mkdir()
    (work / "spec.yaml").write_text(SPEC)
    (work / "here.yaml").write_text(PROFILE.format(venv=sys.prefix))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDLBENCH_")}
    env.update(PYTHONPATH=str(root), DDLBENCH_RESULTS=str(work / "results"))

    def cli(*args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, "-m", "ddlbench", *args], cwd=work, env=env, capture_output=True,
            text=True, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
        return proc

    where = subprocess.run(
        [sys.executable, "-c", "import ddlbench; print(ddlbench.__file__)"], cwd=work, env=env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.strip() == str(root / "ddlbench" / "__init__.py")
    cli("validate", "spec.yaml", "--cluster", "here.yaml")
    plan = json.loads(cli("plan", "spec.yaml", "--cluster", "here.yaml", "--json").stdout)
    assert {r["framework"] for r in plan["runs"]} == {"numpyref"}
    cli("submit", "spec.yaml", "--cluster", "here.yaml")
    cli("wait", "numpyref-scaling", "--timeout", "500")
    status = json.loads(cli("status", "numpyref-scaling", "--json").stdout)
    assert [r["state"] for r in status["runs"]] == ["COMPLETED", "COMPLETED"], status
    cli("report", "numpyref-scaling")
    campaign = work / "results" / "numpyref-scaling"
    runs = pd.read_parquet(campaign / "data" / "runs.parquet")
    assert sorted(runs["world_size"]) == [1, 2]
    assert set(runs["framework"]) == {"numpyref"} and (runs["throughput"] > 0).all()
    assert set(runs["backend"]) == {"none"}
    report = (campaign / "report" / "report.md").read_text()
    assert "| numpyref | 2 | 1x2 | 1 |" in report
