"""The executor interface (as submitit's executors): submit, refresh, cancel.

A backend (``execute/slurm``, ``execute/local``) implements :meth:`Executor.submit_runs`,
:meth:`Executor.refresh` and :meth:`Executor.cancel`. :meth:`Executor.submit` returns a
:class:`SubmitSummary`: one :class:`RunOutcome` per run it was given (submitted, adopted,
skipped or failed, with the job id or the reason), so that the counts a user reads always add
up to the runs. The printed summary is built in one place, :mod:`ddlbench.execute.summary`.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import os
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from ddlbench.campaign.manifest import Campaign, RunInfo
from ddlbench.errors import DDLBenchError
from ddlbench.execute.store import Attempt, CampaignStore

Echo = Callable[[str], None]

#: exit code of any command that gave up because the scheduler did not answer (EX_TEMPFAIL)
EXIT_UNREACHABLE = 75


class SchedulerUnreachable(DDLBenchError):
    """The scheduler (the Slurm controller) did not answer after the retries."""

    exit_code = EXIT_UNREACHABLE
    #: whether asking again cannot help (the client cannot work from here at all): ``wait``
    #: stops at once instead of polling through its patience
    lasting = False


#: the monotonic time by which a scheduler command must have given up (``wait --patience``):
#: its own timeout and its retries are cut short there, so an outage is noticed in time
_POLL_DEADLINE: contextvars.ContextVar[Optional[float]] = contextvars.ContextVar(
    "poll_deadline", default=None
)


@contextlib.contextmanager
def poll_deadline(deadline: Optional[float]) -> Iterator[None]:
    """Scheduler commands run inside give up (as unreachable) at ``deadline`` at the latest."""
    token = _POLL_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _POLL_DEADLINE.reset(token)


def seconds_to_deadline() -> Optional[float]:
    """Seconds left before the current :func:`poll_deadline`, or None without one."""
    deadline = _POLL_DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


#: what happened to one run in one submit: the scheduler accepted it now; an earlier,
#: interrupted submit had already put it there (found by its token); it had been submitted
#: before and was left alone; the scheduler refused it
SUBMITTED = "submitted"
ADOPTED = "adopted"
SKIPPED = "skipped"
FAILED = "failed"
OUTCOMES = (SUBMITTED, ADOPTED, SKIPPED, FAILED)


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    outcome: str  # one of OUTCOMES
    job_id: Optional[str] = None
    reason: str = ""


def _ignore(_n: int) -> None:
    pass


class OutcomeList(list):
    """A read-only list of outcomes: recording goes through ``SubmitSummary.add_*``, so that a
    backend that still appends to ``summary.submitted`` fails loudly instead of losing runs."""

    def _refuse(self, *_args, **_kw):
        raise TypeError("record outcomes with SubmitSummary.add_submitted/add_adopted/...")

    append = extend = insert = remove = pop = clear = __setitem__ = __delitem__ = _refuse
    __iadd__ = _refuse


@dataclass
class SubmitSummary:
    """What one submit did: one outcome per run (a later outcome of a run replaces an earlier
    one), the job arrays it made, and why it stopped early, if it did. ``total`` is the number
    of runs the command was about (None: only those with an outcome)."""

    campaign: str
    executor: str
    total: Optional[int] = None
    outcomes: Dict[str, RunOutcome] = field(default_factory=dict)
    array_jobs: List[str] = field(default_factory=list)
    stopped: Optional[str] = None  # why submission stopped early (campaign cancelled)
    notes: List[str] = field(default_factory=list)

    # -- recording (the backends) ------------------------------------------------------------

    def record(self, run_id: str, outcome: str, job_id: Optional[str] = None, reason: str = ""):
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown submit outcome {outcome!r}")
        self.outcomes.pop(run_id, None)  # keep the order of the latest outcome
        self.outcomes[run_id] = RunOutcome(run_id, outcome, job_id, reason)

    def add_submitted(self, run_id: str, job_id: str) -> None:
        self.record(run_id, SUBMITTED, job_id)

    def add_adopted(self, run_id: str, job_id: str) -> None:
        self.record(run_id, ADOPTED, job_id)

    def add_skipped(self, run_id: str) -> None:
        self.record(run_id, SKIPPED)

    def add_failed(self, run_id: str, reason: str) -> None:
        self.record(run_id, FAILED, reason=reason)

    def merge(self, other: SubmitSummary) -> None:
        """Take ``other``'s outcomes (they win), arrays, notes and stop reason."""
        for o in other.outcomes.values():
            self.record(o.run_id, o.outcome, o.job_id, o.reason)
        self.array_jobs.extend(other.array_jobs)
        self.notes.extend(other.notes)
        self.stopped = other.stopped or self.stopped

    # -- reading ----------------------------------------------------------------------------

    def of(self, outcome: str) -> List[RunOutcome]:
        return [o for o in self.outcomes.values() if o.outcome == outcome]

    def counts(self) -> Dict[str, int]:
        """Runs per outcome, and ``not_submitted``: runs of ``total`` without an outcome."""
        out = {k: len(self.of(k)) for k in OUTCOMES}
        if self.total is not None:
            out["not_submitted"] = max(0, self.total - len(self.outcomes))
        return out

    @property
    def submitted(self) -> List[Tuple[str, str]]:
        """(run id, job id) of the runs submitted now."""
        return OutcomeList((o.run_id, o.job_id or "") for o in self.of(SUBMITTED))

    @property
    def adopted(self) -> List[Tuple[str, str]]:
        """(run id, job id) of the runs an interrupted submit had already submitted."""
        return OutcomeList((o.run_id, o.job_id or "") for o in self.of(ADOPTED))

    @property
    def skipped(self) -> List[str]:
        return OutcomeList(o.run_id for o in self.of(SKIPPED))

    @property
    def rejected(self) -> List[Tuple[str, str]]:
        """(run id, the scheduler's message) of the runs it refused."""
        return OutcomeList((o.run_id, o.reason) for o in self.of(FAILED))

    @property
    def failed(self) -> int:
        return len(self.of(FAILED))

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or self.stopped else 0


