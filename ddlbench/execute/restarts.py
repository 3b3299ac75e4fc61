"""Record in the store how often the scheduler restarted a job (a Slurm requeue).

A requeued job keeps its job id and runs its script again, which logs into a new
``logs/attempt-<k>/`` folder (ddlbench/campaign/restarts.py reads them). After each poll,
the attempts that were live are checked, so a restart is recorded even when no poll saw the
job PENDING again between its two starts. A job array task is named ``<array>_<task>`` in the
store and by its own job id in the run folder; the array's own output files
(``<token>-<array>_<task>-<job>.out``) tell one from the other.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from ddlbench.campaign.manifest import Campaign
from ddlbench.campaign.paths import CampaignPaths
from ddlbench.campaign.restarts import last_start, restarts_of_job
from ddlbench.execute.store import Attempt, CampaignStore


def note_restarts(campaign: Campaign, store: CampaignStore, attempts: Iterable[Attempt]) -> int:
    """Raise ``attempts.restarts`` where the run folder shows more starts; returns how many
    attempts changed."""
    paths = CampaignPaths.of(campaign.dir)
    attempts = [a for a in attempts if a.job_id]
    own = _own_ids(paths, attempts)
    changed = 0
    for a in attempts:
        run = paths.run(a.run_id)
        job = own.get(_task_of(a)) or str(a.job_id)
        n = restarts_of_job(run, job)
        if n > a.restarts and store.record_restart(
            a.id,
            n,
            f"job {a.job_id} started its script again (a requeue)",
            when=last_start(run, job),
        ):
            changed += 1
    return changed


_Task = Optional[Tuple[str, str, int]]


def _task_of(a: Attempt) -> _Task:
    if a.array_job_id is None or a.array_task_id is None:
        return None
    return (a.batch_token, a.array_job_id, int(a.array_task_id))


def _own_ids(paths: CampaignPaths, attempts: List[Attempt]) -> Dict[_Task, str]:
    """(token, array, task) -> the task's own job id, for the array tasks among ``attempts``."""
    if not any(_task_of(a) for a in attempts):
        return {}
    return {(o.token, o.array_id, o.task): o.own_id for o in paths.array_outputs() if o.own_id}
