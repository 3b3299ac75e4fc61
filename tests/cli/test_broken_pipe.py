"""A reader that closes the output early (``ddlbench docs | head -2``) is normal: the command
exits quietly with 141 (128 + SIGPIPE), no message, no traceback, nothing complained about
at the interpreter's exit; a broken pipe of ddlbench's own stays an internal error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import invoke

ROOT = Path(__file__).resolve().parents[2]


def _closed_reader(*args: str) -> subprocess.CompletedProcess:
    """``python -m ddlbench ARGS`` writing to a pipe whose read end is already closed."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "ddlbench", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args",
    [
        ("docs",),  # click.echo
        ("--help",),  # the group's help: click's main answers a closed pipe with 1
        ("--version",),
        ("plan", "configs/resnet50.yaml"),  # a rich table
        (
            "predict",
            "--model",
            "resnet50",
            "--batch",
            "64",
            "--single-device-throughput",
            "300",
            "--gpus-per-node",
            "4",
            "--nodes",
            "1,2,4",
            "--intra-busbw",
            "100",
            "--inter-busbw",
            "10",
        ),
    ],
    ids=["docs", "help", "version", "plan", "predict"],
)
def test_a_closed_pipe_exits_quietly(args):
    proc = _closed_reader(*args)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == "", proc.stderr  # no "internal error", no "Exception ignored"


def test_a_broken_pipe_of_ddlbench_own_is_an_internal_error(monkeypatch):
    import ddlbench.cli.cmd_docs as docs

    def broken() -> dict:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(docs, "_topics", broken)
    res = invoke(["docs"])
    assert res.exit_code == 1
    assert "internal error: BrokenPipeError" in res.stderr
