"""Hang detection: a per-rank watchdog that names where a rank stopped.

Every rank arms one :class:`Watchdog` (a daemon thread) before its body runs. The measuring
loops report each completed step (or allreduce iteration) with :func:`progress` and mark what
they are doing with :func:`mark` (``forward``, ``backward``, ``optimizer``, ``collective``,
``barrier``...: one attribute store, cheap enough for every step). When nothing completes in
time the watchdog

1. asks every other rank of the attempt to dump too: it creates
   ``<log_dir>/hang-dump-request.json`` (the attempt's log folder, on the shared file system;
   the first rank to fire wins; written whole, then hard-linked to that name, so that no rank
   reads it half written), which every watchdog looks for at each tick,
2. dumps every thread's Python stack with :mod:`faulthandler` into
   ``<log_dir>/stacks-rank-<rank>.txt``,
3. writes a ``hang`` record into the rank log: its last completed step, the phase it was in,
   how long it waited and the limit it applied (docs/log-format.md),
4. waits ``grace_s`` (at least two ticks and half a second: the other ranks see the request
   and dump) and ends the process with
   :data:`EXIT_HUNG`; srun's ``--kill-on-bad-exit=1`` then ends the step and the job, long
   before its time limit. The login node records the run as ``HUNG``.

A rank that sees the request dumps its stacks and writes its ``hang`` record with
``requested_by`` (the rank that fired) and goes on until the job is ended. Ranks arm their
watchdogs seconds apart, so without the request the first to fire is often an early, healthy
rank, and the others are killed before they dump; a rank that cannot answer (stopped, dead,
stuck holding the interpreter) is then the one without a record, or with a late one: its
``waited_s`` is well past its ``limit_s`` (campaign/hangs.py reads both).

The limit: ``first_s`` until the first step completes (start-up, rendezvous, compilation),
then ``max(floor_s, factor * median of the recent step times)``; during an evaluation
(phase ``eval``) ``first_s`` again. ``first_s`` defaults to a tenth of the job's time limit
(run config ``time_limit_s``), at least 300 s and at most 1,200 s (:func:`first_limit`). Run
config ``watchdog`` (spec key ``watchdog``): ``{floor_s, factor, first_s, grace_s}``, or
``false`` to disarm.

Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import statistics
import sys
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Optional

from .cpu_limit import release_all

#: the exit code of a rank whose watchdog fired (distinct from 1: a failure, 2: usage,
#: 3: a busy node in the pre-flight)
EXIT_HUNG = 86
DEFAULTS: Dict[str, float] = {"floor_s": 300.0, "factor": 20.0, "grace_s": 3.0}
#: the start-up limit without ``first_s``: this share of the job's time limit, within bounds
FIRST_SHARE, FIRST_MIN_S, FIRST_MAX_S = 0.1, 300.0, 1200.0
#: the file (in the attempt's log folder) by which the first watchdog to fire asks the others
REQUEST = "hang-dump-request.json"
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
        time_limit_s: Optional[float] = None,
    ) -> None:
        opts = dict(DEFAULTS, first_s=first_limit(time_limit_s))
        opts.update({k: float(v) for k, v in (settings or {}).items() if v is not None})
        self.floor_s, self.factor = opts["floor_s"], opts["factor"]
        self.first_s, self.grace_s = opts["first_s"], opts["grace_s"]
        self.request_path = os.path.join(log_dir, REQUEST)
        #: how often the limit and the request are checked
        self.tick_s = min(1.0, max(0.05, self.floor_s / 20.0))
        # the others need a tick to see the request and a moment to dump before the job ends
        self.grace_s = max(self.grace_s, 2 * self.tick_s + 0.5)
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
        while not self._stop.wait(self.tick_s):
            waited = time.monotonic() - self.last_done
            limit = self.limit_s()
            if waited > limit:
                self.fire(waited, limit)
                return
            asked = self.requested_by()
            if asked is not None:
                self.dump(waited, limit, asked)
                return

    def requested_by(self) -> Optional[int]:
        """The rank whose watchdog fired and asked every rank to dump, or None."""
        if not os.path.exists(self.request_path):
            return None
        try:
            with open(self.request_path) as fh:
                return int(json.load(fh)["rank"])
        except (OSError, ValueError, KeyError, TypeError):
            return -1  # unreadable (or written in place, being written): asked all the same

    def _ask_the_others(self) -> None:
        """Create the request whole (the first rank to fire wins; the others' attempts are
        no-ops): written to a file of this rank's own, then hard-linked to the request's name,
        which fails where the request exists already; so a rank that sees the request reads
        all of it, on a shared file system too. Where hard links are refused, the request is
        created exclusively and written in place (a reader may then catch it empty)."""
        body = json.dumps({"rank": self.rank, "host": self.host, "t": time.time()})
        tmp = f"{self.request_path}.{self.rank}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as fh:
                fh.write(body)
            os.link(tmp, self.request_path)
        except FileExistsError:
            pass  # another rank asked first
        except OSError:
            self._create_in_place(body)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _create_in_place(self, body: str) -> None:
        try:
            fd = os.open(self.request_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            return
        with os.fdopen(fd, "w") as fh:
            fh.write(body)

    def describe(self, waited: float, limit: float) -> str:
        return (
            f"rank {self.rank} on {self.host}: no step completed in {waited:.1f} s "
            f"(limit {limit:.1f} s), phase {self.phase}, last step {self.last_step}"
        )

    def fire(self, waited: float, limit: float) -> None:
        """Ask the others to dump, dump the stacks, log the ``hang`` record, and end the process
        with :data:`EXIT_HUNG` after ``grace_s``."""
        self._ask_the_others()
        try:
            self.dump(waited, limit, None)
        finally:
            time.sleep(self.grace_s)
            release_all()  # a cpu-share cgroup (os._exit skips atexit)
            os._exit(EXIT_HUNG)

    def dump(self, waited: float, limit: float, requested_by: Optional[int]) -> None:
        """The stack dump and the ``hang`` record; ``requested_by``: the rank that asked."""
        name: Optional[str] = f"stacks-rank-{self.rank}.txt"
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
            "requested_by": requested_by,
            "tick_s": self.tick_s,
        }
        asked = "" if requested_by is None else f" (asked by rank {requested_by})"
        try:
            self._write_record(record)
        finally:
            sys.stderr.write(f"ddlbench: {self.describe(waited, limit)}; stacks in {name}{asked}\n")
            sys.stderr.flush()


def first_limit(time_limit_s: Optional[float]) -> float:
    """The start-up limit when the spec sets no ``first_s``: a tenth of the job's time limit,
    at least 300 s (imports from a shared file system and a rendezvous of hundreds of ranks
    take minutes) and at most 1,200 s. Without a time limit: 1,200 s."""
    if not time_limit_s:
        return FIRST_MAX_S
    return max(FIRST_MIN_S, min(FIRST_MAX_S, FIRST_SHARE * float(time_limit_s)))


_CURRENT: Optional[Watchdog] = None


def arm(
    cfg: Dict[str, Any], log_dir: str, rank: int, host: str, write_record: Any
) -> Optional[Watchdog]:
    """Start this rank's watchdog from the run config's ``watchdog`` (None when disarmed)."""
    global _CURRENT
    settings = cfg.get("watchdog")
    if settings is False:
        return None
    limit = cfg.get("time_limit_s")
    _CURRENT = Watchdog(log_dir, rank, host, write_record, settings or None, limit).start()
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
