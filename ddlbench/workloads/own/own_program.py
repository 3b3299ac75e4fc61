"""Run a spec's own training program on one rank and write that rank's log from what it reports.

``python -m ddlbench.workloads.node.rank_start own_program <run.json>`` is what the job script of a
spec with a ``workload`` runs, through the framework's own template (the same binding,
rendezvous, ports, NCCL settings, containers and pre-flight as ddlbench's workloads). This
module

1. exports the framework's standard environment for the program (``RANK``, ``WORLD_SIZE``,
   ``LOCAL_RANK``..., ``TF_CONFIG``, Horovod's and MXNet's variables: docs/your-own-workload.md);
2. starts run.json's ``program.argv`` (a list: no shell ever sees it) in ``program.cwd``, with
   its stdout and stderr passed through to the job's output;
3. turns its steps into ``step`` records of the rank log (docs/log-format.md): either from
   regular expressions on its output (``measure`` patterns), or from the marks it sends with
   :mod:`ddlbench.workloads.steps` down the pipe ``DDLBENCH_MARK_FD``;
4. fails the rank with an ``error`` record saying which (non-zero exit, no pattern match, no
   mark, command not found) and the program's last lines of output.

A report that cannot be used (a step line whose number does not parse, a mark that is not
JSON, has a non-numeric field, ends before it starts, counts negative samples, a non-finite
time) is skipped: the output is still read and passed through, the rank's stderr says why (the
first few), and the summary's ``rejected_reports`` counts them. A non-finite loss is kept (the
log writes it ``null``, which the training-health check reads as divergence, as for
ddlbench's own workloads).

Each completed step feeds the rank's watchdog, so a program that stops stepping is reported as
hung. Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import runpy
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Tuple

from ..common.env import cpu_name
from ..common.runner import Context, ExplainedFailure, workload_main

#: the lines of the program's output kept for the failure message
TAIL_LINES = 20
#: rejected reports whose reason the rank's stderr gives (the later ones are only counted)
SAID_REJECTIONS = 3
#: the characters of a rejected line or mark quoted in its reason
QUOTED_CHARS = 80
#: the errors that make a report unusable
BAD_REPORT = (ValueError, TypeError, OverflowError, KeyError)
#: the distribution whose version the ``meta`` record gives, per framework
DISTRIBUTIONS = {
    "pytorch": "torch",
    "horovod": "horovod",
    "tensorflow": "tensorflow",
    "keras": "keras",
    "mxnet": "mxnet",
}


class ProgramFailed(ExplainedFailure):
    """The program failed, or told nothing a step could be made of (its message says which:
    logged without a traceback)."""


def framework_env(cfg: Dict[str, Any], env: Dict[str, str]) -> Dict[str, str]:
    """The variables the program receives on top of the job's, by framework."""
    out: Dict[str, str] = {}
    rank = env.get("SLURM_PROCID", "0")
    local = env.get("SLURM_LOCALID", "0")
    out.update(
        {
            "RANK": rank,
            "WORLD_SIZE": env.get("SLURM_NTASKS", str(cfg.get("world_size", 1))),
            "LOCAL_RANK": local,
            "LOCAL_WORLD_SIZE": str(cfg.get("tasks_per_node", 1)),
            "NODE_RANK": env.get("SLURM_NODEID", "0"),
        }
    )
    if env.get("DDLBENCH_FIRST_ADDR") and env.get("DDLBENCH_PORT"):
        out.setdefault("MASTER_ADDR", env.get("MASTER_ADDR") or env["DDLBENCH_FIRST_ADDR"])
        out.setdefault("MASTER_PORT", env.get("MASTER_PORT") or env["DDLBENCH_PORT"])
    framework = cfg.get("framework")
    if framework in ("tensorflow", "keras"):
        from ..tf.tfconfig import ensure_tf_config

        ensure_tf_config(os.environ)  # type: ignore[arg-type]
    elif framework == "horovod":
        from ..hvd.horovod_rendezvous import setup_horovod_env

        setup_horovod_env(cfg)
    elif framework == "mxnet":
        from ..mx.mxnet_main import prepare_ps_environment  # imports MXNet: its environment's rules

        prepare_ps_environment(os.environ)  # type: ignore[arg-type]
    return out


def _framework_version(framework: str) -> str:
    try:
        from importlib.metadata import version

        return version(DISTRIBUTIONS.get(framework, framework))
    except Exception:
        return "unknown"


