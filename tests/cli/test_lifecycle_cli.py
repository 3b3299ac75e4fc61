"""Lifecycle messages: text as given on one line, a bad --campaign checked before any
output, an empty DDLBENCH_RESULTS, folders ddlbench cannot write, a full stdout, node-hours
as plan --json rounds them, a lost store in ``list``, ``status --watch`` (docs/cli.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ddlbench.campaign import states as S
from ddlbench.campaign.manifest import load_campaign
from ddlbench.cli.common import node_hours_text
from ddlbench.execute.store import CampaignStore
from tests.support.campaigns import make_campaign
from tests.support.cli import invoke
from tests.support.repo import ROOT

QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def test_a_spec_path_is_printed_as_given_on_one_line(tmp_path):
    spec = tmp_path / "t[bold]y.yaml"
    shutil.copy(QUICKSTART, spec)
    name = "a-rather-long-campaign-name-that-pushes-the-line-past-eighty-columns"
    r = invoke(["submit", spec, "--dry-run", "--campaign", name, "--results", tmp_path / "r"])
    assert r.exit_code == 0, r.output
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"campaign {name} (spec quickstart): 6 runs") and first.endswith(
        f"('cluster' in {spec})"
    )


def test_a_bad_campaign_name_is_refused_before_any_output(tmp_path):
    r = invoke(["submit", QUICKSTART, "--dry-run", "--campaign", "ok\nddlbench: campaign ok"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "ddlbench: --campaign: campaign name 'ok\\nddlbench: campaign ok' must start with a "
        "letter or digit and contain only letters, digits, '.', '_' and '-' (no '..', at most "
        "128 characters)"
    ]
    assert not (tmp_path / "results").exists()


def test_an_empty_results_variable_means_the_default_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DDLBENCH_RESULTS", "")
    (tmp_path / "results").mkdir()
    (tmp_path / "other").mkdir()
    r = invoke(["list"])
    assert r.exit_code == 0 and f"no campaigns in {tmp_path / 'results'}" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["report", "x", "--report-dir", "{file}/sub"],
        ["init", "{file}/sub"],
        ["submit", str(QUICKSTART), "--dry-run", "--results", "{file}/r"],
        ["report", "x", "--report-dir", "/proc/nope"],
        ["init", "/proc/x"],
    ],
)
def test_a_folder_that_cannot_be_written_is_bad_input(tmp_path, args):
    if any(a.startswith("/proc") for a in args) and not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    (tmp_path / "f").write_text("a file\n")
    args = [a.replace("{file}", str(tmp_path / "f")) for a in args]
    r = invoke(args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "cannot write there" in lines[0], r.stderr
    assert "internal error" not in r.stderr


def test_a_results_variable_under_a_file_is_bad_input(tmp_path, monkeypatch):
    (tmp_path / "f").write_text("a file\n")
    monkeypatch.setenv("DDLBENCH_RESULTS", str(tmp_path / "f" / "x"))
    r = invoke(["submit", QUICKSTART, "--dry-run"])
    assert r.exit_code == 2 and "results folder ($DDLBENCH_RESULTS)" in r.stderr, r.output
    assert f"{tmp_path / 'f'} is a file, not a folder" in r.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("args", [["docs", "reports"], ["--version"]])
def test_a_full_stdout_is_said_to_be_the_output_not_a_disk(tmp_path, args):
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [sys.executable, "-m", "ddlbench", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
    assert p.returncode == 74, p.stderr
    assert p.stderr.startswith("ddlbench: could not write the output to stdout (No space left")
    assert "disk that holds" not in p.stderr and "Traceback" not in p.stderr


def test_node_hours_are_rounded_as_in_the_json():
    assert node_hours_text(0.0833 + 0.1667) == "0.25"
    assert (node_hours_text(112.5), node_hours_text(84.0), node_hours_text(1 / 3)) == (
        "112.5",
        "84",
        "0.333",
    )
    text = invoke(["plan", QUICKSTART]).stdout
    doc = json.loads(invoke(["plan", QUICKSTART, "--json"]).stdout)
    assert f", {node_hours_text(doc['node_hours'])} node-hours requested" in text
    ok = invoke(["validate", QUICKSTART]).stdout
    assert f"{node_hours_text(doc['node_hours'])} node-hours requested)" in ok


def _ended_campaign(results: Path) -> Path:
    runs = [{"run_id": r, "body": ["true"]} for r in ("a", "b")]
    campaign = load_campaign(make_campaign(results, "ended", runs, scheduler="slurm"))
    with CampaignStore.open(campaign.dir) as store:
        store.sync_runs(campaign.runs)
        store.new_attempt("a", "slurm", S.COMPLETED, job_id="1", exit_code=0)
        store.new_attempt("b", "slurm", S.FAILED, job_id="2", exit_code=1, cause="task 0: boom")
    return campaign.dir


def test_list_says_a_store_is_missing_where_runs_hold_output(tmp_path):
    camp = _ended_campaign(tmp_path)
    out = camp / "runs" / "a"
    out.mkdir(parents=True, exist_ok=True)
    (out / "slurm-1.out").write_text("ran\n")
    for f in camp.glob("state.sqlite*"):
        f.unlink()
    r = invoke(["list", "--results", tmp_path])
    assert r.exit_code == 0, r.output
    assert "NOT_SUBMITTED" not in r.stdout and "unknown" in r.stdout
    assert "  ended: state.sqlite is missing, but 1 run folder(s) hold output" in r.stdout
    assert "ddlbench recover ended" in r.stdout
    doc = json.loads(invoke(["list", "--results", tmp_path, "--json"]).stdout)
    assert doc["campaigns"][0]["counts"] == {} and doc["campaigns"][0]["ended"] is None


def test_watch_prints_the_status_object_and_the_table_without_a_terminal(tmp_path):
    _ended_campaign(tmp_path)
    once = json.loads(invoke(["status", "ended", "--results", tmp_path, "--json"]).stdout)
    r = invoke(["status", "ended", "--results", tmp_path, "--watch", "--json"])
    watched = json.loads(r.stdout.splitlines()[0])
    assert set(watched) == set(once) >= {"suspects", "seen_on_one_node"}
    text = invoke(["status", "ended", "--results", tmp_path, "--watch"]).stdout
    assert text.splitlines()[1].split()[:3] == ["RUN", "STATE", "JOB"]
    assert "task 0: boom" in text and "2 runs (all ended)" in text


def test_a_folder_under_a_parent_that_may_not_be_entered_is_bad_input(tmp_path, monkeypatch):
    """Path.exists raises PermissionError under another user's 0700 folder (root, who runs
    these tests, is never refused, so the refusal is simulated): an input error, not a crash."""
    from ddlbench.cli.common import check_output_folder
    from ddlbench.errors import InputError

    locked = tmp_path / "theirs"
    real_exists = Path.exists

    def exists(self, *args, **kwargs):
        if str(self).startswith(str(locked / "")):
            raise PermissionError(13, "Permission denied", str(self))
        return real_exists(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists)
    with pytest.raises(InputError, match="cannot be looked into \\(Permission denied\\)"):
        check_output_folder(locked / "results", "--results")