@dataclass
class RefreshResult:
    changed: int = 0
    calls: int = 0
    notes: List[str] = field(default_factory=list)


class Executor(ABC):
    """Submits runs, follows them, cancels them. One instance per command invocation."""

    name = "base"

    #: seconds between polls while waiting: (first, longest)
    poll_interval: Tuple[float, float] = (2.0, 30.0)

    def __init__(self, campaign: Campaign, store: CampaignStore, echo: Echo = print):
        self.campaign = campaign
        self.store = store
        self.echo = echo
        #: where a submission says that a scheduler call is slow to answer (None: nowhere)
        self.notice: Optional[Echo] = None

    def check(self) -> None:  # noqa: B027 - an optional hook: most backends need no check
        """Fail early, with a clear message, if this executor cannot work here."""

    def reconcile(self) -> List[Tuple[str, str]]:
        """Settle attempts left SUBMITTING by an interrupted submit; return those adopted."""
        return []

    def submit(
        self,
        runs: List[RunInfo],
        intents: Optional[List[Attempt]] = None,
        *,
        serial: bool = False,
        array: bool = False,
        advance: Callable[[int], None] = _ignore,
    ) -> SubmitSummary:
        """Submit ``runs`` (and settle ``intents``: attempts left SUBMITTING); one outcome
        per run."""
        summary = SubmitSummary(campaign=self.campaign.name, executor=self.name)
        try:
            self.submit_runs(
                list(runs),
                list(intents or []),
                serial=serial,
                array=array,
                summary=summary,
                advance=advance,
            )
        except SchedulerUnreachable as exc:
            exc.summary = summary  # what went out before the scheduler stopped answering
            raise
        return summary

    @abstractmethod
    def submit_runs(
        self,
        runs: List[RunInfo],
        intents: List[Attempt],
        *,
        serial: bool,
        array: bool,
        summary: SubmitSummary,
        advance: Callable[[int], None],
    ) -> None:
        """The backend's submission: record each run's outcome in ``summary``."""

    def refresh(self) -> RefreshResult:
        """Bring the store up to date with the scheduler."""
        return RefreshResult()

    def pending_reason(self) -> Optional[str]:
        """Why pending runs have not started, when the store cannot say it (it is not
        written then: a full disk); None when the store's reasons hold."""
        return None

    # -- what the resubmission policy needs (execute/infra_retry.py) -------------------------

    @property
    def scheduler_calls(self) -> int:
        """Scheduler commands run so far by this executor."""
        return 0

    def infra_retry_limit(self) -> int:
        """How many times a run ended by the infrastructure is resubmitted (0: never)."""
        return 0

    def last_live_job(self) -> Optional[str]:
        """The campaign's newest live job: what a chained (serial) submission waits for."""
        return None

    def submit_attempt(
        self,
        run: RunInfo,
        intent: Attempt,
        *,
        after: Optional[str],
        serial: bool,
        summary: SubmitSummary,
    ) -> Optional[str]:
        """Submit the recorded ``intent`` (a SUBMITTING attempt) of ``run``, after job
        ``after`` if given; the job id, or None when the scheduler refused it."""
        raise NotImplementedError(f"the {self.name} executor does not resubmit single runs")

    @abstractmethod
    def cancel(self, attempts: List[Attempt]) -> List[str]:
        """Cancel live attempts; return messages for the user."""


class FileLock:
    """An advisory ``flock`` held while a ``with`` block runs (released if the process dies)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fd: Optional[int] = None

    def acquire(self, blocking: bool = False) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError:
            os.close(fd)
            return False
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError as exc:  # a bare fd's error names no file: name the lock (a full disk)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def holder(self) -> Optional[int]:
        try:
            text = self.path.read_text().strip()
            return int(text) if text else None
        except (OSError, ValueError):
            return None

    def is_held(self) -> bool:
        """Whether another process holds the lock right now."""
        if self.fd is not None:
            return True
        if not self.path.exists():
            return False
        fd = os.open(str(self.path), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)
        return False

    def __enter__(self) -> FileLock:
        self.acquire(blocking=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
