"""A spec's own program (``workload:``): bad input at validate time (file:line, exit 2, no
traceback), placeholders substituted into run.json's argv without a shell, the workdir copied
once. docs/your-own-workload.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddlbench.render.campaign import read_run_config
from ddlbench.spec.own_workload import (
    PLACEHOLDERS,
    OwnWorkload,
    missing_files,
    placeholders_in,
    substitute,
)
from tests.support.render import render
from tests.support.repo import ROOT

SPEC = """\
name: own
workload:
  command: [python, train.py, --batch-size, "{batch_size}", --tag, "{variant}"]
  framework: {name: pytorch, backend: gloo}
  workdir: src
  measure:
    step: 'time (?P<value>[0-9.]+) s'
    unit: s
variants:
  - {label: a}
batch_size: [8, 16]
scale: {points: ["1x1", "2x2"]}
"""


def _validate(tmp: Path, text: str) -> subprocess.CompletedProcess:
    (tmp / "src").mkdir(exist_ok=True)
    (tmp / "src" / "train.py").write_text("")
    (tmp / "spec.yaml").write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "ddlbench", "validate", "spec.yaml", "--cluster", "local"],
        capture_output=True,
        text=True,
        cwd=tmp,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp)},
    )


def test_a_valid_spec(tmp_path):
    proc = _validate(tmp_path, SPEC)
    assert proc.returncode == 0, proc.stderr
    assert "4 runs" in proc.stdout


@pytest.mark.parametrize(
    "old, new, expected",
    [
        (
            '"{batch_size}"',
            '"{batch_sise}"',
            "spec.yaml:3:45: workload.command[3]: {batch_sise} is not a sweep value (did you "
            "mean 'batch_size'?); the placeholders are batch_size, global_batch_size,",
        ),
        (
            "'time (?P<value>[0-9.]+) s'",
            "'time ([0-9.]+ s'",
            "spec.yaml:7:5: workload.measure.step: step is not a valid regular expression: "
            "missing ), unterminated subpattern at position 5",
        ),
        (
            "'time (?P<value>[0-9.]+) s'",
            "'time [0-9.]+ s'",
            "spec.yaml:7:5: workload.measure.step: step captures nothing: put the number in a "
            "group",
        ),
        ("unit: s", "unit: min", "spec.yaml:8:5: workload.measure.unit: 'min' is not one of"),
        (
            "name: pytorch,",
            "name: pytorhc,",
            "spec.yaml:4:15: workload.framework.name: 'pytorhc' is not one of horovod, keras, "
            "mxnet, pytorch, tensorflow (did you mean 'pytorch'?)",
        ),
        (
            "train.py,",
            "trian.py,",
            "spec.yaml:3:21: workload.command[1]: no such file in the workdir ",
        ),
        ("workdir: src", "workdir: nowhere", "spec.yaml:5:3: workload.workdir: no such folder"),
        ("name: own\n", "name: own\nframeworks: [pytorch]\n", "spec.yaml:2:1: frameworks: a spec"),
        (
            "name: own\n",
            "name: own\nmode: convergence\nepochs: 1\n",
            "spec.yaml:2:1: mode: a spec's own 'workload' is measured in mode throughput only",
        ),
    ],
)
def test_bad_input_is_file_line_and_exit_2(tmp_path, old, new, expected):
    assert old in SPEC
    proc = _validate(tmp_path, SPEC.replace(old, new, 1))
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{tmp_path}/{expected}") or proc.stderr.startswith(expected), (
        proc.stderr
    )


def test_a_missing_workdir_is_reported_beside_the_other_problems(tmp_path):
    text = SPEC.replace("workdir: src", "workdir: nowhere").replace("unit: s", "unit: min")
    proc = _validate(tmp_path, text.replace("batch_size: [8, 16]", "batch_size: [8, 8]"))
    assert proc.returncode == 2, proc.stdout
    lines = [line.replace(f"{tmp_path}/", "") for line in proc.stderr.splitlines()]
    assert [line.split(": ")[:2] for line in lines] == [
        ["spec.yaml:5:3", "workload.workdir"],
        ["spec.yaml:8:5", "workload.measure.unit"],
        ["spec.yaml:11:17", "batch_size[1]"],
    ], proc.stderr
    assert f"no such folder: {tmp_path}/nowhere" in proc.stderr.splitlines()[0]


@pytest.mark.parametrize(
    "command, index",
    [
        (["python", "trian.py"], 1),
        (["python", "-u", "trian.py"], 2),
        (["python3.11", "trian.py"], 1),
        (["/usr/bin/python3", "-O", "-X", "dev", "-W", "error", "trian.py", "-u"], 6),
        (["python", "-Xdev", "-Wignore", "--", "trian.py"], 4),
        (["env", "python", "trian.py"], 2),
        (["env", "-u", "HOME", "OMP_NUM_THREADS=1", "python3", "-u", "trian.py"], 6),
        (["bash", "-e", "-o", "pipefail", "trian.sh"], 4),
        (["env", "./trian.sh"], 1),
        (["python", "-m", "trian.py"], None),  # a module, not a file
        (["python", "-c", "import trian.py"], None),
        (["python", "-um", "trian"], None),
        (["bash", "-c", "trian.sh"], None),
        (["python", "-"], None),
        (["torchrun", "trian.py"], None),  # not an interpreter ddlbench knows
        (["python", "train.py"], None),  # there
    ],
)
def test_the_script_of_an_interpreter_is_found_past_its_options(tmp_path, command, index):
    """``validate`` checks the script of ``python``/``pythonX.Y``/``bash``/``sh``, also after
    the interpreter's options and a leading ``env``; none after ``-m``, ``-c`` or ``-``."""
    (tmp_path / "train.py").write_text("")
    (tmp_path / "train.sh").write_text("")
    own = OwnWorkload(command=command, framework="pytorch")
    found = missing_files(own, str(tmp_path))
    if index is None:
        assert found == []
        return
    ((i, message),) = found
    assert i == index
    assert message.startswith(f"no such file in the workdir {tmp_path}: {command[index]}")
    assert "(did you mean 'train." in message


