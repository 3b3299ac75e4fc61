"""The costs beyond bandwidth (synchronisation, per-message latency, what nothing overlaps), the
prediction intervals and the sharded data-parallel strategies, each checked by hand."""

from __future__ import annotations

import json
import math

import pytest

from ddlbench.analyse import costs, hierarchy, overlap, sharded, whatif
from ddlbench.analyse.hierarchy import Link, Topology
from tests.support.cli import invoke

#: one byte per nanosecond, no latency: times below are bytes / 1e9
FLAT = Link("flat", 1.0, 0.0)


def test_expected_maximum_of_normal_draws():
    # z(2) = 1/sqrt(pi); z(4), z(8): tables of normal order statistics (Harter 1961)
    assert costs.expected_max_normal(1) == 0.0
    assert costs.expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-4)
    assert costs.expected_max_normal(4) == pytest.approx(1.0294, abs=1e-4)
    assert costs.expected_max_normal(8) == pytest.approx(1.4236, abs=1e-4)
    assert costs.sync_fraction_normal(8, 0.02) == pytest.approx(0.02 * 1.4236, abs=1e-5)


def test_expected_maximum_of_measured_draws_by_hand():
    xs = [1.0, 1.0, 1.0, 1.1]
    # E[max of 2] = 1 x (1/16 + 3/16 + 5/16) + 1.1 x 7/16 = 1.04375
    assert costs.sync_fraction_empirical(xs, 2) == pytest.approx(0.04375)
    assert costs.sync_fraction_empirical(xs, 1) == 0.0
    assert costs.sync_fraction_empirical(xs, 10_000) == pytest.approx(0.1)  # the slowest


def test_all_gather_on_a_ring_by_hand():
    link = Link("l", 10.0, 2e-6)
    topo = Topology(4, 2, link, link, 1, 1e-6)
    ag = sharded.gather(topo, 8e9)
    # (N-1)/N x M / busbw = 7/8 x 8e9 / 10e9; latency base + (N - K) + (K - 1) steps
    assert ag.bandwidth_s == pytest.approx(0.7)
    assert ag.latency_s == pytest.approx(1e-6 + 7 * 2e-6)


def test_fsdp_full_shard_by_hand():
    layers = [overlap.LayerSize("a", 10**9, 1), overlap.LayerSize("b", 10**9, 1)]
    topo = Topology(2, 1, FLAT, FLAT)
    # every gather and reduce-scatter: 1/2 x 1e9 / 1e9 = 0.5 s; forward 1 s, backward 2 s
    # per layer. Forward: gather a (0.5), a (to 1.5), gather b (to 1.0), b (to 2.5);
    # backward: gather b again (to 3.0), b (to 5.0) while a is gathered (to 3.5),
    # reduce-scatter b (to 5.5), a (to 7.0), reduce-scatter a (to 7.5): 1.5 s exposed of 6 s
    s = sharded.fsdp(layers, topo, 2.0, 4.0, 1.0, 1.0)
    assert (s.comm_s, s.exposed_s, s.messages) == (pytest.approx(3.0), pytest.approx(1.5), 6)
    # hybrid sharding on one node is full sharding
    assert sharded.fsdp(layers, topo, 2.0, 4.0, 1.0, 1.0, hybrid=True) == s
    # hybrid on 2 nodes of 2: gathers inside the node as above (0.5 s each), and each
    # gradient shard (1e9 / 2 bytes) allreduced across the 2 nodes at the GPU's half of the
    # node's one NIC (0.5 GB/s): 2 x 1/2 x 0.5e9 / 0.5e9 = 1 s more per reduce-scatter
    hybrid = sharded.fsdp(layers, Topology(2, 2, FLAT, FLAT), 2.0, 4.0, 1.0, 1.0, hybrid=True)
    assert hybrid.comm_s == pytest.approx(4 * 0.5 + 2 * 1.5)


