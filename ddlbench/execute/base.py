"""The executor interface and what submitting returns."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from ddlbench.campaign.manifest import Campaign, RunInfo
from ddlbench.execute.store import Attempt, CampaignStore

Echo = Callable[[str], None]


@dataclass
class SubmitSummary:
    """What one ``submit_campaign`` call did. ``failed`` counts runs the scheduler rejected."""

    campaign: str
    executor: str
    submitted: List[Tuple[str, str]] = field(default_factory=list)  # (run_id, job_id)
    adopted: List[Tuple[str, str]] = field(default_factory=list)  # found after an interruption
    skipped: List[str] = field(default_factory=list)  # already submitted earlier
    rejected: List[Tuple[str, str]] = field(default_factory=list)  # (run_id, scheduler message)
    array_jobs: List[str] = field(default_factory=list)
    stopped: Optional[str] = None  # why submission stopped early (campaign cancelled)
    notes: List[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return len(self.rejected)

    @property
    def exit_code(self) -> int:
        return 1 if self.rejected or self.stopped else 0

    def lines(self) -> List[str]:
        out = []
        parts = [f"{len(self.submitted)} submitted"]
        if self.adopted:
            parts.append(f"{len(self.adopted)} found already submitted by an interrupted submit")
        if self.skipped:
            parts.append(f"{len(self.skipped)} already submitted earlier (skipped)")
        if self.rejected:
            parts.append(f"{len(self.rejected)} rejected")
        where = "this machine (local executor)" if self.executor == "local" else "Slurm"
        arrays = f" as {len(self.array_jobs)} job arrays + singles" if self.array_jobs else ""
        out.append(f"campaign {self.campaign} on {where}{arrays}: " + ", ".join(parts))
        for run_id, msg in self.rejected:
            out.append(f"  rejected {run_id}: {msg}")
        if self.stopped:
            out.append(f"  stopped early: {self.stopped}")
        out.extend(f"  {n}" for n in self.notes)
        return out


@dataclass
class RefreshResult:
    changed: int = 0
    calls: int = 0
    notes: List[str] = field(default_factory=list)


class Executor:
    """Submits runs, follows them, cancels them. One instance per command invocation."""

    name = "base"

    def __init__(self, campaign: Campaign, store: CampaignStore, echo: Echo = print):
        self.campaign = campaign
        self.store = store
        self.echo = echo

    def check(self) -> None:
        """Fail early, with a clear message, if this executor cannot work here."""

    def reconcile(self) -> List[Tuple[str, str]]:
        """Settle attempts left SUBMITTING by an interrupted submit; return those adopted."""
        return []

    def submit(
        self,
        runs: List[RunInfo],
        intents: List[Attempt],
        *,
        serial: bool,
        array: bool,
        summary: SubmitSummary,
        advance: Callable[[int], None],
    ) -> None:
        raise NotImplementedError

    def refresh(self) -> RefreshResult:
        """Bring the store up to date with the scheduler."""
        return RefreshResult()

    def cancel(self, attempts: List[Attempt]) -> List[str]:
        """Cancel live attempts; return messages for the user."""
        raise NotImplementedError

    #: seconds between polls while waiting: (first, longest)
    poll_interval: Tuple[float, float] = (2.0, 30.0)


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
        self.fd = fd
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
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
