"""The layout of ``ddlbench/workloads/`` (docs/architecture.md#the-workloads-folder).

Read statically (``ast``), every import of every workload module, at module level or inside a
function: a folder imports only the standard library, the third-party modules its framework
needs, and the workload folders it is allowed to lean on; nothing outside
``ddlbench.workloads`` but ``ddlbench/__init__.py`` (the two are all a campaign's frozen
``pkg/`` holds). No module or folder is named like a framework's top-level module, the top of
the folder holds only the modules whose import path is a contract with code outside the
workloads, and every workload name the launchers plan resolves to a module that exists.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

from ddlbench.frameworks import launchers
from ddlbench.workloads.vocabulary import OWN_WORKLOAD, WORKLOAD_MODULES, workload_module
from tests.support.repo import ROOT

WORKLOADS = ROOT / "ddlbench" / "workloads"

#: folder ("" = the top of workloads/) -> third-party modules it may import
THIRD_PARTY: Dict[str, Set[str]] = {
    "": set(),
    "common": {"numpy", "sklearn", "tiktoken", "pynvml"},
    "node": {"pynvml"},
    "own": set(),
    "comm": {"torch", "horovod"},
    "pytorch": {"torch", "numpy", "PIL"},
    "tf": {"tensorflow", "keras", "numpy"},
    "mx": {"mxnet", "numpy"},
    "hvd": {"horovod", "torch", "tensorflow"},
}
#: modules with third-party imports of their own, each inside the function that needs it
MODULE_THIRD_PARTY: Dict[str, Set[str]] = {
    "steps_callbacks": {"lightning", "pytorch_lightning", "torch", "transformers"},
}
#: folder -> the workload folders it may import ("" = the top: vocabulary, flops, ...)
FOLDERS: Dict[str, Set[str]] = {
    "": {""},
    "common": {"", "common"},
    "node": {"", "common", "node"},
    "pytorch": {"", "common", "pytorch"},
    "tf": {"", "common", "tf"},
    "mx": {"", "common", "mx"},
    # Horovod trains the PyTorch and TensorFlow workloads' models with their steps
    "hvd": {"", "common", "hvd", "pytorch", "tf"},
    "comm": {"", "common", "comm", "pytorch", "hvd"},
    # a spec's own program gets each framework's launch environment (TF_CONFIG, Horovod's
    # rendezvous, MXNet's parameter-server roles)
    "own": {"", "common", "own", "tf", "mx", "hvd"},
}
#: the top of workloads/: imported by the login node or by users' programs by these paths
TOP_MODULES = {"__init__", "vocabulary", "flops", "flops_lm", "steps", "steps_callbacks"}
#: names a module or folder of the workloads must not take: on sys.path, it would hide these
FRAMEWORK_MODULES = {"torch", "tensorflow", "keras", "mxnet", "horovod", "jax", "numpy"}


def _folder(path: Path) -> str:
    rel = path.relative_to(WORKLOADS)
    return rel.parts[0] if len(rel.parts) > 1 else ""


def _module(path: Path) -> List[str]:
    """The module's dotted name as a list (a package's is its folder's)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, absolute module name) of every import in the file, named modules included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module(path) if path.name == "__init__.py" else _module(path)[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            yield node.lineno, name
            for alias in node.names:  # ``from ..tf import models_tf`` imports a module
                if _module_file(f"{name}.{alias.name}").is_file():
                    yield node.lineno, f"{name}.{alias.name}"


def _workload_folder(name: str) -> str | None:
    """The workloads folder an absolute ddlbench module name is in ("" = the top), or None
    when it is no module of the workloads."""
    parts = name.split(".")
    if parts[:2] != ["ddlbench", "workloads"]:
        return None
    rest = parts[2:]
    if rest and (WORKLOADS / rest[0]).is_dir():
        return rest[0]
    return ""


def _problems(path: Path) -> Iterator[str]:
    folder, stem = _folder(path), path.stem
    where = str(path.relative_to(ROOT))
    allowed = THIRD_PARTY[folder] | MODULE_THIRD_PARTY.get(stem, set())
    seen: Set[Tuple[int, str]] = set()
    for line, name in _imports(path):
        top = name.split(".")[0]
        target = _workload_folder(name) if top == "ddlbench" else None
        key = (line, name if target is None else f"workloads/{target}")
        if key in seen:
            continue
        seen.add(key)
        if top != "ddlbench":
            if top not in sys.stdlib_module_names and top not in allowed:
                yield f"{where}:{line}: imports {top} (folder {folder or 'top'}: {allowed})"
            continue
        if target is None:
            if name != "ddlbench":  # ddlbench/__init__.py is in pkg/, nothing else is
                yield f"{where}:{line}: imports {name}, which pkg/ does not hold"
        elif target not in FOLDERS[folder]:
            yield f"{where}:{line}: {folder or 'top'}/ imports {target or 'top'}/ ({name})"


def test_each_folder_imports_only_its_framework_and_the_folders_it_may():
    files = sorted(WORKLOADS.rglob("*.py"))
    folders = {_folder(p) for p in files}
    assert folders == set(FOLDERS) == set(THIRD_PARTY), folders ^ set(FOLDERS)
    problems = [p for path in files for p in _problems(path)]
    assert len(files) > 50 and not problems, "\n".join(problems)


def test_the_check_catches_a_framework_in_the_wrong_folder(tmp_path, monkeypatch):
    fake = tmp_path / "ddlbench" / "workloads"
    (fake / "mx").mkdir(parents=True)
    (fake / "mx" / "bad.py").write_text(
        "import torch\nfrom ..pytorch import models_torch\nfrom ddlbench import plan\n"
    )
    for folder in (fake / "pytorch", tmp_path / "ddlbench" / "plan"):
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    monkeypatch.setitem(globals(), "WORKLOADS", fake)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    found = list(_problems(fake / "mx" / "bad.py"))
    assert len(found) == 3, found
    assert "imports torch" in found[0] and "mx/ imports pytorch/" in found[1]
    assert "ddlbench.plan, which pkg/ does not hold" in found[2]
    (fake / "mx" / "bad.py").write_text("from ... import __version__\nfrom .. import vocabulary\n")
    assert not list(_problems(fake / "mx" / "bad.py"))


def test_no_module_or_folder_is_named_like_a_framework():
    clashes = [
        str(p.relative_to(ROOT))
        for p in WORKLOADS.rglob("*")
        if (p.stem if p.suffix == ".py" else p.name) in FRAMEWORK_MODULES
    ]
    assert not clashes, clashes


def test_the_top_of_the_folder_holds_only_the_contract_modules():
    top = {p.stem for p in WORKLOADS.glob("*.py")}
    assert top == TOP_MODULES, (
        f"new at the top of ddlbench/workloads/: {sorted(top - TOP_MODULES)}: a framework's "
        "code goes in its folder, node-side tools in node/ (docs/architecture.md)"
    )


def _module_file(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@pytest.mark.parametrize("name", sorted(WORKLOAD_MODULES))
def test_every_listed_workload_module_exists(name):
    assert _module_file(workload_module(name)).is_file(), workload_module(name)


def test_every_planned_workload_resolves_to_a_module():
    names = {OWN_WORKLOAD}
    for launcher in launchers().values():
        for options in launcher.probe_options:
            opts = launcher.options(**options)
            names |= {launcher.workload(mode, opts) for mode in launcher.modes}
    missing = [n for n in sorted(names) if not _module_file(workload_module(n)).is_file()]
    assert len(names) >= len(WORKLOAD_MODULES) and not missing, missing
    assert names == set(WORKLOAD_MODULES)  # every listed name is one a launcher plans