def test_zero_adds_the_gather_nothing_overlaps():
    # fp32 and no small first bucket: ZeRO-1's buckets are DDP's, plus the all-gather of the
    # updated parameters after the optimizer step
    case = whatif.Case("gpt2-124m", 4, 20.0, seq=1024, first_bucket_bytes=0)
    topo = Topology(8, 2, hierarchy.preset("nvlink-a100"), hierarchy.preset("10gbe"))
    ddp, z1 = (whatif.point(case, topo), whatif.point(replace_parallel(case, "zero1"), topo))
    params = sum(la.params for la in whatif.layers_of(case))
    post = sharded.gather(topo, params * 4).time_s
    assert z1["exposed_comm_s"] == pytest.approx(ddp["exposed_comm_s"] + post)
    assert z1["unoverlapped_s"] >= post
    assert z1["efficiency"] < ddp["efficiency"]


def replace_parallel(case, parallel):
    from dataclasses import replace

    return replace(case, parallel=parallel)


def test_intervals_come_from_the_inputs():
    topo = Topology(4, 8, hierarchy.preset("pcie3-host"), hierarchy.preset("10gbe"))
    case = whatif.Case("resnet50", 64, 253.1, bucket_mb=64, first_bucket_bytes=0)
    p = whatif.point(case, topo)
    assert p["efficiency_low"] < p["efficiency"] < p["efficiency_high"]
    # a link given as a number has no range, a measured jitter replaces the default and one
    # overlap slowdown serves at both ends: the interval narrows to the base's uncertainty
    # around the mid value
    fixed = Topology(4, 8, Link("x", 5.0, 5.7e-6), Link("y", 0.95, 40e-6))
    steady = whatif.Case("resnet50", 64, 253.1, jitter_samples=(1.0,) * 50, base_uncertainty=0.01,
                         overlap_slowdown=(0.189,) * 3)  # fmt: skip
    q = whatif.point(steady, fixed)
    assert q["sync_s"] == 0.0
    assert q["efficiency_low"] == pytest.approx(q["efficiency"] / 1.01)
    assert q["efficiency_high"] == pytest.approx(q["efficiency"] * 1.01)
    # TCP and RDMA on the same line rate: sockets reach less, and say where that comes from
    tcp, roce = hierarchy.preset("100gbe"), hierarchy.preset("100gbe-roce")
    assert tcp.transport == "tcp" and roce.transport == "rdma"
    assert tcp.busbw_gbps < roce.busbw_gbps and tcp.alpha_s > roce.alpha_s
    assert "nccl/issues/450" in tcp.source


def test_horovod_fusion_cycles_by_hand():
    layers = [overlap.LayerSize(str(i), 100, 1) for i in range(4)]
    # backward 4 s (compute 6 s), a layer every second: ready at 1, 2, 3, 4 s; cycle 2 s:
    # at 2 s two layers (200 bytes, 2 s of allreduce, to 4 s), at 4 s the other two (to 6 s)
    ov = overlap.wait_free(layers, 6.0, lambda b: b / 100, 1, 1e9, 0, 2 / 3, cycle_s=2.0)
    assert (ov.buckets, ov.comm_s, ov.exposed_s) == (2, pytest.approx(4.0), pytest.approx(2.0))


