"""The straggler draw of common/inject.py (standard library, no ranks needed)."""

from __future__ import annotations

from ddlbench.workloads.common.inject import StepExtras, StragglerInjector


def _draws(spec, steps=60, rank=1):
    inj = StragglerInjector(spec, rank, run_seed=42)
    return [inj.factor(s) for s in range(steps)]


def test_persist_steps_holds_a_draw_for_its_block():
    spec = {"probability": 0.3, "min_slowdown": 3, "max_slowdown": 20, "seed": 1}
    fresh = _draws(spec)
    held = _draws(dict(spec, persist_steps=10))
    for block in range(6):
        assert len(set(held[10 * block : 10 * block + 10])) == 1
    assert len(set(held)) > 1  # blocks differ
    # a block draws what a per-step draw would at step = block number
    assert held[::10] == fresh[:6]
    assert _draws(dict(spec, persist_steps=10)) == held  # reproducible


def test_slowed_steps_count_without_a_measured_delay():
    """cpu-share logs no delay (injected_s null) but its slowed steps still count."""
    extras = StepExtras(2, backup_workers=1, batch_size=128)
    extras.add("measure", {"injected_s": None, "slowdown": 2.0, "dropped": [2]})
    extras.add("measure", {"injected_s": None, "slowdown": 1.0, "dropped": [0]})
    extras.add("warmup", {"injected_s": 1.0, "slowdown": 2.0, "dropped": [2]})
    assert extras.summary() == {
        "injected_steps": 1,
        "injected_s": 0.0,
        "backup_workers": 1,
        "dropped_steps": 1,
        "applied_samples": 128,
        "dropped_samples": 128,
    }
