"""Only ``ddlbench/collect/data_files.py`` spells the names of the collected data files.

The tables that ``ddlbench collect`` writes to ``data/`` (``runs.parquet``, ``runs.csv``, ...)
are named there; every other module asks it (``table_file``, ``DATA_FILES``, ...). The
``collect.json`` written next to them is a campaign file, named by ``ddlbench/campaign/paths.py``.

A string constant spells a data-file name when it is a file name of its own (``runs.csv``,
any ``*.parquet``, ``collect.json``) or a piece of an f-string that starts a table's suffix
(``f"{name}.parquet"``). Prose (help texts, messages, docstrings) may mention the files, and
other CSV files (reference data) are not data files.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Set, Tuple

from ddlbench.campaign.paths import COLLECT_INFO
from ddlbench.collect.data_files import DATA_FILES
from tests.support.repo import ROOT

PACKAGE = ROOT / "ddlbench"

#: the data files that are not tables (``runs.csv``); a table is any ``*.parquet``
OTHER_FILES = [n for n in DATA_FILES if n != COLLECT_INFO and not n.endswith(".parquet")]
#: the name's owner -> what it owns
OWNERS = {
    "ddlbench/collect/data_files.py": re.compile(
        "|".join([r"[\w*-]*\.parquet"] + [re.escape(n) for n in OTHER_FILES])
    ),
    "ddlbench/campaign/paths.py": re.compile(re.escape(COLLECT_INFO)),
}
#: an f-string piece that starts a table's suffix: f"{name}.parquet"
SUFFIX_PIECE = re.compile(r"\.parquet\b")


def _docstrings(tree: ast.AST) -> Set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def offences(path: Path, name: re.Pattern) -> Iterator[Tuple[int, str]]:
    """Where ``path`` spells a name that ``name`` matches."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    pieces = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    pieces.add(id(part))
                    if SUFFIX_PIECE.match(part.value) and name.search(part.value):
                        yield node.lineno, f"f-string piece {part.value!r}"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs | pieces
            and name.fullmatch(node.value)
        ):
            yield node.lineno, repr(node.value)


def _modules() -> Iterator[Tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path


def test_only_the_owners_spell_the_data_file_names():
    found = [
        f"{rel}:{line}: {what} (ask {owner})"
        for rel, path in _modules()
        for owner, name in OWNERS.items()
        if rel != owner
        for line, what in offences(path, name)
    ]
    assert not found, "a data-file name spelled outside its owner:\n" + "\n".join(found)


def test_the_scanner_finds_what_it_must(tmp_path):
    for owner, name in OWNERS.items():
        assert list(offences(ROOT / owner, name)), (
            f"{owner} spells its names; the scan must see them"
        )
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Reads runs.parquet."""\n'
        'A = "runs.csv"\n'
        'B = f"{x}.parquet"\n'
        'E = "published.csv"\n'
        'C = "writes runs.parquet and runs.csv"\n'
        'D = f"wrote {n} files: runs.csv"\n'
    )
    name = OWNERS["ddlbench/collect/data_files.py"]
    assert sorted(line for line, _ in offences(sample, name)) == [2, 3]


def test_the_names_import_without_pandas_or_pyarrow():
    # freshness (and through it every command that checks whether data is stale) asks the
    # owner for the names; that must stay cheap
    probe = (
        "import sys, ddlbench.collect.data_files, ddlbench.collect.freshness\n"
        "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == "[]", proc.stdout
