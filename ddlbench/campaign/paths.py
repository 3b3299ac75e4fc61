"""Every file of a campaign folder, named once (as submitit's ``JobPaths`` does for a job).

```
results/<campaign>/
  campaign.json      CampaignPaths.manifest
  spec.yaml          CampaignPaths.spec
  cluster.yaml       CampaignPaths.cluster
  pkg/               CampaignPaths.pkg          frozen workload code used by the jobs
  jobs/<run>.sh      CampaignPaths.job_script(run_id)
  runs/<run>/        CampaignPaths.run(run_id) -> RunPaths
    logs/attempt-<k>/  RunPaths.attempt(k)      rank logs of the k-th start of the job
  state.sqlite       CampaignPaths.store (+ -wal, -shm)
  data/              CampaignPaths.data         collected tables
  report/            CampaignPaths.report       the default report folder
  .ddlbench/         CampaignPaths.work         locks, shims, runner log, local jobs, arrays
    jobs/<job-id>/   CampaignPaths.local_job_dir(job_id)   a local-executor job's files
    arrays/<token>.sh  CampaignPaths.array_script(token)   a job array's script (submit --array)
    arrays/<token>-<array>_<task>-<job>.out                 CampaignPaths.array_output(token)
    dry-run          CampaignPaths.dry_run_mark    written by ``submit --dry-run``
```

No other module spells these names; a layering test checks it. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Union

MANIFEST = "campaign.json"
SPEC = "spec.yaml"
CLUSTER = "cluster.yaml"
PKG_DIR = "pkg"
JOBS_DIR = "jobs"
RUNS_DIR = "runs"
STORE = "state.sqlite"
STORE_SIDE_FILES = ("state.sqlite-wal", "state.sqlite-shm")
DATA_DIR = "data"
#: written last by ``collect``: data with it is whole
COLLECT_INFO = "collect.json"
REPORT_DIR = "report"
#: the report's formats, each written as ``report.<format>``
REPORT_FORMATS = ("html", "md")
#: in the report folder: the language-model comparisons as a table (when there are any)
LM_COMPARISONS_CSV = "lm_comparisons.csv"
WORK_DIR = ".ddlbench"
LOCAL_JOBS_DIR = "jobs"  # under WORK_DIR: one folder per local-executor job
ARRAYS_DIR = "arrays"  # under WORK_DIR: job array scripts and their own output files
SUBMIT_LOCK = "submit.lock"  # under WORK_DIR: held while runs of the campaign are submitted
RUNNER_LOCK = "runner.lock"  # under WORK_DIR: held by the local executor's runner
SHIMS_DIR = "bin"  # under WORK_DIR: the local executor's srun/scontrol shims
DRY_RUN_MARK = "dry-run"  # under WORK_DIR: rendered by ``submit --dry-run``
#: a job array's own output file: array job id, task id and the task's own job id, which
#: ``ddlbench recover`` reads back (%j is what the task's ``slurm-%j.out`` is named after)
_ARRAY_OUTPUT = re.compile(r"^([0-9a-f]+)-(\d+)_(\d+)(?:-(\d+))?\.out$")

RUN_CONFIG = "run.json"
LOGS_DIR = "logs"
PROVENANCE_DIR = "provenance"
EXIT_CODE = "exit_code"
RANK_LOG_GLOB = "rank-*.jsonl"
#: the --output/--error patterns of a job script (Slurm puts the job id in for %j)
SLURM_OUTPUT_PATTERN = "slurm-%j.out"
SLURM_ERROR_PATTERN = "slurm-%j.err"
ATTEMPT_PREFIX = "attempt-"
ATTEMPT_JOB = "job.txt"
#: per-node GPU telemetry logs (``telemetry/<node>.jsonl``) and pre-flight reports
#: (``provenance/preflight/<node>.json``); docs/telemetry.md
TELEMETRY_DIR = "telemetry"
PREFLIGHT_DIR = "preflight"
#: each node's facts (NCCL, GPU links, network, CPU/NUMA), written by the workload
NODE_FACTS_GLOB = "node-*.json"


class ArrayOutput(NamedTuple):
    """What the name of a job array task's own output file says."""

    token: str
    array_id: str
    task: int
    own_id: Optional[str]  # the task's own job id (None in folders of earlier versions)


