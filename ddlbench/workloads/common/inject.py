"""Straggler injection and the per-step fields it (and backup workers) add to the rank log.

run.json's ``inject.straggler`` (docs/stragglers.md) slows chosen ranks on purpose:

- fixed: ``{ranks: [1], slowdown: 1.5}``: every step, the listed ranks take ``slowdown``
  times their compute time;
- random: ``{probability: p, distribution: pareto, shape: a, min_slowdown: m,
  max_slowdown: M, seed: s, ranks: [...]}``: every step, each listed rank (all ranks when
  none are listed) is slowed with probability ``p`` by a factor ``min(M, m * P)`` with
  ``P ~ Pareto(a)`` (``P >= 1``, heavy-tailed: ``P(P > x) = x**-a``). The draw depends on
  ``(seed, run seed, step, rank)`` only, so a run is reproducible and every rank can tell
  what every other rank drew.

The delay is added to the rank's compute, inside the measured step, after the forward pass
and before the backward pass: it is ``(factor - 1) x 3 x`` the step's forward time (the
backward pass costs about twice the forward, the convention of ddlbench's FLOP count). It is
a sleep: the rank's device idles, as a throttled or time-shared device would, and the
machine's cores stay free for the other ranks. ``sleep`` may cut it short (backup workers:
the step no longer needs this rank).
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, Dict, List, Optional

#: the step-record fields these features add (docs/log-format.md)
STEP_FIELDS = ("injected_s", "slowdown", "dropped")


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
        rng = random.Random(f"ddlbench-straggler:{self.seed}:{self.run_seed}:{step}:{rank}")
        if rng.random() >= float(self.probability):
            return 1.0
        return min(self.max_slowdown, self.min_slowdown * rng.paretovariate(self.shape))

    def delay_s(self, step: int, forward_s: float) -> float:
        """Seconds to add at ``step`` given the step's forward time."""
        return max(0.0, (self.factor(step) - 1.0) * 3.0 * forward_s)


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
    workers, ``backup_workers``."""

    def __init__(self, rank: int, backup_workers: Optional[int] = None) -> None:
        self.rank = rank
        self.backup_workers = backup_workers
        self.injected_steps = 0
        self.injected_s = 0.0
        self.dropped_steps = 0
        self.seen = False

    def add(self, phase: str, extra: Dict[str, Any]) -> None:
        if phase != "measure":
            return
        self.seen = True
        injected = extra.get("injected_s")
        if injected:
            self.injected_steps += 1
            self.injected_s += float(injected)
        dropped: List[int] = extra.get("dropped") or []
        if self.rank in dropped:
            self.dropped_steps += 1

    def summary(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.seen:
            out.update(injected_steps=self.injected_steps, injected_s=self.injected_s)
        if self.backup_workers is not None:
            out.update(backup_workers=self.backup_workers, dropped_steps=self.dropped_steps)
        return out
