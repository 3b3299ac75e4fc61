"""Helpers of the collector/analysis/report tests: small synthetic campaigns."""

from __future__ import annotations

from typing import List

from tests.support.synth import SynthRun

S = 1_790_000_000.0  # start of every hand-computed fixture (an exact float)


def exact_run(**kw) -> SynthRun:
    """A run without randomness: step durations and offsets come from the arguments."""
    base = dict(noise=0.0, repeat_noise=0.0, start=S, gap=0.0)
    base.update(kw)
    return SynthRun(**base)


def small_sweep(repeats: int = 2, **kw) -> List[SynthRun]:
    """pytorch and horovod at 1, 2 and 4 devices (1x1, 1x2, 2x2)."""
    return [
        SynthRun(fw, nodes=nn, tasks_per_node=tp, repeat=r, measure_steps=8, warmup_steps=2, **kw)
        for fw in ("pytorch", "horovod")
        for nn, tp in ((1, 1), (1, 2), (2, 2))
        for r in range(repeats)
    ]
