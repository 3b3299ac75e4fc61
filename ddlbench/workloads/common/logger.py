"""The per-rank log, format v1 (docs/log-format.md, ddlbench/schemas/rank-log-v1.schema.json).

Every record is serialised to one line and handed to the kernel with ``os.write()`` on an
``O_APPEND`` descriptor, so a killed rank leaves a readable prefix (at most a truncated last
line). Step records are the exception that makes training cheaper to measure: they are kept
and written together, at most :data:`STEP_FLUSH_S` after the previous write (a step that
takes longer is written at its end, as before), and before any other record, from any
thread. A rank killed with no chance to run (SIGKILL) loses at most that last half second of
steps; every way a rank ends that ddlbench handles (its summary, an error, SIGTERM, SIGUSR1,
the watchdog's hang record, close) writes them first. The steps' line is formatted directly
(:func:`encode_step`, the same bytes as the generic encoder): at 3-5 ms CPU steps this took
the harness from 2.6 % of a step to 1.5 %, and the time between steps from 1.7-1.9 % of the
window to 0.9 % (docs/workloads.md#harness-overhead). There is no fsync (it would slow
training).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from ... import __version__ as DDLBENCH_VERSION
from .env import RankInfo

FORMAT_VERSION = 1
#: step records wait at most this long after the previous write before they are written
STEP_FLUSH_S = 0.5
#: the step phases the loops use, as their JSON strings (another phase goes through json)
_PHASES = {p: json.dumps(p) for p in ("warmup", "measure", "step")}


def _clean(value: Any) -> Any:
    """JSON-safe copy: numpy scalars to Python numbers, NaN/inf to None."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    item = getattr(value, "item", None)  # numpy / framework scalars
    if callable(item):
        try:
            return _clean(item())
        except (TypeError, ValueError):
            pass
    return str(value)


def _opt_float(value: Any) -> Optional[float]:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def encode_record(record: Dict[str, Any]) -> bytes:
    """One record as the log's line: JSON without NaN/inf, newline-terminated, UTF-8."""
    return (json.dumps(_clean(record), allow_nan=False) + "\n").encode("utf-8")


def _num(value: Optional[float]) -> str:
    """An optional float as JSON, as ``json.dumps`` writes it (``repr``; NaN/inf: null)."""
    if value is None:
        return "null"
    value = float(value)
    return repr(value) if math.isfinite(value) else "null"


def encode_step(
    step: int,
    epoch: Optional[int],
    phase: str,
    t_start: float,
    t_end: float,
    samples: int,
    loss: Any,
    lr: Any,
    compute_s: Any = None,
    comm_s: Any = None,
) -> str:
    """A ``step`` record without extra fields as its line (newline included): the text
    :func:`encode_record` makes of the same record, formatted directly."""
    name = _PHASES.get(phase) or json.dumps(str(phase))
    return (
        f'{{"type": "step", "step": {int(step)}, '
        f'"epoch": {"null" if epoch is None else int(epoch)}, "phase": {name}, '
        f'"t_start": {_num(t_start)}, "t_end": {_num(t_end)}, "samples": {int(samples)}, '
        f'"loss": {_num(loss)}, "lr": {_num(lr)}, '
        f'"compute_s": {_num(compute_s)}, "comm_s": {_num(comm_s)}}}\n'
    )


