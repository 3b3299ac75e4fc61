"""The decisions of a Slurm poll, as pure functions: no scheduler, no store, no clock.

One poll asks squeue about every live attempt; for the jobs it no longer lists, or lists as
ended in a way that squeue cannot explain (no exit code, a preemption), it asks sacct (or reads
the jobcomp file, or asks ``scontrol``). :func:`decide` turns what those said about one attempt,
and the time, into an :class:`Update`; :func:`record_values` turns a record into the attempt's
columns. The executor (executor.py) runs the commands and writes the updates; tests drive these
functions directly (tests/execute/test_poll_core.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional

from ddlbench.campaign import states as S
from ddlbench.execute.slurm.commands import JobRecord
from ddlbench.execute.store import Attempt

#: squeue lists a job as ended at once, while slurmdbd may get its record (exit code, the
#: failing step) a moment later: a job that ended this recently, on a cluster whose sacct
#: answers, is not recorded from squeue alone; the next poll asks sacct again
ACCOUNTING_GRACE_S = 60.0

#: the states squeue shows without what a user needs: an exit code, whether the job comes back
NEEDS_ACCOUNTING = frozenset({S.FAILED, S.OUT_OF_MEMORY, S.PREEMPTED})

LOST_MESSAGE = (
    "the job left the Slurm controller and no record of how it ended was found (no sacct, "
    "no readable jobcomp file)"
)

#: a job ddlbench asked Slurm to cancel, which then left with no record (a cancelled pending
#: task of a job array leaves none: no sacct without slurmdbd, no jobcomp line, no scontrol)
CANCELLED_MESSAGE = "Slurm kept no record of the job after ddlbench cancelled it"

#: what an update does: take a record; nothing (ask again next poll); note the first poll
#: that found the job nowhere; give the job up as LOST; record the cancel ddlbench asked for
APPLY, WAIT, MISSING, LOST, CANCELLED = "apply", "wait", "missing", "lost", "cancelled"


@dataclass(frozen=True)
class Update:
    """What one poll does to one attempt."""

    action: str
    #: the record to take (APPLY): :func:`record_values` gives the columns
    record: Optional[JobRecord] = None
    #: the columns to set (MISSING, LOST)
    values: Dict[str, Any] = field(default_factory=dict)


def needs_accounting(squeue: Optional[JobRecord]) -> bool:
    """Whether squeue's word on a job is not enough: it no longer lists the job, or lists it
    ended without an exit code or without saying whether it comes back."""
    return squeue is None or squeue.state in NEEDS_ACCOUNTING


def just_ended(rec: JobRecord, now: float, grace: Optional[float] = None) -> bool:
    """Whether squeue shows the job ended less than :data:`ACCOUNTING_GRACE_S` ago."""
    grace = ACCOUNTING_GRACE_S if grace is None else grace
    return rec.state in S.FINAL and rec.end_time is not None and now - rec.end_time < grace


def decide(
    attempt: Attempt,
    squeue: Optional[JobRecord],
    accounting: Optional[JobRecord],
    now: float,
    sacct_answered: bool,
    *,
    lost_after: float = 60.0,
) -> Update:
    """One attempt's update from squeue's record and the accounting record (sacct, jobcomp or
    scontrol; None: none was found or none was asked for) at time ``now``.

    ``sacct_answered``: sacct was asked this poll and answered (a job it has no end for yet
    may be recorded by slurmdbd a moment later). ``lost_after``: seconds a job may be missing
    everywhere before it is LOST (:class:`ExecuteSettings`)."""
    if not needs_accounting(squeue):
        return Update(APPLY, squeue)
    if accounting is not None and (accounting.state in S.FINAL or squeue is None):
        if squeue is not None and accounting.reason is None:
            accounting = replace(accounting, reason=squeue.reason)
        return Update(APPLY, accounting)
    if squeue is not None:
        if sacct_answered and just_ended(squeue, now):
            return Update(WAIT)
        return Update(APPLY, squeue)
    if attempt.cancel_requested and not _accounting_may_still_say(attempt, now, sacct_answered):
        # gone everywhere after ddlbench's own scancel: cancelled, not LOST (campaign/causes.py
        # words it: still pending when asked, it never started)
        values = {"state": S.CANCELLED, "end_time": now, "missing_since": None}
        return Update(CANCELLED, values={**values, "message": CANCELLED_MESSAGE})
    if attempt.missing_since is None:
        return Update(MISSING, values={"missing_since": now})
    if attempt.cancel_requested:  # never LOST: cancelled once the grace is over
        return Update(WAIT)
    if now - attempt.missing_since > lost_after:
        return Update(LOST, values={"state": S.LOST, "end_time": now, "message": LOST_MESSAGE})
    return Update(WAIT)


def _accounting_may_still_say(attempt: Attempt, now: float, sacct_answered: bool) -> bool:
    """Whether sacct, which answers on this cluster, may record the job a moment later: a job
    that ended on its own just as ddlbench cancelled it (COMPLETED, FAILED) is recorded so,
    not as cancelled, once slurmdbd has its record; for :data:`ACCOUNTING_GRACE_S` after the
    first poll that found it nowhere. Without sacct nothing more will come: at once."""
    if not sacct_answered:
        return False
    return attempt.missing_since is None or now - attempt.missing_since < ACCOUNTING_GRACE_S


def record_values(attempt: Attempt, rec: JobRecord) -> Dict[str, Any]:
    """The attempt's columns that ``rec`` sets (all of them, changed or not), but the failing
    task: that needs the job's files (:func:`needs_cause`)."""
    values: Dict[str, Any] = {"state": rec.state, "missing_since": None}
    values["source"] = rec.source or None
    values["slurm_state"] = (rec.slurm_state or "").strip().split(" ")[0].upper() or None
    if attempt.job_id is None or attempt.state == S.SUBMITTING:
        values["job_id"] = rec.key
        values["array_job_id"] = rec.array_job_id
        values["array_task_id"] = rec.array_task_id
    if rec.reason is not None or rec.state != attempt.state:
        values["reason"] = rec.reason  # a new state makes the old reason stale
    for key in ("nodelist", "submit_time", "start_time", "end_time"):
        val = getattr(rec, key)
        if val is not None:
            values[key] = val
    if rec.exit_code is not None:
        values["exit_code"] = rec.exit_code
        values["signal"] = rec.signal
    if rec.state == S.COMPLETED and values.get("exit_code") is None:
        values["exit_code"] = 0
    return values


def needs_cause(attempt: Attempt, rec: JobRecord) -> bool:
    """Whether the first failing task should be looked for: the job ended unsuccessfully and
    no cause is recorded yet."""
    return rec.state in S.FINAL and rec.state != S.COMPLETED and attempt.cause is None


def changes(attempt: Attempt, values: Dict[str, Any]) -> Dict[str, Any]:
    """The columns of ``values`` that differ from the attempt's."""
    return {k: v for k, v in values.items() if getattr(attempt, k) != v}
