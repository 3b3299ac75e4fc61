"""Entry-point wrapper shared by all workloads.

``workload_main(body)`` reads ``argv[1]`` (the run.json path), builds a
:class:`Context` (config, rank identity, rank log, MLLOG printer) and calls
``body(ctx)``. When ``body`` raises (or the rank gets SIGTERM, as Slurm sends at
its time limit), it writes an ``error`` record (preceded by a fallback ``meta``
record if ``body`` had not written one yet, so the log still starts with meta),
prints the traceback and returns 1. An :class:`ExplainedFailure` (an expected failure whose
message says what happened and what to do) is printed and logged as its message alone: no
traceback, no class name.

The torch workloads end their process with :func:`end_process`, without the interpreter's
teardown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, NoReturn, Optional, Tuple

from . import cpu_limit, diagnose, watchdog
from .config import load_run_config
from .data import TrainData
from .env import RankInfo, rank_info
from .logger import RankLogger, build_meta
from .loop import Measurement, StepReturn, run_training
from .mllog import MLLog
from .provenance import write_node_facts, write_packages
from .schedule import LRSchedule
from .window import SumRanks

Evaluate = Callable[[int], Tuple[float, Optional[float], Optional[int]]]


class Terminated(Exception):
    """The rank received SIGTERM (or SIGINT)."""


class ExplainedFailure(Exception):
    """An expected failure whose message says all there is to say: logged as the message
    alone (no traceback, no class name), in the ``error`` record and on stderr."""


@dataclass
class Context:
    cfg: Dict[str, Any]
    info: RankInfo
    logger: RankLogger
    mllog: MLLog
    start_time: float
    meta_fields: Dict[str, Any] = field(default_factory=dict)
    #: a common.inject.StepExtras when the step function returns extra step fields
    step_extras: Any = None

    def write_meta(
        self,
        framework_version: str,
        device_name: str,
        param_count: Optional[int],
        backend: str,
        **extra: Any,
    ) -> None:
        """Write the ``meta`` record (see :func:`logger.build_meta`)."""
        self.meta_fields = build_meta(
            self.cfg,
            self.info,
            framework_version,
            device_name,
            param_count,
            backend,
            start_time=self.start_time,
            **extra,
        )
        self.logger.meta(self.meta_fields)

    def measurement(self) -> Measurement:
        """A :class:`Measurement` for this run's mode and target."""
        return Measurement(
            self.logger,
            mode=self.cfg["mode"],
            target_accuracy=self.cfg.get("target_accuracy"),
            mllog=self.mllog,
            compiled=bool(self.cfg.get("compile")),
            extras=self.step_extras,
        )

    def train(
        self,
        step_fn: Callable[[Any, float], StepReturn],
        data: TrainData,
        make_evaluate: Callable[[Callable[[], Iterator[Any]]], Evaluate],
        checksum: Callable[[], Tuple[float, str]],
        sum_ranks: Optional[SumRanks] = None,
    ) -> None:
        """Train with ``step_fn`` on ``data`` (:func:`run_training`, the learning-rate
        schedule from ``data.steps_per_epoch``; in convergence mode ``make_evaluate(data.val)``
        evaluates after each epoch; ``sum_ranks`` sums a list of floats over the ranks, for
        ``steps.measure_seconds``), then write the summary with the parameter ``checksum()``."""
        schedule = LRSchedule.from_config(self.cfg, data.steps_per_epoch)
        evaluate = None
        if self.cfg["mode"] == "convergence":
            if data.val is None:
                raise ValueError("convergence mode needs a validation split")
            evaluate = make_evaluate(data.val)
        measurement = run_training(
            self.cfg, self.measurement(), step_fn, schedule, data.batches, evaluate, sum_ranks
        )
        param_sum, param_sha256 = checksum()
        self.finish(measurement.summary_fields(), param_sum, param_sha256)

    def finish(
        self,
        fields: Dict[str, Any],
        param_sum: Optional[float] = None,
        param_sha256: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Write the ``summary`` record and print a one-line result on rank 0."""
        record = dict(fields)
        record.setdefault("param_sum", param_sum)
        record.setdefault("param_sha256", param_sha256)
        if param_sum is not None:
            record["param_sum"] = param_sum
        if param_sha256 is not None:
            record["param_sha256"] = param_sha256
        self.logger.summary(record)
        if self.info.is_root:
            self.say(_summary_line(record))
        return record

    def say(self, message: str) -> None:
        """Print a line on rank 0's stdout."""
        if self.info.is_root:
            sys.stdout.write("ddlbench[{}]: {}\n".format(self.cfg.get("workload"), message))
            sys.stdout.flush()


def _summary_line(rec: Dict[str, Any]) -> str:
    parts: List[str] = ["status={}".format(rec.get("status"))]
    for key, fmt in (
        ("throughput", "throughput=%.2f samples/s"),
        ("measure_time_s", "window=%.3f s"),
        ("final_loss", "loss=%.4f"),
        ("best_accuracy", "best_accuracy=%.4f"),
        ("time_to_accuracy_s", "tta=%.2f s"),
        ("max_busbw_gbps", "max_busbw=%.3f GB/s"),
    ):
        if rec.get(key) is not None:
            parts.append(fmt % rec[key])
    return " ".join(parts)


def _raise_terminated(signum: int, _frame: Any) -> None:
    raise Terminated(f"received signal {signum}")


def _record_packages(cfg: Dict[str, Any]) -> None:
    """Rank 0 lists its interpreter's packages into the run's provenance (never fails a run)."""
    run_dir = os.environ.get("DDLBENCH_RUN_DIR") or os.path.dirname(str(cfg["log_dir"]))
    try:
        write_packages(run_dir)
    except Exception as exc:
        sys.stderr.write(f"ddlbench: cannot record the installed packages: {exc}\n")


def _record_node(cfg: Dict[str, Any]) -> None:
    """One rank per node writes the node's facts into the run's provenance (never fails it)."""
    run_dir = os.environ.get("DDLBENCH_RUN_DIR") or os.path.dirname(str(cfg["log_dir"]))
    try:
        write_node_facts(run_dir)
    except Exception as exc:
        sys.stderr.write(f"ddlbench: cannot record the node's provenance: {exc}\n")


def _start(args: List[str], start_time: float) -> Optional[Context]:
    """The run's :class:`Context` (config, rank, opened rank log), or None after a message
    when the config cannot be read or the log not opened (nothing to log into yet)."""
    try:
        cfg = load_run_config(args[0])
        info = rank_info()
        # the job script points each attempt at its own folder (logs/attempt-<k>/)
        log_dir = os.environ.get("DDLBENCH_LOG_DIR") or cfg["log_dir"]
        cfg["log_dir"] = log_dir
        logger = RankLogger(log_dir, info.rank)
    except Exception as exc:
        sys.stderr.write(f"ddlbench: cannot start workload: {exc}\n")
        return None
    mllog = MLLog(bool(cfg.get("mllog")) and info.is_root)
    return Context(cfg, info, logger, mllog, start_time)


def _log_failure(ctx: Context) -> None:
    """Print the current exception's traceback and log it as the ``error`` record (after a
    fallback ``meta`` record when the body had not written one); an :class:`ExplainedFailure`
    or a :class:`Terminated` rank as its message alone."""
    exc = sys.exc_info()[1]
    if isinstance(exc, (ExplainedFailure, Terminated)):
        # stopped by a signal (srun ending a step another rank failed, a time limit) or an
        # explained failure: the message says it all; "Terminated: " marks a stopped rank
        message = f"Terminated: {exc}" if isinstance(exc, Terminated) else str(exc)
        sys.stderr.write(f"ddlbench: rank {ctx.info.rank}: {message}\n")
        sys.stderr.flush()
        _log_error(ctx, message, None)
        return
    tb = traceback.format_exc()
    sys.stderr.write(tb)
    sys.stderr.flush()
    _log_error(ctx, f"{type(exc).__name__}: {exc}", tb)


def _log_error(ctx: Context, message: str, tb: Optional[str]) -> None:
    """The ``error`` record, after a fallback ``meta`` record when none was written yet."""
    cfg, logger = ctx.cfg, ctx.logger
    try:
        if not logger.meta_written:
            logger.meta(
                build_meta(
                    cfg,
                    ctx.info,
                    framework_version="unknown",
                    device_name="unknown",
                    param_count=None,
                    backend=str(cfg.get("framework_options", {}).get("backend", "unknown")),
                    start_time=ctx.start_time,
                    incomplete=True,
                )
            )
        logger.error(message, tb)
        ctx.mllog.end("run_stop", metadata={"status": "aborted"})
    except Exception as log_exc:  # the log itself failed (disk full, ...)
        sys.stderr.write(f"ddlbench: cannot write the error record: {log_exc}\n")


#: the exit code of a rank stopped by SIGUSR1 (``campaign.states.STOPPED_EXIT_CODE``)
EXIT_STOPPED = 87
#: the ``error`` record's message of a rank stopped by SIGUSR1 (the login node reads it)
STOPPED_MESSAGE = (
    "stopped: SIGUSR1 (Slurm's --signal warning that the time limit is near); the run did not "
    "finish its steps"
)


def _arm_stop(ctx: Context) -> None:
    """Stop this rank cleanly on SIGUSR1 (``#SBATCH --signal=USR1@60``): an ``error`` record,
    then exit :data:`EXIT_STOPPED`, instead of SIGUSR1's default of killing the process with no
    record. Python runs signal handlers only between bytecodes of the main thread, which may be
    inside a collective for as long as a peer is away; the C-level handler writes the signal
    number to a wake-up pipe at once, and a thread waiting on it writes the record."""
    try:
        signal.signal(signal.SIGUSR1, lambda *_: None)  # caught, so it no longer kills
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
    except (ValueError, OSError):  # not the main thread
        return
    threading.Thread(target=_stop_on_usr1, args=(ctx, r), daemon=True).start()


def _stop_on_usr1(ctx: Context, fd: int) -> None:
    while True:
        data = os.read(fd, 64)
        if not data:
            return
        if signal.SIGUSR1 in data and not ctx.logger.summary_written:
            break  # after the summary the run is complete: it ends as it would have
    sys.stderr.write(f"ddlbench: rank {ctx.info.rank}: {STOPPED_MESSAGE}\n")
    _log_error(ctx, STOPPED_MESSAGE, None)
    cpu_limit.release_all()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_STOPPED)


