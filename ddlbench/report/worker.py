"""Draw the report's figures in a second process, in parallel with the rest of the report.

``ddlbench report`` starts the worker before its own imports (:func:`early_worker`; a
``build_report`` called without one starts it first thing): while the main process imports
pandas and collects, the worker imports pandas and matplotlib on the other core; later it
draws the figures while the main process writes the data files and renders the tables. It
shares the drawing with a forked child (:func:`_draw_split`), so that both cores draw. Plain
``subprocess`` with a pickled request on stdin and a pickled answer on stdout
(``multiprocessing`` would re-run ``python -m ddlbench`` in the child).

``DDLBENCH_REPORT_WORKER=0`` draws in-process; any failure of the worker does the same.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, Optional

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

    def __init__(self) -> None:
        import ddlbench

        root = str(Path(ddlbench.__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            [sys.executable, "-m", "ddlbench.report.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
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


def start() -> Optional[FigureWorker]:
    """A started worker, or None when it is switched off (:data:`ENV`) or cannot start."""
    if not enabled():
        return None
    try:
        return FigureWorker()
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


def _serve() -> int:
    from ddlbench.report import figures  # the slow import, done while the parent works

    request = pickle.loads(sys.stdin.buffer.read())
    fig_input, directory = request["input"], Path(request["dir"])
    drawn = _draw_split(figures, fig_input, directory)
    if drawn is None:
        drawn = figures.make_figures(fig_input, directory)
    sys.stdout.buffer.write(pickle.dumps(_as_strings(drawn)))
    sys.stdout.buffer.flush()
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
    rc = _serve()
    sys.stdout.flush()
    sys.stderr.flush()
    # the parent waits for this process to end: skip the interpreter's teardown of
    # matplotlib and pandas (~0.2 s), there is nothing left to clean up
    os._exit(rc)
