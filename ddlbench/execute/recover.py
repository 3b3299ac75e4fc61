"""``ddlbench recover``: rebuild a lost campaign store from what is left.

A store that is missing, empty (0 bytes) or not a database while run folders hold output is
never replaced silently (``CampaignStore.open`` refuses: a new store would submit finished runs
again). ``recover`` rebuilds it from

* the manifest (``campaign.json``): the runs;
* the run folders: the job ids that ran each run (``logs/attempt-<k>/job.txt``,
  ``slurm-<jobid>.out/.err``, ``provenance/job.txt``), how each start ended (its rank logs, the
  run's ``exit_code``, a time-limit or cancel line in the Slurm output) and the restarts;
* the job arrays (``submit --array``): which run each task ran, so that their runs are named
  ``<array>_<task>`` again (recover_arrays.py);
* the scheduler: for Slurm, ``squeue`` (jobs still queued or running, found by job name, even
  those that wrote nothing yet), then ``sacct``/the jobcomp file/``scontrol`` for jobs that
  ended (the executor's own poll); for the local executor, nothing outlives the store but the
  run folders, so a local job still running makes recover stop and ask to wait.

The old store file is kept, renamed ``state.sqlite.lost-<time>``. What could not be established
is said, run by run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ddlbench.campaign import states as S
from ddlbench.campaign.manifest import Campaign, load_campaign
from ddlbench.campaign.paths import CampaignPaths, RunPaths
from ddlbench.errors import DDLBenchError
from ddlbench.execute.local.records import read_end_record
from ddlbench.execute.recover_arrays import ArrayTask, SqueueLine, array_tasks, fold_own_ids
from ddlbench.execute.restarts import note_restarts
from ddlbench.execute.store import CampaignStore, new_token
from ddlbench.execute.store_guard import store_is_intact

_JOB_FILE = re.compile(r"^slurm-(\d+(?:_\d+)?)\.(?:out|err)$")
_TOKEN = re.compile(r"~([0-9a-f]{12})$")


@dataclass
class Recovered:
    """What ``recover`` found and did."""

    campaign: str
    store: str
    moved_aside: List[str] = field(default_factory=list)
    attempts: List[Dict] = field(default_factory=list)
    unknown: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    intact: bool = False

    def as_dict(self) -> Dict:
        return dict(self.__dict__)


def job_ids_in_folder(run: RunPaths) -> List[str]:
    """Every job id that left a trace in a run folder, ascending."""
    ids = set()
    for k in run.attempts():
        job = run.attempt_job(k).get("job_id")
        if job:
            ids.add(job)
    for p in run.scheduler_outputs():
        m = _JOB_FILE.match(p.name)
        if m:
            ids.add(m.group(1))
    try:
        text = (run.provenance / "job.txt").read_text(errors="replace")
        ids.update(re.findall(r"^job_id=(\S+)$", text, re.M))
    except OSError:
        pass
    return sorted(ids, key=_job_key)


def _job_key(job: str) -> Tuple[int, int, str]:
    m = re.match(r"^(\d+)(?:_(\d+))?", job)
    if not m:
        return (0, 0, job)
    return (int(m.group(1)), int(m.group(2) or 0), job)


#: how a job ended, by its run folder: (state or None when unknown, store values)
Verdict = Tuple[Optional[str], Dict]


def folder_verdict(run: RunPaths, job_id: str, newest: bool) -> Verdict:
    """How a start of job ``job_id`` ended, by its run folder alone: (state or None, values)."""
    text = "".join(_tail(run.slurm_output(job_id, stream)) for stream in ("err", "out"))
    if "DUE TO TIME LIMIT" in text:
        return S.TIMEOUT, {"reason": "TimeLimit (from the job's output)"}
    if re.search(r"\*\*\* JOB \S+ ON \S+ CANCELLED AT", text):  # written while it ran
        return S.CANCELLED, {"reason": "cancelled while running (from the job's output)"}
    logs = _logs_of_job(run, job_id)
    status = _logs_status(logs)
    times = _log_times(logs)
    if status == "ok" and (not newest or _exit_code(run) in (None, 0)):
        return S.COMPLETED, {"exit_code": 0, "reason": "every rank wrote its summary", **times}
    if status == "failed":
        code = _exit_code(run) if newest else None
        kept = {"exit_code": code} if code is not None else {}
        return S.FAILED, {"reason": "a rank log records an error", **kept, **times}
    if newest and _exit_code(run) is not None:
        code = _exit_code(run)
        state = S.COMPLETED if code == 0 else S.FAILED
        return state, {"exit_code": code, "reason": f"exit_code file says {code}", **times}
    return None, times


def _tail(path: Path, size: int = 65536) -> str:
    """The end of a job's output file ('' when there is none): the ranks may write a lot
    after the time-limit or cancel line."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _log_times(logs: List[Path]) -> Dict[str, float]:
    """When the job's ranks started and last wrote (their logs' first record's ``time``, the
    files' modification times), so that a recovered attempt keeps its elapsed time."""
    starts, ends = [], []
    for path in logs:
        with contextlib.suppress(OSError, ValueError):
            with open(path, encoding="utf-8", errors="replace") as f:
                first = json.loads(f.readline() or "{}")
            if isinstance(first.get("time"), (int, float)):
                starts.append(float(first["time"]))
            ends.append(path.stat().st_mtime)
    out: Dict[str, float] = {}
    if starts:
        out["start_time"] = min(starts)
    if ends:
        out["end_time"] = max(ends)
    return out


