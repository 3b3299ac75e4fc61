"""Warnings before the node-hours are spent: a spec whose measurements would be too few or too
short to mean much (docs/spec.md#how-much-to-measure). ``validate`` and ``plan`` print them;
they never stop a spec from running. Also a learning-rate schedule that does not fit in the
training: a warmup as long as the run or longer, a decay at or after its end
(docs/spec.md#optimizer-and-lr_scaling)."""

from __future__ import annotations

from typing import Any, List, Optional

from ddlbench.spec.experiment import ExperimentSpec
from ddlbench.spec.measure_policy import MIN_MEASURE_SECONDS, MIN_REPEATS
from ddlbench.spec.own_workload import placeholders_in
from ddlbench.spec.yamlsource import Loc, YamlSource, format_loc

__all__ = [
    "MIN_MEASURE_SECONDS",
    "MIN_REPEATS",
    "measurement_warnings",
    "schedule_warnings",
    "warning_line",
]


def warning_line(source: Optional[YamlSource], loc: Loc, message: str) -> str:
    """``file:line: warning: where: message``, as ``validate`` and ``plan`` print warnings."""
    where = format_loc(loc)
    prefix = ""
    if source is not None:
        line, _col = source.position(loc)
        prefix = f"{source.file}:{line}: " if line is not None else f"{source.file}: "
    return f"{prefix}warning: {where + ': ' if where else ''}{message}"


def _too_few(repeats: int) -> str:
    """What ``repeats`` below :data:`MIN_REPEATS` does to the report's 95 % interval (the
    t interval of the log throughputs: t(0.975, n - 1) s / sqrt(n))."""
    if repeats <= 1:
        return "one repeat gives the report no interval at all"
    # 12.71 / sqrt(2) against 4.30 / sqrt(3): the same spread, a 3.6x wider interval
    return "two repeats give a 95 % interval 3.6 times as wide as three for the same spread"


def _own_window(spec: ExperimentSpec, source: Optional[YamlSource]) -> str:
    """The warning for a program of the user's own that is not told how long to measure: its
    window is what its own steps last, which ddlbench cannot lengthen (empty when told)."""
    own = spec.workload
    if own is None or any("measure_seconds" in placeholders_in(w) for w in own.command):
        return ""
    return warning_line(
        source,
        ("workload", "command"),
        f"the measured window is what your program's {spec.steps.measure} measured steps "
        f"last, maybe under {MIN_MEASURE_SECONDS:g} s (a window that short mostly shows the "
        "moment a run ran in): steps.measure_seconds reaches the program only as "
        "{measure_seconds}, which the command does not pass; give it more steps, or pass "
        "{measure_seconds} (ddlbench docs your-own-workload#how-long-to-measure)",
    )


def measurement_warnings(spec: ExperimentSpec, source: Optional[YamlSource]) -> List[str]:
    """One ``file:line: warning: where: what`` line per weakness of the spec's measurement."""
    out = []
    if spec.repeats < MIN_REPEATS:
        out.append(
            warning_line(
                source,
                ("repeats",),
                f"{spec.repeats} repeat(s) per configuration: {_too_few(spec.repeats)}, and "
                "the tests can hardly call a change (ddlbench docs metrics); use repeats: "
                f"{MIN_REPEATS} or more",
            )
        )
    steps = spec.steps
    own = _own_window(spec, source)
    if own:
        out.append(own)
    elif spec.mode == "throughput" and steps.measure_seconds < MIN_MEASURE_SECONDS:
        if steps.measure_seconds:
            asked = f"{steps.measure_seconds:g} s is below the {MIN_MEASURE_SECONDS:g} s minimum"
        else:
            asked = (
                f"no time asked: the measured window is {steps.measure} steps, which may last "
                f"less than {MIN_MEASURE_SECONDS:g} s (40 CPU steps of the quickstart lasted "
                "0.24-0.61 s)"
            )
        out.append(
            warning_line(
                source,
                ("steps", "measure_seconds"),
                f"{asked}; so short a window mostly shows the moment a run ran in; set "
                f"steps.measure_seconds: {MIN_MEASURE_SECONDS:g} or more "
                "(ddlbench docs spec#how-much-to-measure)",
            )
        )
    return out + schedule_warnings(spec, source)


def _schedule_problems(lr_scaling: Any, epochs: int, base: Loc) -> List[tuple]:
    """``(where, message)`` for the keys written in ``lr_scaling`` (at ``base``) that do not
    fit in ``epochs`` epochs of training."""
    out: List[tuple] = []
    written = lr_scaling.model_fields_set
    warmup = lr_scaling.warmup_epochs
    if "warmup_epochs" in written and warmup and warmup >= epochs:
        out.append(
            (
                base + ("warmup_epochs",),
                f"a warmup of {warmup:g} epoch(s) is not shorter than the training "
                f"({epochs} epoch(s)): the learning rate reaches its peak only after the "
                "last step; use fewer warmup_epochs than epochs (Goyal et al. 2017: 5 of 90)",
            )
        )
    for i, epoch in enumerate(lr_scaling.decay_epochs if "decay_epochs" in written else []):
        if epoch >= epochs:
            out.append(
                (
                    base + ("decay_epochs", i),
                    f"a decay at epoch {epoch} never happens: the training ends after "
                    f"{epochs} epoch(s) (a decay at epoch e applies from epoch e on, "
                    f"counted from 0); use epochs below {epochs}",
                )
            )
    return out


def schedule_warnings(spec: ExperimentSpec, source: Optional[YamlSource]) -> List[str]:
    """One warning per ``lr_scaling`` key (the spec's, a variant's) that does not fit in
    ``epochs`` (convergence mode; throughput runs do not train whole epochs)."""
    if spec.mode != "convergence" or spec.epochs is None:
        return []
    found = _schedule_problems(spec.lr_scaling, spec.epochs, ("lr_scaling",))
    for i, variant in enumerate(spec.variants):
        if variant.lr_scaling is not None:
            found += _schedule_problems(
                variant.lr_scaling, spec.epochs, ("variants", i, "lr_scaling")
            )
    return [warning_line(source, loc, message) for loc, message in found]
