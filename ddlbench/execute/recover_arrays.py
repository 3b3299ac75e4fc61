"""Job array tasks of a campaign, mapped back to its runs, for ``ddlbench recover``.

``submit --array`` submits one script per group of runs (``.ddlbench/arrays/<token>.sh``):
task *i* runs the *i*-th run's job script, and the store names it ``<array>_<i>``. A task's
own job id (``SLURM_JOB_ID``, which names the run's ``slurm-<job>.out``) differs from that
name. To rebuild the attempts, recover reads

* the array scripts: which run each task of each array runs (their ``case`` lines);
* the arrays' own output files, ``<token>-<array>_<task>-<job>.out``: every task that started,
  with its own job id;
* squeue (``--array``: one line per task, pending ones too, with their own job id once
  started), by the array's job name ``<campaign>.array~<token>``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from ddlbench.campaign.paths import CampaignPaths

_CASE = re.compile(r"^\s*(\d+)\) (.*) ;;\s*$")
_ARRAY_NAME = re.compile(r"\.array~([0-9a-f]{12})$")
_KEY = re.compile(r"^(\d+)_(\d+)$")


@dataclass
class ArrayTask:
    """One task of a job array and the run it ran."""

    run_id: str
    token: str
    array_id: str
    task: int
    own_id: Optional[str] = None  # the task's own job id, once known

    @property
    def key(self) -> str:
        return f"{self.array_id}_{self.task}"

    def store_values(self) -> Dict[str, object]:
        """The attempt columns a submit records for this task (executor._submit_array)."""
        return {
            "token": f"{self.token}-{self.task}",
            "batch_token": self.token,
            "job_id": self.key,
            "array_job_id": self.array_id,
            "array_task_id": self.task,
        }


def script_runs(paths: CampaignPaths) -> Dict[str, Dict[int, str]]:
    """token -> {task: run id}, from the ``case`` lines of every array script."""
    out: Dict[str, Dict[int, str]] = {}
    runs = paths.runs.resolve()
    for script in paths.array_scripts():
        try:
            lines = script.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            m = _CASE.match(line)
            words = shlex.split(m.group(2)) if m else []
            if len(words) < 2 or words[0] != "cd":
                continue
            run_dir = Path(words[1])
            if run_dir.parent.resolve() == runs:
                out.setdefault(script.stem, {})[int(m.group(1))] = run_dir.name  # type: ignore
    return out


#: one squeue line of recover's listing: (job, state, working dir, own job id, name)
SqueueLine = Tuple[str, str, str, str, str]


def array_tasks(
    campaign_name: str, paths: CampaignPaths, listed: Iterable[SqueueLine]
) -> Dict[str, Dict[str, ArrayTask]]:
    """run id -> {``<array>_<task>``: task} for every task of the campaign's arrays that
    started (own output file) or that Slurm still lists."""
    scripts = script_runs(paths)
    found: Dict[str, Dict[str, ArrayTask]] = {}

    def add(token: str, array_id: str, task: int, own: Optional[str]) -> None:
        run_id = scripts.get(token, {}).get(task)
        if run_id is None:
            return
        t = found.setdefault(run_id, {}).setdefault(
            f"{array_id}_{task}", ArrayTask(run_id, token, array_id, task)
        )
        t.own_id = t.own_id or own

    for o in paths.array_outputs():
        add(o.token, o.array_id, o.task, o.own_id)
    for job, state, _workdir, own, name in listed:
        m, k = _ARRAY_NAME.search(name), _KEY.match(job)
        if m and k and name.startswith(f"{campaign_name}.array~"):
            started = state.upper() != "PENDING" and own.isdigit()
            add(m.group(1), k.group(1), int(k.group(2)), own if started else None)
    return found


def fold_own_ids(jobs: Iterable[str], tasks: Dict[str, ArrayTask]) -> List[str]:
    """The job ids of a run folder with array tasks' own ids replaced by ``<array>_<task>``,
    and every task of ``tasks`` added."""
    own = {t.own_id: key for key, t in tasks.items() if t.own_id}
    return sorted({own.get(j, j) for j in jobs} | set(tasks))
