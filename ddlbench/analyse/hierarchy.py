"""Hierarchical allreduce time: ``G`` GPUs per node on an intra-node link, ``K`` nodes on
``nics`` network links per node, with the ring and tree shapes NCCL uses.

Definitions (docs/scaling-model.md#the-hierarchical-allreduce):

* Bus bandwidth as nccl-tests reports it (``doc/PERFORMANCE.md``): a ring allreduce of
  ``M`` bytes on ``N`` ranks moves ``2(N-1)/N x M`` bytes through every rank's link, so
  ``t = 2(N-1)/N x M / busbw``. On several nodes the ring crosses each node boundary once per
  channel, with one channel per NIC, so the ring's bus bandwidth is the slower of the
  intra-node link and ``nics x`` the per-NIC bandwidth.
* Latency as NCCL's tuning model counts it (``src/graph/tuning.cc``, ``ncclTopoTuneModel``):
  ring ``base + (2(N-1) - 2(K-1)) alpha_intra + 2(K-1) alpha_inter``; tree
  ``base + 2((G-1) alpha_intra + log2(K) alpha_inter)``; the tree's algorithm bandwidth is
  half its bus bandwidth (the same file), so its bandwidth term is ``2 M / busbw``.
* NCCL's tuner runs the algorithm with the lower predicted time; so does this model. On one
  node only the ring is used.

Presets of link figures, each with its public source: ``reference/interconnects.yaml``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional, Tuple

PRESETS_FILE = Path(__file__).parent / "reference" / "interconnects.yaml"
#: the allreduce algorithms NCCL can be held to (``NCCL_ALGO``): "auto" is its tuner's pick,
#: the faster of the two; "ring" is also what NCCL before 2.4 had
ALGORITHMS = ("auto", "ring", "tree")


class UnknownPreset(ValueError):
    """A preset name that ``reference/interconnects.yaml`` does not define."""


@dataclass(frozen=True)
class Link:
    """One level of the hierarchy: bus bandwidth (GB/s, per NIC for a network) and the
    latency of one ring step."""

    name: str
    busbw_gbps: float
    alpha_s: float
    basis: str = "given"
    source: str = ""
    busbw_range_gbps: Optional[Tuple[float, float]] = None  # what the sources allow
    transport: str = ""
    #: a TCP-socket network's cost per message beyond NCCL's latency: (fixed s, s per ring step)
    message_s: Tuple[float, float] = (0.0, 0.0)

    @property
    def busbw_low_high(self) -> Tuple[float, float]:
        return self.busbw_range_gbps or (self.busbw_gbps, self.busbw_gbps)

    def scaled(self, busbw_gbps: float) -> Link:
        """The same link at another bus bandwidth (an end of its range)."""
        return replace(self, busbw_gbps=busbw_gbps)


@dataclass(frozen=True)
class Topology:
    gpus_per_node: int
    nodes: int
    intra: Link
    inter: Link
    nics_per_node: int = 1
    base_latency_s: float = 0.0
    #: the factor on the network's socket message cost (1; an end of its range in an interval)
    message_scale: float = 1.0
    #: one of ``ALGORITHMS``: the allreduce algorithm across nodes
    algorithm: str = "auto"

    @property
    def ranks(self) -> int:
        return self.gpus_per_node * self.nodes

    def message_latency_s(self, steps: int, nccl_s: float) -> float:
        """The latency of one collective of ``steps`` ring steps whose NCCL latency is
        ``nccl_s``: over TCP sockets between nodes, the larger of it and the socket message
        cost (``socket_message`` in ``reference/interconnects.yaml``)."""
        fixed, per_step = self.inter.message_s
        if self.nodes <= 1 or not (fixed or per_step):
            return nccl_s
        return max(nccl_s, self.message_scale * (fixed + steps * per_step))


@dataclass(frozen=True)
class Allreduce:
    """One allreduce's predicted time and its parts."""

    time_s: float
    algorithm: str  # "ring", "tree" or "none" (one rank)
    latency_s: float
    bandwidth_s: float
    bottleneck: str  # "intra-node", "inter-node" or "none"


@lru_cache(maxsize=1)
def _load() -> dict:
    import yaml

    return yaml.safe_load(PRESETS_FILE.read_text())


def presets() -> Dict[str, Link]:
    """Every preset of ``reference/interconnects.yaml`` by name."""
    out = {}
    sm = socket_message()
    for name, p in _load()["presets"].items():
        lo, hi = (float(v) for v in p.get("busbw_range_gbps") or (p["busbw_gbps"],) * 2)
        msg = (1e-6 * sm["fixed_us"], 1e-6 * sm["per_step_us"])
        out[name] = Link(name, float(p["busbw_gbps"]), 1e-6 * float(p["alpha_us"]),
                         str(p["basis"]), str(p["source"]), (lo, hi),
                         str(p.get("transport", "")),
                         msg if p.get("transport") == "tcp" else (0.0, 0.0))  # fmt: skip
    return out


