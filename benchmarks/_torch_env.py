"""Run a benchmark with a Python that has torch: this one, or the torch environment's."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def reexec_in_torch_env(name: str) -> None:
    """Return if torch imports here; else re-run this program with
    ``$DDLBENCH_ENVS/torch/bin/python`` (scripts/make-envs.sh), or exit naming what is missing."""
    try:
        import torch  # noqa: F401
    except ImportError:
        envs = Path(os.environ.get("DDLBENCH_ENVS") or Path.home() / ".cache/ddlbench/envs")
        python = envs / "torch" / "bin" / "python"
        if not python.exists():
            sys.exit(f"{name}: torch is not importable and {python} does not exist")
        os.execv(str(python), [str(python), *sys.argv])
