"""The measurement loop: warmup and measured steps, evaluation, summary fields.

A framework program supplies ``step_fn(batch, lr)``, which runs one training
step and returns the loss as a Python float read back from the device (that
read, or an explicit device synchronisation inside ``step_fn``, is what makes
the step end honest). The loop takes ``t_start`` before fetching the batch and
``t_end`` after ``step_fn`` returns, logs one ``step`` record per step and keeps
the figures of the ``summary`` record.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from . import watchdog
from .logger import RankLogger
from .mllog import MLLog
from .schedule import LRSchedule
from .window import MeasureWindow, SumRanks

StepReturn = Union[
    float,
    Tuple[float, Optional[float], Optional[float]],
    Tuple[float, Optional[float], Optional[float], Dict[str, Any]],
]


class Measurement:
    """Records steps and evaluations of one rank and computes its summary figures.

    Use :meth:`step` to time a step function, or :meth:`record_step` when the
    framework times steps itself (e.g. in a Keras callback).
    """

    def __init__(
        self,
        logger: RankLogger,
        mode: str = "throughput",
        target_accuracy: Optional[float] = None,
        mllog: Optional[MLLog] = None,
        compiled: bool = False,
        extras: Any = None,
    ) -> None:
        self.logger = logger
        #: a common.inject.StepExtras that sums up the extra step fields, or None
        self.extras = extras
        #: whether the step is compiled (its first step then includes the compilation)
        self.compiled = compiled
        self.first_step_s: Optional[float] = None
        self.mode = mode
        self.target_accuracy = target_accuracy
        self.mllog = mllog or MLLog(False)
        self.first_t_start: Optional[float] = None  # first step of any phase
        self.measure_t_start: Optional[float] = None
        self.measure_t_end: Optional[float] = None
        self.steps_measured = 0
        self.samples_measured = 0
        self.step_times: List[float] = []
        self.compute_times: List[float] = []
        self.comm_times: List[float] = []
        self.final_loss: Optional[float] = None
        self.final_accuracy: Optional[float] = None
        self.best_accuracy: Optional[float] = None
        self.time_to_accuracy_s: Optional[float] = None
        self.eval_time_s = 0.0
        #: the throughput run's measured-window rule (set by run_training)
        self.window: Optional[MeasureWindow] = None

    def record_step(
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
        """Log a step timed elsewhere and account for it."""
        self.logger.step(
            step, epoch, phase, t_start, t_end, samples, loss, lr, compute_s, comm_s, extra
        )
        watchdog.progress(step)
        if extra is not None and self.extras is not None:
            self.extras.add(phase, extra)
        if self.first_t_start is None:
            self.first_t_start = t_start
            self.first_step_s = t_end - t_start
        if loss is not None:
            self.final_loss = float(loss)
        if phase == "measure":
            if self.measure_t_start is None:
                self.measure_t_start = t_start
            self.measure_t_end = t_end
            self.steps_measured += 1
            self.samples_measured += int(samples)
            self.step_times.append(t_end - t_start)
            if compute_s is not None:
                self.compute_times.append(compute_s)
            if comm_s is not None:
                self.comm_times.append(comm_s)

    def step(
        self,
        step_fn: Callable[[Any, float], StepReturn],
        step: int,
        epoch: Optional[int],
        phase: str,
        samples: int,
        lr: float,
        batches: Optional[Iterator[Any]] = None,
    ) -> Optional[float]:
        """Fetch the next batch (if ``batches``), run ``step_fn(batch, lr)``, log the step."""
        t_start = time.time()
        watchdog.mark("data")
        batch = next(batches) if batches is not None else None
        watchdog.mark("step")
        out = step_fn(batch, lr)
        t_end = time.time()
        extra = None
        if isinstance(out, tuple) and len(out) == 4:  # with the injection/backup fields
            loss, compute_s, comm_s, extra = out
        elif isinstance(out, tuple):
            loss, compute_s, comm_s = out
        else:
            loss, compute_s, comm_s = out, None, None
        self.record_step(
            step, epoch, phase, t_start, t_end, samples, loss, lr, compute_s, comm_s, extra
        )
        return loss

    def record_eval(
        self,
        epoch: int,
        accuracy: float,
        loss: Optional[float],
        samples: Optional[int] = None,
        eval_start: Optional[float] = None,
    ) -> bool:
        """Log an evaluation that just finished; returns whether the target is reached."""
        t = time.time()
        if eval_start is not None:
            self.eval_time_s += t - eval_start
        elapsed = t - (self.first_t_start if self.first_t_start is not None else t)
        self.logger.eval(epoch, t, elapsed, accuracy, loss, samples)
        if samples is not None:
            self.mllog.once("eval_samples", int(samples))
        self.mllog.event("eval_accuracy", float(accuracy), {"epoch_num": epoch + 1})
        self.final_accuracy = float(accuracy)
        if self.best_accuracy is None or accuracy > self.best_accuracy:
            self.best_accuracy = float(accuracy)
        reached = self.target_accuracy is not None and accuracy >= self.target_accuracy
        if reached and self.time_to_accuracy_s is None:
            self.time_to_accuracy_s = elapsed
            # MLPerf's run ends at the target; training may go on to the planned epochs
            self.mllog.end("run_stop", metadata={"status": "success", "epoch_num": epoch + 1})
        return reached

    def window_s(self) -> float:
        """This rank's measured window so far: first measured step's start to last's end."""
        if self.measure_t_start is not None and self.measure_t_end is not None:
            return self.measure_t_end - self.measure_t_start
        return 0.0

    def summary_fields(self) -> Dict[str, Any]:
        """The ``summary`` figures, without ``param_sum``/``param_sha256`` (the caller's)."""
        window = self.window_s()
        status = "ok"
        if self.mode == "convergence" and self.target_accuracy is not None:
            status = "ok" if self.time_to_accuracy_s is not None else "target_not_reached"
        return {
            "status": status,
            "steps_measured": self.steps_measured,
            "samples_measured": self.samples_measured,
            "measure_time_s": window,
            "throughput": self.samples_measured / window if window > 0 else None,
            "final_loss": self.final_loss,
            "final_accuracy": self.final_accuracy,
            "best_accuracy": self.best_accuracy,
            "time_to_accuracy_s": self.time_to_accuracy_s,
            "step_time_median_s": statistics.median(self.step_times) if self.step_times else None,
            "compute_time_median_s": _median(self.compute_times),
            "comm_time_median_s": _median(self.comm_times),
            "eval_time_s": self.eval_time_s if self.mode == "convergence" else None,
            "first_step_s": self.first_step_s,
            "compile_s": self.compile_seconds(),
            **(self.extras.summary() if self.extras is not None else {}),
            **(self.window.summary() if self.window is not None else {}),
        }

    def compile_seconds(self) -> Optional[float]:
        """Compilation time of a compiled step, estimated as the first step's excess over the
        median measured step (``None`` when the step is not compiled)."""
        if not self.compiled or self.first_step_s is None:
            return None
        median = statistics.median(self.step_times) if self.step_times else 0.0
        return max(0.0, self.first_step_s - median)


