"""The hierarchical allreduce, the wait-free-backprop overlap and the what-if step time,
against cases computed by hand (docs/scaling-model.md)."""

from __future__ import annotations

import pytest

from ddlbench.analyse import hierarchy, overlap, whatif
from ddlbench.analyse.alpha_beta import AlphaBeta, allreduce_time, links_from_fits
from ddlbench.analyse.hierarchy import Link, Topology
from ddlbench.workloads.common.architectures import EXPECTED_PARAMS

NVL = Link("nvl", 100.0, 2e-6)  # 100 GB/s, 2 us per ring step
NET = Link("net", 10.0, 10e-6)  # 10 GB/s per NIC, 10 us per step
M = 1e9  # 1 GB of gradients


def test_one_node_is_a_ring_on_the_intra_link():
    # 8 GPUs, 1 node: 2(8-1) = 14 steps x 2 us; 2 x 7/8 x 1 GB / 100 GB/s = 17.5 ms
    ar = hierarchy.allreduce(Topology(8, 1, NVL, NET), M)
    assert ar.algorithm == "ring" and ar.bottleneck == "intra-node"
    assert ar.latency_s == pytest.approx(14 * 2e-6)
    assert ar.time_s == pytest.approx(28e-6 + 17.5e-3)


def test_many_nodes_the_nic_sets_the_ring_and_nics_add_up():
    # 4 GPUs x 4 nodes, one NIC: ring busbw = min(100, 10) = 10 GB/s
    # steps: 2 x 15 = 30, of which 2 x 3 = 6 cross nodes: 24 x 2 us + 6 x 10 us = 108 us
    topo = Topology(4, 4, NVL, NET, nics_per_node=1)
    r = hierarchy.ring(topo, M)
    assert r.latency_s == pytest.approx(108e-6)
    assert r.bandwidth_s == pytest.approx(2 * 15 / 16 * M / 10e9)
    assert r.bottleneck == "inter-node"
    # 4 NICs: 40 GB/s across nodes, still below NVLink
    r4 = hierarchy.ring(Topology(4, 4, NVL, NET, nics_per_node=4), M)
    assert r4.bandwidth_s == pytest.approx(2 * 15 / 16 * M / 40e9)
    # 16 NICs for 4 GPUs: each GPU drives one NIC at most, still 40 GB/s
    r16 = hierarchy.ring(Topology(4, 4, NVL, NET, nics_per_node=16), M)
    assert r16.bandwidth_s == pytest.approx(r4.bandwidth_s)
    # 8 GPUs, 8 NICs of 25 GB/s: more than NVLink carries, the intra-node link sets the ring
    r8 = hierarchy.ring(Topology(8, 4, NVL, Link("hdr", 25.0, 10e-6), nics_per_node=8), M)
    assert r8.bottleneck == "intra-node"
    assert r8.bandwidth_s == pytest.approx(2 * 31 / 32 * M / 100e9)


def test_one_gpu_per_node_every_step_crosses_the_network():
    # 1 GPU x 8 nodes: 14 steps, all inter-node; one GPU drives one NIC even if there are 4
    r = hierarchy.ring(Topology(1, 8, NVL, NET, nics_per_node=4), M)
    assert r.latency_s == pytest.approx(14 * 10e-6)
    assert r.bandwidth_s == pytest.approx(2 * 7 / 8 * M / 10e9)


def test_tree_wins_small_messages_on_many_nodes_ring_wins_large_ones():
    topo = Topology(8, 64, NVL, NET)
    # tree latency 2 x (7 x 2 us + log2(64) x 10 us) = 148 us; ring: 2 x 511 steps,
    # 126 across nodes: 896 x 2 + 126 x 10 = 3052 us
    t, r = hierarchy.tree(topo, 1024), hierarchy.ring(topo, 1024)
    assert t.latency_s == pytest.approx(148e-6)
    assert r.latency_s == pytest.approx(3052e-6)
    assert hierarchy.allreduce(topo, 1024).algorithm == "tree"
    # bandwidth: tree 2 M / busbw (algbw = busbw / 2, NCCL's tuning model) vs 2(N-1)/N M
    assert hierarchy.tree(topo, M).bandwidth_s == pytest.approx(2 * M / 10e9)
    assert hierarchy.allreduce(topo, 10 * M).algorithm == "ring"
    # one node: no tree
    assert hierarchy.allreduce(Topology(8, 1, NVL, NET), 1024).algorithm == "ring"
    assert hierarchy.allreduce(Topology(1, 1, NVL, NET), M).time_s == 0.0


def test_nccl_held_to_one_algorithm_gets_it_across_nodes_and_the_ring_on_one_node():
    """NCCL_ALGO (``--nccl-algo``): the ring where the tree would win, the tree where the
    ring would; one node stays a ring; links fitted from a sweep stay a ring."""
    from dataclasses import replace

    topo = Topology(8, 64, NVL, NET)
    ring = replace(topo, algorithm="ring")
    assert hierarchy.allreduce(ring, 1024) == hierarchy.ring(topo, 1024)  # tree would win
    tree = replace(topo, algorithm="tree")
    assert hierarchy.allreduce(tree, 10 * M) == hierarchy.tree(topo, 10 * M)  # ring would
    assert hierarchy.allreduce(Topology(8, 1, NVL, NET, algorithm="tree"), M).algorithm == "ring"
    fitted = replace(tree, inter=replace(NET, basis="fitted"))
    assert hierarchy.allreduce(fitted, 1024).algorithm == "ring"
    assert hierarchy.ALGORITHMS == ("auto", "ring", "tree")