class RankLogger:
    """Writes ``<log_dir>/rank-<rank>.jsonl``.

    The file must not exist yet (``O_EXCL``): a rank log is never truncated or overwritten.
    Every start of a job script logs into a folder of its own (``logs/attempt-<k>/``,
    ``DDLBENCH_LOG_DIR``), so a retry or a requeue keeps the earlier attempts' logs.
    """

    def __init__(self, log_dir: str, rank: int) -> None:
        os.makedirs(log_dir, exist_ok=True)
        self.path = os.path.join(log_dir, f"rank-{rank}.jsonl")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        try:
            self._fd: Optional[int] = os.open(self.path, flags, 0o644)
        except FileExistsError:
            raise FileExistsError(
                f"rank log {self.path} already exists; ddlbench never overwrites a rank log "
                "(each attempt of a run logs into its own logs/attempt-<k>/ folder)"
            ) from None
        self.meta_written = False
        self.summary_written = False
        self.error_written = False
        #: step lines not written yet, and when the log was last written (monotonic)
        self._steps: List[str] = []
        self._written_at = time.monotonic()
        self._lock = threading.RLock()  # the watchdog, program readers: other threads

    # -- low level -------------------------------------------------------------------------
    def write(self, record: Dict[str, Any]) -> None:
        """Write one record as one line, after the step records kept so far."""
        data = encode_record(record)
        with self._lock:
            self.emit(self._take_steps() + data)

    def flush(self) -> None:
        """Write the step records kept so far."""
        with self._lock:
            data = self._take_steps()
            if data:
                self.emit(data)

    def _add_step(self, line: str) -> None:
        """Keep a step's line; write what is kept once :data:`STEP_FLUSH_S` has passed."""
        with self._lock:
            if self._fd is None:
                raise ValueError("rank log is closed")
            self._steps.append(line)
            if time.monotonic() - self._written_at >= STEP_FLUSH_S:
                self.emit(self._take_steps())

    def _take_steps(self) -> bytes:
        data = "".join(self._steps).encode("utf-8") if self._steps else b""
        self._steps = []
        return data

    def emit(self, data: bytes) -> None:
        """Hand ``data`` (whole lines) to the file, all of it and in order: every byte of the
        log passes here, with the lock held. A subclass may collect them instead (the
        synthetic campaigns of the tests and benchmarks write each file in one go)."""
        if self._fd is None:
            raise ValueError("rank log is closed")
        n = os.write(self._fd, data)
        while n < len(data):  # only on a full disk or a signal; keep what is left in order
            data = data[n:]
            n = os.write(self._fd, data)
        self._written_at = time.monotonic()

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            with self._lock:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> RankLogger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- records ---------------------------------------------------------------------------
    def meta(self, fields: Dict[str, Any]) -> None:
        """Write the ``meta`` record (build it with :func:`build_meta`)."""
        record = {"type": "meta"}
        record.update(fields)
        self.write(record)
        self.meta_written = True

    def step(
        self,
        step: int,
        epoch: Optional[int],
        phase: str,
        t_start: float,
        t_end: float,
        samples: int,
        loss: Optional[float],
        lr: Optional[float],
        compute_s: Optional[float] = None,
        comm_s: Optional[float] = None,
        extra: Optional[Dict[str, Any]] = None,
    ) -> None:
        if not extra:
            line = encode_step(
                step, epoch, phase, t_start, t_end, samples, loss, lr, compute_s, comm_s
            )
            self._add_step(line)
            return
        # extra: the optional fields of straggler injection and backup workers, written last
        self._add_step(
            encode_record(
                {
                    "type": "step",
                    "step": int(step),
                    "epoch": None if epoch is None else int(epoch),
                    "phase": phase,
                    "t_start": float(t_start),
                    "t_end": float(t_end),
                    "samples": int(samples),
                    "loss": _opt_float(loss),
                    "lr": _opt_float(lr),
                    "compute_s": _opt_float(compute_s),
                    "comm_s": _opt_float(comm_s),
                    **extra,
                }
            ).decode("utf-8")
        )

    def eval(
        self,
        epoch: int,
        t: float,
        elapsed_s: float,
        accuracy: float,
        loss: Optional[float],
        samples: Optional[int] = None,
    ) -> None:
        record = {
            "type": "eval",
            "epoch": int(epoch),
            "t": float(t),
            "elapsed_s": float(elapsed_s),
            "accuracy": float(accuracy),
            "loss": _opt_float(loss),
        }
        if samples is not None:
            record["samples"] = int(samples)
        self.write(record)

    def allreduce(
        self,
        nbytes: int,
        dtype: str,
        iters: int,
        time_s: float,
        algbw_gbps: float,
        busbw_gbps: float,
    ) -> None:
        self.write(
            {
                "type": "allreduce",
                "bytes": int(nbytes),
                "dtype": dtype,
                "iters": int(iters),
                "time_s": float(time_s),
                "algbw_gbps": float(algbw_gbps),
                "busbw_gbps": float(busbw_gbps),
            }
        )

    def summary(self, fields: Dict[str, Any]) -> None:
        """Write the ``summary`` record; ``fields`` must hold the required keys."""
        record: Dict[str, Any] = {"type": "summary", "t": time.time()}
        record.update(fields)
        self.write(record)
        self.summary_written = True

    def error(
        self, message: str, traceback: Optional[str] = None, t: Optional[float] = None
    ) -> None:
        when = time.time() if t is None else float(t)
        record: Dict[str, Any] = {"type": "error", "t": when, "message": message}
        if traceback is not None:
            record["traceback"] = traceback
        self.write(record)
        self.error_written = True


def build_meta(
    cfg: Dict[str, Any],
    info: RankInfo,
    framework_version: str,
    device_name: str,
    param_count: Optional[int],
    backend: str,
    start_time: Optional[float] = None,
    **extra: Any,
) -> Dict[str, Any]:
    """The fields of the ``meta`` record, from the run config and the rank's identity.

    ``extra`` adds fields. ``precision`` is the one that ran: the workload's resolved knobs pass
    it in ``extra`` (:meth:`Knobs.meta`); a record without them (an allreduce sweep, the record
    of a rank that failed before its knobs were applied) says run.json's.
    """
    fields: Dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "run_id": cfg["run_id"],
        "campaign": cfg["campaign"],
        "framework": cfg["framework"],
        "workload": cfg["workload"],
        "framework_version": str(framework_version),
        "mode": cfg["mode"],
        "rank": info.rank,
        "local_rank": info.local_rank,
        "node_rank": info.node_rank,
        "world_size": info.world_size,
        "host": info.host,
        "pid": os.getpid(),
        "device": cfg["device"],
        "device_name": str(device_name),
        "model": cfg["model"],
        "param_count": None if param_count is None else int(param_count),
        "batch_size": int(cfg["batch_size"]),
        "global_batch_size": int(cfg["global_batch_size"]),
        "precision": extra.pop("precision", cfg["precision"]),
        "backend": str(backend),
        "repeat": int(cfg["repeat"]),
        "slurm_job_id": info.job_id,
        "slurm_nodelist": info.nodelist,
        "time": time.time() if start_time is None else float(start_time),
        "ddlbench_version": DDLBENCH_VERSION,
        "python_version": platform.python_version(),
    }
    fields.update(extra)
    return fields


def warn(message: str) -> None:
    """A warning on stderr, prefixed so that it can be found in the job's output."""
    sys.stderr.write(f"ddlbench: warning: {message}\n")
    sys.stderr.flush()
