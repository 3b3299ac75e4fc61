"""The report's transport comparison on a synthetic campaign: the same job over RDMA and over
TCP, the measured tcp/rdma ratio with its interval beside the model's ratio for the profile's
presets; a point outside the model's interval and a run off its transport are named."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ddlbench.analyse import hierarchy, whatif
from ddlbench.analyse.analysis import analyse
from ddlbench.analyse.transports import compare_transports
from ddlbench.collect.collector import ensure_collected
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign

PRESETS = {"intra": "nvlink-v100", "rdma": "edr", "tcp": "10gbe"}
STEP = 0.1  # s per step over RDMA at every scale (weak scaling, perfect)
BATCH = 32


def model_ratio(nodes: int) -> float:
    """The model's tcp/rdma efficiency ratio at ``nodes`` x 2 V100, from a 1x2 base."""
    case = whatif.Case("resnet50", BATCH, BATCH / STEP, base_devices=2, base_uncertainty=0.0)
    eff = {}
    for t in ("rdma", "tcp"):
        one = hierarchy.Topology(2, 1, hierarchy.preset("nvlink-v100"), hierarchy.preset(
            PRESETS[t]), 1, hierarchy.base_latency_s())  # fmt: skip
        eff[t] = whatif.point(case, replace(one, nodes=nodes), one)["efficiency"]
    return eff["tcp"] / eff["rdma"]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    # tcp as the model says at 2 nodes, at half of it at 4 nodes
    tcp_step = {2: STEP / model_ratio(2), 4: STEP / (0.5 * model_ratio(4))}
    runs = []
    for rep in range(3):
        for nodes in (1, 2, 4):
            runs.append(SynthRun(nodes=nodes, tasks_per_node=2, batch_size=BATCH, repeat=rep,
                                 tag="-rdma", transport="rdma", step_time=STEP))  # fmt: skip
            if nodes > 1:
                runs.append(SynthRun(nodes=nodes, tasks_per_node=2, batch_size=BATCH,
                                     repeat=rep, tag="-tcp", transport="tcp",
                                     step_time=tcp_step[nodes]))  # fmt: skip
    camp = write_campaign(tmp_path_factory.mktemp("tr"), "transports", runs)
    cluster = camp / "cluster.yaml"
    profile = json.loads(cluster.read_text())
    profile["network"]["presets"] = PRESETS
    cluster.write_text(json.dumps(profile))
    return camp


def test_measured_ratio_beside_the_models(campaign):
    data = ensure_collected(campaign)
    assert set(data.runs["transport"]) == {"rdma", "tcp"}
    a = analyse(data)
    cmp = compare_transports(a.configs, a.runs, PRESETS)
    rows = cmp.rows.set_index("nodes")
    assert list(rows.index) == [2, 4]  # one node: no traffic between nodes, no comparison
    for nodes, factor in ((2, 1.0), (4, 0.5)):
        r = rows.loc[nodes]
        assert r["measured_ratio"] == pytest.approx(factor * model_ratio(nodes), rel=0.05)
        assert r["measured_low"] < r["measured_ratio"] < r["measured_high"]
        # the model's base is the measured 1x2 rdma point (within its noise of STEP)
        assert r["model_ratio"] == pytest.approx(model_ratio(nodes), rel=0.02)
        assert r["model_low"] <= r["model_ratio"] <= r["model_high"]
    assert rows.loc[2, "verdict"] == "agrees" and rows.loc[4, "verdict"] == "below"
    assert 0.2 < model_ratio(2) < 0.95  # 10 GbE TCP costs ResNet-50 on V100 at 2 nodes


def test_report_model_section(campaign):
    md = build_report(campaign, formats=("md",)).files["md"].read_text()
    assert "## Scaling model" in md
    assert (
        "Transport comparison: the same job over TCP and over RDMA: model 10gbe against edr" in md
    )
    assert f"{model_ratio(2):.2f}" in md and "agrees" in md
    assert "Transport comparison of pytorch at 4x2: the measured tcp/rdma ratio" in md
    assert "is below the model's" in md


def test_a_run_off_its_transport_is_named_and_no_presets_no_model(campaign):
    data = ensure_collected(campaign)
    a = analyse(data)
    runs = a.runs.copy()
    runs["nccl_net"] = runs["transport"].map({"rdma": "IB", "tcp": "Socket"})
    runs.loc[(runs["transport"] == "rdma") & (runs["nodes"] == 4), "nccl_net"] = "Socket"
    cmp = compare_transports(a.configs, runs, None)
    rows = cmp.rows.set_index("nodes")
    assert rows.loc[2, "off_transport"] == ""
    assert rows.loc[4, "off_transport"] == "rdma ran over NCCL network Socket"
    assert any("4x2 is not one: rdma ran over NCCL network Socket" in n for n in cmp.notes)
    assert rows["model_ratio"].isna().all() and (rows["verdict"] == "").all()
    assert any("names no network.presets" in n for n in cmp.notes)