def _median(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def run_training(
    cfg: Dict[str, Any],
    measurement: Measurement,
    step_fn: Callable[[Any, float], StepReturn],
    schedule: LRSchedule,
    batches: Optional[Callable[[int], Iterable[Any]]] = None,
    evaluate: Optional[Callable[[int], Tuple[float, Optional[float], Optional[int]]]] = None,
    sum_ranks: Optional[SumRanks] = None,
) -> Measurement:
    """Drive the steps of a run config's mode and return ``measurement``.

    - ``step_fn(batch, lr)``: one training step at learning rate ``lr`` (the
      framework sets it on its optimizer); returns the loss as a float, or
      ``(loss, compute_s, comm_s)``.
    - ``batches(epoch)``: the epoch's training batches (an iterable of
      ``steps_per_epoch`` items), or ``None`` when every step reuses one batch
      (synthetic data: ``step_fn`` gets ``None``).
    - ``evaluate(epoch)``: ``(accuracy, loss, samples)`` on the validation
      split, global over all ranks (convergence mode).
    - ``sum_ranks(values)``: a list of floats summed over all ranks (a small allreduce);
      the ranks agree with it on how long to measure (``steps.measure_seconds``; needed
      when world_size > 1).

    Throughput mode: ``steps.warmup`` warmup steps then ``steps.measure``
    measured ones (more until the window lasts ``steps.measure_seconds``), epochs counted by
    ``schedule.steps_per_epoch``; real data
    cycles through epochs. Convergence mode: ``epochs`` epochs of
    ``schedule.steps_per_epoch`` steps, every step measured, evaluation after
    each epoch (it runs to the last epoch even when the target is reached; the MLLOG
    ``run_stop`` is written at the evaluation that reaches it).
    """
    mllog = measurement.mllog
    mllog.schedule(cfg, schedule)
    mllog.end("init_stop")
    mllog.start("run_start")
    if cfg["mode"] == "throughput":
        _run_throughput(cfg, measurement, step_fn, schedule, batches, sum_ranks)
        mllog.end("run_stop", metadata={"status": "success"})
        return measurement
    if cfg["mode"] != "convergence":
        raise ValueError(f"run_training does not handle mode {cfg['mode']!r}")
    if batches is None or evaluate is None:
        raise ValueError("convergence mode needs batches and evaluate")
    reached = _run_convergence(cfg, measurement, step_fn, schedule, batches, evaluate)
    status = "success" if reached or measurement.target_accuracy is None else "aborted"
    mllog.end("run_stop", metadata={"status": status})
    return measurement


def _run_throughput(
    cfg: Dict[str, Any],
    measurement: Measurement,
    step_fn: Callable[[Any, float], StepReturn],
    schedule: LRSchedule,
    batches: Optional[Callable[[int], Iterable[Any]]],
    sum_ranks: Optional[SumRanks] = None,
) -> None:
    """Warmup then measured steps, at least ``steps.measure`` of them and, with
    ``steps.measure_seconds``, until the window is that long (:class:`MeasureWindow`); real
    data restarts its iterator at each epoch boundary."""
    samples = int(cfg["batch_size"])
    warmup = int(cfg["steps"]["warmup"])
    window = MeasureWindow(cfg["steps"], int(cfg.get("world_size") or 1))
    measurement.window = window
    epoch = -1
    it: Optional[Iterator[Any]] = None
    step, end = 0, warmup + window.planned
    while step < end:
        step_epoch = schedule.epoch_of(step)
        if batches is not None and (it is None or step_epoch != epoch):
            it = iter(batches(step_epoch))
        epoch = step_epoch
        phase = "warmup" if step < warmup else "measure"
        measurement.step(step_fn, step, epoch, phase, samples, schedule(step), it)
        step += 1
        if step == end:
            end += window.more(measurement.steps_measured, measurement.window_s(), sum_ranks)


def _run_convergence(
    cfg: Dict[str, Any],
    measurement: Measurement,
    step_fn: Callable[[Any, float], StepReturn],
    schedule: LRSchedule,
    batches: Callable[[int], Iterable[Any]],
    evaluate: Callable[[int], Tuple[float, Optional[float], Optional[int]]],
) -> bool:
    """``epochs`` epochs of measured steps, each followed by an evaluation; returns whether
    an evaluation reached the target."""
    mllog = measurement.mllog
    samples = int(cfg["batch_size"])
    steps_per_epoch = int(round(schedule.steps_per_epoch))
    step = 0
    reached = False
    for epoch in range(int(cfg["epochs"])):
        mllog.start("epoch_start", metadata={"epoch_num": epoch + 1})
        it = iter(batches(epoch))
        for _ in range(steps_per_epoch):
            measurement.step(step_fn, step, epoch, "measure", samples, schedule(step), it)
            step += 1
        mllog.end("epoch_stop", metadata={"epoch_num": epoch + 1})
        eval_start = time.time()
        watchdog.mark("eval")
        mllog.start("eval_start", metadata={"epoch_num": epoch + 1})
        accuracy, loss, n = evaluate(epoch)
        mllog.end("eval_stop", metadata={"epoch_num": epoch + 1})
        reached = measurement.record_eval(epoch, accuracy, loss, n, eval_start) or reached
    return reached


def eval_result(totals: Iterable[Any]) -> Tuple[float, float, int]:
    """``(accuracy, mean loss, samples)`` from the global ``(correct, loss sum, samples)``
    totals of an evaluation (accuracy 0 and loss NaN when there were no samples)."""
    correct, loss_sum, n = (float(v) for v in totals)
    return (correct / n if n else 0.0), (loss_sum / n if n else float("nan")), int(n)
