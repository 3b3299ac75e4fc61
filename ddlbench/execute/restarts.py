"""Record in the store how often the scheduler restarted a job (a Slurm requeue).

A requeued job keeps its job id and runs its script again, which logs into a new
``logs/attempt-<k>/`` folder (ddlbench/campaign/restarts.py reads them). After each poll,
the attempts that were live are checked, so a restart is recorded even when no poll saw the
job PENDING again between its two starts.
"""

from __future__ import annotations

from typing import Iterable

from ddlbench.campaign.manifest import Campaign
from ddlbench.campaign.paths import CampaignPaths
from ddlbench.campaign.restarts import last_start, restarts_of_job
from ddlbench.execute.store import Attempt, CampaignStore


def note_restarts(campaign: Campaign, store: CampaignStore, attempts: Iterable[Attempt]) -> int:
    """Raise ``attempts.restarts`` where the run folder shows more starts; returns how many
    attempts changed."""
    paths = CampaignPaths.of(campaign.dir)
    changed = 0
    for a in attempts:
        if not a.job_id:
            continue
        run = paths.run(a.run_id)
        n = restarts_of_job(run, str(a.job_id))
        if n > a.restarts and store.record_restart(
            a.id,
            n,
            f"job {a.job_id} started its script again (a requeue)",
            when=last_start(run, str(a.job_id)),
        ):
            changed += 1
    return changed
