"""Power, energy and utilisation of a run's GPUs in its measured window (docs/telemetry.md).

Input: per node, the sampler's series (:class:`NodeSeries`); output: :class:`WindowEnergy`.

* Energy of one GPU over ``[t0, t1]``: the difference of NVML's total-energy counter,
  linearly interpolated at ``t0`` and ``t1``, when the counter is reported on both sides of
  the window; else the trapezoidal integral of the sampled power, interpolated at the window
  ends. The run's energy is the sum over its GPUs (all nodes).
* Mean power = energy / window length (so mean power and energy agree); utilisation is the
  mean over the samples inside the window and over the GPUs.
* Joules per sample = energy / samples measured in the window (all ranks).
* Throttled: some sample in the window reports a clock-event reason that slows the GPU down
  for power or heat (:data:`THROTTLE_MASK`); idle does not count. The application-clocks
  reason (clocks held at the administrator's application clocks, below what the GPU could
  run) is listed in ``throttle_reasons`` without making the run throttled: it is a setting,
  recorded in provenance/nvidia-smi-q.txt, not an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

#: NVML clock event reasons that mean "slowed down": SW power cap (0x4), HW slowdown (0x8),
#: SW thermal (0x20), HW thermal (0x40), HW power brake (0x80)
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
THROTTLE_NAMES = {
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}


@dataclass
class NodeSeries:
    """One node's samples: ``t`` (n,), and (n, gpus) arrays with NaN where unknown."""

    node: str
    t: np.ndarray
    power_w: np.ndarray
    energy_j: np.ndarray
    util_pct: np.ndarray
    throttle: np.ndarray  # integer bit masks, -1 where unknown

    @property
    def gpus(self) -> int:
        return int(self.power_w.shape[1]) if self.power_w.ndim == 2 else 0


@dataclass
class WindowEnergy:
    energy_j: Optional[float]
    mean_power_w: Optional[float]
    mean_util_pct: Optional[float]
    throttled: Optional[bool]
    throttle_reasons: List[str]
    gpus: int
    samples: int


def _gpu_energy(t: np.ndarray, power: np.ndarray, energy: np.ndarray, t0: float, t1: float):
    """Energy (J) of one GPU over [t0, t1], or None when the samples do not cover it."""
    ok = ~np.isnan(energy)
    te = t[ok]
    if len(te) >= 2 and te[0] <= t0 and te[-1] >= t1:
        e = energy[ok]
        return float(np.interp(t1, te, e) - np.interp(t0, te, e))
    ok = ~np.isnan(power)
    tp, p = t[ok], power[ok]
    if len(tp) < 2 or tp[0] > t0 or tp[-1] < t1:
        return None
    inside = (tp > t0) & (tp < t1)
    ts = np.concatenate(([t0], tp[inside], [t1]))
    ps = np.concatenate(([np.interp(t0, tp, p)], p[inside], [np.interp(t1, tp, p)]))
    return float(np.sum((ps[1:] + ps[:-1]) * np.diff(ts)) / 2.0)


def window_energy(series: Sequence[NodeSeries], t0: float, t1: float) -> WindowEnergy:
    """Energy, mean power, utilisation and throttling of all GPUs in ``[t0, t1]``."""
    total, known, gpus, n_in = 0.0, True, 0, 0
    utils: List[np.ndarray] = []
    mask = 0
    seen_throttle = False
    for s in series:
        gpus += s.gpus
        for g in range(s.gpus):
            e = _gpu_energy(s.t, s.power_w[:, g], s.energy_j[:, g], t0, t1)
            if e is None:
                known = False
            else:
                total += e
        inside = (s.t >= t0) & (s.t <= t1)
        n_in += int(inside.sum())
        if inside.any():
            utils.append(s.util_pct[inside].ravel())
            th = s.throttle[inside].ravel()
            th = th[th >= 0]
            if len(th):
                seen_throttle = True
                mask |= int(np.bitwise_or.reduce(th.astype(np.int64)))
    energy = total if known and gpus and t1 > t0 else None
    util = np.concatenate(utils) if utils else np.zeros(0)
    util = util[~np.isnan(util)]
    reasons = [name for bit, name in THROTTLE_NAMES.items() if mask & bit]
    return WindowEnergy(
        energy_j=energy,
        mean_power_w=None if energy is None else energy / (t1 - t0),
        mean_util_pct=float(util.mean()) if len(util) else None,
        throttled=bool(mask & THROTTLE_MASK) if seen_throttle else None,
        throttle_reasons=reasons,
        gpus=gpus,
        samples=n_in,
    )


def joules_per_sample(energy_j: Optional[float], samples: Optional[float]) -> Optional[float]:
    if energy_j is None or not samples:
        return None
    return energy_j / samples
