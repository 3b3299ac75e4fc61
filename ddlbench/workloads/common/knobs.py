"""Performance knobs of a run: what it asked for and what the rank really applied.

The spec's ``precision``, ``layout`` and ``compile`` (values:
:mod:`ddlbench.workloads.vocabulary`) reach the workload through ``run.json``. Each workload
applies them with its framework's API and records the outcome with a :class:`Knobs`;
whatever it could not apply as asked becomes a *fallback*: a warning on stderr and an entry in
the meta record's ``fallbacks`` list, never a silent change (docs/spec.md#performance-knobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..vocabulary import DEFAULT_PRECISION, KNOB_DEFAULTS, PRECISIONS, precision_fallback
from .logger import warn

#: warmup steps a compiled run gets at least (compilation happens in the first steps; some
#: frameworks recompile once more, e.g. after the first optimizer step creates its state)
MIN_COMPILE_WARMUP = 5


@dataclass
class Knobs:
    """The knobs asked for (``requested``) and applied (the other fields) on one rank."""

    requested: Dict[str, Any]
    precision: str = DEFAULT_PRECISION
    #: physical activation layout that ran: NCHW or NHWC
    layout: str = "NCHW"
    #: what compiled the step, e.g. ``torch.compile(mode=default)``, ``xla``; ``off`` if nothing
    compile: str = "off"
    fallbacks: List[str] = field(default_factory=list)
    #: framework-specific facts, e.g. ``tf32_matmul``, ``tf32_conv``, ``loss_scaling``
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Dict[str, Any]) -> Knobs:
        requested = {k: cfg.get(k, default) for k, default in KNOB_DEFAULTS.items()}
        requested["compile"] = bool(requested["compile"])
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


def resolve_precision(
    knobs: Knobs,
    on_gpu: bool,
    tf32_ok: bool = False,
    bf16_ok: bool = False,
    trains: Tuple[str, ...] = PRECISIONS,
    framework: str = "",
) -> str:
    """The precision that runs, given the device's and the framework's abilities; sets
    ``knobs.precision`` and records a fallback when it differs from the one asked for.

    Every workload resolves its precision here; the rule itself is
    :func:`ddlbench.workloads.vocabulary.precision_fallback`.
    """
    got, why = precision_fallback(
        knobs.requested["precision"], on_gpu, tf32_ok, bf16_ok, trains, framework
    )
    if why is not None:
        knobs.fallback(why)
    knobs.precision = got
    return got


def warmup_steps(cfg: Dict[str, Any], knobs: Knobs) -> None:
    """Raise ``steps.warmup`` of a compiled throughput run to :data:`MIN_COMPILE_WARMUP`,
    so that compilation stays outside the measured window; recorded in ``knobs.extra``."""
    compiles = knobs.requested["compile"] and cfg.get("compile", True)  # False: fell back
    if not compiles or cfg.get("mode") != "throughput":
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
