"""Hang and health evidence names a suspected node only for runs on more than one node
(docs/bad-nodes.md#one-node): on one node, status and the report say what was seen, with the
node it was seen on, and call no node a suspect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest

from ddlbench.analyse.suspects import annotate_status, campaign_suspects, suspects_lines
from ddlbench.campaign.manifest import load_campaign
from ddlbench.campaign.paths import CampaignPaths, RunPaths
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign

ONE, TWO, DONE = (
    "pytorch-resnet50-n1x2-b32-r0",
    "pytorch-resnet50-n2x1-b32-r0",
    "pytorch-resnet50-n1x1-b32-r0",
)


def _hang(camp: Path, run_id: str, rank: int, host: str) -> None:
    """The hang record that rank ``rank``'s watchdog writes (its stack dump beside it)."""
    logs = RunPaths(CampaignPaths.of(camp).run_dir(run_id)).log_dir()
    (logs / f"stacks-rank-{rank}.txt").write_text("Thread 0x1 (most recent call first):\n")
    rec = {"type": "hang", "rank": rank, "host": host, "phase": "backward", "last_step": 3}
    rec.update(waited_s=5.1, limit_s=5.0, tick_s=0.25, stacks=f"stacks-rank-{rank}.txt")
    log = logs / f"rank-{rank}.jsonl"
    text = log.read_text()  # a killed rank's log: its truncated last line goes
    log.write_text(text[: text.rfind("\n") + 1] + json.dumps(rec) + "\n")


def _health_failure(camp: Path, run_id: str, node: str) -> None:
    folder = RunPaths(CampaignPaths.of(camp).run_dir(run_id)).preflight
    folder.mkdir(parents=True, exist_ok=True)
    check = {"check": "gpu_count", "status": "fail", "detail": "1 GPU, 4 expected"}
    (folder / f"{node}.json").write_text(json.dumps({"node": node, "health": {"checks": [check]}}))


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    """A run on one node that hung and failed a health check, the same on two nodes, and a
    complete run (so that the report has figures)."""
    runs = [
        SynthRun(tasks_per_node=2, killed_ranks=(1,)),
        SynthRun(nodes=2, killed_ranks=(1,)),
        SynthRun(),
    ]
    camp = write_campaign(tmp_path_factory.mktemp("evidence"), "evidence", runs)
    assert [r["run_id"] for r in load_campaign(camp).raw["runs"]] == [ONE, TWO, DONE]
    _hang(camp, ONE, 1, "gpu001")
    _health_failure(camp, ONE, "gpu001")
    _hang(camp, TWO, 1, "gpu002")
    _health_failure(camp, TWO, "gpu002")
    return camp


def _kinds(entries) -> Dict[str, set]:
    return {e["node"]: {(x["kind"], x["run_id"]) for x in e["evidence"]} for e in entries}


def test_one_node_evidence_is_seen_not_suspected(campaign):
    found = campaign_suspects(campaign, [ONE, TWO, DONE], complete=[DONE])
    # the two-node run's hang and health failure name gpu002; the one-node run names nobody
    assert _kinds(found["suspects"]) == {"gpu002": {("hang", TWO), ("health", TWO)}}
    assert _kinds(found["seen_on_one_node"]) == {"gpu001": {("hang", ONE), ("health", ONE)}}


def test_status_says_what_was_seen_on_one_node(campaign):
    rows = [{"run_id": r, "state": "FAILED"} for r in (ONE, TWO)]
    status = annotate_status(campaign, {"runs": rows + [{"run_id": DONE, "state": "COMPLETED"}]})
    assert [s["node"] for s in status["suspects"]] == ["gpu002"]
    assert [s["node"] for s in status["seen_on_one_node"]] == ["gpu001"]
    assert status["runs"][0]["reason"].startswith("hung: rank 1 on gpu001")  # what was seen
    lines = suspects_lines(status["suspects"], status["seen_on_one_node"])
    assert lines[0].startswith("suspect node gpu002: ")
    assert lines[1].startswith("seen on node gpu001 (a run on one node: no other node to")
    assert "not a suspect" in lines[1] and f"{ONE}: rank 1 never arrived" in lines[1]
    assert not any(line.startswith("suspect node gpu001") for line in lines)


def test_report_lists_one_node_evidence_apart(campaign):
    md = build_report(campaign, formats=("md", "html")).files["md"].read_text()
    suspected = md.split("\n## Suspected nodes\n")[1].split("\n## ")[0]
    seen = md.split("\n## Seen on one node\n")[1].split("\n## ")[0]
    assert "| gpu002 | hang |" in suspected and "| gpu002 | health |" in suspected
    assert "gpu001" not in suspected
    assert f"| gpu001 | hang | {ONE} | rank 1 never arrived (backward) |" in seen
    assert f"| gpu001 | health | {ONE} | health check failed (gpu_count) |" in seen
    html = (campaign / "report" / "report.html").read_text()
    assert 'id="seen">Seen on one node</h2>' in html


def test_one_node_campaign_names_no_suspect(tmp_path):
    """A campaign on one node only: what was seen, and no "Suspected nodes" section."""
    camp = write_campaign(tmp_path, "alone", [SynthRun(tasks_per_node=2, killed_ranks=(1,))])
    run_id = load_campaign(camp).raw["runs"][0]["run_id"]
    _hang(camp, run_id, 1, "gpu001")
    assert campaign_suspects(camp, [run_id])["suspects"] == []
    res = build_report(camp, formats=("md",))
    md = res.files["md"].read_text()
    assert "Suspected nodes" not in md and "suspect node" not in md
    assert "## Seen on one node" in md and "| gpu001 | hang |" in md
