"""What-if predictions without a cluster: one model, one measured throughput on
``base_devices`` devices, a hierarchy of links (docs/scaling-model.md, ``ddlbench predict``).

Step time on ``N = G x K`` devices (weak scaling, the per-device batch ``b`` fixed):
``T(N) = C (1 + sync(N)) + exposed(N) + slowed(N)``: ``C`` the compute of one step, ``sync``
the wait for the slowest rank (``costs.py``), ``exposed`` the communication the compute does
not hide (DDP's buckets by wait-free backprop, ``overlap.py``; sharded strategies,
``sharded.py``; or ``(1 - f) x comm`` for a measured overlapped fraction ``f``), ``slowed`` the
compute's slowdown while communication overlaps it (``costs.overlap_slowdown_s``). ``C`` is
what makes ``T(base)`` equal the measured step ``b / rate`` at the base (``C = b / rate`` on
one device).
Throughput ``N b / T(N)`` samples/s (x ``seq`` tokens/s for a language model), efficiency
``T(base) / T(N)``. Every point carries an interval: the model at the pessimistic and the
optimistic end of its inputs, widened by the base measurement's uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from . import costs, hierarchy, overlap, sharded

GRAD_BYTES = 4  # DDP keeps fp32 gradients under fp32, tf32, amp and bf16 autocast
#: Training FLOPs per forward FLOP, by activation checkpointing: 3 without; "full" recomputes
#: the forward pass (4); "selective" recomputes attention's core, about 4 % more compute
#: (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models").
TRAINING_FACTOR = {"none": 3.0, "selective": 3.12, "full": 4.0}


@dataclass(frozen=True)
class Case:
    """One what-if: a model at a per-device batch, its measured per-device rate on
    ``base_devices`` devices (samples/s)."""

    model: str
    batch: int
    single_throughput: float  # per-device samples/s at the base
    grad_bytes_per_param: float = GRAD_BYTES
    bucket_mb: float = overlap.DDP_BUCKET_MB
    first_bucket_bytes: float = overlap.DDP_FIRST_BUCKET_BYTES
    fusion_cycle_ms: float = 0.0  # Horovod's HOROVOD_CYCLE_TIME; 0: DDP's buckets
    overlap_fraction: Optional[float] = None  # measured: wins over the estimate
    base_devices: int = 1
    parallel: str = "ddp"
    seq: int = 0  # tokens per sample (language models); 0: a CNN
    precision: str = "fp32"
    checkpointing: str = "none"
    jitter_samples: Tuple[float, ...] = ()  # measured relative step times: win over the cv
    jitter_cv: float = costs.JITTER_CV
    base_uncertainty: float = costs.BASE_UNCERTAINTY
    shape: object = None  # a TransformerShape given on the command line
    #: the gradient reduction's dtype (fp32, bf16); None: ddlbench's workload's, fp32 for
    #: every mode (``grad_bytes_per_param``)
    reduce_dtype: Optional[str] = None
    #: micro-batches per step (gradient accumulation): ``batch`` is one micro-batch, a step
    #: takes ``batch x grad_accum`` samples per device
    grad_accum: int = 1
    #: the allreduce algorithm across nodes (``hierarchy.ALGORITHMS``: NCCL_ALGO)
    nccl_algo: str = "auto"
    #: compute slowed by this share of the communication it overlaps, at the middle, the
    #: optimistic and the pessimistic end (``costs.OVERLAP_SLOWDOWN``; zeros leave it out)
    overlap_slowdown: Tuple[float, float, float] = costs.OVERLAP_SLOWDOWN


def layers_of(case: Case) -> List[overlap.LayerSize]:
    if case.shape is not None:
        return overlap.transformer_layers(case.shape, case.seq)  # type: ignore[arg-type]
    if case.model in overlap.MODEL_INPUT:
        return overlap.layer_sizes(case.model)
    return overlap.transformer_layers(case.model, case.seq)


def _sync(case: Case, n: int, end: str) -> float:
    """The synchronisation fraction at ``n`` ranks; ``end``: "mid", "pess" (the most jitter)
    or "opt" (the least)."""
    if case.jitter_samples:
        s = costs.sync_fraction_empirical(case.jitter_samples, n)
        return s * {"mid": 1.0, "opt": 0.75, "pess": 1.25}[end]
    lo, hi = costs.JITTER_CV_RANGE
    cv = {"mid": case.jitter_cv, "opt": lo, "pess": hi}[end]
    return costs.sync_fraction_normal(n, cv)


def _comm(case: Case, topo: hierarchy.Topology, layers, compute: float) -> sharded.Sharded:
    """The communication of one step of ``compute`` seconds on ``topo``."""
    share = 1.0 - 1.0 / TRAINING_FACTOR[case.checkpointing]
    pb = sharded.gathered_param_bytes(case.parallel, case.precision)
    gb = _grad_bytes(case)
    if case.parallel in ("fsdp", "hsdp"):
        return sharded.fsdp(layers, topo, (1 - share) * compute, share * compute, pb, gb,
                            hybrid=case.parallel == "hsdp" and topo.nodes > 1)  # fmt: skip
    if case.parallel in ("zero1", "zero2"):
        stage = 1 if case.parallel == "zero1" else 2
        return sharded.zero(stage, layers, topo, compute, pb, gb, case.bucket_mb * 1e6, share)
    est = overlap.wait_free(
        layers, compute, lambda nb: hierarchy.allreduce(topo, nb).time_s, gb,
        case.bucket_mb * 1e6, case.first_bucket_bytes, share, case.fusion_cycle_ms / 1e3,
    )  # fmt: skip
    lat = est.buckets * hierarchy.allreduce(topo, 1.0).latency_s  # per message
    exposed = est.exposed_s
    if case.overlap_fraction is not None and topo.ranks > 1:
        exposed = (1 - case.overlap_fraction) * est.comm_s
    return sharded.Sharded(est.comm_s, exposed, est.last_s, est.buckets, lat)


def _grad_bytes(case: Case) -> float:
    """Bytes per gradient element reduced: ``reduce_dtype``'s when given (a framework that
    reduces in bf16: FSDP ``reduce_dtype=bfloat16``, DeepSpeed's bf16), else what ddlbench's
    workload reduces in every mode, fp32 (FSDP's ``reduce_dtype=float32``; DDP and ZeRO-1
    keep float32 gradients under autocast)."""
    if case.reduce_dtype is not None:
        return sharded.REDUCE_BYTES[case.reduce_dtype]
    return case.grad_bytes_per_param


def step_samples(case: Case) -> int:
    """Samples per device in one step: every micro-batch of it."""
    return case.batch * max(1, case.grad_accum)


#: the modes that reduce every micro-batch of an accumulated step (FSDP2 in ddlbench's
#: workload reduce-scatters each one, and all-gathers for each; DeepSpeed's ZeRO-2 reduces
#: each into its partition); the others reduce once, behind the last micro-batch's backward
REDUCE_EVERY_MICRO_BATCH = ("fsdp", "hsdp", "zero2")


def held(case: Case, topo: hierarchy.Topology) -> hierarchy.Topology:
    """``topo`` with the allreduce algorithm ``case`` holds NCCL to (``--nccl-algo``)."""
    if topo.algorithm == case.nccl_algo:
        return topo
    return replace(topo, algorithm=case.nccl_algo)


def _step_comm(case: Case, topo: hierarchy.Topology, layers, compute: float) -> sharded.Sharded:
    """The communication of a step of ``compute`` seconds (all its micro-batches)."""
    if topo.ranks <= 1:
        return sharded.Sharded(0, 0, 0, 0, 0)
    k = max(1, case.grad_accum)
    comm = _comm(case, held(case, topo), layers, compute / k)
    if k == 1 or case.parallel not in REDUCE_EVERY_MICRO_BATCH:
        return comm
    return sharded.Sharded(
        k * comm.comm_s, k * comm.exposed_s, k * comm.unoverlapped_s, k * comm.messages,
        k * comm.latency_s,
    )  # fmt: skip


def _step(case, topo, layers, compute: float, end: str) -> Dict[str, float]:
    n = topo.ranks
    comm = _step_comm(case, topo, layers, compute)
    sync = compute * _sync(case, n, end)
    share = dict(zip(("mid", "opt", "pess"), case.overlap_slowdown))[end]
    slowed = costs.overlap_slowdown_s(share, comm.comm_s, comm.exposed_s, compute)
    return {"step_s": compute + sync + comm.exposed_s + slowed, "compute_s": compute,
            "sync_s": sync, "comm_s": comm.comm_s, "exposed_comm_s": comm.exposed_s,
            "unoverlapped_s": min(comm.unoverlapped_s, comm.exposed_s),
            "latency_s": comm.latency_s, "messages": comm.messages,
            "overlap_slowdown_s": slowed}  # fmt: skip


#: The relative gap between the model's step at the base and the measured one that counts as
#: solved; a larger one after bisection means no compute time reproduces the base.
SOLVED = 1e-6


def _compute_at_base(case, base: hierarchy.Topology, layers, end: str) -> float:
    """``C`` such that the model's step at the base equals the measured one: a fixed-point
    iteration, then bisection on ``(0, measured]`` where that has not converged (the step
    at ``C = measured`` is at least ``measured``). A base the links cannot reproduce (its
    communication at ``C -> 0`` already longer than the measured step, :func:`base_floor`)
    gets the smallest ``C`` tried."""
    measured = step_samples(case) / case.single_throughput
    c = measured
    for _ in range(8):
        s = _step(case, base, layers, c, end)
        c = max(1e-9, c * measured / s["step_s"])
    if abs(_step(case, base, layers, c, end)["step_s"] / measured - 1) <= SOLVED:
        return c
    lo, hi = measured * 1e-9, measured
    if _step(case, base, layers, lo, end)["step_s"] >= measured:
        return lo
    for _ in range(100):
        mid = (lo + hi) / 2
        if _step(case, base, layers, mid, end)["step_s"] < measured:
            lo = mid
        else:
            hi = mid
        if hi - lo <= SOLVED * measured * 1e-3:
            break
    return (lo + hi) / 2


def base_floor(case: Case, base: hierarchy.Topology) -> Tuple[float, float]:
    """(the measured step at the base, the shortest step the model allows there: its
    communication and synchronisation with no compute to hide behind). A measured step below
    the floor means the base is faster than the links given allow (docs/scaling-model.md)."""
    layers = layers_of(case)
    measured = step_samples(case) / case.single_throughput
    return measured, _step(case, base, layers, measured * 1e-9, "mid")["step_s"]


def base_layout(case: Case, gpus_per_node: int, one: hierarchy.Topology) -> hierarchy.Topology:
    """The layout the base was measured on: ``base_devices`` on as few nodes as hold them."""
    bn = sharded.ceil_nodes(case.base_devices, gpus_per_node)
    return replace(one, gpus_per_node=min(case.base_devices, gpus_per_node), nodes=bn)


def _at(topo: hierarchy.Topology, end: str) -> hierarchy.Topology:
    """``topo`` with each link at the ``end`` of its range ("mid": as given, "pess": the
    slow end, "opt": the fast end), a TCP network's message cost too."""
    if end == "mid":
        return topo
    pick = 0 if end == "pess" else 1
    sm = hierarchy.socket_message()
    return replace(topo, intra=topo.intra.scaled(topo.intra.busbw_low_high[pick]),
                   inter=topo.inter.scaled(topo.inter.busbw_low_high[pick]),
                   message_scale=sm["high"] if end == "pess" else sm["low"])  # fmt: skip


