"""Fixtures for the executor tests: campaign folders, and the project's real local Slurm."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LOCAL_SLURM = ROOT / "scripts" / "local-slurm.sh"
sys.path.insert(0, str(HERE))


@pytest.fixture(autouse=True)
def _fast_local(monkeypatch):
    # local jobs are stopped quickly in tests (SIGTERM -> SIGKILL after 1 s)
    monkeypatch.setenv("DDLBENCH_LOCAL_KILL_WAIT", "1")
    monkeypatch.setenv("DDLBENCH_SLURM_RETRIES", "1")
    monkeypatch.setenv("DDLBENCH_SLURM_BACKOFF", "0.2")


def _env_exports(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export ") :].partition("=")
            out[key] = value.strip().strip("'\"")
    return out


@pytest.fixture(scope="session")
def slurm_cluster():
    """The local Slurm cluster (scripts/local-slurm.sh), brought up if it is down.

    Left as it was found: a cluster this fixture started is stopped at the end.
    """
    if (
        shutil.which("slurmctld") is None
        and shutil.which("sbatch") is None
        and not os.environ.get("CI")
    ):
        pytest.skip("Slurm is not installed (scripts/local-slurm.sh up installs it)")
    started = False
    status = subprocess.run([str(LOCAL_SLURM), "status"], capture_output=True, text=True)
    if status.returncode != 0:
        up = subprocess.run([str(LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=600)
        if up.returncode != 0:
            pytest.fail(f"scripts/local-slurm.sh up failed:\n{up.stdout}\n{up.stderr}")
        started = True
    env = _env_exports(
        subprocess.run([str(LOCAL_SLURM), "env"], capture_output=True, text=True).stdout
    )
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if started:
        subprocess.run([str(LOCAL_SLURM), "down"], capture_output=True, timeout=300)


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
