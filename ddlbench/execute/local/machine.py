"""What the local executor shares between all campaigns of one user on one machine.

Two campaigns submitted side by side must not share the machine during a measurement, nor
give two jobs the same number. Both are settled in a per-user folder, with ``flock``:

* **job numbers**: ``<state dir>/job-counter`` holds the last local job number handed out;
  :func:`next_job_id` increments it under an exclusive lock, so numbers are unique for the
  user across campaigns (and across machines that share a home folder), short and Slurm-like.
* **slots**: ``<slot dir>/slot-<i>`` for ``i < max_parallel``; a job supervisor holds an
  exclusive ``flock`` on one of them while its job runs. The kernel drops the lock when the
  supervisor exits, however it exits, so a crashed job never keeps a slot.

Locations (docs/executors.md):

* ``DDLBENCH_LOCAL_HOME``, when set: both, as ``$DDLBENCH_LOCAL_HOME/job-counter`` and
  ``$DDLBENCH_LOCAL_HOME/slots/`` (tests use it);
* else the counter is ``~/.cache/ddlbench/local/job-counter`` (kept across logins, so numbers
  never repeat) and the slots are ``$XDG_RUNTIME_DIR/ddlbench/local-slots/`` (private to the
  user and to this machine), or ``~/.cache/ddlbench/local-slots/<hostname>/`` without it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

HOME_ENV = "DDLBENCH_LOCAL_HOME"
COUNTER = "job-counter"
SLOT_POLL_S = 0.2


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ddlbench"


def state_dir() -> Path:
    """Where the job counter lives."""
    home = os.environ.get(HOME_ENV)
    return Path(home) if home else _cache() / "local"


def slot_dir() -> Path:
    """Where the slot files live (machine-local)."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home) / "slots"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return Path(runtime) / "ddlbench" / "local-slots"
    return _cache() / "local-slots" / socket.gethostname()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def next_job_id(at_least: int = 1) -> int:
    """The next local job number for this user (never below ``at_least``)."""
    with _locked(state_dir() / COUNTER) as fd:
        raw = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        last = int(raw) if raw.isdigit() else 0
        value = max(last + 1, at_least)
        data = f"{value}\n".encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        return value


class Slot:
    """One held slot: an open, flock-ed ``slot-<i>`` file. :meth:`release` or exit frees it."""

    def __init__(self, index: int, fd: int, path: Path) -> None:
        self.index = index
        self.path = path
        self._fd: Optional[int] = fd

    def fds(self) -> tuple:
        """The held lock's file descriptor (none once released), for a process that must
        keep the slot while it lives (the job's watchdog)."""
        return () if self._fd is None else (self._fd,)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def try_slot(limit: int, holder: str) -> Optional[Slot]:
    """Take a free slot among the first ``limit``; None when all are held."""
    folder = slot_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(max(1, limit)):
        path = folder / f"slot-{i}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{holder}\n".encode(), 0)
        return Slot(i, fd, path)
    return None


def holders(limit: int) -> list:
    """What the slot files say about their holders (for messages)."""
    out = []
    for i in range(max(1, limit)):
        with contextlib.suppress(OSError):
            text = (slot_dir() / f"slot-{i}").read_text().strip()
            if text:
                out.append(text)
    return out


def wait_for_slot(
    limit: int, holder: str, give_up: Callable[[], bool], on_wait: Callable[[], None]
) -> Optional[Slot]:
    """Block until a slot is free (``on_wait`` is called once when it must wait).

    Returns None when ``give_up()`` turns true while waiting (a cancel).
    """
    waited = False
    while True:
        slot = try_slot(limit, holder)
        if slot is not None:
            return slot
        if give_up():
            return None
        if not waited:
            waited = True
            on_wait()
        time.sleep(SLOT_POLL_S)
