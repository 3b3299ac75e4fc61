"""What-if predictions without a cluster: one model, one measured single-device throughput,
a hierarchy of links (docs/scaling-model.md, ``ddlbench predict``).

Step time on ``N = G x K`` devices (weak scaling, the per-device batch ``b`` fixed):
``T(N) = C + exposed(N)``, with ``C = b / throughput(1)`` and ``exposed`` the allreduce time
left after the backward pass (``overlap.wait_free``, or ``(1 - f) x comm`` for a given
overlapped fraction ``f``). Throughput ``N b / T(N)``, efficiency ``C / T(N)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional

from . import hierarchy, overlap

GRAD_BYTES = 4  # DDP keeps fp32 gradients under fp32, tf32, amp and bf16 autocast


@dataclass(frozen=True)
class Case:
    """One what-if: a model at a per-device batch, its measured single-device rate."""

    model: str
    batch: int
    single_throughput: float
    grad_bytes_per_param: float = GRAD_BYTES
    bucket_mb: float = overlap.DDP_BUCKET_MB
    first_bucket_bytes: float = overlap.DDP_FIRST_BUCKET_BYTES
    overlap_fraction: Optional[float] = None  # measured: wins over the estimate


def point(case: Case, topo: hierarchy.Topology) -> Dict[str, object]:
    """The prediction of ``case`` on ``topo``: one row of the predict table."""
    compute = case.batch / case.single_throughput
    layers = overlap.layer_sizes(case.model)
    grad = sum(la.params for la in layers) * case.grad_bytes_per_param
    whole = hierarchy.allreduce(topo, grad)
    est = overlap.wait_free(
        layers,
        compute,
        lambda nbytes: hierarchy.allreduce(topo, nbytes).time_s,
        case.grad_bytes_per_param,
        case.bucket_mb * 1e6,
        case.first_bucket_bytes,
    )
    if case.overlap_fraction is not None and topo.ranks > 1:
        exposed, how = (1 - case.overlap_fraction) * est.comm_s, "measured"
    else:
        exposed, how = est.exposed_s, "estimated (wait-free backprop)"
    step = compute + exposed
    n = topo.ranks
    return {
        "devices": n,
        "nodes": topo.nodes,
        "gpus_per_node": topo.gpus_per_node,
        "step_s": step,
        "throughput": n * case.batch / step,
        "efficiency": compute / step,
        "compute_s": compute,
        "comm_s": est.comm_s,
        "exposed_comm_s": exposed,
        "overlap": 1 - exposed / est.comm_s if est.comm_s > 0 else 1.0,
        "overlap_source": how if n > 1 else "none",
        "buckets": est.buckets,
        "algorithm": whole.algorithm,
        "bottleneck": whole.bottleneck,
        "dominant": dominant(compute, exposed, whole),
        "grad_bytes": grad,
    }


def dominant(compute: float, exposed: float, ar: hierarchy.Allreduce) -> str:
    """The term that costs the step most beyond the compute: "compute" while the exposed
    communication is below a tenth of the compute, else the allreduce's larger part."""
    if ar.algorithm == "none" or exposed < 0.1 * compute:
        return "compute"
    if ar.latency_s > ar.bandwidth_s:
        return "latency"
    return f"{ar.bottleneck} bandwidth"


def curve(
    case: Case,
    gpus_per_node: int,
    nodes: List[int],
    intra: hierarchy.Link,
    inter: hierarchy.Link,
    nics_per_node: int = 1,
) -> List[Dict[str, object]]:
    """Rows for one device, then ``gpus_per_node`` devices on each node count of ``nodes``."""
    base = hierarchy.Topology(1, 1, intra, inter, nics_per_node, hierarchy.base_latency_s())
    rows = [point(case, base)]
    for k in sorted(set(nodes)):
        topo = replace(base, gpus_per_node=gpus_per_node, nodes=k)
        if topo.ranks > 1:
            rows.append(point(case, topo))
    return rows
