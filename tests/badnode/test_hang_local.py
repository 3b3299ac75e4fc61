"""A rank that blocks forever before its allreduce, through the local executor: the run ends
HUNG within the watchdog's time (not at the time limit), naming the rank, its host and phase,
with every rank's stack dump in the attempt's log folder; on one node, no suspect."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.cli import ddlbench
from tests.support.envs import require_envs

pytestmark = pytest.mark.frameworks

SPEC = """\
name: hang
mode: allreduce
frameworks: [{name: pytorch, backend: gloo}]
allreduce: {min_bytes: 1024, max_bytes: 4096, iters: 3, warmup: 1}
scale: {points: [1x2]}
watchdog: {first_s: 15, floor_s: 5, grace_s: 2}
comm_debug: true
env: {DDLBENCH_TEST_HANG_RANK: "1"}
"""


def test_blocked_rank_is_named(tmp_path):
    require_envs("pytorch")
    spec = tmp_path / "hang.yaml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    t0 = time.time()
    sub = ddlbench("submit", str(spec), "--cluster", "local", "--campaign", "hang", results=results)
    assert sub.returncode == 0, sub.stderr
    ddlbench("wait", "hang", "--timeout", "300", results=results)
    took = time.time() - t0
    status = json.loads(ddlbench("status", "hang", "--json", results=results).stdout)
    (row,) = status["runs"]
    assert row["state"] == "HUNG", row
    assert took < 240, took  # the profile's time limit is 30 minutes
    missing = row["hang"]["not_arrived"]
    assert [m["rank"] for m in missing] == [1]
    assert missing[0]["phase"] == "prepare" and missing[0]["last_step"] is None
    assert "rank 1 on" in row["reason"] and "never arrived" in row["reason"]
    # rank 0 arrived: it waits in the collective; both dumped their stacks
    ranks = {r["rank"]: r for r in row["hang"]["ranks"]}
    assert ranks[0]["phase"] == "collective"
    with open(missing[0]["stacks"]) as fh:
        stacks = fh.read()
    assert "before_collective" in stacks and "Thread" in stacks
    # a run on one node: what was seen, with its node, and no suspect (nothing to compare with)
    assert status["suspects"] == []
    assert status["seen_on_one_node"][0]["node"] == missing[0]["host"]
    assert status["seen_on_one_node"][0]["evidence"][0]["kind"] == "hang"
    assert row["exit_code"] == 86 or "86" in (row["cause"] or "") or row["state"] == "HUNG"
    # comm_debug: c10d's own INFO lines are in the job's error file
    (err,) = list((results / "hang" / "runs").glob("*/slurm-*.err"))
    assert "c10d" in err.read_text()
    rep = ddlbench("report", "hang", "--format", "md", "-q", results=results)
    # no run is complete: exit 3 with what is missing; the report shows what the hang left
    assert rep.returncode == 3 and "has no complete run" in rep.stderr, rep.stderr
    # a hang is called a hang, with the watchdog's words, not a failure of the stopped ranks
    assert ": hung: rank 1 on" in rep.stderr and "1 hung." in rep.stderr, rep.stderr
    assert "retry hang --failed   # run the hung ones again" in rep.stderr
    text = (results / "hang" / "report" / "report.md").read_text()
    assert f"| {missing[0]['host']} | hang |" in text and "rank 1 never arrived" in text
    table = ddlbench("status", "hang", results=results).stdout
    assert "HUNG" in table and f"seen on node {missing[0]['host']} (a run on one node" in table
    assert "suspect node" not in table and "## Suspected nodes" not in text