def _logs_of_job(run: RunPaths, job_id: str) -> List[Path]:
    mine = [k for k in run.attempts() if run.attempt_job(k).get("job_id") == job_id]
    if mine:
        return RunPaths.rank_logs_in(run.attempt(mine[-1]))
    if not run.attempts():  # run folders of earlier versions: logs/ holds one start's logs
        return RunPaths.rank_logs_in(run.logs)
    return []


def _logs_status(logs: List[Path]) -> Optional[str]:
    """'ok' when every rank log ends with an ok summary, 'failed' on an error record."""
    if not logs:
        return None
    complete = True
    for path in logs:
        last = None
        try:
            for line in path.read_text(errors="replace").splitlines():
                rec = json.loads(line) if line.strip().startswith("{") else None
                if rec and rec.get("type") == "error":
                    return "failed"
                last = rec or last
        except (OSError, ValueError):
            complete = False
            continue
        if not last or last.get("type") != "summary" or last.get("status", "ok") != "ok":
            complete = False
    return "ok" if complete else None


def _exit_code(run: RunPaths) -> Optional[int]:
    try:
        return int(run.exit_code.read_text().strip())
    except (OSError, ValueError):
        return None


def live_local_jobs(campaign: Campaign) -> List[str]:
    """Local jobs whose process group is still alive (their supervisors hold old attempt ids)."""
    from ddlbench.execute.local.executor import runner_lock
    from ddlbench.execute.local.job import read_pgid

    live = []
    jobs = CampaignPaths.of(campaign.dir).local_jobs
    if runner_lock(campaign.dir).is_held():
        live.append("the local runner")
    if jobs.is_dir():
        for d in sorted(jobs.iterdir()):
            pgid = read_pgid(campaign.dir, d.name)  # the recorded group, if still the same
            if not pgid:
                continue
            try:
                os.killpg(pgid, 0)
            except OSError:
                continue
            live.append(f"job {d.name}")
    return live


def _move_aside(paths: CampaignPaths) -> List[str]:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    moved = []
    for p in paths.store_files:
        if p.exists():
            dest = p.with_name(p.name + f".lost-{stamp}")
            os.replace(p, dest)
            moved.append(str(dest))
    return moved