def device_name(cfg: Dict[str, Any], rank: int) -> str:
    """The CPU's model, or the name of the GPU rank_start placed this rank on (nvidia-smi)."""
    if cfg["device"] != "gpu":
        return cpu_name()
    try:
        with open(os.path.join(cfg["log_dir"], "placement", f"rank-{rank}.json")) as fh:
            uuid = json.load(fh)["device"]["uuid"]
        query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", str(uuid)]
        out = subprocess.run(query, capture_output=True, text=True, timeout=60)
        return out.stdout.strip() or "gpu"
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return "gpu"


def _text(match: re.Match[str]) -> Any:
    return match.group("value") if "value" in match.re.groupindex else match.group(1)


def _amount(value: Any, what: str) -> float:
    """``value`` as a finite number >= 0 (ValueError saying ``what`` is wrong otherwise)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} is {value!r}, not a number")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{what} is {value!r}, not a finite number >= 0")
    return number


def step_of_line(found: re.Match[str], unit: str, samples: int) -> Tuple[float, int]:
    """``(duration in s, samples)`` of a step line matched by the step pattern; ValueError
    (or TypeError) when its numbers cannot make a step."""
    value = _amount(_text(found), "the captured value")
    if "samples" in found.re.groupindex and found.group("samples"):
        samples = int(_amount(found.group("samples"), "the samples group"))
    if unit == "samples/s":
        if value <= 0:
            raise ValueError(f"a rate of {value:g} samples/s gives no step time")
        duration = samples / value
    else:
        duration = value / 1000.0 if unit == "ms" else value
    if not math.isfinite(duration):
        raise ValueError(f"a step of {duration} s")
    return duration, samples


def _optional(m: Dict[str, Any], key: str) -> Optional[float]:
    value = m.get(key)
    return None if value is None else _amount(value, key)


def parse_mark(raw: bytes) -> Tuple[float, float, int, Optional[float], Any, Any]:
    """``(t_start, t_end, samples, loss, compute_s, comm_s)`` of one mark (a JSON object),
    checked: finite times with ``t_end >= t_start``, ``samples`` >= 0, a numeric ``loss``
    (NaN and infinity kept: a diverged loss), ``compute_s``/``comm_s`` >= 0 or absent.
    Raises one of :data:`BAD_REPORT` saying what is wrong."""
    m = json.loads(raw.decode("utf-8"))
    if not isinstance(m, dict):
        raise ValueError("not a JSON object")
    for key in ("t_start", "t_end", "samples"):
        if m.get(key) is None:
            raise ValueError(f"no {key}")
    t_start, t_end = _amount(m["t_start"], "t_start"), _amount(m["t_end"], "t_end")
    if t_end < t_start:
        raise ValueError(f"t_end {t_end!r} is before t_start {t_start!r}")
    samples = _amount(m["samples"], "samples")
    if samples != int(samples):
        raise ValueError(f"samples is {m['samples']!r}, not a whole number")
    loss = m.get("loss")
    if loss is not None:
        if isinstance(loss, bool):
            raise ValueError(f"loss is {loss!r}, not a number")
        loss = float(loss)
    return t_start, t_end, int(samples), loss, _optional(m, "compute_s"), _optional(m, "comm_s")


class StepSink:
    """Turns reports (output lines or marks) into the rank's ``step`` records, thread-safe."""

    def __init__(self, ctx: Context, program: Dict[str, Any]) -> None:
        self.ctx = ctx
        self.measurement = ctx.measurement()
        self.warmup = int(ctx.cfg["steps"]["warmup"])
        measure = program["measure"]
        self.patterns: Optional[Dict[str, Any]] = None if measure == "marks" else measure
        self.step_re = re.compile(measure["step"]) if self.patterns else None
        loss = measure.get("loss") if self.patterns else None
        self.loss_re = re.compile(loss) if loss else None
        self.samples = int((self.patterns or {}).get("samples") or ctx.cfg["batch_size"])
        self.steps = 0
        self.lines = 0
        self.loss: Optional[float] = None
        self.tail: Deque[str] = collections.deque(maxlen=TAIL_LINES)
        #: stderr's own tail: the two streams are read by two threads, so a traceback can
        #: arrive before the stdout lines printed ahead of it and be pushed out of ``tail``
        self.err_tail: Deque[str] = collections.deque(maxlen=TAIL_LINES // 2)
        self.lock = threading.Lock()
        #: reports (output lines, marks) skipped because no step could be made of them
        self.rejected = 0
        #: the first one's reason, for the failure message
        self.first_rejection = ""

    def reject(self, what: str, why: str) -> None:
        """Skip a report that cannot be used: count it, and say why on stderr (the first
        :data:`SAID_REJECTIONS`)."""
        with self.lock:
            self.rejected += 1
            n = self.rejected
            if n == 1:
                self.first_rejection = f"{what}: {why}"
        if n <= SAID_REJECTIONS:
            more = " (later ones are only counted)" if n == SAID_REJECTIONS else ""
            rank = self.ctx.info.rank
            try:  # a note: a stderr that cannot be written must not stop the reader
                sys.stderr.write(f"ddlbench: rank {rank}: skipped {what}: {why}{more}\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    def record(
        self,
        t_start: float,
        t_end: float,
        samples: int,
        loss: Optional[float],
        compute_s: Optional[float] = None,
        comm_s: Optional[float] = None,
    ) -> None:
        with self.lock:
            phase = "warmup" if self.steps < self.warmup else "measure"
            self.measurement.record_step(
                self.steps, None, phase, t_start, t_end, samples, loss, None, compute_s, comm_s
            )
            self.steps += 1

    def line(self, text: str, err: bool = False) -> None:
        """One line of the program's output (stdout, or stderr with ``err``)."""
        now = time.time()
        with self.lock:
            self.lines += 1
            (self.err_tail if err else self.tail).append(text.rstrip("\n"))
        quoted = repr(text.rstrip("\n")[:QUOTED_CHARS])
        if self.loss_re is not None:
            found = self.loss_re.search(text)
            if found:
                try:
                    self.loss = float(_text(found))  # NaN and infinity kept: a diverged loss
                    self.measurement.final_loss = self.loss
                except BAD_REPORT as exc:
                    self.loss = None
                    self.reject("a loss line", f"{exc}: {quoted}")
        if self.step_re is None:
            return
        found = self.step_re.search(text)
        if not found:
            return
        unit = self.patterns["unit"]  # type: ignore[index]
        try:
            duration, samples = step_of_line(found, unit, self.samples)
        except BAD_REPORT as exc:
            self.reject("a step line", f"{exc}: {quoted}")
            return
        self.record(now - duration, now, samples, self.loss)

    def mark(self, raw: bytes) -> None:
        """One mark from ddlbench.workloads.steps: a JSON object per line."""
        try:
            t_start, t_end, samples, loss, compute_s, comm_s = parse_mark(raw)
        except BAD_REPORT as exc:
            self.reject("a mark", f"{exc}: {raw[:QUOTED_CHARS]!r}")
            return
        if loss is not None:
            self.measurement.final_loss = loss
        self.record(t_start, t_end, samples, loss, compute_s, comm_s)

    def last_lines(self) -> str:
        with self.lock:
            err = list(self.err_tail)
            lines = list(self.tail)[-(TAIL_LINES - len(err)) :] + err  # stderr's last
        if not lines:
            return "; it printed nothing"
        return "; its last lines:\n" + "\n".join("  | " + line for line in lines)


def _pump(stream: Any, out: Any, sink: StepSink, err: bool = False) -> None:
    """Pass the program's output through, line by line, and hand each line to ``sink``. The
    pipe is read to its end whatever happens, so the program never blocks on a full pipe."""
    for raw in iter(stream.readline, b""):
        if out is not None:
            try:
                out.buffer.write(raw)
                out.flush()
            except (OSError, ValueError):  # the job's output is gone: keep reading
                out = None
        try:
            sink.line(raw.decode("utf-8", errors="replace"), err)
        except Exception as exc:  # never stop reading
            sink.reject("an output line", f"{type(exc).__name__}: {exc}")
    stream.close()


def _read_marks(fd: int, sink: StepSink) -> None:
    """Hand each mark to ``sink`` until the program closes the pipe (a bad mark is skipped)."""
    with os.fdopen(fd, "rb") as marks:
        for raw in marks:
            try:
                sink.mark(raw)
            except Exception as exc:  # never stop reading: the program would get EPIPE
                sink.reject("a mark", f"{type(exc).__name__}: {exc}")


def _die_with_parent() -> None:
    """In the child: be killed when this rank's process ends (a hang, srun's kill)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def start_program(
    program: Dict[str, Any], env: Dict[str, str], sink: StepSink
) -> Tuple[subprocess.Popen, List[threading.Thread]]:
    """Start the program with its output pumped into ``sink`` (and the mark pipe with marks)."""
    argv: List[str] = list(program["argv"])
    cwd = program.get("cwd") or os.environ.get("DDLBENCH_RUN_DIR") or os.getcwd()
    read_fd, write_fd = os.pipe()
    env = dict(env, DDLBENCH_MARK_FD=str(write_fd))
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(write_fd,),
            preexec_fn=_die_with_parent,
        )
    except OSError as exc:
        os.close(read_fd)
        raise ProgramFailed(
            f"cannot start the program {argv[0]!r} in {cwd}: {exc.strerror or exc} (is it on the "
            "PATH of the job's environment, or a path relative to the workdir?)"
        ) from None
    finally:
        os.close(write_fd)
    threads = [
        threading.Thread(target=_pump, args=(proc.stdout, sys.stdout, sink), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, sys.stderr, sink, True), daemon=True),
        threading.Thread(target=_read_marks, args=(read_fd, sink), daemon=True),
    ]
    for t in threads:
        t.start()
    return proc, threads


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def check_outcome(rc: int, sink: StepSink, program: Dict[str, Any], where: str) -> None:
    """Raise :class:`ProgramFailed` unless the program exited 0 having reported measured
    steps."""
    name = program["argv"][0]
    if rc != 0:
        how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
        raise ProgramFailed(f"the program {name!r} {how} {where}{sink.last_lines()}")
    skipped = f"; skipped {sink.first_rejection}" if sink.rejected else ""
    if sink.steps == 0 and sink.patterns is not None:
        if sink.rejected:
            raise ProgramFailed(
                f"the step pattern {sink.patterns['step']!r} matched no line whose number makes "
                f"a step ({sink.rejected} rejected) {where}{skipped}: make the pattern capture "
                f"the step's time or rate{sink.last_lines()}"
            )
        raise ProgramFailed(
            f"the step pattern {sink.patterns['step']!r} never matched the program's output "
            f"({sink.lines} lines) {where}{sink.last_lines()}"
        )
    if sink.steps == 0:
        raise ProgramFailed(
            f"the program {name!r} never marked a step {where} (it imports "
            f"ddlbench.workloads.steps and calls step_done() or uses 'with step()'; "
            f"{sink.rejected} rejected marks){skipped}{sink.last_lines()}"
        )
    if sink.measurement.steps_measured == 0:
        raise ProgramFailed(
            f"the program reported {sink.steps} steps {where}, all of them warmup "
            f"(steps.warmup is {sink.warmup}){skipped}{sink.last_lines()}"
        )
    if sink.measurement.window_s() <= 0:
        raise ProgramFailed(
            f"the program's {sink.measurement.steps_measured} measured steps {where} last 0 s "
            f"in all, so they give no throughput: end each step after its work (marks), or "
            f"capture a time above 0 (patterns){skipped}{sink.last_lines()}"
        )


def body(ctx: Context) -> None:
    cfg = ctx.cfg
    program = cfg["program"]
    extra = framework_env(cfg, dict(os.environ))
    env = dict(os.environ, **extra)
    ctx.write_meta(
        _framework_version(str(cfg["framework"])),
        device_name(cfg, ctx.info.rank),
        None,
        str(cfg.get("backend") or ""),
        program=list(program["argv"]),
        measured_by="marks" if program["measure"] == "marks" else "output",
    )
    sink = StepSink(ctx, program)
    where = f"on rank {ctx.info.rank} ({ctx.info.host})"
    proc, threads = start_program(program, env, sink)
    try:
        rc = proc.wait()
    finally:
        _stop(proc)
    for t in threads:
        t.join(timeout=30)
    check_outcome(rc, sink, program, where)
    if sink.rejected:
        sys.stderr.write(
            f"ddlbench: rank {ctx.info.rank}: {sink.rejected} of the program's reports were "
            f"skipped (the summary's rejected_reports; the first: {sink.first_rejection})\n"
        )
    ctx.finish(dict(sink.measurement.summary_fields(), rejected_reports=sink.rejected))


def main() -> int:
    if os.environ.get("DMLC_ROLE", "worker").strip().lower() in ("scheduler", "server"):
        # MXNet's scheduler and servers: ddlbench's own, the program runs as the workers
        runpy.run_module("ddlbench.workloads.mx.mxnet_main", run_name="__main__", alter_sys=True)
        return 0
    return workload_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
