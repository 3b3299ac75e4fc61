"""Where the tests' shared code lives: helpers in ``tests/support/``, never in a conftest.

- no module under ``tests/`` or ``benchmarks/`` imports a conftest or a test module, and the
  tests import no module of ``tests/`` outside ``tests/support/``;
- a conftest defines only fixtures and pytest hooks (and imports what they use);
- nothing under ``benchmarks/`` imports from ``tests/`` (the tests may use ``benchmarks/``).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List, Tuple

from tests.support.repo import ROOT


def _imported(path: Path) -> Iterator[Tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{a.name}") for a in node.names)


def _files(folder: str) -> List[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _is_test_module(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last == "conftest" or last.startswith("test_")


def test_no_conftest_or_test_module_is_imported():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in _files("tests") + _files("benchmarks")
        for line, name in _imported(path)
        if _is_test_module(name)
    ]
    assert not found, "move shared helpers to tests/support/:\n" + "\n".join(found)


def test_shared_test_code_is_in_tests_support():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in _files("tests")
        for line, name in _imported(path)
        if name.split(".")[0] == "tests" and name.split(".")[:2] != ["tests", "support"]
    ]
    assert not found, "move shared helpers to tests/support/:\n" + "\n".join(found)


def _is_fixture(node: ast.AST) -> bool:
    for dec in getattr(node, "decorator_list", []):
        target = dec.func if isinstance(dec, ast.Call) else dec
        if "fixture" in ast.dump(target):
            return True
    return False


def test_conftest_files_hold_only_fixtures_and_hooks():
    found = []
    for path in (ROOT / "tests").rglob("conftest.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                if not (_is_fixture(node) or node.name.startswith("pytest_")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [ast.unparse(t) for t in targets]
                if names != ["pytestmark"] and names != ["pytest_plugins"]:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {', '.join(names)}")
    assert not found, "helpers belong in tests/support/:\n" + "\n".join(found)


def test_benchmarks_import_nothing_from_the_tests():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in _files("benchmarks")
        for line, name in _imported(path)
        if name.split(".")[0] == "tests"
    ]
    assert not found, "benchmarks/ keeps what it needs in benchmarks/:\n" + "\n".join(found)
