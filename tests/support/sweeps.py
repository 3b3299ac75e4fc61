"""Small synthetic sweeps (lists of runs for :mod:`tests.support.synth`) of the analysis tests."""

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


GLOBAL_BATCH = 256
#: the truth: strong scaling peaks at 4 devices and falls at 8
THROUGHPUT = {1: 1000.0, 2: 1900.0, 4: 3000.0, 8: 2800.0}
LAYOUT = {1: (1, 1), 2: (1, 2), 4: (1, 4), 8: (2, 4)}


def strong_sweep(**kw) -> List[SynthRun]:
    """Strong scaling with the throughput of :data:`THROUGHPUT`: 3 repeats of each scale, no
    noise; the lowest repeat at 8 devices never ran."""
    runs = []
    for n, tput in THROUGHPUT.items():
        nodes, tpn = LAYOUT[n]
        for r in range(3):
            runs.append(
                SynthRun(
                    nodes=nodes,
                    tasks_per_node=tpn,
                    batch_size=GLOBAL_BATCH // n,
                    scaling="strong",
                    repeat=r,
                    step_time=GLOBAL_BATCH / tput,
                    noise=0.0,
                    repeat_noise=0.0,
                    lr_scaling="sqrt",
                    warmup_epochs=2.0,
                    not_run=(n == 8 and r == 0),
                    **kw,
                )
            )
    return runs
