"""Draw the report's figures in a second process, in parallel with the rest of the report.

``build_report`` starts the worker first thing: while the main process collects (parsing
is multi-threaded, the rest is single-threaded Python), the worker imports matplotlib on the
other core; later it draws the figures while the main process writes the data files and
renders the tables. Plain ``subprocess`` with a pickled request on stdin and a pickled answer
on stdout (``multiprocessing`` would re-run ``python -m ddlbench`` in the child).

``DDLBENCH_REPORT_WORKER=0`` draws in-process; any failure of the worker does the same.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

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


def _serve() -> int:
    from ddlbench.report import plots  # the slow import, done while the parent works

    request = pickle.loads(sys.stdin.buffer.read())
    figures = plots.make_figures(request["input"], Path(request["dir"]))
    answer = {k: {e: str(p) for e, p in v.items()} for k, v in figures.items()}
    sys.stdout.buffer.write(pickle.dumps(answer))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
