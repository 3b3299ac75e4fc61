"""How long a throughput run measures: at least ``steps.measure`` steps and at least
``steps.measure_seconds`` seconds, at most ``steps.max_measure`` steps (docs/spec.md#steps).

Ranks of a synchronous run must take the same number of steps, so the decision to go on is
agreed: after the planned steps each rank works out how many more steps it needs to reach
``measure_seconds`` (its measured window so far over the steps it took gives the time per
step, with :data:`MARGIN` added), the ranks sum their answers and a count of themselves with
the framework's ``sum_ranks`` (one small allreduce) and all of them take the mean, rounded
up. That repeats
at most :data:`MAX_ROUNDS` times, so at most that many small allreduces fall inside the
measured window. Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional

#: extrapolating the window a little too far costs less than one more agreement round
MARGIN = 1.05
#: agreement rounds after the planned steps (each one small allreduce)
MAX_ROUNDS = 4
#: the cap on measured steps when ``steps.max_measure`` is not given, as a multiple of
#: ``steps.measure`` (and at least :data:`DEFAULT_CAP_MIN` steps)
DEFAULT_CAP_FACTOR = 100
DEFAULT_CAP_MIN = 1000

#: ``sum_ranks(values)``: the list of floats summed element-wise over all ranks
SumRanks = Callable[[List[float]], List[float]]


class MeasureWindow:
    """The measured-step plan of one rank: planned steps, time target, cap, rounds used."""

    def __init__(self, steps: Dict[str, Any], world_size: int) -> None:
        self.planned = int(steps["measure"])
        self.seconds = float(steps.get("measure_seconds") or 0.0)
        cap = steps.get("max_measure")
        if cap is None:
            cap = max(DEFAULT_CAP_FACTOR * self.planned, DEFAULT_CAP_MIN)
        self.cap = max(int(cap), self.planned)
        self.world_size = max(1, int(world_size))
        self.rounds = 0
        #: the cap (or the round limit) stopped the run before ``measure_seconds`` was reached
        self.capped = False

    def wanted(self, steps_done: int, window_s: float) -> int:
        """More steps this rank wants, from its measured window so far (0: enough)."""
        if self.seconds <= 0 or window_s >= self.seconds or steps_done <= 0:
            return 0
        per_step = window_s / steps_done if window_s > 0 else 0.0
        if per_step <= 0:
            return 1
        return max(1, int(math.ceil((self.seconds - window_s) / per_step * MARGIN)))

    def more(self, steps_done: int, window_s: float, sum_ranks: Optional[SumRanks]) -> int:
        """Steps every rank takes next (0: stop). Every rank calls it after the same step,
        and the answer is the same on every rank (the ranks' wishes summed by ``sum_ranks``)."""
        if self.seconds <= 0:
            return 0
        if self.rounds >= MAX_ROUNDS:
            self.capped = window_s < self.seconds
            return 0
        room = self.cap - steps_done
        if room <= 0:
            self.capped = window_s < self.seconds
            return 0
        self.rounds += 1
        wish, ranks = float(self.wanted(steps_done, window_s)), 1.0
        if sum_ranks is not None:
            wish, ranks = (float(v) for v in sum_ranks([wish, 1.0]))
        elif self.world_size > 1:
            raise ValueError(
                "steps.measure_seconds needs the ranks to agree on the step count, "
                "and this workload gives no sum over ranks"
            )
        more = int(math.ceil(round(wish / max(ranks, 1.0), 6)))
        if more > room:
            self.capped = True
            return room
        return more

    def summary(self) -> Dict[str, Any]:
        """The summary record's fields about the rule (docs/log-format.md#summary)."""
        return {
            "measure_seconds_target": self.seconds,
            "measure_capped": self.capped,
        }
