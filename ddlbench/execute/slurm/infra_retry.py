"""Resubmitting runs whose job was ended by the infrastructure, not by itself.

A job that ends ``NODE_FAIL``, ``BOOT_FAIL`` or ``PREEMPTED`` (Slurm's own word, kept in the
attempt's ``slurm_state``) says nothing about the benchmark: the run is submitted again, as a
new attempt, up to the profile's ``slurm.infra_retries`` times (as ReFrame's
``resubmit_on_errors``). A run that failed on its own (FAILED, TIMEOUT, OUT_OF_MEMORY, or
CANCELLED by a user) is never resubmitted by this policy; ``ddlbench retry`` does that on
request. Whichever poll (``status``, ``wait``) first sees the failure resubmits; claiming the
run and recording the new attempt is one store transaction, so two polls never both do.

A run that was submitted chained (``--serial``: its attempt has ``serial`` set) is chained
again: the new attempt waits (``afterany``) for the campaign's newest live job, as a serial
``submit`` or ``retry`` would, so it starts after every job already queued and two runs of the
campaign never overlap. Runs resubmitted by one poll are chained one after the other. A run
submitted without ``--serial`` is resubmitted without a dependency.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, List, Optional

from ddlbench.campaign import states as S
from ddlbench.execute.base import FileLock, SubmitSummary
from ddlbench.execute.store import Attempt, CampaignStore

if TYPE_CHECKING:  # pragma: no cover
    from ddlbench.execute.slurm.executor import SlurmExecutor

#: Slurm's end states that are the infrastructure's doing
INFRA_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL", "PREEMPTED"})
DEFAULT_INFRA_RETRIES = 2


def is_infra_failure(attempt: Attempt) -> bool:
    """Whether an ended attempt was ended by the infrastructure (never a user's cancel)."""
    if not attempt.final or attempt.state == S.COMPLETED:
        return False
    return (attempt.slurm_state or "").upper() in INFRA_STATES


def retry_limit(executor: SlurmExecutor) -> int:
    env = os.environ.get("DDLBENCH_INFRA_RETRIES")
    value = env if env not in (None, "") else executor.campaign.slurm_setting("infra_retries")
    try:
        return max(0, int(value)) if value is not None else DEFAULT_INFRA_RETRIES
    except (TypeError, ValueError):
        return DEFAULT_INFRA_RETRIES


def due(store: CampaignStore, limit: int) -> List[Attempt]:
    """Newest attempts ended by the infrastructure whose run has resubmissions left."""
    out = []
    for run_id, latest in store.latest().items():
        if latest.scheduler != "slurm" or not is_infra_failure(latest):
            continue
        used = sum(1 for a in store.attempts(run_id) if is_infra_failure(a))
        if used <= limit:
            out.append(latest)
    return out


def _claim(store: CampaignStore, failed: Attempt, limit: int) -> Optional[Attempt]:
    """Record the resubmission's intent, unless another poll already did (one transaction)."""
    used = sum(1 for a in store.attempts(failed.run_id) if is_infra_failure(a))
    with store.tx():
        row = store.conn.execute(
            "SELECT MAX(number) FROM attempts WHERE run_id=?", (failed.run_id,)
        ).fetchone()
        if int(row[0] or 0) != failed.number:
            return None
        return store.new_attempt(
            failed.run_id,
            "slurm",
            S.SUBMITTING,
            message=f"resubmitted: attempt {failed.number} (job {failed.job_id}) ended "
            f"{failed.slurm_state}, an infrastructure failure "
            f"({used} of at most {limit} resubmissions)",
            serial=failed.serial,
        )


def resubmit_infra_failures(executor: SlurmExecutor) -> List[str]:
    """Submit new attempts for runs ended by NODE_FAIL/BOOT_FAIL/PREEMPTED; return notes."""
    limit = retry_limit(executor)
    store = executor.store
    if limit <= 0:
        return []
    todo = due(store, limit)
    if not todo:
        return []
    lock = FileLock(executor.campaign.work_dir / "submit.lock")
    if not lock.acquire():
        return []  # a submit or retry is going on: the next poll does it
    notes: List[str] = []
    try:
        summary = SubmitSummary(campaign=executor.campaign.name, executor="slurm")
        for failed in todo:
            intent = _claim(store, failed, limit)
            if intent is None:
                continue
            notes.append(_resubmit(executor, failed, intent, summary))
    finally:
        lock.release()
    for note in notes:
        executor.echo(note)
    return notes


def _resubmit(
    executor: SlurmExecutor, failed: Attempt, intent: Attempt, summary: SubmitSummary
) -> str:
    """Submit the claimed attempt (chained after the newest live job if the run was serial)."""
    run = executor.campaign.run(failed.run_id)
    serial = bool(failed.serial)
    after = executor._last_live_job() if serial else None
    job = executor._submit_one(run, intent, after, summary, serial=serial)
    note = f"{failed.run_id}: job {failed.job_id} ended {failed.slurm_state}; "
    if not job:
        return note + "resubmission rejected"
    return note + f"resubmitted as job {job}" + (f" (after job {after})" if after else "")
