"""``ddlbench predict``: the what-if table, its JSON, the curve, bad input, and ``--from`` a
collected campaign with an allreduce sweep."""

from __future__ import annotations

import json

import pytest

from ddlbench.analyse import hierarchy, whatif
from tests.support.cli import invoke
from tests.support.synth import SynthRun, write_campaign

BASE = ["predict", "--model", "resnet50", "--batch", "256", "--precision", "amp",
        "--single-device-throughput", "1200", "--gpus-per-node", "8"]  # fmt: skip


def test_predict_prints_every_node_count_and_draws_the_curve(tmp_path):
    png = tmp_path / "curve.png"
    args = ["--nodes", "1,2,8", "--intra-busbw", "nvlink-v100", "--inter-busbw", "edr"]
    res = invoke(BASE + args + ["--plot", png])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "nvlink-v100 (150 GB/s)" in lines[0] and "overlap estimated" in lines[0]
    assert [ln.split()[0] for ln in lines[2:]] == ["1", "8", "16", "64"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_predict_json_matches_the_model(tmp_path):
    args = ["--nodes", "1,4", "--intra-busbw", "nvlink-a100", "--inter-busbw", "3.125",
            "--nics-per-node", "2", "--json", "--no-plot"]  # fmt: skip
    res = invoke(BASE + args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["inter"]["busbw_gbps"] == 3.125 and out["nics_per_node"] == 2
    pts = {p["devices"]: p for p in out["points"]}
    assert sorted(pts) == [1, 8, 32]
    topo = hierarchy.Topology(
        8,
        4,
        hierarchy.preset("nvlink-a100"),
        hierarchy.link("3.125", "inter"),
        2,
        hierarchy.base_latency_s(),
    )
    want = whatif.point(whatif.Case("resnet50", 256, 1200.0), topo)  # fmt: skip
    assert pts[32]["efficiency"] == pytest.approx(want["efficiency"])
    assert pts[32]["comm_s"] > pts[8]["comm_s"] > 0
    for key in ("step_s", "throughput", "efficiency", "comm_s", "exposed_comm_s", "dominant"):
        assert key in pts[32]
    assert pts[1]["efficiency"] == 1.0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--intra-busbw", "nvlink-v100", "--inter-busbw", "hdr2"],
         "unknown inter-node interconnect preset 'hdr2' (did you mean 'hdr'?) "
         "(known: edr, hdr, ndr, 10gbe, 25gbe, 100gbe)"),
        (["--intra-busbw", "-5", "--inter-busbw", "edr"], "must be a positive number"),
        (["--intra-busbw", "nvlink-v100", "--inter-busbw", "0"], "must be a positive number"),
        (["--intra-busbw", "nvlink-v100", "--inter-busbw", "edr", "--nodes", ""],
         "--nodes: give at least one node count"),
        (["--intra-busbw", "nvlink-v100", "--inter-busbw", "edr", "--model", "resnet18"],
         "unknown model 'resnet18'"),
        (["--intra-busbw", "nvlink-v100"], "--inter-busbw is required: a preset (edr, hdr"),
    ],
)  # fmt: skip
def test_predict_bad_input_exits_2(extra, message):
    res = invoke(BASE + ["--no-plot"] + extra)
    assert res.exit_code == 2, res.output
    assert message in res.stderr and "Traceback" not in res.output


def test_list_presets_names_each_source():
    res = invoke(["predict", "--list-presets", "--json"])
    assert res.exit_code == 0
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert {"nvlink-v100", "nvlink-a100", "nvlink-h100", "pcie4", "edr", "hdr", "ndr",
            "25gbe", "100gbe"} <= set(rows)  # fmt: skip
    assert all(r["source"] for r in rows.values())


def test_predict_from_a_campaign_uses_its_base_sweep_and_links(results):
    sizes = [1 << k for k in range(10, 27, 2)]
    sweep = [
        SynthRun("pytorch", model="allreduce", mode="allreduce", nodes=nn, tasks_per_node=tp,
                 allreduce_sizes=sizes, workload="allreduce_torch")
        for nn, tp in ((1, 4), (2, 4))
    ]  # fmt: skip
    write_campaign(results, "sweep", sweep)
    train = [SynthRun("pytorch", nodes=nn, tasks_per_node=tp, repeat=r, measure_steps=6)
             for nn, tp in ((1, 1), (1, 4), (2, 4)) for r in range(2)]  # fmt: skip
    write_campaign(results, "train", train)
    res = invoke(["predict", "--from", "train", "--calibration", "sweep", "--results", results,
                  "--gpus-per-node", "4", "--nodes", "1,2,16", "--json", "--no-plot"])  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["model"] == "resnet50" and out["inputs"].startswith("from campaign train")
    # the synthetic sweep's truth: 90 GB/s in a node, 22 GB/s across nodes
    assert out["intra"]["busbw_gbps"] == pytest.approx(90, rel=0.03)
    assert out["inter"]["busbw_gbps"] == pytest.approx(22, rel=0.03)
    assert [p["devices"] for p in out["points"]] == [1, 4, 8, 64]
    # a preset on the command line wins over the fitted link
    res = invoke(["predict", "--from", "train", "--calibration", "sweep", "--results", results,
                  "--inter-busbw", "ndr", "--json", "--no-plot"])  # fmt: skip
    assert json.loads(res.stdout)["inter"]["name"] == "ndr"


@pytest.mark.parametrize(
    "fraction, says",
    [(None, "estimated by wait-free backprop"), (0.8, "measured: 1 - logged exposed comm_s")],
)
def test_the_report_model_says_which_overlap_it_used(results, fraction, says):
    from ddlbench.analyse.analysis import analyse
    from ddlbench.analyse.scaling_model import build
    from ddlbench.collect.collector import collect_campaign

    sizes = [1 << k for k in range(10, 27, 2)]
    sweep = [SynthRun("pytorch", model="allreduce", mode="allreduce", nodes=1, tasks_per_node=4,
                      allreduce_sizes=sizes, workload="allreduce_torch")]  # fmt: skip
    cal = collect_campaign(write_campaign(results, "sw", sweep))
    train = [SynthRun("pytorch", nodes=1, tasks_per_node=tp, measure_steps=6,
                      compute_fraction=fraction) for tp in (1, 4)]  # fmt: skip
    d = collect_campaign(write_campaign(results, "tr", train))
    model = build(analyse(d), d, cal)
    line = next(a for a in model.assumptions if "overlapped fraction" in a)
    assert says in line
    p = model.predictions.set_index("devices")
    assert (p["predicted_exposed_s"] <= p["predicted_allreduce_s"] + 1e-12).all()
    assert p.loc[1, "predicted_exposed_s"] == 0.0