@pytest.mark.parametrize(
    "args",
    [
        # issue 27
        ["--model", "mpt-13b", "--seq", "2048", "--batch", "2", "--precision", "bf16",
         "--parallel", "fsdp", "--base-throughput", "30000", "--base-devices", "8",
         "--gpus-per-node", "8", "--nodes", "1,2,4,8", "--intra-busbw", "nvlink-h100",
         "--inter-busbw", "ndr", "--nics-per-node", "8", "--json"],
        # issue 26 (links not given: assumed and said so)
        ["--model", "llama3-8b", "--seq", "8192", "--batch", "2", "--precision", "bf16",
         "--parallel", "fsdp", "--activation-checkpointing", "selective", "--gpus-per-node",
         "8", "--nodes", "1,16", "--base-throughput", "40000", "--base-devices", "8", "--json"],
    ],
)  # fmt: skip
def test_the_issue_command_lines(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke(["predict"] + args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["unit"] == "tokens/s" and out["parallel"] == "fsdp"
    pts = out["points"]
    assert pts[0]["devices"] == 8 and pts[0]["efficiency"] == pytest.approx(1.0)
    assert pts[0]["throughput"] == pytest.approx(out["base_throughput"])
    for p in pts:
        for key in ("devices", "efficiency", "efficiency_low", "efficiency_high",
                    "throughput", "step_s", "sync_s", "exposed_comm_s", "latency_s"):  # fmt: skip
            assert key in p, key
        assert p["efficiency_low"] <= p["efficiency"] <= p["efficiency_high"]
    effs = [p["efficiency"] for p in pts]
    assert effs == sorted(effs, reverse=True)
    assert list(tmp_path.iterdir()) == []  # no plot unless asked
    # the memory per rank is the plan's prediction at each point's world size: sharded state
    # shrinks as devices are added, activations and logits do not
    from ddlbench.analyse.lm_memory import predict_memory

    mems = [p["memory_gib"] for p in pts]
    assert mems == sorted(mems, reverse=True) and mems[0] > mems[-1]
    ckpt = out["activation_checkpointing"]
    want = predict_memory(out["model"], int(out["seq"]), 2, "bf16", "fsdp", ckpt, 8, 8)
    assert mems[0] == pytest.approx(want["total_gib"])


def test_a_transformer_given_by_its_shape_and_every_strategy():
    base = ["predict", "--transformer", "12,768,12,50257", "--seq", "1024", "--batch", "8",
            "--precision", "bf16", "--base-throughput", "40000", "--base-devices", "1",
            "--gpus-per-node", "4", "--nodes", "1,4", "--intra-busbw", "pcie4",
            "--inter-busbw", "25gbe", "--json"]  # fmt: skip
    eff = {}
    for strategy in sharded.STRATEGIES:
        res = invoke(base + ["--parallel", strategy])
        assert res.exit_code == 0, res.output
        pts = json.loads(res.stdout)["points"]
        assert [p["devices"] for p in pts] == [1, 4, 16]
        eff[strategy] = pts[-1]["efficiency"]
    # over a slow network, full sharding moves 1.5x the bytes of an allreduce and pays it in
    # every layer; hybrid sharding keeps the gathers inside the node
    assert eff["fsdp"] < eff["hsdp"]
    assert all(0 < e < 1 for e in eff.values())


def test_the_base_point_has_no_efficiency_interval_but_keeps_its_throughput_interval():
    case = whatif.Case("resnet50", 64, 253.1, base_uncertainty=0.05)
    rows = whatif.curve(case, 4, [1, 2], hierarchy.preset("pcie3-host"), hierarchy.preset("edr"))
    base = rows[0]
    assert base["devices"] == 1
    assert base["efficiency_low"] == base["efficiency"] == base["efficiency_high"] == 1.0
    assert base["throughput_low"] == pytest.approx(253.1 / 1.05)  # a factor either way
    assert base["throughput_high"] == pytest.approx(253.1 * 1.05)
    assert base["step_s_low"] < base["step_s"] < base["step_s_high"]
    for r in rows[1:]:  # beyond the base the base's uncertainty widens the efficiency too
        assert r["efficiency_low"] < r["efficiency"] < r["efficiency_high"]
    assert costs.efficiency_interval(0.9, 1.0, 0.02, at_base=False) == (0.9 / 1.02, 1.02)
    # the base's interval is symmetric on the log scale: as a factor either way, never below 0
    u = costs.relative_half_width(2314.3, 12803.7)
    assert u == pytest.approx(1.352, abs=1e-3) and costs.factor_words(u) == "-57 % to +135 %"
    assert costs.widen(0.9, 1.0, u)[0] > 0


def test_one_allreduce_per_gradient_tensor_with_a_cap_of_zero():
    layers = overlap.layer_sizes("resnet50")
    # torchvision's ResNet-50 has 161 parameter tensors: 53 convolutions, 53 batch norms with a
    # weight and a bias each, the classifier's weight and bias
    assert sum(len(la.tensors) for la in layers) == 161
    assert all(sum(la.tensors) == la.params for la in layers)
    per_tensor = overlap.buckets(layers, 4, 0)
    assert len(per_tensor) == 161
    assert sum(b for b, _ in per_tensor) == 4 * overlap.param_count("resnet50")
    # backward order: the classifier's weight and bias first
    assert sorted(per_tensor[:2]) == [
        (4 * 1000, len(layers) - 1),
        (4 * 2048 * 1000, len(layers) - 1),
    ]
    vgg = overlap.buckets(overlap.layer_sizes("vgg16"), 4, 0)
    assert len(vgg) == 32  # 13 convolutions and 3 linear layers, a weight and a bias each


def test_tcp_sockets_pay_the_measured_message_cost_between_nodes():
    sm = hierarchy.socket_message()
    tcp, rdma = hierarchy.preset("100gbe"), hierarchy.preset("edr")
    intra = hierarchy.preset("pcie3-host")
    on = Topology(4, 8, intra, tcp, 1, hierarchy.base_latency_s())
    steps = 2 * (on.ranks - 1)
    expected = 1e-6 * (sm["fixed_us"] + steps * sm["per_step_us"])
    assert hierarchy.allreduce(on, 4.0).latency_s == pytest.approx(expected)
    # the line through the measured startup times: 523, 908 and 1348 us at 8, 16, 32 workers
    for n, measured in ((8, 523e-6), (16, 908e-6), (32, 1348e-6)):
        t = Topology(4, n // 4, intra, tcp, 1, hierarchy.base_latency_s())
        assert hierarchy.allreduce(t, 4.0).latency_s == pytest.approx(measured, rel=0.1)
    # RDMA pays NCCL's latency model only; one node moves nothing over the network
    over_ib = Topology(4, 8, intra, rdma, 1, hierarchy.base_latency_s())
    assert hierarchy.allreduce(over_ib, 4.0).latency_s < 0.2 * expected
    one = Topology(4, 1, intra, tcp, 1, hierarchy.base_latency_s())
    assert hierarchy.allreduce(one, 4.0).latency_s < 1e-4
    # an all-gather: N-1 steps; the ends of the interval scale the cost
    ag = sharded.gather(on, 4.0).latency_s
    assert ag == pytest.approx(1e-6 * (sm["fixed_us"] + 31 * sm["per_step_us"]))
    pess = whatif._at(on, "pess")
    assert hierarchy.allreduce(pess, 4.0).latency_s > hierarchy.allreduce(on, 4.0).latency_s
    assert pess.message_scale == sm["high"] and whatif._at(on, "opt").message_scale == sm["low"]


def test_overlap_is_a_share_and_reads_zero_when_nothing_is_hidden():
    # LeNet's small gradients: the communication is all exposed, and 1 - exposed / comm of two
    # equal times read 5.55e-15 in --json before it was rounded
    case = whatif.Case("lenet", 32, 8655.0)
    for nodes, gpn in ((1, 2), (2, 2), (4, 2), (16, 8)):
        topo = Topology(nodes, gpn, hierarchy.preset("nvlink-h100"), hierarchy.preset("ndr"))
        p = whatif.point(case, topo)
        assert 0.0 <= p["overlap"] <= 1.0
        if p["exposed_comm_s"] == pytest.approx(p["comm_s"], rel=1e-9):
            assert p["overlap"] == 0.0
    assert whatif._overlap({"comm_s": 3e-5, "exposed_comm_s": 3e-5 * (1 - 1e-15)}) == 0.0
    assert whatif._overlap({"comm_s": 0.0, "exposed_comm_s": 0.0}) == 1.0


def test_the_efficiency_axis_shows_an_interval_above_100_percent():
    from ddlbench.cli.predict_output import efficiency_axis_top

    rows = [{"efficiency_high": 1.0}, {"efficiency_high": 1.276}]
    assert efficiency_axis_top(rows, []) >= 127.6  # the quickstart's noisy base: 56.1-127.6 %
    assert efficiency_axis_top([{"efficiency_high": 0.95}], []) == 110.0
    assert efficiency_axis_top(rows[:1], [{"measured_efficiency": 1.3}]) >= 130.0
