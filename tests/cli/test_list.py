"""``ddlbench list``: every campaign under the results folder, from its own files.

The campaigns here are real: one submitted to the local executor and run to its end, one
rendered with ``--dry-run``, and copies of them broken on purpose.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.campaigns import QUICKSTART, TRIVIAL_LOCAL
from tests.support.cli import invoke


def ddlbench(*args, code: int = 0):
    res = invoke(args)
    assert res.exit_code == code, res.output
    return res


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """``ran`` (6 runs, all completed, collected) then ``rendered`` (6 runs, dry run)."""
    tmp = tmp_path_factory.mktemp("list")
    profile = tmp / "profile.yaml"
    profile.write_text(TRIVIAL_LOCAL)
    res = tmp / "results"
    common = ("--cluster", profile, "--results", res)
    ddlbench("submit", QUICKSTART, *common, "--campaign", "ran")
    ddlbench("wait", "ran", "--results", res, "--timeout", "180")
    ddlbench("collect", "ran", "--results", res)
    ddlbench("submit", QUICKSTART, *common, "--campaign", "rendered", "--dry-run")
    return res


def listing(results: Path) -> dict:
    return json.loads(ddlbench("list", "--json", "--results", results).stdout)


def test_list_json_counts_states_oldest_first_latest_last(results):
    doc = listing(results)
    assert doc["results"] == str(results.absolute())
    ran, rendered = doc["campaigns"]
    assert (ran["name"], rendered["name"]) == ("ran", "rendered")
    assert ran["counts"] == {"COMPLETED": 6} and ran["ended"] is True and ran["runs"] == 6
    assert rendered["counts"] == {"NOT_SUBMITTED": 6} and rendered["ended"] is False
    # a dry run is marked, and never the latest while a campaign with submitted runs exists
    assert (ran["latest"], rendered["latest"]) == (True, False)
    assert (ran["dry_run"], rendered["dry_run"]) == (False, True)
    assert (ran["collected"], rendered["collected"]) == (True, False)
    for entry in (ran, rendered):
        assert entry["cluster"] == "triv-local" and entry["scheduler"] == "local"
        assert entry["created"] and entry["problems"] == [] and entry["reports"] == []
        assert entry["path"] == str((results / entry["name"]).absolute())


def test_list_table_names_each_campaign_and_where_states_come_from(results):
    out = ddlbench("list", "--results", results).stdout
    lines = out.splitlines()
    assert lines[0].split() == [
        "CAMPAIGN", "CREATED", "CLUSTER", "SCHEDULER", "RUNS", "STATES", "COLLECTED", "REPORT",
    ]  # fmt: skip
    assert lines[1].startswith("ran (latest) ") and "6 COMPLETED" in lines[1]
    assert lines[1].split()[-2:] == ["yes", "-"]  # collected, no report
    assert lines[2].startswith("rendered (dry run) ") and "6 NOT_SUBMITTED" in lines[2]
    assert lines[-1].startswith(f"2 campaigns in {results.absolute()}; states as last recorded")


def test_commands_without_a_campaign_use_the_latest_real_one(results, tmp_path):
    status = ddlbench("status", "--results", results, "--json")
    assert json.loads(status.stdout)["campaign"] == "ran"
    # with only a dry run there, it is the latest (and still marked a dry run)
    res = tmp_path / "results"
    shutil.copytree(results / "rendered", res / "rendered")
    (only,) = listing(res)["campaigns"]
    assert only["latest"] is True and only["dry_run"] is True
    table = ddlbench("list", "--results", res).stdout.splitlines()
    assert table[1].startswith("rendered (latest, dry run) ")


def test_a_broken_campaign_is_listed_with_its_problem_and_hides_no_other(results, tmp_path):
    res = tmp_path / "results"
    shutil.copytree(results, res)
    shutil.copytree(res / "ran", res / "torn")
    (res / "torn" / "state.sqlite").write_bytes(b"not a database, " * 64)
    shutil.copytree(res / "rendered", res / "garbled")
    (res / "garbled" / "campaign.json").write_text('{"runs": [')
    by_name = {e["name"]: e for e in listing(res)["campaigns"]}
    assert by_name["ran"]["counts"] == {"COMPLETED": 6}
    torn, garbled = by_name["torn"], by_name["garbled"]
    assert torn["runs"] == 6 and torn["counts"] == {} and torn["ended"] is None
    assert torn["problems"] == ["state.sqlite cannot be read: run states unknown"]
    assert garbled["runs"] is None and garbled["counts"] == {}
    assert garbled["problems"][0].startswith("campaign.json cannot be read: ")
    out = ddlbench("list", "--results", res).stdout
    assert "  torn: state.sqlite cannot be read" in out and "  garbled: campaign.json" in out


def test_list_of_an_empty_or_missing_results_folder(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = ddlbench("list", "--results", empty)
    assert res.stdout == "" and "no campaigns in" in res.stderr
    assert listing(empty) == {"results": str(empty.absolute()), "campaigns": []}
    missing = ddlbench("list", "--results", tmp_path / "typo", code=2)
    assert "results folder" in missing.stderr and "does not exist" in missing.stderr
    assert "Traceback" not in missing.output


def test_collected_is_reports_rule_reading_the_store_is_no_change(results, tmp_path):
    # status, list and report open the store (its -wal and -shm files come and go): the data
    # stay fresh; a write to a row the collector reads makes them stale, for report and list
    from ddlbench.campaign import states as S
    from ddlbench.campaign.store_view import StoreView
    from ddlbench.collect.freshness import is_stale
    from ddlbench.execute.store import CampaignStore

    res = tmp_path / "results"
    shutil.copytree(results / "ran", res / "ran")
    camp = res / "ran"

    def collected() -> tuple:
        (entry,) = listing(res)["campaigns"]
        column = ddlbench("list", "--results", res).stdout.splitlines()[1].split()[-2]
        return is_stale(camp), entry["collected"], entry["stale"], column

    with StoreView.open(camp) as view:
        assert view.attempts(["state"])
    ddlbench("status", "ran", "--results", res)
    with CampaignStore.open(camp) as store:
        store.set_meta("probe", 1)  # a write, but to nothing the collector reads
    assert collected() == (False, True, False, "yes")
    with CampaignStore.open(camp) as store:
        first = sorted(store.latest().values(), key=lambda a: a.run_id)[0]
        assert store.update_attempt(first.id, if_state_in=[S.COMPLETED], state=S.FAILED)
    assert collected() == (True, False, True, "stale")
    ddlbench("collect", "ran", "--results", res)
    assert collected() == (False, True, False, "yes")
    # a rank log that appears (these runs ran `true`: they wrote none) is a change too
    log = next(camp.glob("runs/*/logs/attempt-1")) / "rank-0.jsonl"
    log.write_text("{}\n")
    assert collected() == (True, False, True, "stale")
    ddlbench("collect", "ran", "--results", res)
    # and so is a placement record, which feeds the placement columns
    (log.parent / "placement").mkdir()
    (log.parent / "placement" / "rank-0.json").write_text('{"rank": 0}\n')
    assert collected() == (True, False, True, "stale")


def test_the_first_status_of_a_dry_run_leaves_its_data_fresh(results, tmp_path):
    # report collects a dry run (nothing to report: exit 3); the first status then creates
    # its store, with no attempt in it: nothing the collector reads has changed
    from ddlbench.collect.freshness import is_stale

    res = tmp_path / "results"
    shutil.copytree(results / "rendered", res / "rendered")
    camp = res / "rendered"
    ddlbench("report", "rendered", "--results", res, "-q", code=3)
    assert not is_stale(camp)
    ddlbench("status", "rendered", "--results", res)
    assert not is_stale(camp)
    (entry,) = listing(res)["campaigns"]
    assert (entry["collected"], entry["stale"]) == (True, False)


def test_status_of_a_dry_run_says_none_was_submitted(results):
    out = ddlbench("status", "rendered", "--results", results).stdout
    assert "6 runs (none submitted): 6 NOT_SUBMITTED" in out and "in progress" not in out
