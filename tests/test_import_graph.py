"""The package's imports form no circle, and no module uses another module's private names.

Imports are read statically (``ast``) from every module of ``ddlbench/``: ``import a.b``,
``from a import b`` (a module when ``a/b.py`` exists, else a name of ``a``) and relative
imports, resolved to the module they load. Importing ``a.b.c`` also runs ``a/__init__.py``
and ``a/b/__init__.py``, so those count as imported too, except the packages the importer is
itself in (they are being imported already; a name taken from one of them does count).
Imports inside functions and under ``if TYPE_CHECKING:`` count too (a circle through them
still ties the modules together), but are named apart in the messages.

A private name is one starting with a single ``_`` (dunders are public). Offences:
``from m import _x``; ``m._x`` on a ddlbench module ``m`` imported by name; ``p._x`` on a
parameter ``p`` annotated with a class imported from another ddlbench module. A package's
``__init__.py`` and the modules directly in it may share private names.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

from tests.support.repo import ROOT

PACKAGE = "ddlbench"

#: circles being untangled, each as the sorted names of its modules (none left). A listed
#: circle that no longer occurs fails the test, so that it is removed from here.
KNOWN_CIRCLES: Set[Tuple[str, ...]] = set()
#: private names used across modules, being made public or moved, as
#: (user, "module[.Class]._name") (none left); the same rule holds for an entry that goes.
KNOWN_PRIVATE: Set[Tuple[str, str]] = set()


#: where an import statement is; each is named apart in the messages
MODULE_LEVEL, TYPE_CHECKING_ONLY, IN_FUNCTION = "module level", "type checking only", "in functions"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    where: str = MODULE_LEVEL


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, made absolute."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _ancestors(name: str) -> List[str]:
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _places(tree: ast.AST) -> Dict[int, str]:
    """ids of the nodes in function bodies and in ``if TYPE_CHECKING:`` blocks -> which."""
    out: Dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            out.update((id(n), TYPE_CHECKING_ONLY) for b in node.body for n in ast.walk(b))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            out.update((id(n), IN_FUNCTION) for n in ast.walk(node) if n is not node)
    return out


@dataclass
class Scan:
    edges: List[Edge] = field(default_factory=list)
    #: (user, "module._name", line)
    private: List[Tuple[str, str, int]] = field(default_factory=list)
    #: local name -> the ddlbench module it is bound to
    modules: Dict[str, str] = field(default_factory=dict)
    #: local name -> "module.Name" of a name imported from a ddlbench module
    names: Dict[str, str] = field(default_factory=dict)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports(module: str, tree: ast.AST, out: Scan) -> None:
    places = _places(tree)

    def add(target: str, node: ast.AST) -> None:
        """An edge to ``target``, and to the packages whose ``__init__`` importing it runs
        (those the importer is in are running already)."""
        mine = _ancestors(module)
        for t in [target] + [p for p in _ancestors(target) if p not in mine]:
            if t in MODULES and t != module:
                where = places.get(id(node), MODULE_LEVEL)
                out.edges.append(Edge(module, t, node.lineno, where))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    add(alias.name, node)
                    if alias.asname:
                        out.modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:
                    add(full, node)
                    out.modules[alias.asname or alias.name] = full
                    continue
                add(base, node)  # a name defined in ``base``
                out.names[alias.asname or alias.name] = full
                if _is_private(alias.name) and not _shares_privates(module, base):
                    out.private.append((module, full, node.lineno))


def _typed_parameters(fn: ast.AST, names: Dict[str, str]) -> Dict[str, str]:
    """The parameters of ``fn`` annotated with a class imported from a ddlbench module
    (``def f(executor: SlurmExecutor)``) -> that class's "module.Name"."""
    out: Dict[str, str] = {}
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for arg in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
            ann = arg.annotation
            key = getattr(ann, "id", None) or getattr(ann, "value", None)
            if isinstance(key, str) and key in names:
                out[arg.arg] = names[key]
    return out


