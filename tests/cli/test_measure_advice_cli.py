"""Warnings before the node-hours are spent (validate, plan), -q on every command that prints
progress, a missing profile named by the spec or by DDLBENCH_CLUSTERS, and the shipped specs'
descriptions against what plan shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.support.cli import invoke
from tests.support.repo import ROOT

SPEC = """\
name: advice
model: lenet
data: digits
frameworks: [pytorch]
steps: {warmup: 1, measure: 5, measure_seconds: 0}
scale: {points: [1x1, 1x2]}
repeats: 2
"""


def test_validate_and_plan_warn_about_too_little_measurement(tmp_path):
    spec = tmp_path / "advice.yaml"
    spec.write_text(SPEC)
    for args in (["validate", spec], ["plan", spec, "--json"]):
        res = invoke([*args, "--cluster", "local"])
        assert res.exit_code == 0, res.output  # warnings never stop a spec
        lines = res.stderr.splitlines()
        assert len(lines) == 2, lines
        assert lines[0].startswith(f"{spec}:7: warning: repeats: 2 repeat(s) per configuration")
        assert "3.6 times as wide as three" in lines[0]  # what two repeats cost the interval
        assert "median" not in lines[0]  # the interval is of the geometric mean (docs/metrics.md)
        assert "use repeats: 3 or more" in lines[0]
        assert lines[1].startswith(f"{spec}:5: warning: steps.measure_seconds: no time asked")
        assert "set steps.measure_seconds: 5 or more" in lines[1]
    assert json.loads(res.stdout)["runs"]  # --json stays clean: the warnings are on stderr
    spec.write_text(SPEC.replace("measure_seconds: 0", "measure_seconds: 2"))
    res = invoke(["validate", spec, "--cluster", "local"])
    assert "2 s is below the 5 s minimum" in res.stderr
    quiet = invoke(["validate", ROOT / "configs" / "quickstart.yaml"])
    assert quiet.exit_code == 0 and quiet.stderr == ""  # 3 repeats, 10 s: nothing to say


OWN = """\
name: own
workload:
  command: [python, train.py, --steps, "{steps}"]
  framework: {name: pytorch, backend: gloo}
  workdir: src
  measure: marks
