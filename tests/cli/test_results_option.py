"""One name for the campaigns folder: ``--results`` on every command.

``submit --out`` (an old alias of ``--results``) and ``report --out`` (the report's folder, now
``--report-dir``) still work, with a one-line deprecation notice on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.campaigns import QUICKSTART, TRIVIAL_LOCAL
from tests.support.cli import invoke

COMMANDS = ("submit", "status", "list", "wait", "cancel", "retry", "collect", "report", "compare")


def ddlbench(*args, code: int = 0):
    res = invoke(args)
    assert res.exit_code == code, res.output
    return res


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(TRIVIAL_LOCAL)
    return path


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_results_with_an_example(command):
    text = ddlbench(command, "--help").output
    assert "--results DIR" in text and "Folder that holds the campaigns" in text
    assert "--results" in text.split("Examples:", 1)[1]


def test_submit_results_then_wait_results(tmp_path, profile):
    res = tmp_path / "R"
    ddlbench("submit", QUICKSTART, "--cluster", profile, "--results", res, "--campaign", "qs")
    out = ddlbench("wait", "qs", "--results", res, "--timeout", "180")
    assert "6 COMPLETED" in out.stdout
    st = json.loads(ddlbench("status", "--json", "--results", res).stdout)
    assert st["campaign"] == "qs" and st["counts"] == {"COMPLETED": 6}


def test_submit_out_is_a_deprecated_alias_of_results(tmp_path, profile):
    res = tmp_path / "R"
    out = ddlbench("submit", QUICKSTART, "--cluster", profile, "--dry-run", "--out", res)
    notice = [line for line in out.stderr.splitlines() if "deprecated" in line]
    assert notice == [
        "ddlbench submit: --out is deprecated; use --results DIR (--results names the folder "
        "that holds the campaigns on every command)"
    ]
    assert (res / "quickstart" / "campaign.json").is_file()
    assert out.stdout.strip() == str((res / "quickstart").resolve())
    # the same folder twice is fine; two different folders are refused
    ddlbench(
        "submit", QUICKSTART, "--cluster", profile, "--dry-run", "--out", res, "--results", res
    )
    bad = ddlbench(
        "submit", QUICKSTART, "--dry-run", "--out", res, "--results", tmp_path / "S", code=2
    )
    assert "--out and --results name different folders" in bad.output


@pytest.mark.parametrize("command", ["status", "wait", "cancel", "retry", "collect"])
def test_out_on_other_commands_points_at_results(tmp_path, command):
    res = ddlbench(command, "qs", "--out", tmp_path, code=2)
    assert f"{command} has no --out option" in res.output
    assert f"--results {tmp_path}" in res.output


def test_report_out_is_a_deprecated_alias_of_report_dir(tmp_path):
    # the notice comes first; then the unknown campaign is an input error as usual
    res = ddlbench("report", "nope", "--results", tmp_path, "--out", tmp_path / "rep", code=2)
    assert res.stderr.splitlines()[0] == (
        "ddlbench report: --out is deprecated; use --report-dir DIR "
        "(the folder the report is written to)"
    )
    both = ("--out", tmp_path / "a", "--report-dir", tmp_path / "b")
    res = ddlbench("report", "nope", "--results", tmp_path, *both, code=2)
    assert "--out and --report-dir name different folders" in res.output
    text = ddlbench("report", "--help").output
    assert "--report-dir DIR" in text and "--out" not in text.split("Examples:")[0]
