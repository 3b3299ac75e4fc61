"""Run a benchmark with a Python that has torch: this one, or the torch environment's."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def torch_python() -> Path:
    """The torch environment's python, ``$DDLBENCH_ENVS/torch/bin/python`` (make-envs.sh)."""
    envs = Path(os.environ.get("DDLBENCH_ENVS") or Path.home() / ".cache/ddlbench/envs")
    return envs / "torch" / "bin" / "python"


def reexec_in_torch_env(name: str) -> None:
    """Return if torch imports here; else re-run this program with :func:`torch_python`, or
    exit naming what is missing."""
    try:
        import torch  # noqa: F401
    except ImportError:
        python = torch_python()
        if not python.exists():
            sys.exit(f"{name}: torch is not importable and {python} does not exist")
        os.execv(str(python), [str(python), *sys.argv])
