"""The learning-rate rule of Goyal et al. 2017 as the workloads apply it per step
(ddlbench/workloads/common/schedule.py): linear scaling, gradual warmup, step decay."""

from __future__ import annotations

import pytest

from ddlbench.workloads.common.data import steps_per_epoch
from ddlbench.workloads.common.schedule import LRSchedule


def test_warmup_by_hand_two_ranks_digits() -> None:
    # 1438 digits training samples, 2 ranks x 32: 22 steps per epoch; 0.5 warmup epochs
    # = 11 steps from base 0.01 to peak 0.02, decay x0.1 at epoch 1 (step 22)
    spe = steps_per_epoch(1438, 2, 32)
    s = LRSchedule(0.01, 0.02, spe, warmup_epochs=0.5, decay_epochs=[1], decay_factor=0.1)
    assert spe == 22
    got = [s(t) for t in (0, 1, 5, 10, 11, 21, 22, 43)]
    want = [0.01, 0.01 + 0.01 / 11, 0.01 + 0.05 / 11, 0.01 + 0.1 / 11, 0.02, 0.02, 0.002, 0.002]
    assert got == pytest.approx(want)


def test_warmup_covers_the_same_samples_at_every_scale() -> None:
    # Goyal: 5 epochs of warmup whatever the batch; ImageNet at 8 and 96 GPUs x 32
    for ranks, peak in ((8, 0.1), (96, 1.2)):
        spe = steps_per_epoch(1281167, ranks, 32)
        s = LRSchedule(0.1, peak, spe, warmup_epochs=5)
        w = 5 * spe
        assert s(w) == pytest.approx(peak)
        assert s(w - 1) < peak or peak == 0.1
        assert w * ranks * 32 == pytest.approx(5 * 1281167, rel=0.01)


def test_warmup_never_starts_above_the_peak() -> None:
    # a global batch below base_batch_size (k < 1): the peak 0.0125 is below base_lr 0.1;
    # "warmup" from 0.1 would start 8x above the rate the rule asks for
    s = LRSchedule(0.1, 0.0125, steps_per_epoch=10, warmup_epochs=5)
    assert [s(t) for t in (0, 1, 25, 49, 50)] == pytest.approx([0.0125] * 5)


def test_warmup_below_peak_unchanged_by_the_floor() -> None:
    s = LRSchedule(0.1, 0.8, steps_per_epoch=10, warmup_epochs=2)
    assert [s(t) for t in (0, 10, 20)] == pytest.approx([0.1, 0.45, 0.8])
