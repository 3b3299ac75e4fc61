"""The PyTorch Lightning and Hugging Face ``Trainer`` callbacks (ddlbench.workloads.
steps_callbacks) mark one step per optimizer step, each a well-formed mark.

Neither package is in ddlbench's framework environments: these tests run where a Python with
them is named by ``DDLBENCH_TEST_CALLBACK_PYTHON`` (e.g. a venv with torch, lightning,
transformers and accelerate), and are skipped otherwise."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.repo import ROOT

PROGRAMS = Path(__file__).parent / "callback_programs"


def _python_with(module: str) -> str:
    python = os.environ.get("DDLBENCH_TEST_CALLBACK_PYTHON")
    if not python:
        pytest.skip("DDLBENCH_TEST_CALLBACK_PYTHON names no Python with " + module)
    ok = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
    if ok.returncode != 0:
        pytest.skip(f"{python} cannot import {module}")
    return python


def _marks(python: str, program: str, tmp: Path) -> list:
    """Run ``program`` with a mark pipe, as ddlbench.workloads.own.own_program does."""
    read_fd, write_fd = os.pipe()
    env = dict(os.environ, PYTHONPATH=str(ROOT), DDLBENCH_MARK_FD=str(write_fd))
    proc = subprocess.Popen(
        [python, str(PROGRAMS / program), str(tmp / "out")],
        cwd=tmp,
        env=env,
        pass_fds=(write_fd,),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as marks:
        lines = marks.read().decode().splitlines()
    out = proc.communicate(timeout=300)[0].decode(errors="replace")
    assert proc.returncode == 0, out[-3000:]
    return [json.loads(x) for x in lines]


def _check(marks: list, loss: bool) -> None:
    assert len(marks) == 6  # 24 samples in batches of 4
    assert all(m["samples"] == 4 and m["t_end"] > m["t_start"] for m in marks)
    assert all(a["t_end"] <= b["t_start"] for a, b in zip(marks, marks[1:]))
    assert all((m["loss"] is not None) == loss for m in marks)


def test_lightning_callback(tmp_path):
    _check(_marks(_python_with("lightning"), "lightning_fit.py", tmp_path), loss=True)


def test_hugging_face_trainer_callback(tmp_path):
    _check(_marks(_python_with("transformers"), "hf_trainer.py", tmp_path), loss=False)