#: seconds recover gives a local runner that has nothing left to run to exit by itself
RUNNER_GRACE_S = 15.0


def _settled_local_jobs(campaign: Campaign) -> List[str]:
    """:func:`live_local_jobs`, after giving an idle runner (no live job) time to exit."""
    deadline = time.monotonic() + RUNNER_GRACE_S
    live = live_local_jobs(campaign)
    while live == ["the local runner"] and time.monotonic() < deadline:
        time.sleep(0.25)
        live = live_local_jobs(campaign)
    return live


def recover_campaign(campaign_dir: Path, *, force: bool = False, echo=print) -> Recovered:
    """Rebuild ``campaign_dir``'s store (see the module docstring)."""
    campaign = load_campaign(campaign_dir)
    paths = CampaignPaths.of(campaign.dir)
    out = Recovered(campaign.name, str(paths.store))
    if store_is_intact(paths.store) and not force:
        out.intact = True
        out.notes.append(f"{paths.store} is intact; nothing to recover (--force rebuilds it)")
        return out
    if campaign.scheduler == "local":
        from ddlbench.campaign.resolve import campaign_words

        live = _settled_local_jobs(campaign)
        if live:
            raise DDLBenchError(
                f"{campaign.dir}: {', '.join(live)} still running; wait until it ends "
                f"(or stop it), then run `ddlbench recover {campaign_words(campaign.dir)}` again"
            )
    out.moved_aside = _move_aside(paths)
    with CampaignStore.open(campaign.dir, rebuild=True) as store:
        store.sync_runs(campaign.runs)
        slurm = campaign.scheduler == "slurm"
        listed = _squeue_lines(campaign, store) if slurm else []
        queued = _queued_slurm_jobs(campaign, listed)
        arrays = array_tasks(campaign.name, paths, listed) if slurm else {}
        fallbacks: Dict[int, Verdict] = {}
        for run in campaign.runs:
            found = _Found(queued.get(run.run_id, {}), arrays.get(run.run_id, {}))
            fallbacks.update(_recover_run(campaign, store, paths.run(run.run_id), found, out))
        _settle(campaign, store, fallbacks, out, echo)
        note_restarts(campaign, store, store.attempts())
        store.set_meta("recovered", {"time": time.time(), "moved_aside": out.moved_aside})
        out.attempts = [a.as_dict() for a in store.attempts()]
    return out


@dataclass
class _Found:
    """What the scheduler and the arrays folder say about one run's jobs."""

    queued: Dict[str, str]  # job id -> token, of jobs squeue lists
    tasks: Dict[str, ArrayTask]  # "<array>_<task>" -> the array task that ran the run


def _recover_run(
    campaign, store, run: RunPaths, found: _Found, out: Recovered
) -> Dict[int, Verdict]:
    """One attempt per job id that ran the run (an array task's as ``<array>_<task>``);
    returns, for Slurm attempts, the folder's verdict to fall back on when Slurm has no
    record (attempt id -> verdict)."""
    fallbacks: Dict[int, Verdict] = {}
    jobs = fold_own_ids(set(job_ids_in_folder(run)) | set(found.queued), found.tasks)
    jobs.sort(key=_job_key)
    for i, job in enumerate(jobs):
        task = found.tasks.get(job)
        in_folder = task.own_id if task and task.own_id else job  # slurm-<own id>.out
        state, values = folder_verdict(run, in_folder, i == len(jobs) - 1)
        if campaign.scheduler == "slurm":
            # the scheduler is asked first (_settle); the folder's verdict is the fallback
            ids = task.store_values() if task else {"job_id": job}
            token = str(ids.pop("token", None) or found.queued.get(job) or new_token())
            a = store.new_attempt(run.run_id, "slurm", S.RUNNING, token=token, **ids)
            fallbacks[a.id] = (state, values)
            continue
        _local_attempt(campaign, store, run.run_id, job, (state, values), out)
    return fallbacks