def test_validate_names_the_script_after_interpreter_options(tmp_path):
    spec = SPEC.replace("[python, train.py,", "[env, python3.11, -u, trian.py,")
    proc = _validate(tmp_path, spec)
    assert proc.returncode == 2, proc.stdout
    assert "spec.yaml:3:34: workload.command[3]: no such file in the workdir " in proc.stderr
    assert "trian.py (did you mean 'train.py'?)" in proc.stderr


def test_placeholders_and_literal_braces():
    assert placeholders_in("{{x}}-{batch_size}") == ["batch_size"]
    assert substitute("{{{lr}}}-{epochs}", {"lr": "0.1", "epochs": None}) == "{0.1}-"
    assert set(PLACEHOLDERS) >= {"batch_size", "nodes", "world_size", "lr", "variant"}


HOSTILE = 'x\'; touch pwned; echo "$(id)" `id` $HOME \\\nEOF\nDDLBENCH_RUN_JSON\n'


def test_hostile_values_stay_argv_elements_in_run_json(tmp_path):
    """A variant label is a safe name, so the hostile text comes in through the command itself:
    it lands verbatim in run.json's argv, inside the script's quoted heredoc."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    text = SPEC.replace("--tag,", f'--secs, "{{measure_seconds}}", --tag, {json.dumps(HOSTILE)},')
    (tmp_path / "spec.yaml").write_text(text)
    root = render(tmp_path / "spec.yaml", "local", tmp_path / "results").root
    manifest = json.loads((root / "campaign.json").read_text())
    run = manifest["runs"][-1]
    cfg = read_run_config(root / run["run_dir"], root / run["script"])
    argv = cfg["program"]["argv"]
    assert argv[:5] == ["python", "train.py", "--batch-size", str(run["batch_size"]), "--secs"]
    assert argv[5:7] == ["10", "--tag"]  # steps.measure_seconds, 10 s by default
    assert argv[7] == HOSTILE and argv[8] == "a"
    assert cfg["program"]["cwd"] == str(root / "pkg" / "workdir")
    assert (root / "pkg" / "workdir" / "train.py").read_text() == "print('hi')\n"
    script = (root / run["script"]).read_text()
    assert "<<'DDLBENCH_RUN_JSON'" in script and "\nDDLBENCH_RUN_JSON\n" in script
    assert script.count("\nDDLBENCH_RUN_JSON\n") == 1  # the value cannot end the heredoc
    # the copy is taken once: a changed source does not change a campaign's code
    (tmp_path / "src" / "train.py").write_text("print('changed')\n")
    render(tmp_path / "spec.yaml", "local", tmp_path / "results")
    assert (root / "pkg" / "workdir" / "train.py").read_text() == "print('hi')\n"
