"""The spec's ``inject`` key and ``backup_workers``: planned into run.json, bad input refused
with ``file:line`` and exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddlbench.plan.planner import plan_runs
from ddlbench.render.campaign import run_config
from ddlbench.spec.load import load_profile, load_spec_text

ROOT = Path(__file__).resolve().parents[2]

SPEC = """\
name: bw
cluster: local
model: lenet
data: digits
frameworks:
  - {name: pytorch, label: sync, backend: gloo}
  - {name: pytorch, label: backup1, backend: gloo, backup_workers: 1}
batch_size: 32
scale:
  points: [1x3]
inject:
  straggler: {probability: 0.2, seed: 1}
variants:
  - label: fixed
    inject: {straggler: {ranks: [1], slowdown: 1.5}}
  - label: random
  - label: clean
    inject: {}
"""


def _plan(text: str):
    spec = load_spec_text(text, "bw.yaml")
    return plan_runs(spec.value, load_profile("local").value, spec.source)


def test_inject_and_backups_reach_run_json(tmp_path):
    plan = _plan(SPEC)
    configs = {r.run_id: run_config(r, plan, "bw", tmp_path / r.run_id) for r in plan.runs}
    fixed = configs["backup1-lenet-n1x3-b32-fixed-r0"]
    assert fixed["inject"] == {"straggler": {"ranks": [1], "slowdown": 1.5} | _DEFAULTS}
    assert fixed["framework_options"]["backup_workers"] == 1
    random = configs["sync-lenet-n1x3-b32-random-r0"]
    assert random["inject"]["straggler"]["probability"] == 0.2
    assert "backup_workers" not in random["framework_options"]
    assert "inject" not in configs["sync-lenet-n1x3-b32-clean-r0"]


_DEFAULTS = {
    "distribution": "pareto",
    "shape": 2.0,
    "min_slowdown": 1.5,
    "max_slowdown": 10.0,
    "seed": 0,
}


@pytest.mark.parametrize(
    "old,new,expected",
    [
        (
            "slowdown: 1.5",
            "slowdown: -1.5",
            "bw.yaml:15:38: variants[0].inject.straggler.slowdown: a slowdown is a factor on "
            "the rank's compute time, at least 1 (1.5 = 50 % slower), not -1.5",
        ),
        (
            "ranks: [1]",
            "ranks: [3]",
            "bw.yaml:15:26: variants[0].inject.straggler.ranks: rank 3 is outside the world of "
            "3 rank(s) (ranks are 0 to 2)",
        ),
        (
            "backup_workers: 1",
            "backup_workers: 3",
            "bw.yaml:7:52: frameworks[1].backup_workers: backup_workers 3 leaves no gradient "
            "to average with 3 rank(s): it must be below the number of ranks (at most 2 here)",
        ),
        (
            "{name: pytorch, label: backup1, backend: gloo,",
            "{name: mxnet, label: backup1,",
            "bw.yaml:7:35: frameworks[1].backup_workers: backup1: backup_workers: MXNet's "
            "dist_sync kvstore servers wait for every worker's push before they update; use "
            "framework pytorch",
        ),
        (
            "{probability: 0.2, seed: 1}",
            "{probability: 0.2, slowdown: 2}",
            "bw.yaml:12:33: inject.straggler.slowdown: 'slowdown' is the fixed mode's factor; "
            "random mode draws it between 'min_slowdown' and 'max_slowdown'",
        ),
        (
            "{ranks: [1], slowdown: 1.5}",
            "{kind: gpu, ranks: [1], slowdown: 1.5}",
            "bw.yaml:15:26: variants[0].inject.straggler.kind: ",
        ),
        (
            "{ranks: [1], slowdown: 1.5}",
            "{kind: compute, ranks: [1], slowdown: 1.5}",
            "bw.yaml:15:53: variants[0].inject.straggler.slowdown: kind compute runs each layer "
            "slowdown times, so its slowdown is a whole number, at least 2, not 1.5 (did you "
            "mean 2?)",
        ),
        (
            "{ranks: [1], slowdown: 1.5}",
            "{kind: cpu-share, cpu_share_by: cgrop, ranks: [1], slowdown: 2}",
            "bw.yaml:15:43: variants[0].inject.straggler.cpu_share_by: 'cgrop' is not one of "
            "auto, cgroup, competitors (did you mean 'cgroup'?)",
        ),
        (
            "{ranks: [1], slowdown: 1.5}",
            "{kind: compute, cpu_share_by: cgroup, ranks: [1], slowdown: 2}",
            "bw.yaml:15:41: variants[0].inject.straggler.cpu_share_by: cpu_share_by says how "
            "kind cpu-share limits the rank's CPU; this straggler is kind compute (did you mean "
            "kind: cpu-share?)",
        ),
        (
            "{ranks: [1], slowdown: 1.5}",
            "{ranks: [1], slowdown: 1.5, persist_steps: 5}",
            "bw.yaml:15:53: variants[0].inject.straggler.persist_steps: persist_steps is random "
            "mode's (give 'probability'); fixed mode slows its ranks in every step",
        ),
    ],
)
def test_bad_input_is_file_line_exit_2(tmp_path, old, new, expected):
    assert old in SPEC
    path = tmp_path / "bw.yaml"
    path.write_text(SPEC.replace(old, new))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "plan", "bw.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(line.startswith(expected) for line in lines), proc.stderr
    if not expected.endswith(": "):
        assert expected in lines, proc.stderr
    assert "Traceback" not in proc.stderr


def test_straggler_kinds_reach_run_json(tmp_path):
    text = SPEC.replace("{ranks: [1], slowdown: 1.5}", "{kind: compute, ranks: [1], slowdown: 5}")
    plan = _plan(text.replace("{probability: 0.2, seed: 1}", "{kind: data, probability: 0.2}"))
    configs = {r.run_id: run_config(r, plan, "bw", tmp_path / r.run_id) for r in plan.runs}
    fixed = configs["backup1-lenet-n1x3-b32-fixed-r0"]["inject"]["straggler"]
    assert fixed["kind"] == "compute" and fixed["slowdown"] == 5
    assert configs["sync-lenet-n1x3-b32-random-r0"]["inject"]["straggler"]["kind"] == "data"
    # the default kind (sleep) leaves run.json as before: test_inject_and_backups_reach_run_json
    plan = _plan(
        SPEC.replace(
            "{ranks: [1], slowdown: 1.5}",
            "{kind: cpu-share, ranks: [1], slowdown: 2, cpu_share_by: competitors}",
        )
    )
    run = next(r for r in plan.runs if r.run_id == "sync-lenet-n1x3-b32-fixed-r0")
    straggler = run_config(run, plan, "bw", tmp_path)["inject"]["straggler"]
    assert straggler["cpu_share_by"] == "competitors"


def test_plan_json_unchanged_without_inject(tmp_path):
    """A spec without inject plans runs without the key (run.json keeps its old shape)."""
    text = SPEC.split("inject:")[0].replace(", backup_workers: 1", "")
    plan = _plan(text)
    for r in plan.runs:
        assert r.inject is None
        assert "inject" not in json.loads(json.dumps(run_config(r, plan, "bw", tmp_path)))


def test_injection_into_another_framework_is_refused(tmp_path):
    text = SPEC.replace("{name: pytorch, label: sync, backend: gloo}", "{name: tensorflow}")
    path = tmp_path / "bw.yaml"
    path.write_text(text)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "plan", "bw.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    why = "straggler injection is implemented in the pytorch workload only"
    assert proc.stderr.splitlines() == [  # in file order
        f"bw.yaml:12:3: inject.straggler: tensorflow: {why} (this framework would run without it)",
        f"bw.yaml:15:14: variants[0].inject.straggler: tensorflow: {why} "
        "(this framework would run without it)",
    ]  # the variant that injects nothing (inject: {}) is not refused
