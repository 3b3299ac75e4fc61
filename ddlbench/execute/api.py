"""What the CLI calls: submit, refresh/status, cancel, retry and wait on a campaign folder."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ddlbench.campaign import states as S
from ddlbench.campaign.causes import end_cause, task_cause
from ddlbench.campaign.manifest import Campaign, RunInfo, load_campaign
from ddlbench.errors import DDLBenchError, InputError
from ddlbench.execute.base import (
    EXIT_UNREACHABLE,
    Echo,
    Executor,
    FileLock,
    RefreshResult,
    SchedulerUnreachable,
    SubmitSummary,
    poll_deadline,
)
from ddlbench.execute.infra_retry import refresh as poll_once
from ddlbench.execute.restarts import note_restarts
from ddlbench.execute.store import Attempt, CampaignStore
from ddlbench.execute.summary import summary_lines


def make_executor(campaign: Campaign, store: CampaignStore, echo: Echo = print) -> Executor:
    """The executor that the campaign's cluster profile names (``scheduler: slurm|local``)."""
    if campaign.scheduler == "local":
        from ddlbench.execute.local.executor import LocalExecutor

        return LocalExecutor(campaign, store, echo)
    if campaign.scheduler == "slurm":
        from ddlbench.execute.slurm.executor import SlurmExecutor

        return SlurmExecutor(campaign, store, echo)
    raise InputError(
        f"campaign {campaign.name}: unknown scheduler {campaign.scheduler!r} (slurm or local)"
    )


@contextlib.contextmanager
def open_campaign(
    campaign_dir: Path, echo: Echo = print
) -> Iterator[Tuple[Campaign, CampaignStore, Executor]]:
    campaign = load_campaign(campaign_dir)
    store = CampaignStore.open(campaign.dir)
    try:
        stamp = _manifest_stamp(campaign)
        if store.get_meta("runs_synced") != stamp:  # only when campaign.json changed
            store.sync_runs(campaign.runs)
            store.set_meta("runs_synced", stamp)
        yield campaign, store, make_executor(campaign, store, echo)
    finally:
        store.close()


def _manifest_stamp(campaign: Campaign) -> list:
    st = campaign.paths.manifest.stat()
    return [st.st_mtime_ns, st.st_size, len(campaign.runs)]


def submit_lock(campaign: Campaign) -> FileLock:
    return FileLock(campaign.paths.submit_lock)


def _hold_submit_lock(campaign: Campaign) -> FileLock:
    lock = submit_lock(campaign)
    if not lock.acquire():
        holder = lock.holder()
        raise DDLBenchError(
            f"another ddlbench command (pid {holder}) is submitting runs of campaign "
            f"{campaign.name} right now; wait for it to finish (see `ddlbench status "
            f"{campaign.name}`)"
        )
    return lock


