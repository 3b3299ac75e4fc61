"""Hang detection: a per-rank watchdog that names where a rank stopped.

Every rank arms one :class:`Watchdog` (a daemon thread) before its body runs. The measuring
loops report each completed step (or allreduce iteration) with :func:`progress` and mark what
they are doing with :func:`mark` (``forward``, ``backward``, ``optimizer``, ``collective``,
``barrier``...: one attribute store, cheap enough for every step). When nothing completes in
time the watchdog

1. dumps every thread's Python stack with :mod:`faulthandler` into
   ``<log_dir>/stacks-rank-<rank>.txt`` (the attempt's log folder),
2. writes a ``hang`` record into the rank log: its last completed step, the phase it was in,
   how long it waited and the limit it applied (docs/log-format.md),
3. waits ``grace_s`` (so the other ranks' watchdogs, armed on the same clock, dump too) and
   ends the process with :data:`EXIT_HUNG`; srun's ``--kill-on-bad-exit=1`` then ends the step
   and the job, long before its time limit. The login node records the run as ``HUNG``.

The limit: ``first_s`` until the first step completes (start-up, rendezvous, compilation),
then ``max(floor_s, factor * median of the recent step times)``; during an evaluation
(phase ``eval``) ``first_s`` again. Run config ``watchdog``
(spec key ``watchdog``): ``{floor_s, factor, first_s, grace_s}``, or ``false`` to disarm.

Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

import faulthandler
import os
import statistics
import sys
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Optional

#: the exit code of a rank whose watchdog fired (distinct from 1: a failure, 2: usage,
#: 3: a busy node in the pre-flight)
EXIT_HUNG = 86
DEFAULTS: Dict[str, float] = {"floor_s": 300.0, "factor": 20.0, "first_s": 1200.0, "grace_s": 3.0}
#: how many recent step times the median is taken over
WINDOW = 50
#: phases with no step inside (an evaluation pass): the start-up limit ``first_s`` applies
LONG_PHASES = ("eval",)


class Watchdog:
    """Watches one rank's progress; see the module's description."""

    def __init__(
        self,
        log_dir: str,
        rank: int,
        host: str,
        write_record: Any,
        settings: Optional[Dict[str, Any]] = None,
    ) -> None:
        opts = dict(DEFAULTS)
        opts.update({k: float(v) for k, v in (settings or {}).items() if v is not None})
        self.floor_s, self.factor = opts["floor_s"], opts["factor"]
        self.first_s, self.grace_s = opts["first_s"], opts["grace_s"]
        self.log_dir, self.rank, self.host = log_dir, rank, host
        self._write_record = write_record
        self.phase = "start"
        self.last_step: Optional[int] = None
        self.last_done = time.monotonic()
        self.durations: Deque[float] = deque(maxlen=WINDOW)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ddlbench-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def progress(self, step: int) -> None:
        now = time.monotonic()
        if self.last_step is not None:
            self.durations.append(now - self.last_done)
        self.last_step, self.last_done = step, now

    def limit_s(self) -> float:
        """How long this rank may go without completing a step."""
        if self.last_step is None or not self.durations or self.phase in LONG_PHASES:
            return max(self.first_s, self.floor_s)
        return max(self.floor_s, self.factor * statistics.median(self.durations))

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, max(0.05, self.floor_s / 20.0))):
            waited = time.monotonic() - self.last_done
            limit = self.limit_s()
            if waited > limit:
                self.fire(waited, limit)
                return

    def describe(self, waited: float, limit: float) -> str:
        return (
            f"rank {self.rank} on {self.host}: no step completed in {waited:.1f} s "
            f"(limit {limit:.1f} s), phase {self.phase}, last step {self.last_step}"
        )

    def fire(self, waited: float, limit: float) -> None:
        """Dump the stacks, log the ``hang`` record, end the process with :data:`EXIT_HUNG`."""
        name = f"stacks-rank-{self.rank}.txt"
        try:
            os.makedirs(self.log_dir, exist_ok=True)
            with open(os.path.join(self.log_dir, name), "w") as fh:
                fh.write(f"ddlbench watchdog: {self.describe(waited, limit)}\n")
                fh.flush()
                faulthandler.dump_traceback(fh, all_threads=True)
        except OSError as exc:
            sys.stderr.write(f"ddlbench: cannot write the stack dump: {exc}\n")
            name = None
        record = {
            "type": "hang",
            "t": time.time(),
            "rank": self.rank,
            "host": self.host,
            "phase": self.phase,
            "last_step": self.last_step,
            "waited_s": waited,
            "limit_s": limit,
            "stacks": name,
        }
        try:
            self._write_record(record)
        finally:
            sys.stderr.write(f"ddlbench: {self.describe(waited, limit)}; stacks in {name}\n")
            sys.stderr.flush()
            time.sleep(self.grace_s)
            os._exit(EXIT_HUNG)


_CURRENT: Optional[Watchdog] = None


def arm(
    cfg: Dict[str, Any], log_dir: str, rank: int, host: str, write_record: Any
) -> Optional[Watchdog]:
    """Start this rank's watchdog from the run config's ``watchdog`` (None when disarmed)."""
    global _CURRENT
    settings = cfg.get("watchdog")
    if settings is False:
        return None
    _CURRENT = Watchdog(log_dir, rank, host, write_record, settings or None).start()
    return _CURRENT


def disarm() -> None:
    global _CURRENT
    if _CURRENT is not None:
        _CURRENT.stop()
    _CURRENT = None


def mark(phase: str) -> None:
    """Say what this rank does now (shown when it hangs)."""
    wd = _CURRENT
    if wd is not None:
        wd.phase = phase


def progress(step: int) -> None:
    """A step (or allreduce iteration) completed."""
    wd = _CURRENT
    if wd is not None:
        wd.progress(step)


def current_rank() -> Optional[int]:
    """The rank the armed watchdog watches (None when none is armed)."""
    wd = _CURRENT
    return wd.rank if wd is not None else None
