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


def test_the_top_level_help_lists_every_documented_exit_code():
    import re

    intro = CLI_DOC.read_text().split("## ", 1)[0]  # "Exit codes are the same for every command"
    documented = set(re.findall(r"\*\*(\d+)\*\*", intro))
    assert {"0", "1", "2", "3", "75", "124"} <= documented
    res = invoke(["--help"])
    codes = " ".join(res.stdout.split("Exit codes:", 1)[1].split())
    for code in documented:
        assert re.search(rf"(^|, ){code} ", codes), (code, codes)
