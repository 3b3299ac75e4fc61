"""Every path that ddlbench expands at render time (``~``, ``$VAR``) with an unset variable:
``validate`` and ``submit --dry-run`` name its ``file:line`` and exit 2, never an internal
error (docs/cluster-profiles.md#path-expansion)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import invoke

SPEC = """\
name: unset
model: lenet
frameworks: [{name: pytorch, backend: gloo}]
batch_size: 8
steps: {warmup: 0, measure: 2}
scale: {nodes: [1], gpus_per_node: 1}
data: {kind: imagefolder, path: /nowhere/images}
cluster: p.yaml
"""

PROFILE = """\
name: p
scheduler: local
device: cpu
environments:
  pytorch:
    venv: /opt/venv
    container: {runtime: apptainer, image: /img/torch.sif, bind: [/scratch]}
    module_init: /etc/lmod/init/bash
stage_dir: /tmp
"""

#: (file, text to replace, replacement, expected "file:line:col: where")
FIELDS = [
    (
        "s.yaml",
        "name: unset\n",
        "name: unset\ncontainer: $NOPE_VAR/tf.sif\n",
        "s.yaml:2:1: container",
    ),
    ("p.yaml", "venv: /opt/venv", "venv: $NOPE_VAR/v", "p.yaml:6:5: environments.pytorch.venv"),
    (
        "p.yaml",
        "image: /img/torch.sif",
        'image: "${NOPE_VAR}/t.sif"',
        "p.yaml:7:37: environments.pytorch.container.image",
    ),
    (
        "p.yaml",
        "bind: [/scratch]",
        "bind: [$NOPE_VAR]",
        "p.yaml:7:67: environments.pytorch.container.bind[0]",
    ),
    (
        "p.yaml",
        "module_init: /etc/lmod/init/bash",
        "module_init: $NOPE_VAR/init/bash",
        "p.yaml:8:5: environments.pytorch.module_init",
    ),
    ("p.yaml", "stage_dir: /tmp", "stage_dir: $NOPE_VAR/scratch", "p.yaml:9:1: stage_dir"),
    ("p.yaml", "device: cpu\n", "device: cpu\ntemplates: $NOPE_VAR/t\n", "p.yaml:4:1: templates"),
]


@pytest.mark.parametrize(("name", "old", "new", "where"), FIELDS, ids=[f[3] for f in FIELDS])
def test_unset_variable_is_a_file_line_error(tmp_path, monkeypatch, name, old, new, where):
    monkeypatch.delenv("NOPE_VAR", raising=False)
    files = {"s.yaml": SPEC, "p.yaml": PROFILE}
    assert old in files[name]
    files[name] = files[name].replace(old, new, 1)
    for file, text in files.items():
        (tmp_path / file).write_text(text)
    monkeypatch.chdir(tmp_path)
    for args in (["validate", "s.yaml"], ["submit", "s.yaml", "--dry-run"]):
        res = invoke([*args, "--results", tmp_path / "r"] if args[0] == "submit" else args)
        assert res.exit_code == 2, res.output
        assert "internal error" not in res.output
        assert f"{where}: environment variable NOPE_VAR is not set" in res.stderr, res.output
        assert "(export NOPE_VAR before running ddlbench" in res.stderr
    assert not any(Path(tmp_path / "r").glob("*/jobs/*.sh"))
