"""Synthetic campaigns with known truth for the tests: the writer of ``benchmarks/_synth.py``
(one copy, shared with ``benchmarks/collect_report.py``) and :func:`demo_campaign`.

See ``benchmarks/_synth.py`` for how a campaign is written (ddlbench's own renderer and rank
logger, with injected time stamps and values).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks._synth import SynthRun, run_states, sweep, write_campaign

__all__ = ["SynthRun", "demo_campaign", "run_states", "sweep", "write_campaign"]


def demo_campaign(root: Path, name: str = "demo", seed: int = 0) -> Path:
    """A realistic mixed campaign: scaling sweeps, a large-batch study, allreduce, faults."""
    runs = sweep(
        ("pytorch", "horovod", "tensorflow"),
        ((1, 1), (1, 2), (1, 4), (2, 4), (4, 4), (8, 4)),
        repeats=3,
        batch_size=64,
        measure_steps=40,
        warmup_steps=5,
    )
    # one noisy configuration, one straggler
    for r in runs:
        if r.framework == "tensorflow" and r.nodes == 2:
            r.repeat_noise = 0.12
        if r.framework == "pytorch" and r.nodes == 8 and r.repeat == 0:
            r.stragglers = {13: 1.35}
    # a failed and an incomplete run (extra repeats, so the sweep stays usable)
    runs.append(
        SynthRun("pytorch", nodes=4, tasks_per_node=4, batch_size=64, repeat=3, failed_ranks=(5,))
    )
    runs.append(
        SynthRun(
            "horovod",
            nodes=4,
            tasks_per_node=4,
            batch_size=64,
            repeat=3,
            killed_ranks=(2,),
            missing_ranks=(15,),
        )
    )
    # large-batch study: lenet, growing global batch, with and without warmup
    for nn, tp in ((1, 1), (1, 4), (2, 4), (4, 4), (8, 4)):
        for wu in (0.0, 5.0):
            runs.append(
                SynthRun(
                    "pytorch",
                    model="lenet",
                    mode="convergence",
                    nodes=nn,
                    tasks_per_node=tp,
                    batch_size=256,
                    warmup_epochs=wu,
                    tag="-wu" if wu else "",
                    epochs=12,
                    measure_steps=120,
                    warmup_steps=0,
                    target_accuracy=0.7,
                )
            )
    sizes = [1 << k for k in range(10, 29, 2)]
    for nn, tp in ((1, 4), (2, 4), (4, 4)):
        for fw in ("pytorch", "horovod"):
            runs.append(
                SynthRun(
                    fw,
                    model="allreduce",
                    mode="allreduce",
                    nodes=nn,
                    tasks_per_node=tp,
                    batch_size=1,
                    allreduce_sizes=sizes,
                    workload="allreduce_torch" if fw == "pytorch" else "allreduce_horovod",
                )
            )
    return write_campaign(root, name, runs, seed=seed)
