"""The environment overrides of the executors, read once into one object.

A command builds one :class:`ExecuteSettings` (:meth:`ExecuteSettings.from_env`) when it makes
its executor; nothing else in ``ddlbench/execute`` reads these variables, and a test passes
its own settings instead of changing the environment. See docs/executors.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Mapping, Optional


@dataclass(frozen=True)
class ExecuteSettings:
    #: seconds a job may be missing from squeue and every record of ended jobs before its
    #: run is LOST (``DDLBENCH_LOST_AFTER``)
    lost_after_s: float = 60.0
    #: ``yes``/``no`` forces whether ended jobs are looked up with sacct, over the profile's
    #: ``slurm.sacct`` (``DDLBENCH_SLURM_SACCT``; lower case, None when unset)
    sacct: Optional[str] = None
    #: the jobcomp/filetxt file to read, or ``none`` (``DDLBENCH_JOBCOMP``)
    jobcomp: Optional[str] = None
    #: how many times a run ended by the infrastructure is resubmitted, over the profile's
    #: ``slurm.infra_retries`` (``DDLBENCH_INFRA_RETRIES``, as written)
    infra_retries: Optional[str] = None
    #: retries of a Slurm command while the controller does not answer, and the first pause
    #: between them (``DDLBENCH_SLURM_RETRIES``, ``DDLBENCH_SLURM_BACKOFF``)
    slurm_retries: int = 4
    slurm_backoff: float = 1.0
    #: the local executor: seconds between SIGTERM and SIGKILL when a job is stopped
    #: (``DDLBENCH_LOCAL_KILL_WAIT``), and how long its runner and job supervisors wait for
    #: disk space to record a job's end (``DDLBENCH_DISKFULL_WAIT``)
    local_kill_wait_s: float = 5.0
    diskfull_wait_s: float = 600.0
    #: nodes new Slurm jobs must avoid, sbatch --exclude (``DDLBENCH_EXCLUDE_NODES``, set by
    #: ``ddlbench retry --exclude-bad-nodes``)
    exclude_nodes: Optional[str] = None

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> ExecuteSettings:
        env = os.environ if env is None else env
        sacct = env.get("DDLBENCH_SLURM_SACCT", "").strip().lower()
        return cls(
            lost_after_s=float(env.get("DDLBENCH_LOST_AFTER") or 60.0),
            sacct=sacct or None,
            jobcomp=env.get("DDLBENCH_JOBCOMP") or None,
            infra_retries=env.get("DDLBENCH_INFRA_RETRIES") or None,
            slurm_retries=int(env.get("DDLBENCH_SLURM_RETRIES") or 4),
            slurm_backoff=float(env.get("DDLBENCH_SLURM_BACKOFF") or 1.0),
            local_kill_wait_s=float(env.get("DDLBENCH_LOCAL_KILL_WAIT") or 5.0),
            diskfull_wait_s=float(env.get("DDLBENCH_DISKFULL_WAIT") or 600.0),
            exclude_nodes=env.get("DDLBENCH_EXCLUDE_NODES") or None,
        )


def exclude_args(nodes: Optional[str]) -> List[str]:
    """``["--exclude=<nodes>"]`` when nodes are to be avoided, else ``[]``."""
    return [f"--exclude={nodes}"] if nodes else []
