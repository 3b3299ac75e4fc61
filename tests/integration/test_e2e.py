"""End to end, as users run it: `ddlbench submit` -> real frameworks -> `wait` -> `collect`.

Every framework trains LeNet on the digits data with 2 real ranks through the local executor;
PyTorch, TensorFlow, Horovod (Gloo) and MXNet also run through the project's real Slurm
cluster with two emulated nodes and one rank each. Then the quickstart runs through `report`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ddlbench.campaign.paths import RunPaths
from tests.support.cli import ddlbench, diagnose
from tests.support.e2e import SPEC, run_campaign
from tests.support.envs import require_envs
from tests.support.repo import RANK_LOG_SCHEMA, ROOT

SCHEMA = json.loads(RANK_LOG_SCHEMA.read_text())

ALL = """\
  - {name: pytorch, backend: gloo}
  - {name: tensorflow, communication: ring}
  - {name: keras, communication: ring}
  - {name: horovod, wraps: pytorch, controller: gloo}
  - {name: horovod, wraps: tensorflow, controller: gloo}
  - {name: mxnet, kvstore: dist_sync, servers: 1}"""

ON_SLURM = """\
  - {name: pytorch, backend: gloo}
  - {name: tensorflow, communication: ring}
  - {name: horovod, wraps: pytorch, controller: gloo}
  - {name: mxnet, kvstore: dist_sync, servers: 1}"""


#: the framework campaigns measure 12 steps and at least 1 s: the ranks of every framework
#: agree, through its own collective, on how many steps that takes (docs/spec.md)
WINDOW = "measure_seconds: 1"


def check_run(run_dir: Path, world: int) -> None:
    import jsonschema

    logs = list(RunPaths(run_dir).rank_logs())  # the newest attempt's
    assert [p.name for p in logs] == [f"rank-{k}.jsonl" for k in range(world)], run_dir
    assert logs[0].parent == RunPaths(run_dir).attempt(1)  # one start, one attempt folder
    checksums, losses, measured = set(), [], set()
    for path in logs:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            jsonschema.validate(record, SCHEMA)
        assert records[0]["type"] == "meta" and records[-1]["type"] == "summary"
        assert records[0]["world_size"] == world
        checksums.add(records[-1]["param_sha256"])
        losses.append([r["loss"] for r in records if r["type"] == "step"])
        summary = records[-1]
        assert summary["steps_measured"] >= 12 and summary["throughput"] > 0
        assert summary["measure_seconds_target"] == 1.0
        assert summary["measure_time_s"] >= 1.0 or summary["measure_capped"], summary
        measured.add(summary["steps_measured"])
    assert len(measured) == 1, f"{run_dir.name}: ranks measured {measured} steps"
    # data parallelism is real: every rank ends with bit-identical parameters
    assert len(checksums) == 1, f"{run_dir.name}: ranks disagree on parameters"
    # and training works: the loss of rank 0 goes down. The mean of the later half of the steps
    # against the first three: with a 1 s window a fast framework takes 100+ steps of 16 images,
    # and the last three alone are noise (one MXNet run went 2.29 -> 0.05 -> 4.11)
    first, later = losses[0][:3], losses[0][len(losses[0]) // 2 :]
    assert sum(later) / len(later) < sum(first) / len(first), (
        f"{run_dir.name}: loss did not decrease {losses[0]}"
    )
    # provenance: the job's facts, and the packages of the ranks' own interpreter
    job = (run_dir / "provenance" / "job.txt").read_text()
    assert "job_id=" in job and "ddlbench_version=" in job
    packages = (run_dir / "provenance" / "packages.txt").read_text().splitlines()
    assert packages[0].startswith("# python ")
    framework = run_dir.name.split("-")[0]
    wanted = {"pytorch": "torch==", "tensorflow": "tensorflow", "keras": "keras=="}
    wanted.update(mxnet="mxnet==", horovod="horovod==")
    assert any(line.lower().startswith(wanted[framework]) for line in packages), packages


def check_collected(root: Path, results: Path, runs: int) -> None:
    import pandas as pd

    proc = ddlbench("collect", root.name, results=results)
    assert proc.returncode == 0, proc.stderr
    table = pd.read_parquet(root / "data" / "runs.parquet")
    assert len(table) == runs
    assert table["complete"].all(), table.to_string()


@pytest.mark.frameworks
@pytest.mark.slow
def test_every_framework_on_the_local_executor(tmp_path):
    require_envs("pytorch", "tensorflow", "keras", "horovod", "mxnet")
    spec = SPEC.format(frameworks=ALL, point="1x2").replace("measure_seconds: 0", WINDOW)
    root = run_campaign(spec, "local", "e2e-local", tmp_path)
    runs = sorted((root / "runs").iterdir())
    assert [r.name.split("-lenet-")[0] for r in runs] == [
        "horovod-tf",
        "horovod-torch",
        "keras",
        "mxnet",
        "pytorch",
        "tensorflow",
    ]
    for run_dir in runs:
        check_run(run_dir, world=2)
    check_collected(root, tmp_path / "results", 6)


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_frameworks_on_real_slurm_two_nodes(tmp_path, slurm_cluster):
    require_envs("pytorch", "tensorflow", "horovod", "mxnet")
    spec = SPEC.format(frameworks=ON_SLURM, point="2x1").replace("measure_seconds: 0", WINDOW)
    root = run_campaign(spec, "localslurm", "e2e-slurm", tmp_path)
    for run_dir in sorted((root / "runs").iterdir()):
        check_run(run_dir, world=2)
        # one rank per emulated node: the ranks saw node ids 0 and 1
        metas = [json.loads(p.read_text().splitlines()[0]) for p in RunPaths(run_dir).rank_logs()]
        assert sorted(m["node_rank"] for m in metas) == [0, 1]
        assert all(m["slurm_job_id"] for m in metas)
    check_collected(root, tmp_path / "results", 4)


@pytest.mark.frameworks
@pytest.mark.slow
def test_quickstart_end_to_end_report(tmp_path):
    """The README's main job: quickstart on the local executor, then the report."""
    require_envs("pytorch")
    results = tmp_path / "results"
    sub = ddlbench(
        "submit",
        str(ROOT / "configs" / "quickstart.yaml"),
        "--campaign",
        "qs",
        "--cluster",
        "local",
        results=results,
    )
    assert sub.returncode == 0, sub.stderr
    assert ddlbench("wait", "qs", results=results).returncode == 0
    rep = ddlbench("report", results=results)  # no campaign named: the most recent one
    assert rep.returncode == 0, rep.stderr
    report_dir = results / "qs" / "report"
    assert str(report_dir / "report.html") in rep.stdout + rep.stderr
    md = (report_dir / "report.md").read_text()
    for section in (
        "## Summary",
        "## Throughput and scaling",
        "## Statistics",
        "## Stragglers",
        "## Provenance",
    ):
        assert section in md, section
    # job ids named after the executor that ran them; no interval bound below zero
    assert "local job ids" in md and "Slurm job ids" not in md
    assert not re.search(r"\| -\d", md)
    html = (report_dir / "report.html").read_text()
    assert html.count("<img") + html.count("<svg") >= 3
    assert "http://" not in html and "https://" not in html  # self-contained
    for plot in ("throughput", "efficiency", "rank_step_times"):
        assert (report_dir / "plots" / f"{plot}.png").stat().st_size > 1000
    listed = json.loads(ddlbench("list", "--json", results=results).stdout)["campaigns"]
    assert [(c["name"], c["counts"], c["collected"]) for c in listed] == [
        ("qs", {"COMPLETED": 6}, True)
    ]
    assert listed[0]["reports"] == [
        str((report_dir / f"report.{f}").absolute()) for f in ("html", "md")
    ]
    # re-running submit never submits twice
    again = ddlbench(
        "submit",
        str(ROOT / "configs" / "quickstart.yaml"),
        "--campaign",
        "qs",
        "--cluster",
        "local",
        results=results,
    )
    assert again.returncode == 0 and "0 submitted" in again.stderr + again.stdout


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_quickstart_on_local_slurm(tmp_path, slurm_cluster):
    """`scripts/quickstart.sh --cluster localslurm`: the same main job through real Slurm."""
    require_envs("pytorch")
    results = tmp_path / "results"
    sub = ddlbench(
        "submit",
        str(ROOT / "configs" / "quickstart.yaml"),
        "--cluster",
        "localslurm",
        "--campaign",
        "qs-slurm",
        results=results,
    )
    assert sub.returncode == 0, sub.stderr
    waited = ddlbench("wait", "qs-slurm", "--timeout", "600", results=results)
    assert waited.returncode == 0, diagnose(results / "qs-slurm", waited.stdout)
    rep = ddlbench("report", "qs-slurm", results=results)
    assert rep.returncode == 0, rep.stderr
    md = (results / "qs-slurm" / "report" / "report.md").read_text()
    assert "## Throughput and scaling" in md
    # provenance names real Slurm job ids, not the local executor's
    job_ids = {
        json.loads(p.read_text().splitlines()[0])["slurm_job_id"]
        for p in (RunPaths(d).rank_log(0) for d in (results / "qs-slurm" / "runs").iterdir())
    }
    assert len(job_ids) == 6 and all(j and j.isdigit() for j in job_ids)
    assert "Slurm job ids" in md
    # a dry run on the same profile: report says what to run, exit 3, writes nothing
    dry = ddlbench(
        "submit",
        str(ROOT / "configs" / "quickstart.yaml"),
        "--dry-run",
        "--cluster",
        "localslurm",
        "--campaign",
        "qs-dry",
        results=results,
    )
    assert dry.returncode == 0, dry.stderr
    rep = ddlbench("report", "qs-dry", results=results)
    assert rep.returncode == 3 and "a dry run" in rep.stderr, rep.stderr
    assert "ddlbench submit --resume qs-dry" in rep.stderr
    assert not (results / "qs-dry" / "report" / "report.md").exists()
