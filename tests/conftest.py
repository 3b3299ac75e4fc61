from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def root() -> Path:
    return ROOT


def require_tool(name: str) -> str:
    """Path of a tool the tests need; missing is a failure in CI and a skip elsewhere."""
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{name} is not installed; scripts/test.sh installs it")
    pytest.skip(f"{name} is not installed (scripts/test.sh installs it)")
