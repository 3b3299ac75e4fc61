"""Resubmitting runs whose job was ended by the infrastructure, not by itself.

A job that ends ``NODE_FAIL``, ``BOOT_FAIL`` or ``PREEMPTED`` (Slurm's own word, kept in the
attempt's ``slurm_state``) says nothing about the benchmark: the run is submitted again, as a
new attempt, up to the profile's ``slurm.infra_retries`` times (``DDLBENCH_INFRA_RETRIES``
overrides it; default 2). This is ddlbench's own policy, close to what Slurm itself does for a
job submitted with ``--requeue`` after a node failure, except that the new submission is a new
attempt with its own job id and output. A run that failed on its own (FAILED, TIMEOUT,
OUT_OF_MEMORY, or CANCELLED by a user) is never resubmitted by this policy; ``ddlbench retry``
does that on request. Whichever poll (``status``, ``wait``) first sees the failure resubmits;
claiming the run and recording the new attempt is one store transaction
(:meth:`CampaignStore.new_attempt_after`), so two polls never both do.

A run that was submitted chained (``--serial``: its attempt has ``serial`` set) is chained
again: the new attempt waits (``afterany``) for the campaign's newest live job, as a serial
``submit`` or ``retry`` would, so it starts after every job already queued and two runs of the
campaign never overlap. Runs resubmitted by one poll are chained one after the other. A run
submitted without ``--serial`` is resubmitted without a dependency.

The policy works on the executor interface (:class:`Executor`): it runs after every poll
(:func:`refresh`), whatever the executor; an executor whose :meth:`Executor.infra_retry_limit`
is 0 (the local one) is never asked to resubmit.
"""

from __future__ import annotations

from typing import List, Optional

from ddlbench.campaign import states as S
from ddlbench.execute.base import Executor, FileLock, RefreshResult, SubmitSummary
from ddlbench.execute.store import Attempt, CampaignStore

#: Slurm's end states that are the infrastructure's doing
INFRA_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL", "PREEMPTED"})
DEFAULT_INFRA_RETRIES = 2


def is_infra_failure(attempt: Attempt) -> bool:
    """Whether an ended attempt was ended by the infrastructure (never a user's cancel)."""
    if not attempt.final or attempt.state == S.COMPLETED:
        return False
    return (attempt.slurm_state or "").upper() in INFRA_STATES


def parse_limit(value: object) -> int:
    """The number of resubmissions a setting asks for (negative: 0; unreadable: the default)."""
    try:
        return max(0, int(value)) if value is not None else DEFAULT_INFRA_RETRIES  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return DEFAULT_INFRA_RETRIES


def resubmissions_used(history: List[Attempt]) -> int:
    """How many attempts of a run's ``history`` the infrastructure ended."""
    return sum(1 for a in history if is_infra_failure(a))


def due(store: CampaignStore, limit: int, scheduler: str = "slurm") -> List[Attempt]:
    """Newest attempts ended by the infrastructure whose run has resubmissions left."""
    out = []
    for run_id, latest in store.latest().items():
        if latest.scheduler != scheduler or not is_infra_failure(latest):
            continue
        if resubmissions_used(store.attempts(run_id)) <= limit:
            out.append(latest)
    return out


def claim(store: CampaignStore, failed: Attempt, limit: int) -> Optional[Attempt]:
    """Record the resubmission's intent, unless another poll already did (one transaction)."""
    used = resubmissions_used(store.attempts(failed.run_id))
    return store.new_attempt_after(
        failed,
        failed.scheduler,
        S.SUBMITTING,
        message=f"resubmitted: attempt {failed.number} (job {failed.job_id}) ended "
        f"{failed.slurm_state}, an infrastructure failure "
        f"({used} of at most {limit} resubmissions)",
        serial=failed.serial,
    )


def resubmit_infra_failures(executor: Executor) -> List[str]:
    """Submit new attempts for runs ended by NODE_FAIL/BOOT_FAIL/PREEMPTED; return notes."""
    limit = executor.infra_retry_limit()
    store = executor.store
    if limit <= 0:
        return []
    todo = due(store, limit, executor.name)
    if not todo:
        return []
    lock = FileLock(executor.campaign.paths.submit_lock)
    if not lock.acquire():
        return []  # a submit or retry is going on: the next poll does it
    notes: List[str] = []
    try:
        summary = SubmitSummary(campaign=executor.campaign.name, executor=executor.name)
        for failed in todo:
            intent = claim(store, failed, limit)
            if intent is None:
                continue
            notes.append(_resubmit(executor, failed, intent, summary))
    finally:
        lock.release()
    for note in notes:
        executor.echo(note)
    return notes


def _resubmit(executor: Executor, failed: Attempt, intent: Attempt, summary: SubmitSummary) -> str:
    """Submit the claimed attempt (chained after the newest live job if the run was serial)."""
    run = executor.campaign.run(failed.run_id)
    serial = bool(failed.serial)
    after = executor.last_live_job() if serial else None
    job = executor.submit_attempt(run, intent, after=after, serial=serial, summary=summary)
    note = f"{failed.run_id}: job {failed.job_id} ended {failed.slurm_state}; "
    if not job:
        return note + "resubmission rejected"
    return note + f"resubmitted as job {job}" + (f" (after job {after})" if after else "")


def refresh(executor: Executor) -> RefreshResult:
    """One poll: the executor brings the store up to date, then the runs that it found ended
    by the infrastructure are resubmitted (not while the campaign is being cancelled)."""
    had_live = bool(executor.store.live_attempts(executor.name))
    calls0 = executor.scheduler_calls
    result = executor.refresh()
    if had_live and not executor.store.get_meta("cancel_requested"):
        result.notes += resubmit_infra_failures(executor)
        result.calls = executor.scheduler_calls - calls0
    return result
