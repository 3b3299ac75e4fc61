"""No function in ddlbench/ (login-node code and workloads alike) is longer than MAX_LINES,
and no module is longer than MAX_MODULE_LINES.

A function's length is what :mod:`ast` says: from its ``def`` line to its last line
(``end_lineno - lineno + 1``), docstring, comments and blank lines included, decorators not.
Nested functions count towards the function that holds them and are checked themselves.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Tuple

from tests.support.repo import ROOT

PACKAGE = ROOT / "ddlbench"
MAX_LINES = 60
MAX_MODULE_LINES = 600


def function_lengths(path: Path) -> Iterator[Tuple[int, str, int]]:
    """(line, name, length) of every function and method in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.lineno, node.name, node.end_lineno - node.lineno + 1


def _modules() -> Iterator[Tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path


def test_no_function_is_longer_than_the_limit():
    found = sorted(
        (length, f"{rel}:{line}: {name} has {length} lines")
        for rel, path in _modules()
        for line, name, length in function_lengths(path)
        if length > MAX_LINES
    )
    assert not found, (
        f"functions longer than {MAX_LINES} lines (split them into well-named parts):\n"
        + "\n".join(text for _, text in reversed(found))
    )


def test_no_module_is_longer_than_the_limit():
    found = sorted(
        (n, f"{rel}: {n} lines")
        for rel, path in _modules()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    )
    assert not found, (
        f"modules longer than {MAX_MODULE_LINES} lines (split them along a seam):\n"
        + "\n".join(text for _, text in reversed(found))
    )


def test_the_length_counts_from_def_to_the_last_line(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "@decorator\n"
        "def outer():\n"
        '    """Doc."""\n'
        "\n"
        "    def inner():\n"
        "        return 1\n"
        "    # a comment\n"
        "    return inner\n"
    )
    assert sorted(function_lengths(sample)) == [(2, "outer", 7), (5, "inner", 2)]


def test_the_scan_sees_the_package():
    scanned = [rel for rel, _ in _modules()]
    assert "ddlbench/collect/reader.py" in scanned
    assert "ddlbench/workloads/common/loop.py" in scanned
