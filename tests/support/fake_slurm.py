"""A stand-in for :class:`SlurmClient` that answers from jobs held in memory.

It prints what Slurm's clients print, in the formats ddlbench asks for (commands.py: the squeue
format, the sacct fields), so that the executor's parsers and decisions run unchanged; only the
cluster is missing. Tests change a job's state (``finish``, ``requeue``, ``forget``...) between
polls. The real thing is tests/execute/test_slurm.py, on the project's local Slurm cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from ddlbench.execute.slurm.commands import SACCT_FIELDS, Result


def slurm_time(epoch: Optional[float]) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch)) if epoch else "Unknown"


@dataclass
class FakeJob:
    job_id: str  # the job's own id
    name: str
    comment: str
    state: str = "PENDING"
    reason: str = "None"
    exit: str = "0:0"
    array_job_id: Optional[str] = None
    task: Optional[int] = None
    submit: float = 0.0
    start: Optional[float] = None
    end: Optional[float] = None
    nodes: str = ""
    in_squeue: bool = True  # the controller still lists it (MinJobAge not passed)
    in_sacct: bool = True  # slurmdbd has its record

    @property
    def key(self) -> str:
        return f"{self.array_job_id}_{self.task}" if self.array_job_id else self.job_id

    def squeue_line(self) -> str:
        arr, task = (
            (self.array_job_id, str(self.task)) if self.array_job_id else (self.job_id, "N/A")
        )
        cells = [self.key, self.job_id, arr, task, self.state, self.reason, self.nodes]
        cells += [slurm_time(self.submit), slurm_time(self.start), slurm_time(self.end)]
        return "|".join(cells + [self.comment, self.name])

    def sacct_line(self) -> str:
        row = {
            "JobID": self.key,
            "JobIDRaw": self.job_id,
            "State": self.state,
            "ExitCode": self.exit,
            "Submit": slurm_time(self.submit),
            "Start": slurm_time(self.start),
            "End": slurm_time(self.end),
            "NodeList": self.nodes or "None assigned",
            "JobName": self.name,
        }
        return "|".join(row[f] for f in SACCT_FIELDS)


class FakeSlurmClient:
    """``run(args)`` as :meth:`SlurmClient.run`; every call is counted and logged."""

    def __init__(self, *, accounting: bool = True, first_id: int = 100):
        self.jobs: Dict[str, FakeJob] = {}
        self.accounting = accounting  # whether sacct answers at all
        self.next_id = first_id
        self.calls = 0
        self.log: List[List[str]] = []
        self.retries = 0
        self.backoff = 0.0

    # -- what tests do to the jobs --------------------------------------------------------------

    def job(self, key: str) -> FakeJob:
        return self.jobs[key]

    def start(self, key: str, when: Optional[float] = None) -> None:
        j = self.jobs[key]
        j.state, j.reason, j.start, j.nodes = "RUNNING", "None", when or time.time(), "n1"

    def finish(self, key: str, state: str, exit: str = "0:0", when: Optional[float] = None):
        j = self.jobs[key]
        j.state, j.exit, j.end = state, exit, when or time.time()

    def requeue(self, key: str) -> None:
        """Slurm requeued the job (same id): pending again, until it starts over."""
        j = self.jobs[key]
        j.state, j.reason, j.start, j.end = "PENDING", "BeginTime", None, None

    # -- SlurmClient's interface ---------------------------------------------------------------

    def which(self, prog: str) -> Optional[str]:
        return f"/fake/bin/{prog}"

    def run(self, args: Sequence[str], **_kw) -> Result:
        args = list(args)
        self.calls += 1
        self.log.append(args)
        answer = getattr(self, "_" + args[0])
        return answer(args)

    def _ok(self, args: List[str], out: str) -> Result:
        return Result(args, 0, out, "")

    def _sbatch(self, args: List[str]) -> Result:
        opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        job_id = str(self.next_id)
        tasks = opts.get("array")
        if tasks is None:
            self.jobs[job_id] = FakeJob(
                job_id, opts["job-name"], opts["comment"], submit=time.time()
            )
            self.next_id += 1
            return self._ok(args, job_id + "\n")
        last = int(tasks.split("%")[0].split("-")[1])
        for task in range(last + 1):
            own = str(self.next_id + task)
            job = FakeJob(own, opts["job-name"], opts["comment"], array_job_id=job_id, task=task)
            self.jobs[job.key] = job
        self.next_id += last + 1
        return self._ok(args, job_id + "\n")

    def _squeue(self, args: List[str]) -> Result:
        wanted = next(
            (a.split("=", 1)[1].split(",") for a in args if a.startswith("--jobs=")), None
        )
        listed = [j for j in self.jobs.values() if j.in_squeue]
        if wanted is not None:
            listed = [j for j in listed if (j.array_job_id or j.job_id) in wanted]
        return self._ok(args, "".join(j.squeue_line() + "\n" for j in listed))

    def _sacct(self, args: List[str]) -> Result:
        if not self.accounting:
            return Result(args, 1, "", "sacct: error: Slurm accounting storage is disabled")
        wanted = next(a.split("=", 1)[1].split(",") for a in args if a.startswith("--jobs="))
        found = [j for j in self.jobs.values() if j.in_sacct]
        found = [j for j in found if (j.array_job_id or j.job_id) in wanted]
        return self._ok(args, "".join(j.sacct_line() + "\n" for j in found))

    def _sinfo(self, args: List[str]) -> Result:
        """Every node the fake cluster knows is up again (a node that failed came back before
        the poll, as with ``ReturnToService=2``)."""
        return self._ok(args, "")

    def _scontrol(self, args: List[str]) -> Result:
        if args[1:] == ["show", "config"]:
            storage = (
                "accounting_storage/slurmdbd" if self.accounting else "accounting_storage/none"
            )
            return self._ok(
                args, f"AccountingStorageType   = {storage}\nJobCompType = jobcomp/none\n"
            )
        return self._ok(args, "")

    def _scancel(self, args: List[str]) -> Result:
        for key in args[1:]:
            if key in self.jobs:
                self.finish(key, "CANCELLED by 0", "0:15")
        return self._ok(args, "")
