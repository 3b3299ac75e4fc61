"""Per-node and pairwise allreduce tests with torch.distributed (``allreduce.pairwise``).

Instead of the sweep, ``allreduce_torch`` runs, at ``allreduce.max_bytes``: each node alone (the
ranks of one node in a group of their own, every node at once), then rounds of node pairs
(:func:`common.pairs.pair_rounds`: ``log`` or ``all`` rounds, N/2 pairs at once). Each group
runs ``warmup`` untimed and ``iters`` timed allreduces; the group's lowest rank logs one
``node_comm`` record (test, round, nodes, bytes, median time, algbw, busbw). Ranks are mapped to
nodes by the Slurm node names they gather. The login node names the slow node
(``ddlbench.analyse.suspects``).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Dict, List, Sequence

import torch

from ..common import watchdog
from ..common.allreduce import bandwidths
from ..common.diagnose import before_collective, node_name
from ..common.pairs import pair_rounds


def _node_ranks(dist: Any, world: int) -> Dict[str, List[int]]:
    names: List[Any] = [None] * world
    dist.all_gather_object(names, node_name())
    out: Dict[str, List[int]] = {}
    for rank, name in enumerate(names):
        out.setdefault(str(name), []).append(rank)
    return out


def _time_group(dist: Any, group: Any, buf: Any, ar: Dict[str, Any], rank: int, cuda: bool):
    times = []
    for i in range(int(ar.get("warmup", 5)) + int(ar.get("iters", 20))):
        before_collective(rank)
        t0 = time.perf_counter()
        dist.all_reduce(buf, group=group)
        if cuda:
            torch.cuda.synchronize()
        if i >= int(ar.get("warmup", 5)):
            times.append(time.perf_counter() - t0)
        watchdog.progress(i)
    return statistics.median(times)


def _run_tests(ctx: Any, dist: Any, device: Any, tests: Sequence[Any]) -> float:
    """Run ``tests`` (test, round, node groups); returns the best busbw measured."""
    ar = ctx.cfg["allreduce"]
    rank = ctx.info.rank
    nbytes = int(ar.get("max_bytes", 1 << 20))
    buf = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
    best = 0.0
    for test, rnd, groups in tests:
        made = [(nodes, ranks, dist.new_group(ranks)) for nodes, ranks in groups]
        watchdog.mark("barrier")
        dist.barrier()
        watchdog.mark("collective")
        for nodes, ranks, group in made:
            if rank not in ranks:
                continue
            median = _time_group(dist, group, buf, ar, rank, device.type == "cuda")
            algbw, busbw = bandwidths(nbytes, median, len(ranks))
            best = max(best, busbw)
            if rank == min(ranks):
                rec = {"type": "node_comm", "t": time.time(), "test": test, "round": rnd}
                rec.update(nodes=nodes, ranks=ranks, bytes=nbytes, time_s=median)
                rec.update(algbw_gbps=algbw, busbw_gbps=busbw)
                ctx.logger.write(rec)
    return best


def run_pairwise(ctx: Any, dist: Any, device: Any) -> Dict[str, Any]:
    """The per-node then pairwise tests; returns the summary fields."""
    t_begin = time.time()
    by_node = _node_ranks(dist, ctx.info.world_size)
    nodes = sorted(by_node)
    tests: List[Any] = [("node", 0, [([n], by_node[n]) for n in nodes])]
    for r, pairs in enumerate(pair_rounds(nodes, ctx.cfg["allreduce"]["pairwise"])):
        tests.append(("pair", r, [([a, b], by_node[a] + by_node[b]) for a, b in pairs]))
    best = _run_tests(ctx, dist, device, tests)
    return {
        "status": "ok",
        "steps_measured": 0,
        "samples_measured": 0,
        "measure_time_s": time.time() - t_begin,
        "throughput": None,
        "final_loss": None,
        "param_sum": None,
        "param_sha256": None,
        "sizes": 0,
        "max_algbw_gbps": None,
        "max_busbw_gbps": best,
    }
