"""Runs whose job script started more than once, read from the run folders.

Every start of a job script makes a new ``logs/attempt-<k>/`` folder with a ``job.txt``
(``job_id=... restarts=... start=...``; ``restarts`` is Slurm's ``SLURM_RESTART_COUNT``). A
Slurm requeue (a node failure, ``scontrol requeue``, preemption) starts the script again with
the same job id; ``ddlbench retry`` starts it with a new one. Nothing is overwritten, so the
folders tell how often each run started, which the store (``attempts.restarts``) and the
report repeat. Each submission of a run (a retry, an infrastructure resubmission) is an
attempt of its own in the store, with its own job id, state and exit code;
:func:`attempts_sentence` names them for the report, as ``status --json`` (``history``) does.
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional, Union

from ddlbench.campaign.causes import task_cause
from ddlbench.campaign.paths import CampaignPaths, RunPaths
from ddlbench.campaign.store_view import read_attempts


@dataclass(frozen=True)
class RunStarts:
    """How often one run's job script started, per job id."""

    run_id: str
    #: job id -> the attempt folders (k) it started, ascending
    jobs: Dict[str, List[int]]
    #: the highest SLURM_RESTART_COUNT any start reported
    slurm_restarts: int

    @property
    def starts(self) -> int:
        return sum(len(v) for v in self.jobs.values())

    @property
    def restarts(self) -> int:
        """Starts beyond the first of each job (requeues), at least Slurm's own count."""
        return max(sum(len(v) - 1 for v in self.jobs.values()), self.slurm_restarts)


def run_starts(run: RunPaths) -> RunStarts:
    jobs: Dict[str, List[int]] = {}
    slurm = 0
    for k in run.attempts():
        job = run.attempt_job(k)
        jobs.setdefault(job.get("job_id", "?"), []).append(k)
        count = job.get("restarts", "0")
        slurm = max(slurm, int(count) if count.isdigit() else 0)
    return RunStarts(run.run_id, jobs, slurm)


def restarts_of_job(run: RunPaths, job_id: str) -> int:
    """How many times job ``job_id`` restarted this run's script (Slurm requeues)."""
    starts = run_starts(run)
    own = starts.jobs.get(str(job_id), [])
    return max(len(own) - 1, starts.slurm_restarts if own else 0)


def last_start(run: RunPaths, job_id: str) -> Optional[float]:
    """When job ``job_id`` last started the run's script (``job.txt``'s ``start=``, UTC)."""
    mine = [k for k in run.attempts() if run.attempt_job(k).get("job_id") == str(job_id)]
    if not mine:
        return None
    text = run.attempt_job(mine[-1]).get("start", "")
    try:
        stamp = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return stamp.replace(tzinfo=timezone.utc).timestamp()


def restarted_runs(campaign_dir: Union[str, Path]) -> List[RunStarts]:
    """Every run whose job script started more than once, by run id."""
    out = []
    for run in CampaignPaths.of(campaign_dir).run_folders():
        starts = run_starts(run)
        if starts.starts > 1 or starts.restarts:
            out.append(starts)
    return out


def restarts_sentence(campaign_dir: Union[str, Path], limit: int = 5) -> str:
    """One sentence for a report ('' when every run started once)."""
    runs = restarted_runs(campaign_dir)
    if not runs:
        return ""
    requeued = [r for r in runs if r.restarts]
    parts = []
    for r in runs[:limit]:
        jobs = ", ".join(f"job {j} x{len(ks)}" for j, ks in r.jobs.items())
        parts.append(f"{r.run_id} ({r.starts} starts: {jobs})")
    more = f" and {len(runs) - limit} more" if len(runs) > limit else ""
    return (
        f"{len(runs)} run(s) started more than once ({len(requeued)} requeued or restarted by "
        f"the scheduler): {'; '.join(parts)}{more}. Their numbers come from the newest "
        "attempt; earlier attempts' logs are kept in runs/<run>/logs/attempt-<k>/."
    )


def _attempt_words(a: Dict[str, object]) -> str:
    text = f"attempt {a['number']}: job {a.get('job_id') or '-'} {a.get('state')}"
    if a.get("slurm_state") and a.get("slurm_state") != a.get("state"):
        text += f" ({a['slurm_state']})"
    if a.get("exit_code") is not None:
        text += f", exit {a['exit_code']}"
    cause = task_cause(a)
    if cause:
        text += f", {cause}"
    return text


def attempts_sentence(campaign_dir: Union[str, Path], limit: int = 5) -> str:
    """One sentence naming every attempt of the runs submitted more than once ('' if none).

    The run folder's ``provenance/`` and ``exit_code`` are the newest attempt's; how the
    earlier ones ended is in the store, read here without locking it."""
    found = read_attempts(campaign_dir)
    if found is None:
        return ""
    by_run: Dict[str, List[Dict[str, object]]] = {}
    for row in found.rows:
        by_run.setdefault(str(row["run_id"]), []).append(row)
    many = [(run, rows) for run, rows in sorted(by_run.items()) if len(rows) > 1]
    if not many:
        return ""
    parts = [f"{run} ({'; '.join(_attempt_words(a) for a in rows)})" for run, rows in many[:limit]]
    more = f" and {len(many) - limit} more" if len(many) > limit else ""
    return (
        f"{len(many)} run(s) were submitted more than once: {'; '.join(parts)}{more} "
        "(every attempt: `ddlbench status --json`, `history`)."
    )
