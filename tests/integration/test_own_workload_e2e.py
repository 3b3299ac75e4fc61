"""A user's own training program end to end (docs/your-own-workload.md): the example in
examples/own-pytorch/ (an ordinary PyTorch DDP script) measured both ways through the local
executor at 1 and 2 ranks and through the real Slurm cluster at 1 and 2 nodes, and
examples/own-horovod/ at 1 and 2 ranks; the report's
throughput equals what the script computes from its own timings. A campaign of misbehaving
programs fails run by run, each with its reason and last lines, and loses nothing else."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ddlbench.collect.collector import ensure_collected
from tests.support.cli import ddlbench
from tests.support.e2e import run_campaign
from tests.support.envs import require_envs
from tests.support.repo import ROOT

EXAMPLE = ROOT / "examples" / "own-pytorch"
#: the report's throughput against the script's own: the ranks' windows are read from the
#: time each step line arrives (output patterns) or from the marks, the script's from its own
#: clock on rank 0; on a shared 2-core machine a few ms of scheduling noise in a 0.1 s window
TOLERANCE = 0.10


def _spec(tmp: Path, name: str, points: str, example: Path = EXAMPLE) -> str:
    """An example spec, its workdir pointing at the example, at the scale ``points``."""
    text = (example / name).read_text()
    text = text.replace("workdir: .", f"workdir: {example}")
    return re.sub(r"scale: .*", f"scale: {{points: [{points}]}}", text)


def _own_throughput(run_dir: Path) -> float:
    out = "".join(p.read_text() for p in sorted(run_dir.glob("slurm-*.out")))
    found = re.findall(r"own throughput: ([0-9.]+) samples/s", out)
    assert found, out[-2000:]
    return float(found[-1])


def _check_against_script(root: Path, ranks: set) -> None:
    data = ensure_collected(root)
    runs = data.runs.set_index("run_id")
    assert set(runs["world_size"]) == ranks
    for run_id, row in runs.iterrows():
        assert row["status"] == "ok", row["error_message"]
        assert row["workload"] == "own_program" and row["model"] == "mlp"
        own = _own_throughput(root / "runs" / run_id)
        assert abs(row["throughput"] / own - 1) < TOLERANCE, (run_id, row["throughput"], own)
        assert row["final_loss"] > 0
    assert (runs["samples_measured"] == 50 * 32 * runs["world_size"]).all()


@pytest.mark.frameworks
@pytest.mark.slow
@pytest.mark.parametrize("way", ["output", "marks"])
def test_the_example_both_ways_on_the_local_executor(tmp_path, way):
    require_envs("pytorch")
    spec = _spec(tmp_path, f"spec-{way}.yaml", '"1x1", "1x2"')
    root = run_campaign(spec, "local", f"own-{way}", tmp_path)
    _check_against_script(root, {1, 2})
    if way == "marks":  # everything downstream: report, compare, predict --from
        results = tmp_path / "results"
        rep = ddlbench("report", root.name, results=results)
        assert rep.returncode == 0, rep.stderr
        assert "mlp" in (root / "report" / "report.md").read_text()
        pred = ddlbench("predict", "--from", root.name, "--nodes", "4", results=results)
        assert pred.returncode == 2 and "ran its own program 'mlp'" in pred.stderr
        pred = ddlbench(
            "predict", "--from", root.name, "--model", "lenet", "--nodes", "4", "--no-plot",
            "--intra-busbw", "10", "--inter-busbw", "1",
            results=results,
        )  # fmt: skip
        assert pred.returncode == 0, pred.stderr
        cmp = ddlbench("compare", root.name, root.name, results=results)
        assert cmp.returncode == 0, cmp.stderr


@pytest.mark.frameworks
@pytest.mark.slow
def test_the_horovod_example_on_the_local_executor(tmp_path):
    require_envs("horovod")
    example = ROOT / "examples" / "own-horovod"
    root = run_campaign(
        _spec(tmp_path, "spec.yaml", '"1x1", "1x2"', example), "local", "hvd", tmp_path
    )
    _check_against_script(root, {1, 2})


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_the_example_on_real_slurm_one_and_two_nodes(tmp_path, slurm_cluster):
    require_envs("pytorch")
    spec = _spec(tmp_path, "spec-output.yaml", '"1x1", "2x1"')
    root = run_campaign(spec, "localslurm", "own-slurm", tmp_path)
    _check_against_script(root, {1, 2})
    placed = root.glob("runs/*-n2x1-*/logs/attempt-1/placement/rank-*.json")
    assert len({json.loads(p.read_text())["host"] for p in placed}) == 2


MISBEHAVE = """\
#!/usr/bin/env python3
import os, sys, time
mode = os.path.basename(sys.argv[0])
rank = int(os.environ["RANK"])
for i in range(6):
    time.sleep(0.01)
    if mode == "garbled" and i == 2:
        print(f"step {i} time . s", flush=True)  # no number: skipped and counted
    elif mode != "silent":
        print(f"step {i} time 0.01 s", flush=True)
    if mode == "crash" and rank == 1 and i == 3:
        print("rank 1 gives up", flush=True)
        sys.exit(3)
