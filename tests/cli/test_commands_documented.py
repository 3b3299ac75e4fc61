"""Every command is in docs/cli.md's table and its ``--help`` ends with examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlbench.cli import _commands
from tests.support.cli import invoke

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


@pytest.mark.parametrize("name", sorted(_commands()))
def test_command_is_documented_with_examples(name):
    rows = [line for line in CLI_DOC.read_text().splitlines() if line.startswith("| `")]
    assert any(row.startswith(f"| `{name}") for row in rows), f"{name} missing in docs/cli.md"
    res = invoke([name, "--help"])
    assert res.exit_code == 0 and "Examples:" in res.stdout, res.output
