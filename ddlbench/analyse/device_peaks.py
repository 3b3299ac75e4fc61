"""Peak dense throughput of accelerators per precision, matched on the logged device name.

Figures are TFLOP/s without structured sparsity, from the vendors' data sheets (docs/mfu.md
lists the sources). ``fp32`` is the plain FP32 (CUDA core) rate; ``tf32`` the TF32 tensor-core
rate; ``amp`` the FP16 tensor-core rate with FP32 accumulation; ``bf16`` the BF16 tensor-core
rate. A device without a format has no entry for it (V100: no TF32, no BF16). CPUs have no
entry: their peak depends on the SKU's cores, clocks and vector units, which the device name
alone does not give reliably.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ddlbench.workloads.vocabulary import PRECISIONS


@dataclass(frozen=True)
class DevicePeak:
    key: str
    #: regular expression on the device name (case-insensitive), tried in table order
    pattern: str
    tflops: Dict[str, float]
    source: str


def _rates(**tflops: float) -> Dict[str, float]:
    """One device's peaks, keyed by the precisions of the vocabulary (in its order)."""
    unknown = set(tflops) - set(PRECISIONS)
    if unknown:
        raise ValueError(f"not precisions: {', '.join(sorted(unknown))}")
    return {p: tflops[p] for p in PRECISIONS if p in tflops}


_SXM_H100 = _rates(fp32=66.9, tf32=494.7, amp=989.4, bf16=989.4)
#: most specific first: "H100 PCIe" before "H100"
PEAKS: Tuple[DevicePeak, ...] = (
    DevicePeak("V100-PCIe", r"V100.*PCI", _rates(fp32=14.0, amp=112.0), "NVIDIA V100 data sheet"),
    DevicePeak("V100S", r"V100S", _rates(fp32=16.4, amp=130.0), "NVIDIA V100 data sheet"),
    DevicePeak("V100-SXM", r"V100", _rates(fp32=15.7, amp=125.0), "NVIDIA V100 data sheet"),
    DevicePeak(
        "A100",
        r"A100",
        _rates(fp32=19.5, tf32=156.0, amp=312.0, bf16=312.0),
        "NVIDIA A100 data sheet (SXM4 and PCIe alike)",
    ),
    DevicePeak(
        "H100-PCIe",
        r"H100.*PCI",
        _rates(fp32=51.2, tf32=378.0, amp=756.0, bf16=756.0),
        "NVIDIA H100 data sheet",
    ),
    DevicePeak(
        "H100-NVL",
        r"H100.*NVL",
        _rates(fp32=60.0, tf32=417.5, amp=835.5, bf16=835.5),
        "NVIDIA H100 data sheet",
    ),
    DevicePeak("H100-SXM", r"H100", _SXM_H100, "NVIDIA H100 data sheet (SXM5)"),
    DevicePeak(
        "H200-NVL",
        r"H200.*NVL",
        _rates(fp32=60.0, tf32=417.5, amp=835.5, bf16=835.5),
        "NVIDIA H200 data sheet",
    ),
    DevicePeak("H200-SXM", r"H200", _SXM_H100, "NVIDIA H200 data sheet (SXM)"),
)


def match(device_name: Optional[str]) -> Optional[DevicePeak]:
    """The table entry for a logged device name such as ``NVIDIA H100 80GB HBM3``."""
    if not isinstance(device_name, str) or not device_name:
        return None
    for entry in PEAKS:
        if re.search(entry.pattern, device_name, re.IGNORECASE):
            return entry
    return None


def peak_tflops(device_name: Optional[str], precision: Optional[str]) -> Optional[float]:
    """Peak TFLOP/s of the device for the precision that ran (None when unknown)."""
    entry = match(device_name)
    if entry is None or not isinstance(precision, str):
        return None
    return entry.tflops.get(precision)


def achieved_tflops(
    throughput_per_device: Optional[float], flops_per_sample: Optional[float]
) -> Optional[float]:
    """TFLOP/s one device sustained: samples/s per device x training FLOPs per sample."""
    if not throughput_per_device or not flops_per_sample:
        return None
    return throughput_per_device * flops_per_sample / 1e12


def mfu(achieved: Optional[float], peak: Optional[float]) -> Optional[float]:
    """Model FLOP utilisation: achieved / peak (a fraction)."""
    if achieved is None or not peak:
        return None
    return achieved / peak
