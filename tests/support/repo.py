"""The checkout the tests run from, and the tools and scripts they need from this machine."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Callable, Dict, TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL_SLURM = ROOT / "scripts" / "local-slurm.sh"
RANK_LOG_SCHEMA = ROOT / "ddlbench" / "schemas" / "rank-log-v1.schema.json"

T = TypeVar("T")


def require_tool(name: str) -> str:
    """Path of a tool the tests need; missing is a failure in CI and a skip elsewhere."""
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{name} is not installed; scripts/test.sh installs it")
    pytest.skip(f"{name} is not installed (scripts/test.sh installs it)")


def env_exports(text: str) -> Dict[str, str]:
    """The ``export KEY=value`` lines of a script's output (``local-slurm.sh env``)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export ") :].partition("=")
            out[key] = value.strip().strip("'\"")
    return out


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.1) -> T:
    """The first true value of ``predicate()``, polled every ``interval`` s for ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