@dataclass(frozen=True)
class RunPaths:
    """The files of one run folder (``runs/<run-id>/``)."""

    dir: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def config(self) -> Path:
        """``run.json``: the run's configuration, written by the job script."""
        return self.dir / RUN_CONFIG

    @property
    def logs(self) -> Path:
        return self.dir / LOGS_DIR

    def attempt(self, k: int) -> Path:
        """``logs/attempt-<k>/``: the rank logs of the k-th start of the job script."""
        return self.logs / f"{ATTEMPT_PREFIX}{int(k)}"

    def attempts(self) -> List[int]:
        """The attempt numbers that have a folder under ``logs/``, ascending."""
        if not self.logs.is_dir():
            return []
        found = []
        for d in self.logs.iterdir():
            k = d.name[len(ATTEMPT_PREFIX) :]
            if d.is_dir() and d.name.startswith(ATTEMPT_PREFIX) and k.isdigit():
                found.append(int(k))
        return sorted(found)

    def attempt_job(self, k: int) -> Dict[str, str]:
        """``logs/attempt-<k>/job.txt``: job id, Slurm restart count and start time."""
        try:
            text = (self.attempt(k) / ATTEMPT_JOB).read_text(errors="replace")
        except OSError:
            return {}
        return dict(w.split("=", 1) for w in text.split() if "=" in w)

    def log_dir(self) -> Path:
        """Where the newest attempt's rank logs are: ``logs/attempt-<k>/`` with the highest
        ``k`` that holds a rank log, else ``logs/`` itself (run folders of earlier versions)."""
        for k in reversed(self.attempts()):
            if any(self.attempt(k).glob(RANK_LOG_GLOB)):
                return self.attempt(k)
        return self.logs

    def rank_log(self, rank: int) -> Path:
        return self.log_dir() / f"rank-{int(rank)}.jsonl"

    @staticmethod
    def rank_logs_in(folder: Path) -> List[Path]:
        """The rank logs directly in ``folder`` (one start's logs), sorted."""
        return sorted(folder.glob(RANK_LOG_GLOB))

    def rank_logs(self) -> Iterator[Path]:
        """The newest attempt's rank logs (any depth below its folder), sorted."""
        folder = self.log_dir()
        if not folder.is_dir():
            return
        for p in sorted(folder.rglob(RANK_LOG_GLOB)):
            if folder != self.logs or not p.relative_to(folder).parts[0].startswith(ATTEMPT_PREFIX):
                yield p

    def all_rank_logs(self) -> Iterator[Path]:
        """Every rank log of every attempt, sorted: nothing is ever deleted."""
        if self.logs.is_dir():
            yield from sorted(self.logs.rglob(RANK_LOG_GLOB))

    def has_output(self) -> bool:
        """Whether a job has written anything here (a rank log or scheduler output)."""
        return any(self.all_rank_logs()) or any(self.scheduler_outputs())

    @property
    def provenance(self) -> Path:
        return self.dir / PROVENANCE_DIR

    @property
    def exit_code(self) -> Path:
        return self.dir / EXIT_CODE

    @property
    def telemetry(self) -> Path:
        return self.dir / TELEMETRY_DIR

    def telemetry_logs(self) -> Iterator[Path]:
        if self.telemetry.is_dir():
            yield from sorted(self.telemetry.glob("*.jsonl"))

    @property
    def preflight(self) -> Path:
        return self.provenance / PREFLIGHT_DIR

    def node_facts(self) -> Iterator[Path]:
        """``provenance/node-<host>.json``: one per node of the run's last start."""
        if self.provenance.is_dir():
            yield from sorted(self.provenance.glob(NODE_FACTS_GLOB))

    def preflight_reports(self) -> Iterator[Path]:
        if self.preflight.is_dir():
            yield from sorted(self.preflight.glob("*.json"))

    def slurm_output(self, job_id: Union[str, int], stream: str = "out") -> Path:
        """``slurm-<jobid>.out`` or ``.err``."""
        return self.dir / f"slurm-{job_id}.{stream}"

    def scheduler_outputs(self) -> Iterator[Path]:
        """Every ``*.out``/``*.err`` file of the run folder, sorted."""
        if self.dir.is_dir():
            for p in sorted(self.dir.iterdir()):
                if p.is_file() and p.suffix in (".out", ".err"):
                    yield p