def _private_attribute(module: str, node: ast.AST, bound: Dict[str, str]) -> Optional[str]:
    """``x._y`` where ``x`` is bound to another ddlbench module ("module") or to an instance
    of another module's class ("module.Class"): what it names."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    owner = bound.get(node.value.id)
    if not owner or not _is_private(node.attr):
        return None
    module_of_owner = owner if owner in MODULES else owner.rpartition(".")[0]
    return None if _shares_privates(module, module_of_owner) else f"{owner}.{node.attr}"


def _private_uses(module: str, tree: ast.AST, out: Scan) -> None:
    """``m._x`` on an imported ddlbench module; ``p._x`` on a parameter typed with a class of
    another ddlbench module."""
    scopes = [(tree, out.modules)]
    scopes += [(fn, _typed_parameters(fn, out.names)) for fn in ast.walk(tree)]
    seen: Set[Tuple[str, int]] = set()
    for scope, bound in scopes:
        for node in ast.walk(scope) if bound else ():
            name = _private_attribute(module, node, bound)
            if name and (name, node.lineno) not in seen:
                seen.add((name, node.lineno))
                out.private.append((module, name, node.lineno))


def scan(module: str, path: Path) -> Scan:
    tree = ast.parse(path.read_text(), str(path))
    out = Scan()
    _imports(module, tree, out)
    _private_uses(module, tree, out)
    return out


def _shares_privates(user: str, owner: str) -> bool:
    """A package's ``__init__`` and the modules directly in it."""
    return (_is_package(owner) and user.rpartition(".")[0] == owner) or (
        _is_package(user) and owner.rpartition(".")[0] == user
    )


def _scan_all() -> Dict[str, Scan]:
    return {name: scan(name, path) for name, path in MODULES.items()}


def _circles_of(edges: List[Edge]) -> List[Set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: Dict[str, Set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[Set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: List[Tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child: Optional[str] = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = set()
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.add(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        out.append(comp)
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def _describe(comp: Set[str], edges: List[Edge]) -> str:
    inner = sorted(
        (e for e in edges if e.source in comp and e.target in comp),
        key=lambda e: (e.source, e.line),
    )
    lines = [" <-> ".join(sorted(comp))]
    for where in (MODULE_LEVEL, TYPE_CHECKING_ONLY, IN_FUNCTION):
        found = [f"    {e.source}:{e.line} imports {e.target}" for e in inner if e.where == where]
        if found:
            lines += [f"  {where}:"] + found
    return "\n".join(lines)


def test_no_import_circle():
    edges = [e for s in _scan_all().values() for e in s.edges]
    circles = _circles_of(edges)
    new = [c for c in circles if tuple(sorted(c)) not in KNOWN_CIRCLES]
    assert not new, "import circles (break them):\n" + "\n".join(_describe(c, edges) for c in new)
    found = {tuple(sorted(c)) for c in circles}
    gone = KNOWN_CIRCLES - found
    assert not gone, f"no longer circles: remove them from KNOWN_CIRCLES: {sorted(gone)}"


def test_no_private_name_used_across_modules():
    uses = [u for s in _scan_all().values() for u in s.private]
    new = [
        f"{user} line {line}: {name}"
        for user, name, line in uses
        if (user, name) not in KNOWN_PRIVATE
    ]
    assert not new, "private names used by another module (make them public):\n" + "\n".join(new)
    gone = KNOWN_PRIVATE - {(user, name) for user, name, _ in uses}
    assert not gone, f"no longer used: remove them from KNOWN_PRIVATE: {sorted(gone)}"


def test_the_scanner_finds_what_it_must(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ddlbench.workloads.node.gpu_sampler import nvml_call, _hidden\n"
        "import ddlbench.collect.data_files as files\n"
        "if TYPE_CHECKING:\n"
        "    from ddlbench.execute.store import CampaignStore\n"
        "def f(store: CampaignStore, other):\n"
        "    from ..collect import freshness\n"
        "    return files._secret, freshness, store._conn, other._fine\n"
    )
    found = scan("ddlbench.report.sample", sample)
    edges = {(e.target, e.where) for e in found.edges}
    assert ("ddlbench.workloads.node.gpu_sampler", MODULE_LEVEL) in edges
    assert ("ddlbench.workloads", MODULE_LEVEL) in edges  # its __init__ runs
    assert ("ddlbench.collect.data_files", MODULE_LEVEL) in edges
    assert ("ddlbench.collect.freshness", IN_FUNCTION) in edges
    assert ("ddlbench.execute.store", TYPE_CHECKING_ONLY) in edges
    assert not [e for e in found.edges if e.target == "ddlbench.report"]  # its own package
    assert sorted(name for _, name, _ in found.private) == [
        "ddlbench.collect.data_files._secret",
        "ddlbench.execute.store.CampaignStore._conn",
        "ddlbench.workloads.node.gpu_sampler._hidden",
    ]
    two = [Edge("ddlbench.a", "ddlbench.b", 1), Edge("ddlbench.b", "ddlbench.a", 2, IN_FUNCTION)]
    assert _circles_of(two) == [{"ddlbench.a", "ddlbench.b"}]
