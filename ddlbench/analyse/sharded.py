"""Sharded data parallelism on the hierarchy of ``hierarchy.py``
(docs/scaling-model.md#sharded-data-parallelism).

Per step, for ``L`` layers of ``p_i`` parameters (transformer blocks; the embedding first), on
``N`` ranks, with ``F`` and ``B`` the forward and backward compute spread over the layers by
their multiply-accumulates:

* ``fsdp`` (PyTorch FSDP ``FULL_SHARD``): an all-gather of each layer's parameters before its
  forward and again before its backward, and a reduce-scatter of its gradients after its
  backward; the next layer's all-gather is prefetched (``BACKWARD_PRE``) on the one
  communication stream. Exposed: what the stream has not finished when compute would end.
* ``hsdp`` (``HYBRID_SHARD``): ``fsdp`` inside a node (``G`` ranks on the intra-node link),
  then an allreduce of each gradient shard across the ``K`` nodes (each GPU's share of the
  node's NICs).
* ``zero2`` (grad-op sharding, DeepSpeed ZeRO-2): gradients reduce-scattered per bucket,
  overlapped with the backward pass like DDP's buckets, then an all-gather of the updated
  parameters after the optimizer step that nothing overlaps.
* ``zero1`` (DeepSpeed ZeRO-1): DDP's bucketed allreduce, then the same all-gather.

All-gather and reduce-scatter on a ring (nccl-tests ``doc/PERFORMANCE.md``): ``(N-1)/N x M /
busbw`` with ``M`` the full tensor, latency ``N-1`` steps (half an allreduce's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, List

from . import hierarchy, overlap

STRATEGIES = ("ddp", "fsdp", "hsdp", "zero1", "zero2")


@dataclass(frozen=True)
class Sharded:
    comm_s: float  # every collective's time, summed
    exposed_s: float  # what compute does not hide
    unoverlapped_s: float  # the part nothing can overlap (first gather, post-step gather)
    messages: int  # collectives per step
    latency_s: float  # their latency, summed


def gather(topo: hierarchy.Topology, nbytes: float) -> hierarchy.Allreduce:
    """An all-gather (or reduce-scatter) of a ``nbytes`` tensor on the ring of ``topo``."""
    n, k = topo.ranks, topo.nodes
    if n <= 1:
        return hierarchy.Allreduce(0.0, "none", 0.0, 0.0, "none")
    lat = topo.base_latency_s + (n - k) * topo.intra.alpha_s + (k - 1) * topo.inter.alpha_s
    lat = topo.message_latency_s(n - 1, lat)
    busbw, where = hierarchy.ring_busbw_gbps(topo)
    bw = (n - 1) / n * nbytes / (busbw * 1e9)
    return hierarchy.Allreduce(lat + bw, "ring", lat, bw, where)


def _cross_node(topo: hierarchy.Topology, nbytes: float) -> hierarchy.Allreduce:
    """HSDP's allreduce of one GPU's gradient shard across the nodes: ``K`` ranks, each GPU
    with its share of the node's NICs."""
    g = topo.gpus_per_node
    share = topo.inter.busbw_gbps * max(1, topo.nics_per_node) / g
    net = replace(topo.inter, busbw_gbps=share)
    ring = hierarchy.Topology(1, topo.nodes, net, net, 1, topo.base_latency_s, topo.message_scale)
    return hierarchy.ring(ring, nbytes) if topo.nodes > 1 else gather(ring, 0)


