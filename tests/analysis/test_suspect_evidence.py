"""Suspects only with evidence (docs/bad-nodes.md#stragglers): a campaign on one node names no
node, and a straggler names its node only when its index exceeds the threshold by more than
the run's own step-to-step noise."""

from __future__ import annotations

from ddlbench.analyse.analysis import analyse
from ddlbench.analyse.suspects import campaign_suspects
from ddlbench.collect.collector import collect_campaign
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign


def test_noisy_one_node_campaign_names_no_node(results):
    """One node, 3 repeats, about 40 % noise between repeats and between steps, and a rank
    30 % slower in compute: its runs are stragglers, but nothing points at the node."""
    common = dict(nodes=1, tasks_per_node=2, measure_steps=30, compute_fraction=0.6)
    noisy = dict(noise=0.4, repeat_noise=0.4)
    runs = [
        SynthRun(repeat=r, compute_stragglers={1: 1.3}, **noisy, **common) for r in range(3)
    ] + [SynthRun(tasks_per_node=1, repeat=r, **noisy) for r in range(3)]
    camp = write_campaign(results, "onenode", runs, seed=3)
    data = collect_campaign(camp)
    assert set(data.runs["n_hosts"]) == {1}
    a = analyse(data)
    assert a.stragglers["straggler"].any()  # the slow rank is still shown as a straggler
    assert not a.stragglers["suspect"].any()
    found = campaign_suspects(camp, list(data.runs["run_id"]), a.stragglers)
    assert found["suspects"] == []
    files = build_report(camp, formats=("md", "html")).files
    for fmt in ("md", "html"):
        text = files[fmt].read_text()
        assert "Suspected nodes" not in text
        assert "by compute time" in text or "compute time" in text


def _two_node_run(repeat: int, noise: float) -> SynthRun:
    return SynthRun(
        nodes=2,
        tasks_per_node=2,
        repeat=repeat,
        measure_steps=40,
        compute_fraction=0.6,
        compute_stragglers={3: 1.3},
        noise=noise,
    )


def test_a_straggler_names_its_node_only_above_its_noise(results):
    camp = write_campaign(results, "twonode", [_two_node_run(0, 0.02), _two_node_run(1, 0.5)])
    data = collect_campaign(camp)
    a = analyse(data)
    s = a.stragglers.set_index("run_id")
    quiet, noisy = s.loc["pytorch-resnet50-n2x2-b32-r0"], s.loc["pytorch-resnet50-n2x2-b32-r1"]
    assert quiet["straggler"] and quiet["suspect"]
    assert quiet["straggler_noise"] < 0.1 and quiet["n_hosts"] == 2
    # above the threshold too, but by less than the run's step-to-step noise
    assert noisy["straggler_index"] > 1.1 and noisy["straggler"]
    assert noisy["straggler_noise"] > noisy["straggler_index"] - 1.1
    assert not noisy["suspect"]
    found = campaign_suspects(camp, list(data.runs["run_id"]), a.stragglers)
    (suspect,) = found["suspects"]
    assert suspect["node"] == quiet["slowest_host"]
    assert [e["run_id"] for e in suspect["evidence"]] == ["pytorch-resnet50-n2x2-b32-r0"]
