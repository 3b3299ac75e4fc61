"""Which task (rank) of a run failed first, and how: read from srun's own report.

When one rank of a step dies, srun prints one line per failed task on stderr, in the order it
learns of them, e.g.::

    srun: error: n2: task 1: Killed
    srun: error: n1: task 0: Terminated
    srun: error: n1: tasks 0-1: Exited with exit code 3

The job's exit code is then the batch script's (often 143: rank 0 got srun's SIGTERM), which
names the victim of the clean-up, not the cause. The cause is the first line that is not the
clean-up itself (SIGTERM, "Force Terminated"). The local executor's srun prints the same lines.

Where Slurm keeps accounting, sacct's step records are read first (:func:`find_cause`): the
first srun step that did not complete, with its state, exit code or signal and its nodes. A
step record names no task, and a step that srun stopped after one task failed
(``--kill-on-bad-exit``) is recorded with srun's SIGTERM, the clean-up; so the step's record
is the cause when it ended otherwise, and srun's line that agrees with it adds the task and
its node. Without a telling step record (no accounting, or the clean-up), srun's lines alone
are read. The source is recorded: ``sacct`` or ``srun``.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from ddlbench.execute.slurm.commands import StepRecord

#: at most this much of the end of each output file is read (srun reports at the end)
TAIL_BYTES = 1 << 20

_LINE = re.compile(
    r"^srun: error: (?P<node>[^:\s]+): tasks? (?P<tasks>[0-9][0-9,\-]*): (?P<what>.+)$"
)
_EXITED = re.compile(r"^Exited with exit code (\d+)$")
_BY_NUMBER = re.compile(r"^Killed by signal (\d+)$")
_CLEANUP = {signal.SIGTERM.value}


def _signal_words() -> Dict[str, int]:
    out: Dict[str, int] = {}
    for sig in signal.valid_signals():
        try:
            text = signal.strsignal(sig)
        except (ValueError, OSError):
            text = None
        if text:
            out[text.lower()] = int(sig)
    out["out of memory"] = int(signal.SIGKILL)
    return out


_WORDS = _signal_words()


@dataclass
class TaskFailure:
    task: Optional[int]  # None: only the step is known (a sacct step record)
    node: str
    what: str  # srun's own words: "Killed", "Exited with exit code 3", ...
    signal: Optional[int] = None
    exit_code: Optional[int] = None
    step: Optional[str] = None  # sacct's step id ("123.0") when it came from a step record

    def describe(self) -> str:
        who = f"task {self.task}" if self.task is not None else f"step {self.step}"
        text = f"{who} on {self.node}: {self.what}"
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            text += f" ({name})"
        if self.task is not None and self.step:
            text += f", step {self.step}"
        return text


def _signal_of(what: str) -> Optional[int]:
    """srun's ``Killed``/``Segmentation fault (core dumped)``, or ``Killed by signal 9``."""
    m = _BY_NUMBER.match(what)
    if m:
        return int(m.group(1))
    return _WORDS.get(re.sub(r"\s*\(core dumped\)$", "", what).lower())


def _first_task(text: str) -> int:
    head = re.split(r"[,\-]", text, maxsplit=1)[0]
    return int(head)


def parse_srun_failures(text: str) -> List[TaskFailure]:
    """Every ``srun: error: NODE: task N: WHAT`` line, in order."""
    out: List[TaskFailure] = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        what = m.group("what").strip()
        code = _EXITED.match(what)
        sig = None if code else _signal_of(what)
        if code is None and sig is None:
            continue  # not a task's end ("task 0: Unable to ...", launch errors)
        out.append(
            TaskFailure(
                task=_first_task(m.group("tasks")),
                node=m.group("node"),
                what=what,
                signal=sig,
                exit_code=int(code.group(1)) if code else None,
            )
        )
    return out


def first_failure(failures: List[TaskFailure]) -> Optional[TaskFailure]:
    """The cause: the first failure that is not srun's SIGTERM clean-up, else the first one."""
    for f in failures:
        if f.signal not in _CLEANUP and not (f.exit_code == 0 and f.signal is None):
            return f
    return failures[0] if failures else None


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def find_task_failure(paths: Iterable[Path]) -> Optional[TaskFailure]:
    """The first failing task named by srun in any of ``paths`` (job stderr first)."""
    failures: List[TaskFailure] = []
    for path in paths:
        failures.extend(parse_srun_failures(_tail(path)))
    return first_failure(failures)


def failed_step(steps: Sequence[StepRecord]) -> Optional[StepRecord]:
    """The first srun step that did not complete, unless srun's SIGTERM clean-up ended it."""
    for step in steps:
        if not step.is_task_step:
            continue
        if step.state.startswith("COMPLETED") and not step.exit_code and not step.signal:
            continue
        return None if step.signal in _CLEANUP else step
    return None


def _from_step(step: StepRecord, srun: Optional[TaskFailure]) -> TaskFailure:
    """The step's record, with the task and node of srun's line when that line agrees."""
    agrees = srun is not None and (
        srun.signal == step.signal if step.signal is not None else srun.exit_code == step.exit_code
    )
    if agrees and srun is not None:
        return TaskFailure(srun.task, srun.node, srun.what, step.signal, srun.exit_code, step.step)
    what = step.state.split(" ")[0]
    if step.signal is None and step.exit_code:
        what += f", exit code {step.exit_code}"
    return TaskFailure(None, step.nodelist or "?", what, step.signal, step.exit_code, step.step)


def find_cause(
    steps: Optional[Sequence[StepRecord]], paths: Iterable[Path]
) -> Optional[Tuple[TaskFailure, str]]:
    """The first failure and its source: sacct's ``steps`` when one tells it, else srun's
    lines in ``paths``; None when neither names one."""
    srun = find_task_failure(paths)
    step = failed_step(steps or [])
    if step is not None:
        return _from_step(step, srun), "sacct"
    return (srun, "srun") if srun is not None else None


#: Slurm's end states that say a node failed, and how to say it
_NODE_ENDS = {"NODE_FAIL": "went down", "BOOT_FAIL": "failed to boot"}
#: ``sinfo`` node states (``%T``) of a node that is not serving jobs
_BAD_NODE = re.compile(r"down|fail|drain|not_responding|\*$", re.IGNORECASE)


def bad_nodes(sinfo_text: str) -> List[str]:
    """The nodes ``sinfo -h -N -o '%N %T'`` lists as down, failing, drained or silent."""
    out: List[str] = []
    for line in sinfo_text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and _BAD_NODE.search(parts[1]) and parts[0] not in out:
            out.append(parts[0])
    return out


def node_failure_cause(
    slurm_state: Optional[str],
    failure: Optional[TaskFailure],
    nodelist: Optional[str],
    down: Sequence[str] = (),
) -> Optional[str]:
    """A NODE_FAIL or BOOT_FAIL said as such: which node went down (from ``sinfo``, when it
    still says so), then the first failing task srun named (often a rank on a healthy node
    that lost its peer). None for every other end."""
    word = (slurm_state or "").split(" ")[0].upper()
    what = _NODE_ENDS.get(word)
    if what is None:
        return None
    where = f"a node of {nodelist}" if nodelist else "a node"
    if nodelist and not re.search(r"[\[,]", nodelist):  # one node: it is the one
        where = f"node {nodelist}"
    who = f"node {', '.join(down)}" if down else where
    text = f"{who} {what} (Slurm ended the job {word})"
    if failure is not None:
        text += f"; then {failure.describe()}"
    return text