def fsdp(
    layers: List[overlap.LayerSize],
    topo: hierarchy.Topology,
    forward_s: float,
    backward_s: float,
    param_bytes: float,
    grad_bytes: float,
    hybrid: bool = False,
) -> Sharded:
    """FULL_SHARD (``hybrid``: HYBRID_SHARD) over one step: see the module's docstring."""
    inner = replace(topo, nodes=1) if hybrid else topo
    macs = sum(la.macs for la in layers) or 1
    ag = [gather(inner, la.params * param_bytes) for la in layers]
    rs = [gather(inner, la.params * grad_bytes) for la in layers]
    if hybrid:
        xs = [_cross_node(topo, la.params * grad_bytes / topo.gpus_per_node) for la in layers]
        rs = [hierarchy.Allreduce(a.time_s + x.time_s, a.algorithm, a.latency_s + x.latency_s,
                                  a.bandwidth_s + x.bandwidth_s, a.bottleneck)
              for a, x in zip(rs, xs)]  # fmt: skip
    f = [forward_s * la.macs / macs for la in layers]
    b = [backward_s * la.macs / macs for la in layers]
    t_comm = t_comp = 0.0
    for i in range(len(layers)):  # forward: gather i while layer i-1 computes
        t_comm += ag[i].time_s
        t_comp = max(t_comp, t_comm) + f[i]
    t_comm = max(t_comm, t_comp) + ag[-1].time_s
    ready = t_comm
    for i in range(len(layers) - 1, -1, -1):
        start = max(t_comp, ready)
        if i > 0:
            t_comm = max(t_comm, start) + ag[i - 1].time_s
            ready = t_comm
        t_comp = start + b[i]
        t_comm = max(t_comm, t_comp) + rs[i].time_s
    end = max(t_comp, t_comm)
    everything = ag + ag + rs
    return Sharded(
        comm_s=sum(c.time_s for c in everything),
        exposed_s=max(0.0, end - forward_s - backward_s),
        unoverlapped_s=ag[0].time_s + rs[0].time_s,
        messages=len(everything),
        latency_s=sum(c.latency_s for c in everything),
    )


def zero(
    stage: int,
    layers: List[overlap.LayerSize],
    topo: hierarchy.Topology,
    compute_s: float,
    param_bytes: float,
    grad_bytes: float,
    bucket_bytes: float,
    backward_share: float,
) -> Sharded:
    """ZeRO-1 (allreduce buckets) or ZeRO-2 (reduce-scatter buckets), overlapped with the
    backward pass as DDP's buckets are, then the all-gather of the updated parameters."""
    collective: Callable[[float], hierarchy.Allreduce] = (
        (lambda nb: hierarchy.allreduce(topo, nb)) if stage == 1 else (lambda nb: gather(topo, nb))
    )
    sim = overlap.wait_free(
        layers, compute_s, lambda nb: collective(nb).time_s, grad_bytes, bucket_bytes, 0,
        backward_share,
    )  # fmt: skip
    params = sum(la.params for la in layers)
    post = gather(topo, params * param_bytes)
    packed = overlap.buckets(layers, grad_bytes, bucket_bytes)
    lat = sum(collective(nb).latency_s for nb, _ in packed) + post.latency_s
    return Sharded(
        comm_s=sim.comm_s + post.time_s,
        exposed_s=sim.exposed_s + post.time_s,
        unoverlapped_s=sim.last_s + post.time_s,
        messages=sim.buckets + (1 if topo.ranks > 1 else 0),
        latency_s=lat,
    )


#: bytes per element of a gradient reduction's dtype (``--reduce-dtype``)
REDUCE_BYTES = {"fp32": 4.0, "bf16": 2.0}
#: the reduction ddlbench's own workload runs under every mode and precision: FSDP2's
#: ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`` under bf16, DDP and
#: ZeRO-1 with float32 gradients (workloads/pytorch/parallel_torch.py)
DEFAULT_REDUCE = "fp32"


def param_bytes_of(precision: str) -> float:
    """Bytes per parameter that FSDP gathers: 2 under bf16 (``param_dtype``), else 4."""
    return 2.0 if precision == "bf16" else 4.0


def gathered_param_bytes(strategy: str, precision: str) -> float:
    """Bytes per parameter a sharded strategy all-gathers: FSDP, HSDP and ZeRO-2 gather the
    compute dtype (2 under bf16); ZeRO-1 is DDP, whose parameters stay float32 under bf16
    autocast, and ``ZeroRedundancyOptimizer`` broadcasts the updated float32 shards (4)."""
    return 4.0 if strategy == "zero1" else param_bytes_of(precision)


def is_sharded(strategy: str) -> bool:
    return strategy in STRATEGIES and strategy != "ddp"


def ceil_nodes(devices: int, gpus_per_node: int) -> int:
    return math.ceil(devices / max(1, gpus_per_node))
