"""The spec's ``workload``: the user's own training program (docs/your-own-workload.md).

```yaml
workload:
  command: [python, train.py, --batch-size, "{batch_size}"]
  framework: pytorch           # or a mapping like a ``frameworks`` entry
  workdir: ~/src/mymodel       # copied into the campaign (copy: false uses it in place)
  measure: marks               # or output patterns: {step: REGEX, unit: s, loss: REGEX}
```

This module owns the list of placeholder names (:data:`PLACEHOLDERS`) and their substitution
(:func:`substitute`): the values become argv elements of the program, never shell words.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional, Tuple, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from ddlbench.names import check_safe_name

#: every placeholder a command may hold, and what it becomes (the run's value)
PLACEHOLDERS: Dict[str, str] = {
    "batch_size": "per-device (per-rank) batch size of the run",
    "global_batch_size": "global batch size: batch_size x world_size",
    "nodes": "number of nodes",
    "gpus_per_node": "ranks (GPUs, or CPU ranks) per node",
    "world_size": "number of ranks: nodes x gpus_per_node",
    "lr": "learning rate after the spec's lr_scaling rule",
    "warmup_steps": "the spec's steps.warmup",
    "measure_steps": "the spec's steps.measure",
    "steps": "steps.warmup + steps.measure",
    "measure_seconds": "the spec's steps.measure_seconds: the least measured time asked",
    "epochs": "the spec's epochs (empty when unset)",
    "precision": "the run's precision knob (fp32, tf32, amp, bf16)",
    "seed": "the spec's seed + the repeat index",
    "repeat": "repeat index of the run (0-based)",
    "variant": "the variant's label (empty without variants)",
    "run_id": "the run's id",
    "run_dir": "the run's folder (absolute path)",
}
#: the output units a step pattern's captured value may have
UNITS = ("s", "ms", "samples/s")

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def placeholders_in(text: str) -> List[str]:
    """The placeholder names of one command element (``{{`` and ``}}`` are literal braces)."""
    return [m.group(1) for m in _TOKEN.finditer(text) if m.group(1) is not None]


def substitute(text: str, values: Dict[str, Any]) -> str:
    """One command element with its placeholders replaced by ``values`` (names checked at
    validation; ``{{``/``}}`` become ``{``/``}``). The result is one argv element."""

    def one(m: re.Match) -> str:
        if m.group(1) is None:
            return m.group(0)[0]
        value = values[m.group(1)]
        return "" if value is None else str(value)

    return _TOKEN.sub(one, text)


def _check_regex(value: Optional[str], what: str) -> Optional[str]:
    if value is None:
        return None
    try:
        compiled = re.compile(value)
    except re.error as exc:
        raise ValueError(f"{what} is not a valid regular expression: {exc}") from None
    if "value" not in compiled.groupindex and compiled.groups < 1:
        raise ValueError(
            f"{what} captures nothing: put the number in a group, (?P<value>[0-9.]+) or ([0-9.]+)"
        )
    return value


def check_command_word(word: str) -> str:
    """One command element: every ``{name}`` in it is a placeholder of :data:`PLACEHOLDERS`."""
    from ddlbench.errors import did_you_mean

    for name in placeholders_in(word):
        if name not in PLACEHOLDERS:
            raise ValueError(
                f"{{{name}}} is not a sweep value{did_you_mean(name, PLACEHOLDERS)}; the "
                f"placeholders are {', '.join(PLACEHOLDERS)} (write {{{{ and }}}} for a literal "
                "brace)"
            )
    return word


class OutputPatterns(BaseModel):
    """No code change: each match of ``step`` on a rank's output is one step of that rank."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: regular expression; group ``value`` (or group 1) is the step's time or rate
    step: str
    #: what the captured value is: the step's duration (s, ms) or this rank's samples/s
    unit: Literal[UNITS]  # type: ignore[valid-type]
    #: regular expression for the loss (group ``value`` or 1), optional
    loss: Optional[str] = None
    #: samples of this rank per match (default: the run's per-device batch size); a group
    #: ``samples`` in ``step`` overrides it line by line
    samples: Optional[int] = Field(default=None, ge=1)

    @field_validator("step")
    @classmethod
    def _step(cls, value: str) -> str:
        return _check_regex(value, "step") or value

    @field_validator("loss")
    @classmethod
    def _loss(cls, value: Optional[str]) -> Optional[str]:
        return _check_regex(value, "loss")


class OwnWorkload(BaseModel):
    """The spec's ``workload``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the program and its arguments: one argv element each, never read by a shell
    command: List[Annotated[str, AfterValidator(check_command_word)]] = Field(min_length=1)
    #: how to launch it: a framework name or a mapping like a ``frameworks`` entry
    framework: Union[str, Dict[str, Any]]
    #: folder the program runs in; relative: to the spec file
    workdir: Optional[str] = None
    #: copy ``workdir`` into the campaign (default) or run it in place
    copy_workdir: bool = True
    #: the word for the model in run ids and tables
    name: str = "program"
    #: ``marks`` (the program imports ddlbench.workloads.steps) or output patterns
    measure: Union[Literal["marks"], OutputPatterns] = "marks"

    @field_validator("command")
    @classmethod
    def _command(cls, value: List[str]) -> List[str]:
        if not value[0].strip():
            raise ValueError("the command's first element (the program) is empty")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_safe_name(value, "workload name")


def placeholder_values(run: Any, spec: Any, run_dir: str) -> Dict[str, Any]:
    """The value of every placeholder for one run (a plan ``Run``)."""
    steps = spec.steps
    return {
        "batch_size": run.batch_size,
        "global_batch_size": run.global_batch_size,
        "nodes": run.nodes,
        "gpus_per_node": run.tasks_per_node,
        "world_size": run.world_size,
        "lr": repr(float(run.lr)),
        "warmup_steps": steps.warmup,
        "measure_steps": steps.measure,
        "steps": steps.warmup + steps.measure,
        "measure_seconds": f"{steps.measure_seconds:g}",
        "epochs": spec.epochs,
        "precision": run.precision,
        "seed": spec.seed + run.repeat,
        "repeat": run.repeat,
        "variant": run.variant,
        "run_id": run.run_id,
        "run_dir": run_dir,
    }


#: interpreters whose first argument ending in one of these suffixes is a script to find
_SCRIPTS = {"python": ".py", "python3": ".py", "bash": ".sh", "sh": ".sh"}


def missing_files(own: OwnWorkload, workdir: str) -> List[Tuple[int, str]]:
    """``(command index, message)`` for a program or script the command names relative to the
    workdir that is not there (``./train.sh``; ``python train.py``). Bare program names are
    looked up on the compute nodes' PATH, which the login node cannot check."""
    from ddlbench.errors import did_you_mean

    folder = Path(workdir)
    wanted: List[Tuple[int, str]] = []
    if "/" in own.command[0]:
        wanted.append((0, own.command[0]))
    suffix = _SCRIPTS.get(Path(own.command[0]).name)
    if suffix and len(own.command) > 1 and own.command[1].endswith(suffix):
        wanted.append((1, own.command[1]))
    out: List[Tuple[int, str]] = []
    for i, word in wanted:
        if placeholders_in(word) or Path(word).is_absolute() or (folder / word).exists():
            continue
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        out.append((i, f"no such file in the workdir {folder}: {word}{did_you_mean(word, names)}"))
    return out
