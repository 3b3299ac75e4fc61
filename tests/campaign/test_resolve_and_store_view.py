"""Finding campaigns (one rule for "latest") and the read-only view of the store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddlbench.campaign.paths import CampaignPaths
from ddlbench.campaign.resolve import list_campaigns, resolve_campaign
from ddlbench.campaign.store_view import ATTEMPT_COLUMNS, StoreView, read_attempts
from ddlbench.cli import main
from ddlbench.errors import InputError


def _campaign(results: Path, name: str, created: str = "", mtime: float = 0.0) -> Path:
    paths = CampaignPaths(results / name)
    paths.root.mkdir(parents=True)
    manifest = {"format": "ddlbench-campaign/1", "campaign": name, "runs": []}
    if created:
        manifest["created"] = created
    paths.manifest.write_text(json.dumps(manifest))
    if mtime:
        os.utime(paths.manifest, (mtime, mtime))
    return paths.root


def test_latest_is_by_created_then_mtime_then_name(tmp_path):
    # written last, but created first: not the latest
    _campaign(tmp_path, "b-new-file", created="2026-01-01T00:00:00+00:00", mtime=3000)
    _campaign(tmp_path, "a-created-last", created="2026-02-01T00:00:00+00:00", mtime=1000)
    assert resolve_campaign(None, tmp_path).name == "a-created-last"
    # same created time: the manifest written last wins, then the name
    _campaign(tmp_path, "c", created="2026-03-01T00:00:00+00:00", mtime=1000)
    _campaign(tmp_path, "d", created="2026-03-01T00:00:00+00:00", mtime=2000)
    assert resolve_campaign(None, tmp_path).name == "d"
    _campaign(tmp_path, "e", created="2026-03-01T00:00:00+00:00", mtime=2000)
    assert resolve_campaign(None, tmp_path).name == "e"
    assert [p.name for p in list_campaigns(tmp_path)] == [
        "b-new-file",
        "a-created-last",
        "c",
        "d",
        "e",
    ]


def test_folders_without_a_manifest_are_not_campaigns(tmp_path):
    _campaign(tmp_path, "real", created="2026-01-01T00:00:00+00:00")
    (tmp_path / "data-only" / "runs").mkdir(parents=True)
    assert [p.name for p in list_campaigns(tmp_path)] == ["real"]
    assert resolve_campaign(None, tmp_path).name == "real"


def test_a_name_or_a_path(tmp_path, monkeypatch):
    root = _campaign(tmp_path, "qs")
    assert resolve_campaign("qs", tmp_path) == tmp_path / "qs"
    monkeypatch.chdir(tmp_path)
    assert resolve_campaign("./qs", tmp_path / "elsewhere") == Path("./qs")
    assert resolve_campaign(str(root), None) == root
    with pytest.raises(InputError, match="is not a campaign folder"):
        resolve_campaign(str(tmp_path), None)


def test_unknown_names_say_where_they_looked_and_suggest(tmp_path):
    _campaign(tmp_path, "quickstart")
    with pytest.raises(InputError) as err:
        resolve_campaign("quikstart", tmp_path)
    msg = str(err.value)
    assert f"no campaign 'quikstart' in results folder {tmp_path}" in msg
    assert "(did you mean 'quickstart'?)" in msg
    with pytest.raises(InputError, match=r"results folder .*missing does not exist.*--results"):
        resolve_campaign(None, tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"no campaigns in .*empty.*ddlbench submit SPEC"):
        resolve_campaign(None, empty)
    with pytest.raises(InputError, match="campaign name"):
        resolve_campaign("bad name!", tmp_path)


@pytest.mark.parametrize("command", ["status", "wait", "cancel", "retry", "collect", "report"])
def test_every_command_uses_the_one_resolver(tmp_path, command):
    _campaign(tmp_path, "quickstart")
    res = CliRunner().invoke(main, [command, "quikstart", "--results", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert "(did you mean 'quickstart'?)" in res.output
    assert "Traceback" not in res.output


def test_store_view_reads_attempts_without_writing(tmp_path):
    from ddlbench.execute.store import CampaignStore

    root = _campaign(tmp_path, "s")
    assert read_attempts(root) is None  # no store yet
    assert not CampaignPaths(root).store.exists()  # and the view did not create one
    with CampaignStore.open(root) as store:
        store.conn.execute(
            "INSERT INTO runs(run_id, seq, script, run_dir, added) VALUES('r0', 0, 's', 'd', 0)"
        )
        a = store.new_attempt("r0", "local", "PENDING", job_id="7")
        store.update_attempt(a.id, state="COMPLETED", exit_code=0, start_time=1.0, end_time=2.0)
    store_file = CampaignPaths(root).store
    before = (store_file.stat().st_mtime_ns, store_file.read_bytes())
    found = read_attempts(root)
    assert found is not None
    assert found.columns[: len(ATTEMPT_COLUMNS)] == list(ATTEMPT_COLUMNS)
    assert [(r["run_id"], r["number"], r["state"], r["job_id"]) for r in found.rows] == [
        ("r0", 1, "COMPLETED", "7")
    ]
    assert found.rows[0]["exit_code"] == 0 and found.rows[0]["end_time"] == 2.0
    view = StoreView.open(root)
    assert view is not None
    with view, pytest.raises(Exception, match="readonly"):
        view.conn.execute("DELETE FROM attempts")
    # SQLite may recreate the WAL side files for a reader; the database itself is untouched
    assert (store_file.stat().st_mtime_ns, store_file.read_bytes()) == before


def test_collect_store_states_keeps_its_dataframe(tmp_path):
    pytest.importorskip("pandas")
    from ddlbench.collect.states import store_states
    from ddlbench.execute.store import CampaignStore

    root = _campaign(tmp_path, "s")
    assert store_states(root) is None
    with CampaignStore.open(root) as store:
        store.conn.execute(
            "INSERT INTO runs(run_id, seq, script, run_dir, added) VALUES('r0', 0, 's', 'd', 0)"
        )
    df = store_states(root)
    assert list(df.columns) == [
        "run_id",
        "attempt",
        "state",
        "job_id",
        "exit_code",
        "start",
        "end",
        "nodelist",
        "signal",
        "reason",
    ]
    assert len(df) == 0


def test_latest_reads_only_the_head_of_a_rendered_manifest(tmp_path):
    """Finding the latest campaign reads ``created`` from the manifest's first lines, so a
    results folder of large campaigns is not parsed whole by every command."""
    from ddlbench.campaign.manifest import manifest_head
    from tests.support.campaigns import QUICKSTART, TRIVIAL_LOCAL

    profile = tmp_path / "profile.yaml"
    profile.write_text(TRIVIAL_LOCAL)
    results = tmp_path / "results"
    for name in ("first", "second"):
        res = CliRunner().invoke(
            main,
            ["submit", QUICKSTART, "--dry-run", "--cluster", str(profile), "--campaign", name,
             "--results", str(results)],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
    path = CampaignPaths(results / "second").manifest
    whole = json.loads(path.read_text())
    head = manifest_head(path)
    assert head == {k: whole[k] for k in head} and {"format", "campaign", "created"} <= set(head)
    assert "runs" not in head and "spec" not in head
    # everything after the first nested value unreadable: the head is still read
    text = path.read_text()
    cut = text.index('"spec": {') + len('"spec": {')
    path.write_text(text[:cut] + "\nnot JSON at all")
    assert manifest_head(path)["created"] == whole["created"]
    assert resolve_campaign(None, results).name == "second"
    # a manifest not written one key per line is read whole; an unreadable one gives {}
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps({"created": "2026-01-01T00:00:00+00:00", "runs": []}))
    assert manifest_head(compact) == {"created": "2026-01-01T00:00:00+00:00", "runs": []}
    assert manifest_head(tmp_path / "missing.json") == {}
    # a key asked for that comes after the first nested value: read whole
    late = tmp_path / "late.json"
    late.write_text(json.dumps({"format": "f", "spec": {"a": 1}, "created": "2026"}, indent=1))
    assert manifest_head(late) == {"format": "f"}
    assert manifest_head(late, need=("created",))["created"] == "2026"
