"""Mark the steps of your own training program for ddlbench (docs/your-own-workload.md).

A few lines in the training loop::

    from ddlbench.workloads.steps import step, comm

    for batch in loader:
        with step(samples=len(batch)) as s:     # one training step of this rank
            loss = train_step(batch)
            s.loss = loss.item()                # optional: reading it back also syncs the GPU

or ``step_done(samples=n, loss=x)`` after each step (a step then lasts from the previous mark).
``with comm():`` around the code that communicates splits the step into compute and
communication time (``compute_s``, ``comm_s`` of docs/log-format.md).

Under ddlbench (``DDLBENCH_MARK_FD`` set by ``ddlbench.workloads.own.own_program``) every step is
one JSON line down that pipe, and ddlbench writes the rank log; anywhere else the marks do
nothing, so the program still runs on its own. Standard library only; Python 3.8 syntax; the
whole of ddlbench that a program needs on the compute nodes (the campaign's ``pkg/`` is on
``PYTHONPATH``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Dict, Optional

__all__ = ["step", "step_done", "comm", "enabled", "Step"]

_LOCK = threading.Lock()
_FD: Optional[int] = None
_last_end: Optional[float] = None
_comm_s: float = 0.0
_comm_marked = False


def _fd() -> Optional[int]:
    global _FD
    if _FD is None:
        value = os.environ.get("DDLBENCH_MARK_FD", "")
        _FD = int(value) if value.isdigit() else -1
    return _FD if _FD >= 0 else None


def enabled() -> bool:
    """Whether the marks go anywhere (the program runs under ddlbench)."""
    return _fd() is not None


def _send(record: Dict[str, Any]) -> None:
    fd = _fd()
    if fd is None:
        return
    data = (json.dumps(record) + "\n").encode("utf-8")
    with _LOCK:
        while data:  # a pipe write of less than PIPE_BUF bytes is atomic
            data = data[os.write(fd, data) :]


def _emit(t_start: float, t_end: float, samples: int, loss: Optional[float]) -> None:
    global _last_end, _comm_s, _comm_marked
    comm_s = _comm_s if _comm_marked else None
    compute_s = (t_end - t_start - _comm_s) if _comm_marked else None
    _send(
        {
            "t_start": t_start,
            "t_end": t_end,
            "samples": int(samples),
            "loss": None if loss is None else float(loss),
            "compute_s": compute_s,
            "comm_s": comm_s,
        }
    )
    _last_end, _comm_s, _comm_marked = t_end, 0.0, False


class Step:
    """``with step(samples=n) as s:`` one step; set ``s.loss`` inside to log the loss."""

    def __init__(self, samples: int, loss: Optional[float] = None) -> None:
        self.samples = samples
        self.loss = loss
        self.t_start = 0.0

    def __enter__(self) -> Step:
        global _comm_s, _comm_marked
        _comm_s, _comm_marked = 0.0, False
        self.t_start = time.time()
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            _emit(self.t_start, time.time(), self.samples, self.loss)


def step(samples: int, loss: Optional[float] = None) -> Step:
    """A context manager around one training step of this rank (``samples``: its batch)."""
    return Step(samples, loss)


def step_done(samples: int, loss: Optional[float] = None) -> None:
    """Mark the end of a step that began at the previous mark (the first: at import)."""
    now = time.time()
    _emit(_last_end if _last_end is not None else _IMPORTED, now, samples, loss)


class _Comm:
    def __enter__(self) -> _Comm:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        global _comm_s, _comm_marked
        _comm_s += time.perf_counter() - self.t0
        _comm_marked = True


def comm() -> _Comm:
    """``with comm():`` around communication inside a step (the rest is compute)."""
    return _Comm()


_IMPORTED = time.time()
