"""Every file of a campaign folder, named once (as submitit's ``JobPaths`` does for a job).

```
results/<campaign>/
  campaign.json      CampaignPaths.manifest
  spec.yaml          CampaignPaths.spec
  cluster.yaml       CampaignPaths.cluster
  pkg/               CampaignPaths.pkg          frozen workload code used by the jobs
  jobs/<run>.sh      CampaignPaths.job_script(run_id)
  runs/<run>/        CampaignPaths.run(run_id) -> RunPaths
  state.sqlite       CampaignPaths.store (+ -wal, -shm)
  data/              CampaignPaths.data         collected tables
  report/            CampaignPaths.report       the default report folder
  .ddlbench/         CampaignPaths.work         locks, shims, runner log, local jobs, arrays
```

No other module spells these names; a layering test checks it. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Union

MANIFEST = "campaign.json"
SPEC = "spec.yaml"
CLUSTER = "cluster.yaml"
PKG_DIR = "pkg"
JOBS_DIR = "jobs"
RUNS_DIR = "runs"
STORE = "state.sqlite"
STORE_SIDE_FILES = ("state.sqlite-wal", "state.sqlite-shm")
DATA_DIR = "data"
REPORT_DIR = "report"
WORK_DIR = ".ddlbench"

RUN_CONFIG = "run.json"
LOGS_DIR = "logs"
PROVENANCE_DIR = "provenance"
EXIT_CODE = "exit_code"
RANK_LOG_GLOB = "rank-*.jsonl"
#: per-node GPU telemetry logs (``telemetry/<node>.jsonl``) and pre-flight reports
#: (``provenance/preflight/<node>.json``); docs/telemetry.md
TELEMETRY_DIR = "telemetry"
PREFLIGHT_DIR = "preflight"


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

    def rank_log(self, rank: int) -> Path:
        return self.logs / f"rank-{int(rank)}.jsonl"

    def rank_logs(self) -> Iterator[Path]:
        """Every rank log under ``logs/`` (any depth), sorted."""
        if self.logs.is_dir():
            yield from sorted(self.logs.rglob(RANK_LOG_GLOB))

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
    def report(self) -> Path:
        return self.root / REPORT_DIR

    @property
    def work(self) -> Path:
        return self.root / WORK_DIR

    def is_campaign(self) -> bool:
        return self.manifest.is_file()

    # relative names as they are written into the manifest
    @staticmethod
    def rel_job_script(run_id: str) -> str:
        return f"{JOBS_DIR}/{run_id}.sh"

    @staticmethod
    def rel_run_dir(run_id: str) -> str:
        return f"{RUNS_DIR}/{run_id}"
