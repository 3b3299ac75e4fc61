"""Faults with a clear answer: a damaged store, a bad manifest, a full disk, an unreachable
controller, a killed rank, and infrastructure failures that are resubmitted (docs/failures.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaigns import make_campaign
from click.testing import CliRunner

from ddlbench.campaign.manifest import load_campaign
from ddlbench.cli import main
from ddlbench.execute.store import CampaignStore


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _finished_campaign(tmp_path: Path) -> Path:
    cdir = make_campaign(tmp_path, "dmg", [{"run_id": "a", "body": ["true"]}])
    with CampaignStore.open(cdir) as store:
        store.sync_runs(load_campaign(cdir).runs)
        store.new_attempt("a", "local", "COMPLETED", exit_code=0)
    return cdir


@pytest.mark.parametrize("damage", ["garbage", "half"])
def test_damaged_store_exits_2_naming_the_file(tmp_path, damage):
    cdir = _finished_campaign(tmp_path)
    store = cdir / "state.sqlite"
    for side in ("state.sqlite-wal", "state.sqlite-shm"):
        (cdir / side).unlink(missing_ok=True)
    data = store.read_bytes()
    if damage == "garbage":
        store.write_bytes(b"\x00garbage, not a database\n" * 200)
    else:
        store.write_bytes(data[: len(data) // 2])
    before = store.read_bytes()
    for cmd in ("status", "wait"):
        res = _cli(cmd, "dmg", "--results", tmp_path)
        assert res.exit_code == 2, res.output
        assert f"{store}: the campaign store is damaged" in res.output
        assert "internal error" not in res.output and "Traceback" not in res.output
        assert "ddlbench recover dmg" in res.output
    assert store.read_bytes() == before  # neither repaired nor replaced behind the user's back


def test_store_from_older_ddlbench_gains_new_columns(tmp_path):
    import sqlite3

    path = tmp_path / "state.sqlite"
    with CampaignStore(path) as store:
        store.conn.execute("ALTER TABLE attempts DROP COLUMN cause")
    with CampaignStore(path) as store:
        store.conn.execute("INSERT INTO runs VALUES('x', 0, 'x.sh', 'runs/x', 1, 1, 0)")
        a = store.new_attempt("x", "slurm", "FAILED", cause="task 1 on n2: Killed")
        assert store.get_attempt(a.id).cause == "task 1 on n2: Killed"
    cols = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(attempts)")}
    assert {"cause", "failed_task", "failed_signal", "source", "slurm_state"} <= cols


def test_manifest_entry_without_run_id_exits_2_naming_the_file(tmp_path):
    cdir = _finished_campaign(tmp_path)
    manifest = json.loads((cdir / "campaign.json").read_text())
    del manifest["runs"][0]["run_id"]
    (cdir / "campaign.json").write_text(json.dumps(manifest))
    res = _cli("status", "dmg", "--results", tmp_path)
    assert res.exit_code == 2, res.output
    assert f"{cdir / 'campaign.json'}: runs[0] has no 'run_id'" in res.output
    assert "internal error" not in res.output
