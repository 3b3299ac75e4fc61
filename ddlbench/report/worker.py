"""Draw the report's figures in a second process, in parallel with the rest of the report.

``ddlbench report`` starts the worker as soon as it has checked its options (pandas is
imported by then), before the rest of its imports (:func:`early_worker`; a ``build_report``
called without one starts it first thing): while the main process imports and collects, the
worker imports matplotlib on the other core; later it draws the figures while the main process
writes the data files and renders the tables. It shares the drawing with a forked child
(:func:`_draw_split`), so that both cores draw. The worker is a fork of the main process where
that is safe (:func:`can_fork`: it starts with pandas imported), else ``python -m
ddlbench.report.worker``; either way a pickled request goes in and a pickled answer comes back
on pipes (``multiprocessing`` would re-run ``python -m ddlbench`` in the child).

``DDLBENCH_REPORT_WORKER=0`` draws in-process; any failure of the worker does the same.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

ENV = "DDLBENCH_REPORT_WORKER"


@dataclass
class FigureInput:
    """What the figures need from an :class:`~ddlbench.analyse.analysis.Analysis`."""

    settings: object
    points: object
    series: object
    largest_run: Optional[str]
    largest_ranks: object
    convergence: object
    curves: object
    allreduce: object
    stragglers: object = None  # the straggler table: which quantity each run's index uses

    @classmethod
    def of(cls, a) -> FigureInput:
        return cls(
            a.settings,
            a.points,
            a.series,
            a.largest_run,
            a.largest_ranks,
            a.convergence,
            a.curves,
            a.allreduce,
            a.stragglers,
        )


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "no", "false", "off")


class FigureWorker:
    """A child process that has imported matplotlib and waits for one request."""

    def __init__(self, fork: bool = False) -> None:
        self.proc: Any = _ForkedChild() if fork else _spawn()
        self._thread = None
        self._answer = None
        self._error: Optional[BaseException] = None

    def submit(self, fig_input: FigureInput, directory: Path) -> None:
        """Send the request; the worker draws while the caller goes on."""
        import threading

        if self.proc is None or self._thread is not None:
            raise RuntimeError("figure worker already used")
        request = pickle.dumps({"input": fig_input, "dir": str(directory)})
        proc = self.proc

        def talk() -> None:
            try:
                self._answer = proc.communicate(request, timeout=600)
            except Exception as exc:  # noqa: BLE001 - reported by result()
                self._error = exc

        self._thread = threading.Thread(target=talk, daemon=True)
        self._thread.start()

    def result(self) -> Dict[str, Dict[str, Path]]:
        """The figures drawn by the worker; raises RuntimeError when it failed."""
        if self._thread is None:
            raise RuntimeError("nothing submitted")
        self._thread.join()
        proc, self.proc = self.proc, None
        if self._error is not None:
            raise RuntimeError(f"figure worker: {self._error}")
        out, err = self._answer
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
            raise RuntimeError(f"figure worker exited {proc.returncode}: {tail[0]}")
        answer = pickle.loads(out)
        return {k: {e: Path(p) for e, p in v.items()} for k, v in answer.items()}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def _spawn() -> subprocess.Popen:
    """``python -m ddlbench.report.worker`` with this ddlbench first on its path."""
    import ddlbench

    root = str(Path(ddlbench.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.Popen(
        [sys.executable, "-m", "ddlbench.report.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


class _ForkedChild:
    """A forked copy of this process serving one request on pipes, with the parts of
    ``subprocess.Popen`` that :class:`FigureWorker` uses: it starts with this process's
    imports (pandas, numpy: 0.3 s of CPU that a new interpreter spends again). Its answer is
    the pickled figures (exit 0) or the error's text (exit 1); its own output goes nowhere."""

    def __init__(self) -> None:
        req_r, self._req_w = os.pipe()
        self._ans_r, ans_w = os.pipe()
        self.returncode: Optional[int] = None
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into the caller's code
            code = 1
            try:
                os.close(self._req_w)
                os.close(self._ans_r)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                code = _serve_fds(req_r, ans_w)
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(ans_w)

    def communicate(self, request: bytes, timeout: Optional[float] = None):
        with os.fdopen(self._req_w, "wb") as dst:
            dst.write(request)
        with os.fdopen(self._ans_r, "rb") as src:
            answer = src.read()
        self.wait()
        return (answer, b"") if self.returncode == 0 else (b"", answer)

    def poll(self) -> Optional[int]:
        return self._reap(os.WNOHANG)

    def wait(self) -> int:
        code = self._reap(0)
        return -1 if code is None else code

    def _reap(self, flags: int) -> Optional[int]:
        """The child's exit code once it has ended. The talking thread and ``close`` (after an
        error elsewhere) may both wait for it: the one that does not reap it gets ECHILD,
        which must not replace the error being reported, so it reads as an unknown code."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped by the other thread
                return self.returncode if self.returncode is not None else -1
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def _serve_fds(req_fd: int, ans_fd: int) -> int:
    """The forked child's work: :func:`_serve` on two pipes, an error's text as the answer."""
    with os.fdopen(req_fd, "rb") as src, os.fdopen(ans_fd, "wb") as dst:
        try:
            return _serve(src, dst)
        except BaseException as exc:  # noqa: BLE001 - the parent says it and draws itself
            dst.write(f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
            return 1


def can_fork() -> bool:
    """Whether a forked worker is safe here: Linux, and no other Python thread (a lock that
    another thread holds at the fork stays held in the child)."""
    import threading

    return sys.platform.startswith("linux") and threading.active_count() == 1


def start() -> Optional[FigureWorker]:
    """A started worker, or None when it is switched off (:data:`ENV`) or cannot start: a
    fork of this process where that is safe (:func:`can_fork`), else a new interpreter."""
    if not enabled():
        return None
    try:
        return FigureWorker(fork=can_fork())
    except OSError:
        return None


@contextlib.contextmanager
def early_worker() -> Iterator[Optional[FigureWorker]]:
    """A worker started now, before the caller's heavy imports, for ``build_report``'s
    ``figure_worker``; stopped on the way out if it was never used."""
    worker = start()
    try:
        yield worker
    finally:
        if worker is not None:
            worker.close()


def _serve(src, dst) -> int:
    """Import the figures' modules (while the parent works), read one request from ``src``,
    draw, write the pickled paths to ``dst``.

    Without the cycle collector: this process ends after one request, and its collections
    (0.05-0.06 s of CPU, most of it one pass over everything pandas and matplotlib made at
    import, which in a fork also copies those pages) would free only a few figures."""
    import gc

    gc.disable()
    from ddlbench.report import figures  # the slow import, done while the parent works

    request = pickle.loads(src.read())
    fig_input, directory = request["input"], Path(request["dir"])
    drawn = _draw_split(figures, fig_input, directory)
    if drawn is None:
        drawn = figures.make_figures(fig_input, directory)
    dst.write(pickle.dumps(_as_strings(drawn)))
    dst.flush()
    return 0


def _as_strings(figures) -> Dict[str, Dict[str, str]]:
    """Figure paths as strings, for the pickled answer."""
    return {k: {e: str(p) for e, p in v.items()} for k, v in figures.items()}


def _draw_split(figures, fig_input: FigureInput, directory: Path):
    """Draw half of the figures in a forked child and the other half here, at once
    (``figures.part_of``): the parent waits idle for the figures, so the second core is free.
    The files are the same as drawn in one process. ``None`` when forking is not possible or
    the child failed (then the caller draws everything itself)."""
    import threading

    if not hasattr(os, "fork") or threading.active_count() != 1:
        return None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into the parent's code
        code = 1
        try:
            os.close(read_fd)
            drawn = figures.make_figures(fig_input, directory, part=0)
            with os.fdopen(write_fd, "wb") as out:
                pickle.dump(_as_strings(drawn), out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    mine = figures.make_figures(fig_input, directory, part=1)
    with os.fdopen(read_fd, "rb") as src:
        data = src.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return None
    drawn: Dict[str, Dict[str, Path]] = {}
    for key, paths in list(pickle.loads(data).items()) + list(_as_strings(mine).items()):
        drawn.setdefault(key, {}).update({e: Path(p) for e, p in paths.items()})
    return drawn


if __name__ == "__main__":
    rc = _serve(sys.stdin.buffer, sys.stdout.buffer)
    sys.stdout.flush()
    sys.stderr.flush()
    # the parent waits for this process to end: skip the interpreter's teardown of
    # matplotlib and pandas (~0.2 s), there is nothing left to clean up
    os._exit(rc)
