"""Performance knobs of a run: what it asked for and what the rank really applied.

The spec's ``precision`` (fp32, tf32, amp, bf16), ``layout`` (default, channels_last) and
``compile`` reach the workload through ``run.json``. Each workload applies them with its
framework's API and records the outcome with a :class:`Knobs`; whatever it could not apply as
asked becomes a *fallback*: a warning on stderr and an entry in the meta record's
``fallbacks`` list, never a silent change (docs/spec.md#performance-knobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .logger import warn

#: warmup steps a compiled run gets at least (compilation happens in the first steps; some
#: frameworks recompile once more, e.g. after the first optimizer step creates its state)
MIN_COMPILE_WARMUP = 5

AMP_CPU_MESSAGE = "precision amp is not supported on the CPU; running fp32"


@dataclass
class Knobs:
    """The knobs asked for (``requested``) and applied (the other fields) on one rank."""

    requested: Dict[str, Any]
    precision: str = "fp32"
    #: physical activation layout that ran: NCHW or NHWC
    layout: str = "NCHW"
    #: what compiled the step, e.g. ``torch.compile(mode=default)``, ``xla``; ``off`` if nothing
    compile: str = "off"
    fallbacks: List[str] = field(default_factory=list)
    #: framework-specific facts, e.g. ``tf32_matmul``, ``tf32_conv``, ``loss_scaling``
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Dict[str, Any]) -> Knobs:
        requested = {
            "precision": cfg.get("precision", "fp32"),
            "layout": cfg.get("layout", "default"),
            "compile": bool(cfg.get("compile", False)),
        }
        return cls(requested=requested, precision=requested["precision"])

    def fallback(self, message: str) -> None:
        """Record (and print once) something that ran differently from what was asked."""
        warn(message)
        self.fallbacks.append(message)

    def meta(self) -> Dict[str, Any]:
        """Fields for the meta record (docs/log-format.md)."""
        out: Dict[str, Any] = {
            "precision": self.precision,
            "layout": self.layout,
            "compile": self.compile,
            "knobs_requested": dict(self.requested),
            "fallbacks": list(self.fallbacks),
        }
        if self.precision != self.requested["precision"]:
            out["precision_requested"] = self.requested["precision"]
        out.update(self.extra)
        return out


def resolve_precision(knobs: Knobs, on_gpu: bool, tf32_ok: bool, bf16_ok: bool) -> str:
    """The precision that runs, given the device's abilities; sets ``knobs.precision``.

    On the CPU: tf32 runs fp32 (TF32 is a tensor-core format), amp runs fp32 (fp16 with loss
    scaling is a GPU recipe), bf16 runs as asked. On a GPU: tf32 without TF32 support runs
    fp32, bf16 without bfloat16 support runs amp (fp16 with loss scaling).
    """
    asked = knobs.requested["precision"]
    got = asked
    if not on_gpu and asked == "amp":
        knobs.fallback(AMP_CPU_MESSAGE)
        got = "fp32"
    elif asked == "tf32" and not (on_gpu and tf32_ok):
        where = "the CPU" if not on_gpu else "this GPU (compute capability below 8.0)"
        knobs.fallback(f"precision tf32 is not available on {where}; running fp32")
        got = "fp32"
    elif asked == "bf16" and on_gpu and not bf16_ok:
        knobs.fallback("precision bf16 is not supported by this GPU; running amp (fp16 + scaling)")
        got = "amp"
    knobs.precision = got
    return got


def warmup_steps(cfg: Dict[str, Any], knobs: Knobs) -> None:
    """Raise ``steps.warmup`` of a compiled throughput run to :data:`MIN_COMPILE_WARMUP`,
    so that compilation stays outside the measured window; recorded in ``knobs.extra``."""
    if not knobs.requested["compile"] or cfg.get("mode") != "throughput":
        return
    steps = cfg["steps"]
    if int(steps["warmup"]) < MIN_COMPILE_WARMUP:
        warn(
            f"compile is on: warmup raised from {steps['warmup']} to {MIN_COMPILE_WARMUP} steps "
            "so that compilation stays outside the measured window"
        )
        knobs.extra["warmup_requested"] = int(steps["warmup"])
        knobs.extra["warmup_steps"] = MIN_COMPILE_WARMUP
        steps["warmup"] = MIN_COMPILE_WARMUP


def training_flops(cfg: Dict[str, Any]) -> Optional[int]:
    """Training FLOPs per sample of the run's model (3 x forward, analytic; docs/mfu.md)."""
    from ..flops import training_flops_per_sample

    try:
        return training_flops_per_sample(
            str(cfg["model"]), int(cfg["image_size"]), int(cfg["num_classes"])
        )
    except ValueError:
        return None