class _Progress:
    """A rich progress bar on stderr when it is a terminal; nothing otherwise."""

    def __init__(self, total: int, label: str):
        self.bar = None
        self.task = None
        if total <= 1:
            return
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
        except ImportError:  # pragma: no cover
            return
        console = Console(stderr=True)
        if not console.is_terminal:
            return
        self.bar = Progress(
            TextColumn(label), BarColumn(), MofNCompleteColumn(), console=console, transient=True
        )
        self.bar.start()
        self.task = self.bar.add_task(label, total=total)

    def say(self, text: str) -> None:
        """One line on stderr (above the bar when it shows)."""
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def advance(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def make_run_dirs(runs: Iterable[RunInfo]) -> None:
    """Create the folders of runs about to be submitted: rendering leaves them to submission,
    and Slurm can only open a job's ``--output`` in a folder that exists."""
    for run in runs:
        run.run_dir.mkdir(parents=True, exist_ok=True)


def submit_campaign(
    campaign_dir: Path,
    *,
    serial: bool = False,
    array: bool = False,
    resume: bool = False,
    echo: Echo = print,
    progress: bool = True,
) -> SubmitSummary:
    """Submit every run of a rendered campaign that was never submitted.

    Safe to repeat: a run with an attempt is skipped, and attempts left SUBMITTING by an
    interrupted submit are first looked up at the scheduler (by the token in their comment and
    job name) and adopted, or submitted again under the same token if the scheduler never saw
    them. ``resume`` also resubmits runs whose only outcome was a rejection by sbatch.
    ``serial`` chains the runs (afterany) so only one runs at a time; ``array`` groups runs of
    identical shape into job arrays (Slurm only).
    """
    with open_campaign(campaign_dir, echo) as (campaign, store, ex):
        ex.check()
        summary = SubmitSummary(campaign.name, ex.name, total=len(campaign.runs))
        lock = _hold_submit_lock(campaign)
        try:
            store.del_meta("cancel_requested")
            for run_id, job_id in ex.reconcile():
                summary.add_adopted(run_id, job_id)
            latest = store.latest()
            intents = store.attempts(states=[S.SUBMITTING], scheduler=ex.name)
            todo = select_runs(campaign.runs, latest, summary, resume=resume)
            by_id = {r.run_id: r for r in campaign.runs}
            make_run_dirs(todo + [by_id[a.run_id] for a in intents if a.run_id in by_id])
            count = len(todo) + len(intents) if progress else 0
            bar = _Progress(count, f"submitting {campaign.name}")
            ex.notice = bar.say if progress else None
            try:
                summary.merge(
                    ex.submit(todo, intents, serial=serial, array=array, advance=bar.advance)
                )
            except SchedulerUnreachable as exc:  # stopped: say what went out, then why (75)
                if getattr(exc, "summary", None) is not None:
                    summary.merge(exc.summary)
                bar.close()
                for line in summary_lines(summary):
                    echo(line)
                raise
            finally:
                bar.close()
        finally:
            lock.release()
        if summary.skipped and not resume:
            summary.notes.append(
                "runs already submitted are never submitted again; "
                f"`ddlbench retry {campaign.name}` resubmits those that failed"
            )
        for line in summary_lines(summary):
            echo(line)
        return summary


def select_runs(
    runs: List[RunInfo], latest: Dict[str, Attempt], summary: SubmitSummary, *, resume: bool
) -> List[RunInfo]:
    """The runs to submit now; the others are recorded in ``summary`` as skipped.

    A run without an attempt is submitted (with ``resume``, also one whose only outcome was a
    rejection by the scheduler). A run left SUBMITTING is the executor's to settle, and a run
    that ``summary`` already holds (adopted by reconciliation) is not counted again.
    """
    todo = []
    for run in runs:
        a = latest.get(run.run_id)
        if a is None or (resume and a.state == S.SUBMIT_FAILED):
            todo.append(run)
        elif a.state != S.SUBMITTING and run.run_id not in summary.outcomes:
            summary.add_skipped(run.run_id)
    return todo


def refresh(campaign_dir: Path, echo: Echo = print) -> RefreshResult:
    """Poll the scheduler once and update the store (1-2 scheduler calls for Slurm)."""
    with open_campaign(campaign_dir, echo) as (_c, _s, ex):
        return poll_once(ex)


#: the facts of every attempt that ``status --json`` lists in a run's ``history``
HISTORY_FIELDS = (
    "number",
    "job_id",
    "state",
    "slurm_state",
    "exit_code",
    "signal",
    "cause",
    "cause_source",
    "failed_task",
    "failed_signal",
    "nodelist",
    "submit_time",
    "start_time",
    "end_time",
    "restarts",
    "depends_on",
    "message",
)


def _histories(store: CampaignStore) -> Dict[str, List[Dict]]:
    """run id -> every attempt of the run, oldest first, as :data:`HISTORY_FIELDS`."""
    out: Dict[str, List[Dict]] = {}
    for a in store.attempts():
        facts = {k: getattr(a, k) for k in HISTORY_FIELDS}
        facts["cause"] = task_cause(vars(a))
        out.setdefault(a.run_id, []).append(facts)
    return out


def _run_rows(campaign: Campaign, store: CampaignStore) -> List[Dict]:
    with store.snapshot():
        latest = store.latest()
        history = _histories(store)
    rows = []
    for run in campaign.runs:
        a = latest.get(run.run_id)
        row = {
            "run_id": run.run_id,
            "state": a.state if a else S.NOT_SUBMITTED,
            "final": bool(a and a.final),
            "attempts": len(history.get(run.run_id, [])),
            "job_id": a.job_id if a else None,
            "exit_code": a.exit_code if a else None,
            "signal": a.signal if a else None,
            "reason": end_cause(vars(a)) if a else None,
            "cause": task_cause(vars(a)) if a else None,
            "cause_source": a.cause_source if a else None,
            "message": a.message if a else None,
            "failed_task": a.failed_task if a else None,
            "failed_signal": a.failed_signal if a else None,
            "nodes": run.nodes,
            "nodelist": a.nodelist if a else None,
            "submit_time": a.submit_time if a else None,
            "start_time": a.start_time if a else None,
            "end_time": a.end_time if a else None,
            "scheduler": a.scheduler if a else None,
            "restarts": a.restarts if a else 0,
            "history": history.get(run.run_id, []),
        }
        rows.append(row)
    return rows


def campaign_status(campaign_dir: Path, *, poll: bool = True, echo: Echo = print) -> Dict:
    """Runs, their newest attempt's state and counts; polls the scheduler first if ``poll``."""
    with open_campaign(campaign_dir, echo) as (campaign, store, ex):
        live = store.live_attempts() if poll else []
        result = poll_once(ex) if poll else RefreshResult()
        note_restarts(campaign, store, live)  # Slurm requeues, from the attempt folders
        rows = _run_rows(campaign, store)
        waiting = [r for r in rows if r["state"] == S.PENDING and not r["reason"]]
        why = ex.pending_reason() if waiting else None
        for r in waiting:
            r["reason"] = why
        counts: Dict[str, int] = {}
        for r in rows:
            counts[r["state"]] = counts.get(r["state"], 0) + 1
        interrupted = counts.get(S.SUBMITTING, 0) and not submit_lock(campaign).is_held()
        notes = list(result.notes)
        if interrupted:
            notes.append(
                f"{counts[S.SUBMITTING]} run(s) were being submitted when a submit stopped; "
                f"`ddlbench submit --resume {campaign.name}` finishes the job"
            )
        if counts.get(S.NOT_SUBMITTED):
            notes.append(
                f"{counts[S.NOT_SUBMITTED]} run(s) not submitted; "
                f"`ddlbench submit --resume {campaign.name}` submits them"
            )
        return {
            "campaign": campaign.name,
            "path": str(campaign.dir),
            "scheduler": ex.name,
            "total": len(rows),
            "counts": counts,
            "final": all(r["final"] for r in rows),
            "succeeded": all(r["state"] == S.COMPLETED for r in rows),
            "runs": rows,
            "notes": notes,
            "scheduler_calls": result.calls,
            "time": time.time(),
        }


def cancel_campaign(
    campaign_dir: Path, *, run_ids: Optional[Iterable[str]] = None, echo: Echo = print
) -> List[str]:
    """Cancel live runs (all, or ``run_ids``); runs never submitted are marked CANCELLED too.

    Cancelling the whole campaign also stops a submit that is still going.
    """
    with open_campaign(campaign_dir, echo) as (campaign, store, ex):
        wanted = list(run_ids) if run_ids else None
        if wanted:
            for rid in wanted:
                campaign.run(rid)  # unknown ids are an input error
        else:
            before = store.get_meta("cancel_requested")
            store.set_meta("cancel_requested", time.time())
        selected = set(wanted or [r.run_id for r in campaign.runs])
        latest = store.latest()
        targets = [a for rid, a in latest.items() if rid in selected and a.state in S.LIVE]
        try:
            msgs = ex.cancel(targets) if targets else []
        except SchedulerUnreachable:  # not cancelled now: the flag as it was found
            if not wanted and before is None:
                store.del_meta("cancel_requested")
            elif not wanted:
                store.set_meta("cancel_requested", before)
            raise
        never = [r.run_id for r in campaign.runs if r.run_id in selected and r.run_id not in latest]
        now = time.time()
        with store.tx():
            for rid in never:
                store.new_attempt(
                    rid,
                    ex.name,
                    S.CANCELLED,
                    end_time=now,
                    reason="cancelled before it was submitted",
                )
        for m in msgs:
            echo(m)
        if targets and ex.name == "slurm":
            time.sleep(0.5)
            poll_once(ex)
        done = sorted({a.run_id for a in targets} | set(never))
        if not done:
            echo(f"campaign {campaign.name}: nothing to cancel (no run is pending or running)")
        else:
            echo(f"campaign {campaign.name}: cancelled {len(done)} run(s)")
        return done


def retry_campaign(
    campaign_dir: Path,
    *,
    run_ids: Optional[Iterable[str]] = None,
    states: Optional[Iterable[str]] = None,
    serial: bool = False,
    echo: Echo = print,
    progress: bool = True,
) -> SubmitSummary:
    """Submit new attempts for runs that ended without success (or the named ``run_ids``).

    Old attempts stay in the store; a run that is still pending or running is never retried.
    """
    wanted_states = set(states) if states else set(S.UNSUCCESSFUL)
    with open_campaign(campaign_dir, echo) as (campaign, store, ex):
        ex.check()
        summary = SubmitSummary(campaign=campaign.name, executor=ex.name)
        lock = _hold_submit_lock(campaign)
        try:
            store.del_meta("cancel_requested")
            poll_once(ex)
            latest = store.latest()
            todo = []
            if run_ids:
                for rid in run_ids:
                    run = campaign.run(rid)
                    a = latest.get(rid)
                    if a is not None and not a.final:
                        raise InputError(
                            f"run {rid} is {a.state}: only runs that ended can be retried "
                            f"(cancel it first: `ddlbench cancel {campaign.name} --run {rid}`)"
                        )
                    todo.append(run)
            else:
                todo = [
                    r
                    for r in campaign.runs
                    if r.run_id in latest and latest[r.run_id].state in wanted_states
                ]
            make_run_dirs(todo)
            summary.total = len(todo)
            bar = _Progress(len(todo) if progress else 0, f"retrying {campaign.name}")
            ex.notice = bar.say if progress else None
            try:
                summary.merge(ex.submit(todo, serial=serial, advance=bar.advance))
            finally:
                bar.close()
        finally:
            lock.release()
        if not todo:
            echo(f"campaign {campaign.name}: no run to retry")
            return summary
        for line in summary_lines(summary, verb="resubmitted"):
            echo(line)
        return summary


#: how long ``wait`` keeps polling a scheduler that does not answer (``--patience``)
DEFAULT_PATIENCE_S = 600.0


class _Outage:
    """The scheduler not answering: since when, and when waiting for it must stop."""

    def __init__(self, patience: float, echo: Echo) -> None:
        self.patience = patience
        self.echo = echo
        self.since: Optional[float] = None
        self.seen_at = 0.0

    def deadline(self, poll_start: float) -> float:
        """When the poll starting now must give up: the patience counts from the outage's
        first poll, so a poll whose commands hang cannot stretch it."""
        return (self.since if self.since is not None else poll_start) + self.patience

    def failed_poll(
        self,
        exc: Exception,
        name: str,
        started: float,
        timeout: Optional[float],
        poll_start: float,
    ) -> Optional[int]:
        """Note a poll that found the scheduler down; the exit code when waiting must stop.
        The outage began when the first failed poll began, not when it gave up."""
        now = self.seen_at = time.monotonic()
        if self.since is None:
            self.since = poll_start
            self.echo(f"scheduler unreachable; polling again for up to {self.patience:g} s ({exc})")
        if now - self.since >= self.patience:
            self.echo(
                f"scheduler unreachable for {now - self.since:.0f} s (--patience "
                f"{self.patience:g}); gave up waiting. The runs go on: `ddlbench wait "
                f"{name}` again once `sinfo` answers"
            )
            return EXIT_UNREACHABLE
        if timeout is not None and now - started >= timeout:
            self.echo(f"timed out after {timeout:g} s while the scheduler was unreachable")
            return 124
        return None

    def patience_left(self) -> float:
        """Seconds of patience left at the last failed poll."""
        return self.patience - (self.seen_at - (self.since or self.seen_at))

    def answered(self) -> None:
        if self.since is not None:
            self.echo(f"scheduler answers again after {time.monotonic() - self.since:.0f} s")
            self.since = None


def _state_changes(status: Dict, previous: Dict[str, str]) -> List[Tuple[str, str, str]]:
    """(run id, old state, new state) of the runs whose state changed since ``previous``,
    which is brought up to date."""
    changes = []
    for r in status["runs"]:
        old = previous.get(r["run_id"])
        if old != r["state"]:
            changes.append((r["run_id"], old or "", r["state"]))
            previous[r["run_id"]] = r["state"]
    return changes


def _stuck_runs(status: Dict, campaign: Campaign) -> List[Dict]:
    """Runs that cannot end by themselves: never submitted, or left SUBMITTING by an
    interrupted submit."""
    return [
        r
        for r in status["runs"]
        if r["state"] == S.NOT_SUBMITTED
        or (r["state"] == S.SUBMITTING and not submit_lock(campaign).is_held())
    ]


def _all_ended(status: Dict, stuck: List[Dict], campaign: Campaign, echo: Echo) -> int:
    """The exit code once no run is live: 0 when all succeeded, else 1 (hinting at stuck runs)."""
    if stuck:
        echo(
            f"{len(stuck)} run(s) were never submitted; "
            f"`ddlbench submit --resume {campaign.name}` submits them"
        )
    ok = not stuck and status["succeeded"]
    return 0 if ok else 1


def wait_campaign(
    campaign_dir: Path,
    *,
    timeout: Optional[float] = None,
    patience: float = DEFAULT_PATIENCE_S,
    echo: Echo = print,
    on_change: Optional[Callable[[Dict, List[Tuple[str, str, str]]], None]] = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Block until every run has ended. 0: all COMPLETED; 1: some did not; 124: timed out;
    75: the scheduler did not answer for ``patience`` seconds in a row.

    Polls with backoff (quickly after a change, then slower). Runs that cannot end by
    themselves (never submitted, or left SUBMITTING by an interrupted submit) count as
    unsuccessful, with a hint. A poll that finds the scheduler unreachable is repeated until
    it answers again or ``patience`` runs out (ReFrame's ``max_sacct_failures``, in seconds).
    """
    started = time.monotonic()
    campaign = load_campaign(campaign_dir)
    with open_campaign(campaign_dir, echo) as (_c, _s, ex):
        first, longest = ex.poll_interval
    interval = first
    previous: Dict[str, str] = {}
    outage = _Outage(patience, echo)
    while True:
        poll_start = time.monotonic()
        deadline = outage.deadline(poll_start)
        if timeout is not None:
            deadline = min(deadline, started + timeout)
        try:
            with poll_deadline(deadline):
                status = campaign_status(campaign.dir, echo=echo)
        except SchedulerUnreachable as exc:
            if exc.lasting:  # asking again cannot help (Slurm's client cannot work here)
                raise
            code = outage.failed_poll(exc, campaign.name, started, timeout, poll_start)
            if code is not None:
                return code
            interval = min(longest, interval * 1.5)  # back off, as between quiet polls
            sleep(max(0.05, min(interval, outage.patience_left())))
            continue
        outage.answered()
        changes = _state_changes(status, previous)
        if on_change is not None:
            on_change(status, changes)
        stuck = _stuck_runs(status, campaign)
        live = [r for r in status["runs"] if not r["final"] and r not in stuck]
        if not live:
            return _all_ended(status, stuck, campaign, echo)
        if timeout is not None and time.monotonic() - started >= timeout:
            echo(f"timed out after {timeout:g} s with {len(live)} run(s) not finished")
            return 124
        interval = first if changes else min(longest, interval * 1.5)
        if timeout is not None:
            interval = max(0.05, min(interval, timeout - (time.monotonic() - started)))
        sleep(interval)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


__all__ = [
    "Attempt",
    "SubmitSummary",
    "campaign_status",
    "cancel_campaign",
    "make_executor",
    "refresh",
    "retry_campaign",
    "submit_campaign",
    "wait_campaign",
]