def _local_attempt(campaign, store, run_id: str, job: str, verdict: Verdict, out) -> None:
    """A local job's attempt: as the local executor recorded its end (the store's own columns,
    local/records.py), else as its run folder says."""
    recorded = read_end_record(campaign.dir, job)
    if recorded:  # what status said before the store was lost, in the same words
        state = recorded.pop("state")
        store.new_attempt(run_id, "local", state, token=new_token(), job_id=job, **recorded)
        return
    state, values = verdict[0], dict(verdict[1])
    if state is None:
        state = S.LOST
        out.unknown.append(f"{run_id}: could not establish how local job {job} ended")
    why = values.pop("reason", None) or f"it does not say how local job {job} ended"
    if state == S.CANCELLED:
        values["reason"] = why  # "cancelled while running ...": the cause, as status words it
    values["message"] = f"recovered from the run folder ({why})"
    store.new_attempt(run_id, "local", state, token=new_token(), job_id=job, **values)


def _squeue_lines(campaign: Campaign, store) -> List[SqueueLine]:
    """This user's jobs that Slurm lists, one line per array task: (job, state, working
    folder, own job id, name)."""
    from ddlbench.execute.slurm.commands import squeue_recover_args
    from ddlbench.execute.slurm.executor import SlurmExecutor

    ex = SlurmExecutor(campaign, store)
    res = ex.client.run(squeue_recover_args())
    if not res.ok:
        raise DDLBenchError(f"squeue failed: {res.message}; recover needs the Slurm controller")
    lines: List[SqueueLine] = []
    for line in res.stdout.splitlines():
        parts = line.split("|", 4)
        if len(parts) == 5:
            job, state, workdir, own, name = (p.strip() for p in parts)
            lines.append((job, state, workdir, own, name))
    return lines


def _queued_slurm_jobs(campaign: Campaign, listed: List[SqueueLine]) -> Dict[str, Dict[str, str]]:
    """run id -> {job id: token} of this campaign's single jobs that Slurm still lists.

    A job is this campaign's when its name is ``<campaign>.<run id>[~token]`` *and* its working
    folder is that run's folder (another campaign of the same name elsewhere is not). Array
    tasks are mapped by recover_arrays.py."""
    runs = {f"{campaign.name}.{r.run_id}": r for r in campaign.runs}
    found: Dict[str, Dict[str, str]] = {}
    for job, _state, workdir, _own, name in listed:
        m = _TOKEN.search(name)
        run = runs.get(name[: m.start()] if m else name)
        if run is None or not _same_dir(workdir, run.run_dir):
            continue
        found.setdefault(run.run_id, {})[job] = m.group(1) if m else new_token()
    return found


def _same_dir(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _settle(campaign: Campaign, store, fallbacks: Dict[int, Verdict], out: Recovered, echo) -> None:
    """Slurm: one poll settles what the scheduler knows; the folder's verdict does the rest."""
    if campaign.scheduler != "slurm" or not store.live_attempts("slurm"):
        return
    from ddlbench.execute.infra_retry import refresh
    from ddlbench.execute.slurm.executor import SlurmExecutor

    refresh(SlurmExecutor(campaign, store, echo))  # a poll, with its resubmissions
    for a in store.live_attempts("slurm"):
        if a.missing_since is None:
            continue  # Slurm still lists it: followed as usual
        state, values = fallbacks.get(a.id, (None, {}))
        values = dict(values)
        if state is None:
            state = S.LOST
            out.unknown.append(
                f"{a.run_id}: Slurm has no record of job {a.job_id} and its folder does not "
                "say how it ended"
            )
        why = values.pop("reason", None) or "no trace of how it ended"
        values["message"] = f"recovered from the run folder, Slurm has no record ({why})"
        values.setdefault("end_time", time.time())
        store.update_attempt(a.id, if_live=True, state=state, **values)
