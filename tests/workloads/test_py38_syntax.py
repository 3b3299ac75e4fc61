"""The compute-node code keeps Python 3.8 syntax (docs/workloads.md): framework
environments on clusters are often older than the login node's Python."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WORKLOADS = Path(__file__).resolve().parents[2] / "ddlbench" / "workloads"


def test_every_workload_module_parses_as_python_3_8():
    failures = []
    modules = sorted(WORKLOADS.rglob("*.py"))
    for path in modules:
        try:
            ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=(3, 8))
        except SyntaxError as exc:
            failures.append(f"{path.relative_to(WORKLOADS.parents[1])}:{exc.lineno}: {exc.msg}")
    assert len(modules) > 20 and not failures, "\n".join(failures)


def test_the_check_catches_newer_syntax():
    with pytest.raises(SyntaxError):
        ast.parse("with (open(a) as f, open(b) as g):\n    pass\n", feature_version=(3, 8))
