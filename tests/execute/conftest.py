"""Fixtures for the executor tests: campaign folders, and the project's real local Slurm."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))


@pytest.fixture(autouse=True)
def _fast_local(monkeypatch):
    # local jobs are stopped quickly in tests (SIGTERM -> SIGKILL after 1 s)
    monkeypatch.setenv("DDLBENCH_LOCAL_KILL_WAIT", "1")
    monkeypatch.setenv("DDLBENCH_SLURM_RETRIES", "1")
    monkeypatch.setenv("DDLBENCH_SLURM_BACKOFF", "0.2")


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
