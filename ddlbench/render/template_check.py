"""Refuse a job template that names a workload module ddlbench does not ship.

A site's own templates (the profile's ``templates`` folder, ``$DDLBENCH_TEMPLATES``) may spell
``python -m ddlbench.workloads.<module>`` from an older layout: ``ddlbench.workloads.rank_start``
before the node-side tools moved to ``node/``, or ``ddlbench.workloads.{{ run.workload }}``,
which is no module for a workload that lives in its framework's folder. Found on the compute
node, that fails every job after its wait in the queue; found here, before anything is written
or submitted, it is one ``file:line`` message with the module's place now
(docs/architecture.md#the-workloads-folder).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, List, Optional

import jinja2
import jinja2.meta

import ddlbench
from ddlbench.errors import InputError, Problem
from ddlbench.workloads.vocabulary import WORKLOAD_MODULES

PREFIX = "ddlbench.workloads."
#: ``ddlbench.workloads.`` and what follows: a dotted name or a template expression
MENTION = re.compile(r"ddlbench\.workloads\.(\{\{\s*run\.workload\s*\}\}|[A-Za-z_](?:[\w.]*\w)?)")


def _workloads_root() -> Path:
    return Path(ddlbench.__file__).resolve().parent / "workloads"


def _is_module(dotted: str) -> bool:
    """Whether ``python -m ddlbench.workloads.<dotted>`` runs something (a package only with
    its ``__main__``)."""
    path = _workloads_root().joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def _suggestion(dotted: str) -> Optional[str]:
    """Where the module ``ddlbench.workloads.<dotted>`` is now, when it moved."""
    if dotted in WORKLOAD_MODULES:
        return PREFIX + WORKLOAD_MODULES[dotted]
    stem = dotted.rsplit(".", 1)[-1]
    found = sorted(_workloads_root().rglob(f"{stem}.py"))
    if len(found) == 1:
        rel = found[0].relative_to(_workloads_root()).with_suffix("")
        return PREFIX + ".".join(rel.parts)
    return None


def line_problems(text: str) -> Iterator[str]:
    """What is wrong with one line of a template (nothing for a line that is right)."""
    for match in MENTION.finditer(text):
        name = match.group(1)
        if name.startswith("{{"):
            yield (
                "ddlbench.workloads.{{ run.workload }} is no module for a workload in its "
                "framework's folder (did you mean {{ workload_module }}?)"
            )
        elif not _is_module(name):
            moved = _suggestion(name)
            hint = f" (did you mean {moved}?)" if moved else ""
            yield f"no module {PREFIX}{name} in ddlbench's workloads{hint}"


def _referenced(env: jinja2.Environment, name: str, seen: List[str]) -> None:
    """``name`` and every template it extends or includes, each once, into ``seen``."""
    if name in seen:
        return
    seen.append(name)
    source = env.loader.get_source(env, name)[0]  # type: ignore[union-attr]
    for ref in jinja2.meta.find_referenced_templates(env.parse(source)):
        if ref is not None:
            _referenced(env, ref, seen)


def check_templates(env: jinja2.Environment, names: List[str]) -> None:
    """Raise an :class:`InputError` naming every wrong workload module in these templates."""
    seen: List[str] = []
    for name in names:
        _referenced(env, name, seen)
    problems = []
    for name in seen:
        source, filename, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
        for number, text in enumerate(source.splitlines(), start=1):
            problems += [Problem(m, file=filename, line=number) for m in line_problems(text)]
    if problems:
        raise InputError(problems)