def test_presets_and_links_from_the_command_line():
    edr = hierarchy.preset("edr", "inter")
    assert edr.busbw_gbps == 12.2 and "nccl-tests/issues/29" in edr.source
    assert all(p.source for p in hierarchy.presets().values())
    with pytest.raises(hierarchy.UnknownPreset, match="known: nvlink-p100, nvlink-v100"):
        hierarchy.preset("edr", "intra")
    assert hierarchy.link("50", "inter").busbw_gbps == 50.0
    with pytest.raises(ValueError, match="positive"):
        hierarchy.link("0", "inter")


def test_layer_sizes_add_up_to_the_canonical_parameter_counts():
    for model, params in {**EXPECTED_PARAMS, **overlap.PREDICT_ONLY_PARAMS}.items():
        assert overlap.param_count(model) == params
    # ResNet-101 (predict only): 7.8 G multiply-accumulates a 224x224 image (He et al. 2016)
    assert sum(la.macs for la in overlap.layer_sizes("resnet101")) == pytest.approx(7.8e9, 0.01)
    assert not set(overlap.PREDICT_ONLY_PARAMS) & set(EXPECTED_PARAMS)
    vgg = overlap.layer_sizes("vgg16")
    assert vgg[-3].params == 512 * 49 * 4096 + 4096  # fc1, the largest gradient


def test_buckets_close_in_backward_order():
    layers = [overlap.LayerSize(str(i), p, 1) for i, p in enumerate((10, 30, 20, 40))]
    # backward order 40, 20, 30, 10 (x 1 byte); cap 50: [40+20], [30+10]
    assert overlap.buckets(layers, 1, 50) == [(60, 2), (40, 0)]
    # first bucket capped at 1 byte: [40], then [20+30], [10]
    assert overlap.buckets(layers, 1, 50, first_bytes=1) == [(40, 3), (50, 1), (10, 0)]
    assert len(overlap.buckets(layers, 1, 0)) == 4  # cap 0: one allreduce per layer


def test_wait_free_backprop_by_hand():
    # two layers of equal MACs: compute 3 s, backward 2 s, layer 1 done at 1 s, layer 0 at 2 s
    layers = [overlap.LayerSize("a", 100, 1), overlap.LayerSize("b", 100, 1)]
    ov = overlap.wait_free(layers, 3.0, lambda b: b / 100, 1, bucket_bytes=100)
    # bucket b ready at 1 s, 1 s of allreduce -> 2 s; bucket a ready at 2 s -> 3 s: 1 s exposed
    assert (ov.comm_s, ov.exposed_s, ov.buckets) == (2.0, 1.0, 2)
    assert ov.fraction == pytest.approx(0.5)
    # one bucket: ready at 2 s, all 2 s exposed
    one = overlap.wait_free(layers, 3.0, lambda b: b / 100, 1, bucket_bytes=1e9)
    assert (one.comm_s, one.exposed_s) == (2.0, 2.0)


def test_whatif_step_time_and_a_measured_overlap_wins():
    case = whatif.Case("resnet50", 64, 256.0)  # C = 0.25 s
    topo = Topology(4, 2, NVL, NET)
    est = whatif.point(case, topo)
    # the slowest of 8 ranks at 2 % jitter: 0.02 x z(8), z(8) = 1.4236 (tables of normal order
    # statistics), on top of the compute
    assert est["sync_s"] == pytest.approx(0.25 * 0.02 * 1.4236, rel=1e-3)
    # and compute slowed by 18.9 % of the communication it overlaps (Lee et al. 2025)
    overlapped = est["comm_s"] - est["exposed_comm_s"]
    assert est["overlap_slowdown_s"] == pytest.approx(0.189 * overlapped) and overlapped > 0
    step = 0.25 + est["sync_s"] + est["exposed_comm_s"] + est["overlap_slowdown_s"]
    assert est["step_s"] == pytest.approx(step)
    assert est["efficiency"] == pytest.approx(0.25 / est["step_s"])
    assert est["throughput"] == pytest.approx(8 * 64 / est["step_s"])
    assert est["grad_bytes"] == 4 * EXPECTED_PARAMS["resnet50"]
    assert est["overlap_source"].startswith("estimated")
    meas = whatif.point(whatif.Case("resnet50", 64, 256.0, overlap_fraction=0.25), topo)
    assert meas["exposed_comm_s"] == pytest.approx(0.75 * est["comm_s"])
    assert meas["overlap_source"] == "measured"


def test_links_from_a_sweep_reproduce_its_layouts():
    # one node 4 ranks: alpha 60 us (6 steps -> 10 us each), 90 GB/s; 2 x 4: alpha 200 us,
    # 22 GB/s; its 14 steps: 12 inside nodes x 10 us + 2 across: (200 - 120) / 2 = 40 us
    fits = [AlphaBeta(4, 1, 60e-6, 90.0, 8, 0.0), AlphaBeta(8, 2, 200e-6, 22.0, 8, 0.0)]
    intra, inter = links_from_fits(fits)
    assert intra.alpha_s == pytest.approx(10e-6) and intra.busbw_gbps == 90.0
    assert inter.alpha_s == pytest.approx(40e-6) and inter.busbw_gbps == 22.0
    # the swept layout through the hierarchy equals its own fit
    assert allreduce_time(fits[1:] + [AlphaBeta(4, 1, 60e-6, 90.0, 8, 0.0)], 8, 2, M) == (
        pytest.approx(fits[1].time(M))
    )
    topo = Topology(4, 2, intra, inter)
    assert hierarchy.ring(topo, M).time_s == pytest.approx(fits[1].time(M))
    # 4 nodes: 30 steps, 6 across: 24 x 10 + 6 x 40 = 480 us
    assert allreduce_time(fits, 16, 4, 0) == pytest.approx(480e-6)