@dataclass(frozen=True)
class CampaignPaths:
    """The files of one campaign folder (``results/<campaign>/``)."""

    root: Path

    @classmethod
    def of(cls, root: Union[str, Path]) -> CampaignPaths:
        return cls(Path(root))

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def spec(self) -> Path:
        return self.root / SPEC

    @property
    def cluster(self) -> Path:
        return self.root / CLUSTER

    @property
    def pkg(self) -> Path:
        return self.root / PKG_DIR

    @property
    def jobs(self) -> Path:
        return self.root / JOBS_DIR

    def job_script(self, run_id: str) -> Path:
        return self.jobs / f"{run_id}.sh"

    @property
    def runs(self) -> Path:
        return self.root / RUNS_DIR

    def run_dir(self, run_id: str) -> Path:
        return self.runs / run_id

    def run(self, run_id: str) -> RunPaths:
        return RunPaths(self.run_dir(run_id))

    def run_folders(self) -> Iterator[RunPaths]:
        """Every existing run folder, sorted by name."""
        if self.runs.is_dir():
            for d in sorted(self.runs.iterdir()):
                if d.is_dir():
                    yield RunPaths(d)

    @property
    def store(self) -> Path:
        return self.root / STORE

    @property
    def store_files(self) -> tuple:
        """The store and its WAL side files."""
        return (self.store,) + tuple(self.root / n for n in STORE_SIDE_FILES)

    @property
    def data(self) -> Path:
        return self.root / DATA_DIR

    @property
    def collect_info(self) -> Path:
        return self.data / COLLECT_INFO

    @property
    def report(self) -> Path:
        return self.root / REPORT_DIR

    def reports(self) -> List[Path]:
        """The report files in the campaign's own report folder (not a ``--report-dir``)."""
        return [p for p in (self.report / f"report.{f}" for f in REPORT_FORMATS) if p.is_file()]

    @property
    def work(self) -> Path:
        return self.root / WORK_DIR

    @property
    def submit_lock(self) -> Path:
        """``.ddlbench/submit.lock``: held while a submit, a retry or a resubmission submits."""
        return self.work / SUBMIT_LOCK

    @property
    def runner_lock(self) -> Path:
        """``.ddlbench/runner.lock``: held by the local executor's runner."""
        return self.work / RUNNER_LOCK

    @property
    def shims(self) -> Path:
        """``.ddlbench/bin/``: the local executor's ``srun`` and ``scontrol`` shims."""
        return self.work / SHIMS_DIR

    @property
    def dry_run_mark(self) -> Path:
        return self.work / DRY_RUN_MARK

    def local_job_dir(self, job_id: Union[str, int]) -> Path:
        """``.ddlbench/jobs/<job-id>/``: a local-executor job's pgid, status and shims' files."""
        return self.work / LOCAL_JOBS_DIR / str(job_id)

    @property
    def local_jobs(self) -> Path:
        """``.ddlbench/jobs/``: one folder per local-executor job."""
        return self.work / LOCAL_JOBS_DIR

    @property
    def arrays(self) -> Path:
        """``.ddlbench/arrays/``: the job arrays' scripts and own output files."""
        return self.work / ARRAYS_DIR

    def array_script(self, token: str) -> Path:
        return self.arrays / f"{token}.sh"

    def array_scripts(self) -> Iterator[Path]:
        if self.arrays.is_dir():
            yield from sorted(self.arrays.glob("*.sh"))

    def array_output(self, token: str) -> str:
        """The ``--output`` pattern of a job array's own output (``%A_%a-%j``)."""
        return str(self.arrays / f"{token}-%A_%a-%j.out")

    def array_outputs(self) -> Iterator[ArrayOutput]:
        """Every job array task that started, by the name of its own output file."""
        if not self.arrays.is_dir():
            return
        for p in sorted(self.arrays.iterdir()):
            m = _ARRAY_OUTPUT.match(p.name)
            if m:
                yield ArrayOutput(m.group(1), m.group(2), int(m.group(3)), m.group(4))

    def is_campaign(self) -> bool:
        return self.manifest.is_file()

    # relative names as they are written into the manifest
    @staticmethod
    def rel_job_script(run_id: str) -> str:
        return f"{JOBS_DIR}/{run_id}.sh"

    @staticmethod
    def rel_run_dir(run_id: str) -> str:
        return f"{RUNS_DIR}/{run_id}"
