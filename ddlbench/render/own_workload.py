"""The run.json part and the frozen copy of a spec's own program (docs/your-own-workload.md).

The command's placeholders are replaced here, each value becoming (part of) one argv element
that run.json carries as a JSON list: ``ddlbench.workloads.own.own_program`` starts it without a
shell, so no value is ever read by one. The workdir is copied into the campaign's ``pkg/``
once, at the first render, so every run of a campaign (retries and later scales included)
runs the same code, as ddlbench's own workloads are frozen into ``pkg/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from ddlbench.spec.own_workload import placeholder_values, substitute

#: what a copy of a workdir leaves out
IGNORED = (".git", ".hg", ".svn", "__pycache__", "*.pyc", ".venv", ".ipynb_checkpoints")


def program_config(spec: Any, run: Any, run_dir: str, pkg_root: Path) -> Dict[str, Any]:
    """run.json's ``program``: argv, working folder and how steps are measured."""
    own = spec.workload
    values = placeholder_values(run, spec, run_dir)
    argv = [substitute(item, values) for item in own.command]
    cwd: Optional[str] = None
    if own.workdir is not None:
        cwd = str(workdir_copy(pkg_root)) if own.copy_workdir else own.workdir
    measure: Any = "marks"
    if own.measure != "marks":
        measure = own.measure.model_dump()
        measure["samples"] = measure["samples"] or run.batch_size
    return {"argv": argv, "cwd": cwd, "measure": measure, "name": own.name}


def workdir_copy(pkg_root: Path) -> Path:
    """Where the campaign keeps its copy of the workdir."""
    return Path(pkg_root) / "workdir"


def _ignore(skip: List[Path]) -> Callable[[str, List[str]], List[str]]:
    pattern = shutil.ignore_patterns(*IGNORED)

    def ignore(folder: str, names: List[str]) -> List[str]:
        out = set(pattern(folder, names))
        out.update(n for n in names if (Path(folder) / n).resolve() in skip)
        return sorted(out)

    return ignore


def copy_workdir(spec: Any, pkg_root: Path, results_root: Path) -> None:
    """Copy the workdir into the campaign once (a later render keeps the first copy)."""
    own = getattr(spec, "workload", None)
    if own is None or own.workdir is None or not own.copy_workdir:
        return
    dst = workdir_copy(pkg_root)
    if dst.exists():
        return
    tmp = dst.with_name(".workdir.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    skip = [Path(results_root).resolve(), Path(pkg_root).resolve()]  # never copy into itself
    try:
        shutil.copytree(own.workdir, tmp, ignore=_ignore(skip), symlinks=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tmp.rename(dst)
