"""The interference pre-flight through the local executor: a busy node fails the run under
``preflight: fail`` and is marked (never clean) under ``preflight: warn``; no GPU: said once."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.support.cli import ddlbench
from tests.support.envs import require_envs
from tests.support.repo import ROOT

pytestmark = pytest.mark.frameworks

SPEC = """\
name: pf
model: lenet
data: synthetic
frameworks: [{name: pytorch, backend: gloo}]
batch_size: 8
steps: {warmup: 1, measure: 3, measure_seconds: 0}
scale: {points: [1x1]}
env: {DDLBENCH_PREFLIGHT_LOAD_FRACTION: "-1"}   # below zero: busy even on an idle machine
"""


def profile(tmp_path, policy: str):
    text = (ROOT / "configs" / "clusters" / "local.yaml").read_text()
    path = tmp_path / f"local-{policy}.yaml"
    path.write_text(text.replace("name: local", f"name: local{policy}") + f"preflight: {policy}\n")
    return path


def submit(tmp_path, policy: str):
    spec = tmp_path / "pf.yaml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    camp = f"pf{policy}"
    sub = ddlbench(
        "submit",
        str(spec),
        "--cluster",
        str(profile(tmp_path, policy)),
        "--campaign",
        camp,
        results=results,
    )
    assert sub.returncode == 0, sub.stderr
    waited = ddlbench("wait", camp, "--timeout", "600", results=results)
    return results, camp, waited


def test_busy_node_fails_under_fail(tmp_path):
    require_envs("pytorch")
    results, camp, waited = submit(tmp_path, "fail")
    assert waited.returncode != 0
    (run_dir,) = (results / camp / "runs").iterdir()
    assert (run_dir / "exit_code").read_text().strip() == "3"
    (report,) = (run_dir / "provenance" / "preflight").glob("*.json")
    rep = json.loads(report.read_text())
    assert rep["busy"] is True and rep["cpu"]["cpu_busy"] is True
    assert rep["gpu"]["available"] is False  # no GPU here: checked and said so
    err = "".join(p.read_text() for p in run_dir.glob("slurm-*.err"))
    assert "node busy" in err and "refusing to measure" in err
    assert not list((run_dir / "logs").glob("rank-*.jsonl"))  # no rank started


def test_busy_node_is_marked_under_warn(tmp_path):
    require_envs("pytorch")
    results, camp, waited = submit(tmp_path, "warn")
    assert waited.returncode == 0, waited.stdout
    proc = ddlbench("collect", camp, results=results)
    assert proc.returncode == 0, proc.stderr
    runs = pd.read_parquet(results / camp / "data" / "runs.parquet")
    (row,) = runs.to_dict("records")
    assert row["status"] == "ok" and row["preflight_busy"] is True
    assert row["interference"].startswith("started on a busy node")
    assert "started on a busy node" in row["problems"]  # never passes as clean
    assert row["precision"] == "fp32" and row["compile"] == "eager"
    assert row["flops_per_sample"] == 3 * 2 * 416_520
    assert row["tflops_per_device"] > 0 and pd.isna(row["mfu"])  # no CPU peak in the table
    assert pd.isna(row["telemetry"])  # CPU profile: no sampler
    rep = ddlbench("report", camp, "--format", "md", results=results)
    assert rep.returncode == 0, rep.stderr
    (md,) = (results / camp / "report").glob("*.md")
    text = md.read_text()
    assert "## Precision, MFU and energy" in text and "started on a busy node" in text
    assert "Pre-flight: 1 of 1 measured run(s) started on a busy node" in text  # the summary


@pytest.mark.slurm
def test_preflight_on_real_slurm_one_report_per_node(tmp_path, slurm_cluster):
    """On the two-node Slurm cluster: an srun step per node, one report per node name."""
    require_envs("pytorch")
    text = (ROOT / "configs" / "clusters" / "localslurm.yaml").read_text()
    prof = tmp_path / "localslurm-pf.yaml"
    prof.write_text(text.replace("name: localslurm", "name: localslurmpf") + "preflight: warn\n")
    spec = tmp_path / "pf.yaml"
    spec.write_text(SPEC.replace("points: [1x1]", "points: [2x1]"))
    results = tmp_path / "results"
    sub = ddlbench("submit", str(spec), "--cluster", str(prof), "--campaign", "pfs",
                   results=results)  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    waited = ddlbench("wait", "pfs", "--timeout", "600", results=results)
    assert waited.returncode == 0, waited.stdout
    (run_dir,) = (results / "pfs" / "runs").iterdir()
    reports = sorted(p.name for p in (run_dir / "provenance" / "preflight").glob("*.json"))
    assert reports == ["n1.json", "n2.json"]
    rep = json.loads((run_dir / "provenance" / "preflight" / "n1.json").read_text())
    assert rep["busy"] is True  # load fraction 0: any load is busy
    assert rep["other_jobs"] is not None  # squeue answered on the node
