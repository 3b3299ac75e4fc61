"""How a run's attempt ended, in words: the one place that decides the cause a user reads.

The store keeps what each source said: Slurm's reason (squeue's, which for a job that was
still queued is why it waited: ``Priority``, ``Resources``), the first failing task from
srun's lines or sacct (``cause``), ddlbench's own message. :func:`end_cause` picks the words
that ``status``, ``wait``, the report and its summary show, from one attempt's columns:

- a run that was cancelled (state CANCELLED: ``ddlbench cancel``, ``scancel``) says so, and
  whether it had started: ``cancelled by the user while pending (it never started)``,
  ``cancelled by the user while running (its tasks were stopped with signal 15, SIGTERM)``.
  What srun said of its tasks then (``Exited with exit code 1``) is how the ranks took the
  cancel, not a crash, and is not the cause;
- a pending job's queue reason is shown while it waits, never as the cause of a run that
  ended;
- otherwise the recorded cause, then ddlbench's message, then the reason.

Standard library only (``list``, ``status`` and the collector use it).
"""

from __future__ import annotations

import signal as signals
from typing import Any, Mapping, Optional

from ddlbench.campaign import states as S
from ddlbench.campaign.slurm_reasons import END_REASONS, QUEUE_REASONS

#: the store's columns :func:`end_cause` reads (older stores may lack some)
CAUSE_COLUMNS = (
    "state",
    "reason",
    "cause",
    "message",
    "nodelist",
    "start_time",
    "signal",
    "failed_signal",
    "slurm_state",
    "cancel_requested",
)

#: free-text reasons that start like these are a queued job's too (squeue's longer forms:
#: ``Nodes_required_for_job_are_DOWN...``, ``launch failed requeued held``), and so are the
#: limits a newer Slurm may add (``QOS...``, ``Assoc...``, ``Max...PerAccount``)
QUEUE_REASON_PREFIXES = ("Nodes_required", "launch", "QOS", "Assoc", "Max")


def is_queue_reason(reason: Any) -> bool:
    """Whether ``reason`` is Slurm's word for why a job was still waiting in the queue."""
    if not isinstance(reason, str) or not reason.strip():
        return False
    word = reason.strip().split()[0].rstrip(",:")
    if word in END_REASONS:
        return False
    return word in QUEUE_REASONS or word.startswith(QUEUE_REASON_PREFIXES)


def _text(v: Any) -> Optional[str]:
    """A store value as text; None for empty, NULL or NaN."""
    if v is None or v != v or not str(v).strip():
        return None
    return str(v).strip()


def _signal_words(n: Any) -> str:
    try:
        return f"signal {int(n)}, {signals.Signals(int(n)).name}"
    except (TypeError, ValueError):
        return f"signal {n}"


def _started(a: Mapping[str, Any]) -> bool:
    """Whether the job got nodes (Slurm gives a job cancelled in the queue a start time)."""
    return bool(_text(a.get("nodelist")) or _text(a.get("cause")))


def cancel_cause(a: Mapping[str, Any]) -> str:
    """Why a CANCELLED attempt ended: who cancelled it, and whether it had started."""
    own = _text(a.get("reason"))
    if own and own.lower().startswith(("cancelled", "preempted")):
        return own  # ddlbench's own words ("cancelled before it was submitted", these)
    if (_text(a.get("slurm_state")) or "").upper() == S.PREEMPTED:
        return "preempted and not requeued (Slurm ended the job PREEMPTED)"
    if a.get("cancel_requested"):
        who = "cancelled by the user"
    elif own and own.upper().startswith("CANCELLED BY"):
        who = f"cancelled in Slurm ({own}: scancel)"
    else:
        who = "cancelled in Slurm (scancel)"
    if not _started(a):
        return f"{who} while pending (it never started)"
    sig = _signal_number(a.get("failed_signal")) or _signal_number(a.get("signal")) or 15
    return f"{who} while running (its tasks were stopped with {_signal_words(sig)})"


def _signal_number(v: Any) -> int:
    """A recorded signal as a number; 0 for none or one that is not a number."""
    try:
        return int(v) if _text(v) is not None else 0
    except (TypeError, ValueError):
        return 0


def end_cause(a: Mapping[str, Any]) -> Optional[str]:
    """The words for how the attempt ``a`` (a mapping of :data:`CAUSE_COLUMNS`) ended, or why
    it waits; None when nothing more than its state and exit code is known."""
    state = _text(a.get("state"))
    state = S.from_slurm(state, finished=False) if state and state not in S.ALL else state
    if state == S.CANCELLED:
        return cancel_cause(a)
    reason = _text(a.get("reason"))
    if state in S.FINAL and is_queue_reason(reason):
        reason = None  # why it waited in the queue says nothing of how it ended
    return _text(a.get("cause")) or _text(a.get("message")) or reason


def task_cause(a: Mapping[str, Any]) -> Optional[str]:
    """The attempt's ``cause`` as every command words it: a cancelled attempt's is that it was
    cancelled (what srun said of its tasks then is how they took the cancel), any other's
    the recorded one."""
    return end_cause(a) if _text(a.get("state")) == S.CANCELLED else _text(a.get("cause"))