"""


@pytest.mark.frameworks
@pytest.mark.slow
def test_misbehaving_programs_fail_each_with_its_reason(tmp_path):
    """A crash on one rank, output that never matches and a command that does not exist: each
    run fails with a record saying which and the program's last lines (no wrapper traceback);
    the good run is kept, and so is one with a step line without a number (counted)."""
    require_envs("pytorch")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("ok", "crash", "silent", "garbled"):
        (src / name).write_text(MISBEHAVE)
        (src / name).chmod(0o755)
    spec = f"""\
name: own-bad
workload:
  command: ["./{{variant}}"]
  framework: pytorch
  workdir: {src}
  measure: {{step: 'time ([0-9.]+) s', unit: s}}
variants: [{{label: ok}}, {{label: crash}}, {{label: silent}}, {{label: missing}},
  {{label: garbled}}]
steps: {{warmup: 1, measure: 5}}
scale: {{points: ["1x2"]}}
slurm: {{time: "00:05:00"}}
"""
    (tmp_path / "own-bad.yaml").write_text(spec)
    results = tmp_path / "results"
    sub = ddlbench("submit", str(tmp_path / "own-bad.yaml"), "--cluster", "local", results=results)
    assert sub.returncode == 0, sub.stderr
    ddlbench("wait", "--timeout", "600", results=results)  # the latest campaign: own-bad
    data = ensure_collected(results / "own-bad")
    runs = data.runs
    (said,) = [w for w in data.info["warnings"] if "step report(s) of own programs" in w]
    assert said.startswith("2 step report(s)") and "-garbled-" in said
    runs = runs.set_index(runs["run_id"].str.extract(r"-(ok|crash|silent|missing|garbled)-")[0])
    assert runs.loc["ok", "status"] == "ok" and runs.loc["ok", "throughput"] > 0
    msg = runs["error_message"]
    assert "'./crash' exited with code 3 on rank 1" in msg["crash"]
    assert "| rank 1 gives up" in msg["crash"]
    assert "never matched the program's output (0 lines)" in msg["silent"]
    assert "it printed nothing" in msg["silent"]
    assert "cannot start the program './missing'" in msg["missing"]
    assert all(runs.loc[k, "status"] != "ok" for k in ("crash", "silent", "missing"))
    assert not any(m.startswith("ProgramFailed") for m in msg.dropna())
    (err,) = (results / "own-bad" / "runs").glob("*-crash-*/slurm-*.err")
    assert "Traceback" not in err.read_text() and "exited with code 3" in err.read_text()
    assert runs.loc["garbled", "status"] == "ok" and runs.loc["garbled", "throughput"] > 0
    logs = sorted((results / "own-bad" / "runs").glob("*-garbled-*/logs/attempt-*/rank-*.jsonl"))
    summaries = [json.loads(f.read_text().splitlines()[-1]) for f in logs]
    assert [(s["steps_measured"], s["rejected_reports"]) for s in summaries] == [(4, 1)] * 2
