"""The framework environments (``scripts/make-envs.sh``) that the framework tests run in.

An environment's python is ``$DDLBENCH_ENVS/<env>/bin/python`` (default
``~/.cache/ddlbench/envs``); a test that needs an absent environment is skipped, with the
reason, except under CI (CI=true), where it fails, because CI builds the environments.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import pytest

#: the environment each framework runs in
ENVS = {
    "pytorch": "torch",
    "tensorflow": "tensorflow",
    "keras": "tensorflow",
    "horovod": "horovod",
    "mxnet": "mxnet",
}


def envs_root() -> Path:
    return Path(os.environ.get("DDLBENCH_ENVS") or Path.home() / ".cache" / "ddlbench" / "envs")


def env_python(env: str) -> Optional[str]:
    """The framework environment's python, or None if the environment is absent."""
    python = envs_root() / env / "bin" / "python"
    return str(python) if python.exists() else None


def require_env(env: str) -> str:
    python = env_python(env)
    if python:
        return python
    where = envs_root() / env
    if os.environ.get("CI"):
        pytest.fail(f"framework environment {env!r} missing at {where} (CI builds it)")
    pytest.skip(f"framework environment {env!r} not built at {where} (scripts/make-envs.sh {env})")


def require_envs(*frameworks: str) -> None:
    """Skip (fail under CI) unless the environments of all ``frameworks`` are built."""
    root = envs_root()
    missing = sorted({ENVS[f] for f in frameworks if not (root / ENVS[f] / "bin/python").exists()})
    if missing:
        msg = f"framework environments missing in {root}: {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(msg + " (scripts/test.sh builds them)")
        pytest.skip(msg + " (scripts/make-envs.sh)")
