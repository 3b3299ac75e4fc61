"""A rank that blocks forever before its allreduce, on the real two-node Slurm cluster: the
job ends long before its time limit and the run is HUNG, naming the rank and its node."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.cli import ddlbench
from tests.support.envs import require_envs

SPEC = """\
name: slurmhang
mode: allreduce
frameworks: [{name: pytorch, backend: gloo}]
allreduce: {min_bytes: 1024, max_bytes: 4096, iters: 3, warmup: 1}
scale: {points: [2x1]}
watchdog: {first_s: 20, floor_s: 5, grace_s: 2}
slurm: {time: "00:10:00"}
env: {DDLBENCH_TEST_HANG_RANK: "1"}
"""


@pytest.mark.frameworks
@pytest.mark.slurm
def test_blocked_rank_on_slurm_is_named(tmp_path, slurm_cluster):
    require_envs("pytorch")
    spec = tmp_path / "slurmhang.yaml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    t0 = time.time()
    sub = ddlbench(
        "submit", str(spec), "--cluster", "localslurm", "--campaign", "slurmhang", results=results
    )
    assert sub.returncode == 0, sub.stderr
    ddlbench("wait", "slurmhang", "--timeout", "400", results=results)
    took = time.time() - t0
    status = json.loads(ddlbench("status", "slurmhang", "--json", results=results).stdout)
    (row,) = status["runs"]
    assert row["state"] == "HUNG", row
    assert took < 300, took  # the time limit is 10 minutes
    (missing,) = row["hang"]["not_arrived"]
    assert missing["rank"] == 1 and missing["phase"] == "prepare"
    ranks = {r["rank"]: r for r in row["hang"]["ranks"]}
    assert ranks[0]["phase"] == "collective" and ranks[0]["host"] != missing["host"]
    assert row["hang"]["hosts"] == [missing["host"]]
    assert f"rank 1 on {missing['host']}" in row["reason"]
    with open(missing["stacks"]) as fh:
        assert "before_collective" in fh.read()
    # the first watchdog to fire asked the other rank to dump: both stacks are there
    folder = Path(missing["stacks"]).parent
    assert sorted(p.name for p in folder.glob("stacks-rank-*.txt")) == [
        "stacks-rank-0.txt",
        "stacks-rank-1.txt",
    ]
    assert (folder / "hang-dump-request.json").is_file()


@pytest.mark.frameworks
@pytest.mark.slurm
def test_a_rank_frozen_with_sigstop_is_named_with_its_slurm_node(tmp_path, slurm_cluster):
    """Rank 1 of a 2-node run stopped with SIGSTOP, at two different steps: each time the run
    is HUNG and names rank 1 on its Slurm node (n2, not the machine's host name, which both
    loopback nodes share), and never the healthy rank 0 or its node. Ten trials:
    benchmarks/frozen_rank.py (docs/bad-nodes.md)."""
    from benchmarks._frozen import freeze_trial

    require_envs("pytorch")
    for i, step in enumerate((8, 60)):
        trial = freeze_trial(tmp_path / "results", step, f"frozen{i}")
        assert trial.frozen_node == "n2", trial
        assert trial.right, trial
        assert "n1" not in trial.suspects, trial  # the healthy node is never a suspect
        assert trial.seconds_to_end < 120, trial  # the watchdog's floor is 5 s
