"""Straggler injection and the per-step fields it (and backup workers) add to the rank log.

run.json's ``inject.straggler`` (docs/stragglers.md) slows chosen ranks on purpose:

- fixed: ``{ranks: [1], slowdown: 1.5}``: every step, the listed ranks take ``slowdown``
  times their compute time;
- random: ``{probability: p, distribution: pareto, shape: a, min_slowdown: m,
  max_slowdown: M, seed: s, ranks: [...]}``: every step, each listed rank (all ranks when
  none are listed) is slowed with probability ``p`` by a factor ``min(M, m * P)`` with
  ``P ~ Pareto(a)`` (``P >= 1``, heavy-tailed: ``P(P > x) = x**-a``). The draw depends on
  ``(seed, run seed, step // persist_steps, rank)`` only, so a run is reproducible, every
  rank can tell what every other rank drew, and with ``persist_steps: k`` a slowed rank
  stays slowed for blocks of ``k`` steps, as a slow node does.

``kind`` says what makes the rank slow (the torch side is in ``inject_torch.py``):

- ``sleep``: after the forward pass the rank sleeps ``(factor - 1) x 3 x`` the step's
  forward time (the backward pass costs about twice the forward, the convention of ddlbench's
  FLOP count); :func:`sleep` may cut it short (backup workers: the step no longer needs it);
- ``compute``: the model's forward runs ``round(factor)`` times (the backward too)
  in the autograd graph: real work no check can cut short;
- ``data``: before the step, an uninterruptible wait of ``(factor - 1) x`` the rank's last
  compute time, as a slow input pipeline (storage, decoding) would hold it;
- ``cpu-share``: the rank gets about ``1 / factor`` of its CPU time, by a cgroup CPU quota
  (``cpu_limit.py``) where the rank may make one, else by :class:`CpuShare`'s
  ``round(factor) - 1`` busy processes on each of the rank's cores (``cpu_share_by``:
  ``auto``, ``cgroup`` or ``competitors``; :func:`cpu_share` chooses).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Union

from .cpu_limit import CgroupLimit, Unavailable

#: the step-record fields these features add (docs/log-format.md)
STEP_FIELDS = ("injected_s", "slowdown", "dropped")
#: what makes an injected straggler slow (docs/stragglers.md)
KINDS = ("sleep", "compute", "data", "cpu-share")


class StragglerInjector:
    """The injected slowdown of one rank (see the module docstring)."""

    def __init__(self, spec: Dict[str, Any], rank: int, run_seed: int) -> None:
        self.rank = rank
        self.run_seed = int(run_seed)
        self.ranks = spec.get("ranks")
        self.probability = spec.get("probability")
        self.slowdown = float(spec.get("slowdown") or 1.0)
        self.shape = float(spec.get("shape") or 2.0)
        self.min_slowdown = float(spec.get("min_slowdown") or 1.5)
        self.max_slowdown = float(spec.get("max_slowdown") or 10.0)
        self.seed = int(spec.get("seed") or 0)
        self.kind = str(spec.get("kind") or "sleep")
        self.persist = int(spec.get("persist_steps") or 1)
        self.cpu_share_by = str(spec.get("cpu_share_by") or "auto")

    @classmethod
    def from_config(cls, cfg: Dict[str, Any], rank: int) -> Optional[StragglerInjector]:
        spec = (cfg.get("inject") or {}).get("straggler")
        return cls(spec, rank, int(cfg.get("seed") or 0)) if spec else None

    @property
    def random_mode(self) -> bool:
        return self.probability is not None

    def factor(self, step: int, rank: Optional[int] = None) -> float:
        """The slowdown factor of ``rank`` (default: this rank) at ``step`` (1.0: none)."""
        rank = self.rank if rank is None else rank
        if self.ranks is not None and rank not in self.ranks:
            return 1.0
        if not self.random_mode:
            return self.slowdown
        block = step // self.persist  # a draw holds for persist_steps consecutive steps
        rng = random.Random(f"ddlbench-straggler:{self.seed}:{self.run_seed}:{block}:{rank}")
        if rng.random() >= float(self.probability):
            return 1.0
        return min(self.max_slowdown, self.min_slowdown * rng.paretovariate(self.shape))

    def delay_s(self, step: int, forward_s: float) -> float:
        """Seconds to add at ``step`` given the step's forward time."""
        return max(0.0, (self.factor(step) - 1.0) * 3.0 * forward_s)

    def most(self) -> float:
        """The largest factor this rank can draw."""
        if self.ranks is not None and self.rank not in self.ranks:
            return 1.0
        return self.max_slowdown if self.random_mode else self.slowdown


#: a competing process of ``cpu-share``: spins until its parent ends
_SPIN = (
    "import os,sys\np=int(sys.argv[1])\nwhile os.getppid()==p:\n    for _ in range(200000): pass\n"
)