steps: {warmup: 2, measure: 20}
scale: {points: [1x1]}
repeats: 3
"""


def test_validate_warns_that_an_own_program_sets_its_own_window(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")
    spec = tmp_path / "own.yaml"
    spec.write_text(OWN)
    res = invoke(["validate", spec, "--cluster", "local"])
    assert res.exit_code == 0, res.output
    (line,) = res.stderr.splitlines()  # measure_seconds (10 s by default) does not reach it
    assert line.startswith(f"{spec}:3: warning: workload.command: the measured window is what")
    assert "20 measured steps" in line and "pass {measure_seconds}" in line
    spec.write_text(OWN.replace('"{steps}"', '"{steps}", --seconds, "{measure_seconds}"'))
    told = invoke(["validate", spec, "--cluster", "local"])
    assert told.exit_code == 0 and told.stderr == "", told.output  # told how long: no warning


#: the commands that print progress while they work
PROGRESS_COMMANDS = ("submit", "retry", "wait", "collect", "report", "compare")


@pytest.mark.parametrize("name", PROGRESS_COMMANDS)
def test_every_command_that_prints_progress_takes_q(name):
    res = invoke([name, "--help"])
    assert res.exit_code == 0 and re.search(r"-q, --quiet", res.stdout), res.stdout


def test_submit_q_prints_only_the_result(tmp_path):
    res = invoke(
        ["submit", ROOT / "configs" / "quickstart.yaml", "--dry-run", "-q",
         "--results", tmp_path]
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == str(tmp_path / "quickstart") and res.stderr == ""
    loud = invoke(
        ["submit", ROOT / "configs" / "quickstart.yaml", "--dry-run", "--campaign", "loud",
         "--results", tmp_path]
    )  # fmt: skip
    assert "rendered 6 runs" in loud.stderr


@pytest.mark.parametrize(
    "value, message",
    [
        ("./no/such/site.yaml", "no such cluster profile file: ./no/such/site.yaml"),
        ("iriss", "no cluster profile named 'iriss' (did you mean 'iris'?)"),
    ],
)
def test_a_spec_naming_a_missing_profile_gets_file_and_line(tmp_path, value, message):
    text = (ROOT / "configs" / "quickstart.yaml").read_text()
    spec = tmp_path / "qs.yaml"
    spec.write_text(text.replace("cluster: local", f"cluster: {value}"))
    line = text.splitlines().index("cluster: local") + 1
    for cmd in ("validate", "plan", "submit"):
        res = invoke([cmd, spec, "--results", tmp_path] if cmd == "submit" else [cmd, spec])
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith(f"{spec}:{line}:1: cluster: {message}"), res.stderr
        assert "Traceback" not in res.output


@pytest.mark.parametrize(
    "value, message",
    [
        ("/no/such.yaml", "--cluster: no such cluster profile file: /no/such.yaml (a path"),
        ("iriss", "--cluster: no cluster profile named 'iriss' (did you mean 'iris'?)"),
    ],
)
def test_a_missing_cluster_option_profile_names_the_option(tmp_path, value, message):
    spec = ROOT / "configs" / "quickstart.yaml"
    for args in (["validate", spec], ["plan", spec], ["doctor"]):
        res = invoke([*args, "--cluster", value])
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith(f"ddlbench: {message}"), res.stderr
        assert len(res.stderr.splitlines()) == 1 and "Traceback" not in res.output


def test_the_cluster_help_lists_every_shipped_profile():
    """From the folder the loader reads, so a profile added there is listed."""
    shipped = sorted(p.stem for p in (ROOT / "configs" / "clusters").glob("*.yaml"))
    assert "v100-pyxis" in shipped
    for cmd in ("validate", "plan", "submit", "doctor"):
        text = " ".join(invoke([cmd, "--help"]).stdout.split())
        assert f"profiles ddlbench ships ({', '.join(shipped)})" in text.replace("- ", "-"), cmd


def test_a_missing_folder_in_ddlbench_clusters_is_warned_about(tmp_path):
    # a process of its own: the warning is said once per process, on the real stderr
    gone = tmp_path / "site-profiles"
    env = dict(os.environ, DDLBENCH_CLUSTERS=f"{gone}:{tmp_path}")
    res = subprocess.run(
        [sys.executable, "-m", "ddlbench", "validate", str(ROOT / "configs" / "quickstart.yaml")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("warning: DDLBENCH_CLUSTERS names") == 1
    assert f"{gone}, which does not exist" in res.stderr


def test_no_profile_named_on_a_slurm_machine_names_those_that_hold_the_spec(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    spec = ROOT / "configs" / "llama3-8b.yaml"  # 1, 2 and 4 nodes of 8 GPUs, no 'cluster'
    res = invoke(["validate", spec])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "this machine has Slurm but no cluster profile was named" in res.stderr
    assert (
        "no Slurm profile here (iris, localslurm, v100-pyxis) holds its largest scale point "
        "(4 node(s) x 8 per node): `ddlbench init` writes one" in res.stderr
    ), res.stderr  # iris: 4 GPUs per node; localslurm, v100-pyxis: 2 and 4 nodes at most
    site = yaml.safe_load((ROOT / "configs" / "clusters" / "iris.yaml").read_text())
    site.update(name="big8", gpus_per_node=8, max_nodes=8)
    (tmp_path / "big8.yaml").write_text(yaml.safe_dump(site))
    monkeypatch.setenv("DDLBENCH_CLUSTERS", str(tmp_path))
    res = invoke(["validate", spec])
    assert res.exit_code == 2, res.output
    assert (
        "Slurm profiles here that hold its largest scale point (4 node(s) x 8 per node): "
        "big8" in res.stderr
    ), res.stderr


def _gpu_range(description: str):
    m = re.search(r"(\d+) to (\d+) GPUs", description)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _claims(path) -> bool:
    """Whether a shipped spec's description states GPUs, runs or node-hours."""
    text = yaml.safe_load(path.read_text()).get("description", "")
    return bool(_gpu_range(text) or re.search(r"\d+ runs|node-hours", text))


@pytest.mark.parametrize(
    "path",
    [p for p in sorted((ROOT / "configs").glob("*.yaml")) if _claims(p)],
    ids=lambda p: p.stem,
)
def test_shipped_descriptions_match_the_plan(path):
    """A description that states GPUs, runs or node-hours states what `plan` shows."""
    description = yaml.safe_load(path.read_text()).get("description", "")
    res = invoke(["plan", path, "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    gpus = sorted({r["world_size"] for r in plan["runs"]})
    if _gpu_range(description):
        assert _gpu_range(description) == (gpus[0], gpus[-1]), description
    m = re.search(r"(\d+) runs", description)
    if m:
        assert int(m.group(1)) == len(plan["runs"]), description
    m = re.search(r"([\d,]+) node-hours", description)
    if m:
        assert float(m.group(1).replace(",", "")) == pytest.approx(plan["node_hours"])
