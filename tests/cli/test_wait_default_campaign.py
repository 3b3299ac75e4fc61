"""``ddlbench wait`` without a CAMPAIGN waits for the most recent one, as ``status`` and
``report`` do (docs/your-own-workload.md: ``ddlbench wait && ddlbench report``)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ddlbench.campaign.paths import CampaignPaths
from ddlbench.cli import main


def _campaign(results: Path, name: str, created: str) -> None:
    paths = CampaignPaths(results / name)
    paths.root.mkdir(parents=True)
    manifest = {"format": "ddlbench-campaign/1", "campaign": name, "runs": [], "created": created}
    paths.manifest.write_text(json.dumps(manifest))


def test_wait_without_a_campaign_waits_for_the_most_recent_one(tmp_path):
    _campaign(tmp_path, "older", "2030-01-01T00:00:00")
    _campaign(tmp_path, "newer", "2030-01-02T00:00:00")
    res = CliRunner().invoke(main, ["wait", "--results", str(tmp_path), "--timeout", "30"])
    assert res.exit_code == 0, res.output
    assert "newer: 0/0 runs ended" in res.output and "older" not in res.output


def test_wait_and_status_say_the_same_default_in_their_help():
    for command in ("wait", "status"):
        text = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
        assert "[CAMPAIGN]" in text and "(default: the most recent campaign)" in text
