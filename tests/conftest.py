"""Fixtures of every test: a private local-executor home, the checkout, the local Slurm cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.repo import LOCAL_SLURM, ROOT, env_exports


@pytest.fixture(autouse=True)
def _private_local_home(monkeypatch, tmp_path_factory):
    """Each test gets its own local-executor job counter and machine-wide slots."""
    monkeypatch.setenv("DDLBENCH_LOCAL_HOME", str(tmp_path_factory.mktemp("local-home")))


@pytest.fixture
def root() -> Path:
    return ROOT


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
    env = env_exports(
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
