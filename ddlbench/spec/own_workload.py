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


#: interpreters whose script (their first argument that is not an option) ending in one of
#: these suffixes is a file to find; ``python3.11`` and the like count as ``python``
_SCRIPTS = {"python": ".py", "python3": ".py", "bash": ".sh", "sh": ".sh"}
#: the interpreters' options that take the next argument as their value (``-X opt``)
_VALUED = {"python": "XW", "bash": "oO", "sh": "oO"}
#: their options after which no script file follows (``-m module``, ``-c code``, stdin)
_NO_SCRIPT = {"python": "mc", "bash": "cs", "sh": "cs"}
#: ``env``'s options that take a value (``env -u NAME``)
_ENV_VALUED = ("-u", "--unset", "-C", "--chdir", "-S", "--split-string")


def _interpreter(word: str) -> Optional[str]:
    """``python``, ``bash`` or ``sh`` for an interpreter's name or path, else None."""
    name = Path(word).name
    if re.fullmatch(r"python[0-9.]*", name):
        return "python"
    return name if name in _SCRIPTS else None


def _after_env(command: List[str]) -> int:
    """The index of the program that a leading ``env`` (with its options and ``VAR=value``
    assignments) starts; 0 without ``env``."""
    if Path(command[0]).name != "env":
        return 0
    i = 1
    while i < len(command) and (command[i].startswith("-") or "=" in command[i]):
        i += 2 if command[i] in _ENV_VALUED else 1
    return i


def script_index(command: List[str], start: int) -> Optional[int]:
    """The index of the script file that the interpreter ``command[start]`` runs, past its
    options; None when it is no interpreter or runs none (``-m``, ``-c``, stdin)."""
    kind = _interpreter(command[start])
    if kind is None:
        return None
    i = start + 1
    while i < len(command) and command[i].startswith(("-", "+")) and command[i] != "-":
        word = command[i]
        i += 1
        if word == "--":
            break
        if word.startswith("--"):
            i += 1 if word == "--check-hash-based-pycs" else 0
            continue
        for k, letter in enumerate(word[1:], 1):
            if letter in _NO_SCRIPT[kind]:
                return None
            if letter in _VALUED[kind]:
                i += 0 if word[k + 1 :] else 1  # -Xopt, or -X opt
                break
    return i if i < len(command) and command[i] != "-" else None


def missing_files(own: OwnWorkload, workdir: str) -> List[Tuple[int, str]]:
    """``(command index, message)`` for a program or script the command names relative to the
    workdir that is not there (``./train.sh``; ``python train.py``). Bare program names are
    looked up on the compute nodes' PATH, which the login node cannot check."""
    from ddlbench.errors import did_you_mean

    folder = Path(workdir)
    command = list(own.command)
    start = _after_env(command)
    if start >= len(command):
        return []
    wanted: List[Tuple[int, str]] = []
    if "/" in command[start]:
        wanted.append((start, command[start]))
    script = script_index(command, start)
    kind = _interpreter(command[start])
    if script is not None and kind and command[script].endswith(_SCRIPTS[kind]):
        wanted.append((script, command[script]))
    out: List[Tuple[int, str]] = []
    for i, word in wanted:
        if placeholders_in(word) or Path(word).is_absolute() or (folder / word).exists():
            continue
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        out.append((i, f"no such file in the workdir {folder}: {word}{did_you_mean(word, names)}"))
    return out
