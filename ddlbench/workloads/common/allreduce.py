"""The allreduce sweep shared by allreduce_torch and allreduce_horovod.

For each message size (float32, ``min_bytes`` to ``max_bytes``, powers of
two), every rank runs ``warmup`` untimed allreduces, then times ``iters``
allreduces one by one (each timed op ends when the result is complete on this
rank: the framework's op function must synchronise) and logs the median. The
ranks meet at a barrier before each size. Bandwidths follow nccl-tests:
``algbw = bytes / time``, ``busbw = algbw * 2 (n - 1) / n``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import diagnose, watchdog
from .logger import RankLogger


def message_sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> List[int]:
    """``min_bytes, min_bytes * factor, ...`` up to ``max_bytes`` (included when reached)."""
    if min_bytes < 4 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"bad allreduce size range {min_bytes}..{max_bytes} (factor {factor})")
    sizes = []
    size = int(min_bytes)
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def bandwidths(nbytes: int, time_s: float, world_size: int) -> Tuple[float, float]:
    """``(algbw_gbps, busbw_gbps)`` of one allreduce of ``nbytes`` taking ``time_s``."""
    algbw = nbytes / time_s / 1e9 if time_s > 0 else 0.0
    busbw = algbw * 2.0 * (world_size - 1) / world_size if world_size > 0 else 0.0
    return algbw, busbw


def run_allreduce_sweep(
    logger: RankLogger,
    cfg: Dict[str, Any],
    world_size: int,
    make_op: Callable[[int], Callable[[], None]],
    barrier: Optional[Callable[[], None]] = None,
    dtype: str = "float32",
) -> Dict[str, Any]:
    """Run the sweep, write one ``allreduce`` record per size, return the summary fields.

    ``make_op(nbytes)`` allocates the buffer and returns a function doing one
    complete (synchronised) allreduce of it; ``barrier()`` lines the ranks up.
    The summary fields (``steps_measured``: number of sizes, ``samples_measured``
    0, ``measure_time_s``: sweep duration, ``throughput``/params null, plus
    ``max_busbw_gbps`` and ``max_algbw_gbps``) go to ``RankLogger.summary``.
    """
    ar = cfg["allreduce"]
    iters, warmup = int(ar.get("iters", 20)), int(ar.get("warmup", 5))
    if iters < 1:
        raise ValueError("allreduce.iters must be at least 1")
    t_begin = time.time()
    best_alg = best_bus = 0.0
    sizes = message_sizes(int(ar.get("min_bytes", 1024)), int(ar.get("max_bytes", 256 << 20)))
    done = 0
    for nbytes in sizes:
        watchdog.mark("prepare")
        diagnose.before_collective(watchdog.current_rank())
        watchdog.mark("collective")  # make_op checks one allreduce
        op = make_op(nbytes)
        if barrier is not None:
            watchdog.mark("barrier")
            barrier()
        watchdog.mark("collective")
        for _ in range(warmup):
            op()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            op()
            times.append(time.perf_counter() - t0)
            done += 1
            watchdog.progress(done)
        median = statistics.median(times)
        algbw, busbw = bandwidths(nbytes, median, world_size)
        best_alg, best_bus = max(best_alg, algbw), max(best_bus, busbw)
        logger.allreduce(nbytes, dtype, iters, median, algbw, busbw)
        del op
    return {
        "status": "ok",
        "steps_measured": 0,
        "samples_measured": 0,
        "measure_time_s": time.time() - t_begin,
        "throughput": None,
        "final_loss": None,
        "param_sum": None,
        "param_sha256": None,
        "sizes": len(sizes),
        "max_algbw_gbps": best_alg,
        "max_busbw_gbps": best_bus,
    }
