"""Running the ``ddlbench`` command: in-process with stdout and stderr apart, on every click
version ddlbench supports (8.1 mixes them unless asked; 8.2 dropped the ``mix_stderr`` switch
and keeps both apart, with ``output`` holding both), or as a process (:func:`ddlbench`)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from click.testing import CliRunner

from ddlbench.cli import main


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    output: str  # stdout and stderr together
    exception: Optional[BaseException]


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click 8.1
    except TypeError:
        return CliRunner()  # click 8.2 and later: always apart


def invoke(args: Sequence[Any], **kwargs: Any) -> CliResult:
    res = _runner().invoke(main, [str(a) for a in args], **kwargs)
    stdout, stderr = res.stdout, res.stderr
    output = res.output if stderr and stderr in res.output else stdout + stderr
    return CliResult(res.exit_code, stdout, stderr, output, res.exception)


def ddlbench(*args: str, results: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python -m ddlbench ARGS`` with ``DDLBENCH_RESULTS=results``, output captured."""
    env = dict(os.environ, DDLBENCH_RESULTS=str(results))
    return subprocess.run(
        [sys.executable, "-m", "ddlbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def diagnose(root: Path, text: str) -> str:
    """``text`` and the tail of every run's stderr of the campaign folder ``root``: on a
    failure, it names the failing framework."""
    out = [text]
    for err in sorted(root.glob("runs/*/slurm-*.err")):
        tail = err.read_text(errors="replace").splitlines()[-15:]
        out.append(f"--- {err.relative_to(root)}\n" + "\n".join(tail))
    return "\n".join(out)