def workload_main(body: Callable[[Context], None], argv: Optional[List[str]] = None) -> int:
    """Run a workload body; returns the process exit code (0, 1 on failure, 2 on usage)."""
    start_time = time.time()
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m ddlbench.workloads.<workload> /path/to/run.json\n")
        return 2
    ctx = _start(args, start_time)
    if ctx is None:
        return 2
    old = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError):  # not the main thread
            old[sig] = signal.signal(sig, _raise_terminated)
    _arm_stop(ctx)
    if ctx.info.is_root:
        _record_packages(ctx.cfg)
    diagnose.enable_comm_debug(ctx.cfg, ctx.cfg["log_dir"])
    watchdog.arm(ctx.cfg, ctx.cfg["log_dir"], ctx.info.rank, diagnose.node_name(), ctx.logger.write)
    try:
        ctx.mllog.start("init_start")
        ctx.mllog.run_config(ctx.cfg)
        body(ctx)
        if not ctx.logger.summary_written:
            raise RuntimeError("workload ended without a summary record")
        if ctx.info.local_rank == 0:  # after the run: the NCCL it loaded is known
            _record_node(ctx.cfg)
        return 0
    except BaseException as exc:  # noqa: B036 - log every failure, including SystemExit
        if isinstance(exc, SystemExit) and exc.code in (0, None) and ctx.logger.summary_written:
            return 0
        _log_failure(ctx)
        return 1
    finally:
        watchdog.disarm()
        for sig, handler in old.items():
            signal.signal(sig, handler)
        ctx.logger.close()


def end_process(code: int) -> NoReturn:
    """End the workload's process with ``code`` (:func:`workload_main`'s) once its logs are
    closed, skipping the interpreter's teardown: a run that measured and wrote its summary
    is never turned into a failure by a library's exit-time destructors. Gloo's threads
    (and the TCP store's on rank 0) can abort that teardown with SIGABRT ("terminate called
    without an active exception") after the process group was destroyed. Nothing is lost:
    the rank log is written with ``os.write``, and stdout and stderr are flushed here, and a
    ``cpu-share`` cgroup is removed (``cpu_limit.release_all``)."""
    cpu_limit.release_all()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