def socket_message() -> Dict[str, float]:
    """The TCP-socket message cost: ``fixed_us``, ``per_step_us``, ``low`` and ``high`` (the
    factors at the ends of an interval)."""
    sm = _load()["socket_message"]
    lo, hi = (float(v) for v in sm["range"])
    return {"fixed_us": float(sm["fixed_us"]), "per_step_us": float(sm["per_step_us"]),
            "low": lo, "high": hi}  # fmt: skip


def preset_level(name: str) -> str:
    return str(_load()["presets"][name]["level"])


def base_latency_s() -> float:
    return 1e-6 * float(_load()["base_latency_us"])


def preset(name: str, level: str = "") -> Link:
    """The preset ``name``; ``level`` ("intra" or "inter") restricts the choice."""
    known = [n for n in presets() if not level or preset_level(n) == level]
    if name not in known:
        from ddlbench.errors import did_you_mean

        kind = {"intra": "intra-node ", "inter": "inter-node "}.get(level, "")
        raise UnknownPreset(
            f"unknown {kind}interconnect preset {name!r}{did_you_mean(name, known)} "
            f"(known: {', '.join(known)})"
        )
    return presets()[name]


def link(value: str, level: str) -> Link:
    """A ``--intra-busbw``/``--inter-busbw`` value: a preset name or a bandwidth in GB/s
    (latency per step then the smallest of the level's presets: 3.4 us inside a node, 9.6 us
    across, as NCCL's tuning model has them)."""
    try:
        bw = float(value)
    except ValueError:
        return preset(value, level)
    if not math.isfinite(bw) or bw <= 0:
        raise ValueError(f"bus bandwidth must be a positive number of GB/s, not {value!r}")
    alpha = min(p.alpha_s for n, p in presets().items() if preset_level(n) == level)
    return Link(f"{bw:g} GB/s", bw, alpha, "given", "command line")


def ring_busbw_gbps(topo: Topology) -> Tuple[float, str]:
    """The ring's bus bandwidth and the level that sets it."""
    if topo.nodes <= 1:
        return topo.intra.busbw_gbps, "intra-node"
    net = topo.inter.busbw_gbps * max(1, min(topo.nics_per_node, topo.gpus_per_node))
    if topo.gpus_per_node > 1 and topo.intra.busbw_gbps < net:
        return topo.intra.busbw_gbps, "intra-node"
    return net, "inter-node"


def ring(topo: Topology, nbytes: float) -> Allreduce:
    n, k = topo.ranks, topo.nodes
    inter_steps = 2 * (k - 1)
    lat = topo.base_latency_s + (2 * (n - 1) - inter_steps) * topo.intra.alpha_s
    lat = topo.message_latency_s(2 * (n - 1), lat + inter_steps * topo.inter.alpha_s)
    busbw, where = ring_busbw_gbps(topo)
    bw = 2 * (n - 1) / n * nbytes / (busbw * 1e9)
    return Allreduce(lat + bw, "ring", lat, bw, where)


def tree(topo: Topology, nbytes: float) -> Allreduce:
    g, k = topo.gpus_per_node, topo.nodes
    lat = topo.base_latency_s + 2 * (
        (g - 1) * topo.intra.alpha_s + math.ceil(math.log2(k)) * topo.inter.alpha_s
    )
    lat = topo.message_latency_s(2 * (topo.ranks - 1), lat)
    busbw, where = ring_busbw_gbps(topo)
    bw = 2 * nbytes / (busbw * 1e9)
    return Allreduce(lat + bw, "tree", lat, bw, where)


def allreduce(topo: Topology, nbytes: float) -> Allreduce:
    """The faster of ring and tree (tree only across nodes), or the one ``topo.algorithm``
    holds NCCL to; zero on one rank. Links fitted from a sweep get the ring only: the sweep
    measured whatever algorithm NCCL chose."""
    if topo.ranks <= 1:
        return Allreduce(0.0, "none", 0.0, 0.0, "none")
    best = ring(topo, nbytes)
    if (topo.nodes > 1 and topo.algorithm != "ring"
            and "fitted" not in (topo.intra.basis, topo.inter.basis)):  # fmt: skip
        t = tree(topo, nbytes)
        if topo.algorithm == "tree" or t.time_s < best.time_s:
            best = t
    return best
