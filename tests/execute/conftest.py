"""Fixtures for the executor tests (campaign folders: tests/support/campaigns.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fast_local(monkeypatch):
    # local jobs are stopped quickly in tests (SIGTERM -> SIGKILL after 1 s)
    monkeypatch.setenv("DDLBENCH_LOCAL_KILL_WAIT", "1")
    monkeypatch.setenv("DDLBENCH_SLURM_RETRIES", "1")
    monkeypatch.setenv("DDLBENCH_SLURM_BACKOFF", "0.2")
