"""Learning-rate schedule: gradual warmup then step decay (Goyal et al. 2017).

``optimizer.lr`` in run.json is already the scaled peak rate; ``optimizer.base_lr``
is the unscaled one. During the first ``warmup_epochs`` epochs the rate rises
linearly, per step, from ``base_lr`` (at step 0) to ``lr`` (reached at step
``warmup_epochs * steps_per_epoch``); afterwards it is ``lr`` multiplied by
``decay_factor`` once for every epoch boundary in ``decay_epochs`` already
passed (a decay at epoch ``e`` applies from step ``e * steps_per_epoch`` on).

Warmup starts at ``min(base_lr, lr)``: below ``lr_scaling.base_batch_size`` (``k < 1``) the
scaled rate is the lower one and Goyal et al.'s warmup (from ``base_lr`` up to ``k x
base_lr``, ``k > 1``) has nothing to ramp, so the rate is ``lr`` from the first step rather
than a ramp *down* from ``base_lr`` that starts above the rate the rule asks for.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable


class LRSchedule:
    """``schedule(step) -> lr`` for a 0-based global step counter."""

    def __init__(
        self,
        base_lr: float,
        peak_lr: float,
        steps_per_epoch: float,
        warmup_epochs: float = 0.0,
        decay_epochs: Iterable[float] = (),
        decay_factor: float = 0.1,
    ) -> None:
        if steps_per_epoch <= 0:
            raise ValueError("steps_per_epoch must be positive")
        self.base_lr = min(float(base_lr), float(peak_lr))  # never ramp down to the peak
        self.peak_lr = float(peak_lr)
        self.steps_per_epoch = float(steps_per_epoch)
        self.warmup_steps = float(warmup_epochs or 0.0) * self.steps_per_epoch
        self.decay_steps = sorted(float(e) * self.steps_per_epoch for e in (decay_epochs or ()))
        self.decay_factor = float(decay_factor)

    @classmethod
    def from_config(cls, cfg: Dict[str, Any], steps_per_epoch: float) -> LRSchedule:
        opt, sched = cfg["optimizer"], cfg["lr_schedule"]
        return cls(
            base_lr=opt.get("base_lr", opt["lr"]),
            peak_lr=opt["lr"],
            steps_per_epoch=steps_per_epoch,
            warmup_epochs=sched.get("warmup_epochs") or 0.0,
            decay_epochs=sched.get("decay_epochs") or (),
            decay_factor=sched.get("decay_factor", 0.1),
        )

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            lr = self.base_lr + (self.peak_lr - self.base_lr) * (step / self.warmup_steps)
        else:
            lr = self.peak_lr
        for boundary in self.decay_steps:
            if step >= boundary:
                lr *= self.decay_factor
        return lr

    def epoch_of(self, step: int) -> int:
        """The 0-based epoch a step belongs to."""
        return int(step // self.steps_per_epoch)