def _efficiency(case, base, topo, layers, end: str) -> Tuple[float, Dict[str, float]]:
    b, t = _at(base, end), _at(topo, end)
    c = _compute_at_base(case, b, layers, end)
    t_base = _step(case, b, layers, c, end)["step_s"]
    s = _step(case, t, layers, c, end)
    return t_base / s["step_s"], s


def point(case: Case, topo: hierarchy.Topology, base: Optional[hierarchy.Topology] = None):
    """The prediction of ``case`` on ``topo`` (``base``: the layout the rate was measured
    on; one device when not given): one row of the predict table, with its interval."""
    layers = layers_of(case)
    base = base or replace(topo, gpus_per_node=1, nodes=1)
    eff, s = _efficiency(case, base, topo, layers, "mid")
    pess, _ = _efficiency(case, base, topo, layers, "pess")  # slow links, much jitter
    opt, _ = _efficiency(case, base, topo, layers, "opt")  # fast links, little jitter
    u = case.base_uncertainty
    n = topo.ranks
    lo, hi = costs.efficiency_interval(min(pess, eff), max(opt, eff), u, n == base.ranks)
    t_lo, t_hi = costs.widen(min(pess, eff), max(opt, eff), u)  # throughput, step: the base's too
    per_sample = step_samples(case) * (case.seq or 1)
    rate = case.single_throughput * (case.seq or 1)  # per device, samples or tokens per s
    params = sum(la.params for la in layers)
    whole = hierarchy.allreduce(held(case, topo), params * _grad_bytes(case))
    return {
        "devices": n,
        "nodes": topo.nodes,
        "gpus_per_node": topo.gpus_per_node,
        "efficiency": eff,
        "efficiency_low": lo,
        "efficiency_high": hi,
        "throughput": n * rate * eff,
        "throughput_low": n * rate * t_lo,
        "throughput_high": n * rate * t_hi,
        "step_s": per_sample / (rate * eff),
        "step_s_low": per_sample / (rate * t_hi),
        "step_s_high": per_sample / (rate * t_lo) if t_lo > 0 else None,
        **{k: v for k, v in s.items() if k != "step_s"},
        "overlap": _overlap(s),
        "overlap_source": _overlap_source(case, n),
        "buckets": s["messages"],
        "algorithm": whole.algorithm,
        "bottleneck": whole.bottleneck,
        "dominant": dominant(s, whole),
        "grad_bytes": params * _grad_bytes(case),
    }


