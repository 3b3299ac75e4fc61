"""What every framework's transformer path records, framework-free (docs/workloads.md#transformers).

The time to the first step split into its parts (:func:`process_start_time` for ``import_s``),
the CPU's peak resident set above a baseline (:class:`RssPeak`, with glibc's mmap threshold
fixed by :func:`exact_rss`), the meta record's transformer fields (:func:`lm_meta`), the
training loop in throughput mode (:func:`train_loop`) and the tokens of the measured window
(:func:`token_fields`). Used by ``lm_torch`` (PyTorch, Horovod) and ``lm_tf`` (TensorFlow,
Keras). Standard library only, Python 3.8 syntax.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from ..flops_lm import flops_per_token
from ..vocabulary import TRANSFORMER_SHAPES
from .data_lm import tokens_per_step
from .runner import Context

#: glibc's mallopt parameter and the fixed threshold set on the CPU (see :func:`exact_rss`)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024


def process_start_time() -> Optional[float]:
    """This process's start as a Unix time (Linux: ``/proc``), else None."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return None


def import_seconds(ctx: Context) -> Dict[str, Any]:
    """``{"import_s": ...}``: from the process's start to the workload's start (None where
    ``/proc`` cannot tell)."""
    started = process_start_time()
    return {"import_s": None if started is None else max(0.0, ctx.start_time - started)}


def status_kib(field: str) -> Optional[int]:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``), else None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def exact_rss() -> Optional[int]:
    """On glibc, fix the mmap threshold at 128 KiB (``mallopt(M_MMAP_THRESHOLD)``): every
    tensor above it gets its own mapping, returned to the system when freed, instead of heap
    memory that glibc keeps after a free (by default the threshold rises to 32 MiB with the
    first such free). The resident set then follows the live tensors, which is what the memory
    prediction counts. Returns the threshold set, or None where glibc is not the allocator."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1:
            return MMAP_THRESHOLD_BYTES
    except (OSError, AttributeError):
        pass
    return None


class RssPeak:
    """The CPU's peak resident set (``VmHWM``) and the peak above the resident set at
    :meth:`start` (the peak is reset there through ``/proc/self/clear_refs``), so that the
    interpreter, the libraries and the data set are not counted."""

    def __init__(self) -> None:
        self.mmap_threshold = exact_rss()
        self.baseline_kib: Optional[int] = None

    def start(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            return
        self.baseline_kib = status_kib("VmRSS")

    def fields(self) -> Dict[str, Any]:
        peak = status_kib("VmHWM")
        out: Dict[str, Any] = {
            "peak_rss_bytes": None if peak is None else peak * 1024,
            "malloc_mmap_threshold": self.mmap_threshold,
        }
        if peak is not None and self.baseline_kib is not None:
            out["peak_rss_model_bytes"] = (peak - self.baseline_kib) * 1024
        return out


def lm_meta(cfg: Dict[str, Any], lm: Dict[str, Any], startup: Dict[str, Any]) -> Dict[str, Any]:
    """The meta record's transformer fields: ``lm``, tokens per step and per sample, FLOPs
    per token under each convention, the start-up split."""
    shape = TRANSFORMER_SHAPES[cfg["model"]]
    return dict(
        lm=dict(lm),
        tokens_per_step=tokens_per_step(cfg),
        tokens_per_sample=int(lm["seq_len"]),
        flops_per_token=flops_per_token(shape, int(lm["seq_len"]), lm["activation_checkpointing"]),
        startup=startup,
    )


def train_loop(
    ctx: Context, loop_cfg: Dict[str, Any], step_fn: Any, data: Any, sums: Any = None
) -> Any:
    """``run_training`` in throughput mode; ``loop_cfg``'s batch is the step's sequences per
    rank (micro-batch x accumulation)."""
    from .loop import run_training
    from .schedule import LRSchedule

    schedule = LRSchedule.from_config(loop_cfg, data.steps_per_epoch)
    measurement = ctx.measurement()
    if loop_cfg["mode"] == "convergence":
        raise ValueError("transformer models run in throughput mode (convergence: not yet)")
    return run_training(loop_cfg, measurement, step_fn, schedule, data.batches, None, sums)


def token_fields(cfg: Dict[str, Any], fields: Dict[str, Any]) -> Dict[str, Any]:
    """``tokens_measured`` and this rank's ``tokens_per_s`` over the measured window."""
    tokens = int(fields.get("steps_measured") or 0) * tokens_per_step(cfg)
    window = fields.get("measure_time_s") or 0.0
    return {"tokens_measured": tokens, "tokens_per_s": tokens / window if window > 0 else None}