def _pin_and_tie(core: int) -> None:
    """In a competitor before it starts: run on ``core`` only, and be killed with the rank
    (``PR_SET_PDEATHSIG``: a stopped competitor cannot check its parent)."""
    os.sched_setaffinity(0, {core})
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class CpuShare:
    """``cpu-share`` by competitors: busy processes pinned to this rank's cores, stopped
    (SIGSTOP) and resumed (SIGCONT) per step so that ``round(factor) - 1`` of them run on
    every core. They end with the rank (each checks its parent) and with :meth:`close`."""

    def __init__(self, most: float) -> None:
        self.cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.per_core = max(0, int(round(most)) - 1)
        self.procs: List[List[subprocess.Popen]] = []
        self.running = 0
        self.by = "competitors"
        for _ in range(self.per_core):
            row = []
            for core in self.cores:
                proc = subprocess.Popen(
                    [sys.executable, "-c", _SPIN, str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    preexec_fn=lambda c=core: _pin_and_tie(c),  # noqa: PLW1509
                )
                os.kill(proc.pid, signal.SIGSTOP)
                row.append(proc)
            self.procs.append(row)

    def set(self, factor: float) -> None:
        """Let ``round(factor) - 1`` competitors per core run from now on."""
        want = min(self.per_core, max(0, int(round(factor)) - 1))
        for i, row in enumerate(self.procs):
            if (i < want) != (i < self.running):
                for proc in row:
                    os.kill(proc.pid, signal.SIGCONT if i < want else signal.SIGSTOP)
        self.running = want

    def close(self) -> None:
        for row in self.procs:
            for proc in row:
                proc.kill()
                proc.wait()
        self.procs, self.running = [], 0


def cpu_share(
    most: float, by: str = "auto", threads: Optional[int] = None, rank: int = 0
) -> Optional[Union[CgroupLimit, CpuShare]]:
    """``cpu-share``'s means for a rank that may be slowed by up to ``most`` (None when it is
    never slowed): a :class:`CgroupLimit` for ``by`` ``cgroup``, or for ``auto`` where one
    can be made, else :class:`CpuShare` competitors. ``cgroup`` where none can be made
    raises RuntimeError with the reason; ``auto`` says on stderr why it fell back."""
    if most <= 1.0:
        return None
    if by != "competitors":
        try:
            return CgroupLimit(most, threads)
        except Unavailable as exc:
            if by == "cgroup":
                raise RuntimeError(f"inject.straggler.cpu_share_by is cgroup, but {exc}") from exc
            sys.stderr.write(f"ddlbench: rank {rank}: cpu-share by competitors: {exc}\n")
    return CpuShare(most)


def sleep(
    seconds: float, stop: Optional[Callable[[], bool]] = None, poll_s: float = 0.002
) -> float:
    """Sleep ``seconds``; with ``stop``, in slices of ``poll_s``, ending early once ``stop()``
    is true. Returns the seconds slept."""
    t0 = time.perf_counter()
    if seconds <= 0:
        return 0.0
    if stop is None:
        time.sleep(seconds)
        return time.perf_counter() - t0
    end = t0 + seconds
    while True:
        now = time.perf_counter()
        if now >= end or stop():
            return now - t0
        time.sleep(min(poll_s, end - now))


class StepExtras:
    """What a rank adds to its summary from the extra step fields of its measured steps:
    ``injected_steps`` (steps slowed on purpose), ``injected_s`` (their total delay),
    ``dropped_steps`` (steps whose gradient of this rank was dropped) and, with backup
    workers, ``backup_workers`` and ``applied_samples``/``dropped_samples`` (this rank's
    measured samples whose gradient was applied or dropped) and, for a rank that ``cpu-share``
    may slow, ``cpu_share_by`` (``cgroup-v1``, ``cgroup-v2`` or ``competitors``)."""

    def __init__(
        self,
        rank: int,
        backup_workers: Optional[int] = None,
        batch_size: int = 0,
        cpu_share_by: Optional[str] = None,
    ) -> None:
        self.rank = rank
        self.cpu_share_by = cpu_share_by
        self.backup_workers = backup_workers
        self.batch_size = batch_size
        self.injected_steps = 0
        self.injected_s = 0.0
        self.dropped_steps = 0
        self.kept_steps = 0
        self.seen = False

    def add(self, phase: str, extra: Dict[str, Any]) -> None:
        if phase != "measure":
            return
        self.seen = True
        injected = extra.get("injected_s")
        if injected or float(extra.get("slowdown") or 1.0) > 1.0:
            self.injected_steps += 1
            self.injected_s += float(injected or 0.0)
        dropped: List[int] = extra.get("dropped") or []
        if self.rank in dropped:
            self.dropped_steps += 1
        else:
            self.kept_steps += 1

    def summary(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.seen:
            out.update(injected_steps=self.injected_steps, injected_s=self.injected_s)
        if self.cpu_share_by is not None:
            out.update(cpu_share_by=self.cpu_share_by)
        if self.backup_workers is not None:
            out.update(
                backup_workers=self.backup_workers,
                dropped_steps=self.dropped_steps,
                applied_samples=self.kept_steps * self.batch_size,
                dropped_samples=self.dropped_steps * self.batch_size,
            )
        return out