def _overlap(s: Dict[str, float]) -> float:
    """The share of the communication hidden behind compute, in [0, 1]: rounded, so that a
    difference of two equal times reads 0, not 5.55e-15."""
    if s["comm_s"] <= 0:
        return 1.0
    return min(1.0, max(0.0, round(1 - s["exposed_comm_s"] / s["comm_s"], 9)))


def _overlap_source(case: Case, n: int) -> str:
    if n <= 1:
        return "none"
    if case.overlap_fraction is not None and case.parallel == "ddp":
        return "measured"
    if sharded.is_sharded(case.parallel):
        return f"estimated ({case.parallel}, prefetch)"
    return "estimated (wait-free backprop)"


def dominant(s: Dict[str, float], ar: hierarchy.Allreduce) -> str:
    """The term that costs the step most beyond the compute: "compute" while the exposed
    communication and the synchronisation are below a tenth of the compute, else the larger
    of the two (for communication, the allreduce's larger part)."""
    compute, exposed, sync = s["compute_s"], s["exposed_comm_s"], s["sync_s"]
    if max(exposed, sync) < 0.1 * compute or ar.algorithm == "none" and sync < 0.1 * compute:
        return "compute"
    if sync >= exposed:
        return "synchronisation"
    if ar.latency_s > ar.bandwidth_s or s["latency_s"] > 0.5 * exposed:
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
    """Rows for the base layout (one device, or ``base_devices`` on as few nodes as hold them),
    then ``gpus_per_node`` devices on each node count of ``nodes``."""
    one = hierarchy.Topology(1, 1, intra, inter, nics_per_node, hierarchy.base_latency_s())
    base = base_layout(case, gpus_per_node, one)
    rows = [point(case, base, base)]
    for k in sorted(set(nodes)):
        topo = replace(one, gpus_per_node=gpus_per_node, nodes=k)
        if topo.ranks != base.ranks:
            rows.append(point(case, topo, base))
    return sorted(rows, key=lambda r: int(r["devices"]))  # type: ignore[arg-type]
