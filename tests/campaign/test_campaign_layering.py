"""Only the campaign package spells the names of a campaign folder's files.

Every other login-node module asks ``ddlbench.campaign.paths`` (``CampaignPaths``/``RunPaths``)
for them, so that the folder layout has one owner. The compute-node workloads are exempt:
they get their paths from ``run.json``.

A string constant is a campaign file name when it is one of the file names below (anywhere),
or one of the folder names below used as a path: an operand of ``/``, an argument of
``Path()``/``joinpath()``/``os.path.join()``, or a piece of an f-string next to a ``/``.
Folder names alone ("runs", "data", ...) are also ordinary dictionary keys and column names,
which stay allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Tuple

from tests.support.repo import ROOT

PACKAGE = ROOT / "ddlbench"

#: owners of the names, and compute-node code that reads its paths from run.json
EXEMPT = ("ddlbench/campaign/", "ddlbench/workloads/")

#: modules still to be moved onto CampaignPaths/RunPaths (none left)
PENDING: set = set()

FILE_NAMES = {
    "campaign.json",
    "run.json",
    "state.sqlite",
    "state.sqlite-wal",
    "state.sqlite-shm",
    ".ddlbench",
    "rank-*.jsonl",
    "spec.yaml",
    "cluster.yaml",
    "slurm-%j.out",
    "slurm-%j.err",
    "submit.lock",
    "runner.lock",
}
FOLDER_NAMES = {"runs", "jobs", "logs", "data", "report", "provenance", "pkg", "exit_code"}
FRAGMENTS = ("slurm-%j", "runs/", "jobs/", "/logs", "/run.json", "campaign.json")
PATH_CALLS = {"Path", "joinpath", "join", "PurePath", "PosixPath"}


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _path_operands(tree: ast.AST) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            yield node.left
            yield node.right
        elif isinstance(node, ast.Call) and _call_name(node) in PATH_CALLS:
            yield from node.args


def offences(path: Path) -> Iterator[Tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in FILE_NAMES:
            yield node.lineno, repr(node.value)
        elif isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.Constant) and any(f in str(part.value) for f in FRAGMENTS):
                    yield node.lineno, f"f-string piece {part.value!r}"
    for node in _path_operands(tree):
        if isinstance(node, ast.Constant) and node.value in FOLDER_NAMES:
            yield node.lineno, f"path part {node.value!r}"


def _modules() -> Iterator[Tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(EXEMPT):
            yield rel, path


def test_no_module_outside_the_campaign_package_names_campaign_files():
    found = [
        f"{rel}:{line}: {what}"
        for rel, path in _modules()
        if rel not in PENDING
        for line, what in offences(path)
    ]
    assert not found, "use CampaignPaths/RunPaths (ddlbench/campaign/paths.py):\n" + "\n".join(
        found
    )


def test_pending_modules_exist_and_still_need_the_exemption():
    # an entry that no longer offends (or no longer exists) is removed from PENDING
    for rel in PENDING:
        path = ROOT / rel
        if path.is_file():
            assert list(offences(path)), f"{rel} is clean: remove it from PENDING"


def test_the_scanner_finds_what_it_must():
    sample = ROOT / "ddlbench" / "campaign" / "paths.py"
    assert list(offences(sample)), "paths.py spells every name; the scanner must see them"


#: names of the work folder's own entries that are also common words of other paths (a
#: virtualenv's ``bin``): an offence only under the campaign's work folder
WORK_FOLDER_NAMES = {"bin"}


def _work_folder_offences(path: Path) -> Iterator[Tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        left = node.left
        on_work = isinstance(left, ast.Attribute) and left.attr in ("work", "work_dir")
        right = node.right
        if on_work and isinstance(right, ast.Constant) and right.value in WORK_FOLDER_NAMES:
            yield node.lineno, f"work folder entry {right.value!r}"


def test_the_work_folder_entries_are_named_by_the_campaign_paths():
    found = [
        f"{rel}:{line}: {what}"
        for rel, path in _modules()
        for line, what in _work_folder_offences(path)
    ]
    assert not found, "use CampaignPaths.shims (ddlbench/campaign/paths.py):\n" + "\n".join(found)
