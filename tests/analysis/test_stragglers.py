"""Stragglers: the compute-time index wherever compute_s is logged; ties are not named."""

from __future__ import annotations

import pandas as pd
import pytest

from ddlbench.analyse.analysis import analyse
from ddlbench.collect.collector import collect_campaign
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign


def _campaign(results):
    common = dict(nodes=1, tasks_per_node=4, measure_steps=20, compute_fraction=0.6)
    runs = [
        # a rank 30 % slower in compute: synchronous allreduce evens out every step time
        SynthRun(repeat=0, compute_stragglers={2: 1.3}, **common),
        SynthRun(repeat=1, compute_stragglers={1: 1.3}, **common),
        SynthRun(repeat=2, **common),  # no straggler
        # no compute_s logged and every rank's steps equally long: a tie, nobody is slowest
        SynthRun(
            nodes=1,
            tasks_per_node=2,
            repeat=3,
            step_times={0: [0.1] * 6, 1: [0.1] * 6},
            noise=0.0,
            repeat_noise=0.0,
        ),
    ]
    return write_campaign(results, "strag", runs)


def test_compute_stragglers_are_flagged_and_named(results):
    camp = _campaign(results)
    data = collect_campaign(camp)
    runs = data.runs.set_index("run_id")
    for rep, slow in ((0, 2), (1, 1)):
        r = runs.loc[f"pytorch-resnet50-n1x4-b32-r{rep}"]
        assert r["straggler_metric"] == "compute"
        assert r["step_straggler_index"] == pytest.approx(1.0, abs=1e-9)
        assert r["straggler_index"] == pytest.approx(1.3, rel=0.05)
        assert r["straggler_index"] == r["compute_straggler_index"]
        assert r["slowest_rank"] == slow
        assert r["slowest_ranks"].startswith(f"{slow}@")
    clean = runs.loc["pytorch-resnet50-n1x4-b32-r2"]
    assert clean["straggler_index"] < 1.10
    tie = runs.loc["pytorch-resnet50-n1x2-b32-r3"]
    assert tie["straggler_metric"] == "step"
    assert tie["straggler_index"] == 1.0
    assert pd.isna(tie["slowest_rank"]) and pd.isna(tie["slowest_ranks"])
    a = analyse(data)
    flagged = a.stragglers[a.stragglers["straggler"]]
    assert sorted(flagged["run_id"]) == [
        "pytorch-resnet50-n1x4-b32-r0",
        "pytorch-resnet50-n1x4-b32-r1",
    ]
    md = build_report(camp, formats=("md",)).files["md"].read_text()
    assert "2 run(s) with a straggler" in md
    assert "compute time" in md
