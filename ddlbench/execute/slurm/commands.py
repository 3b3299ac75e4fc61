"""Slurm's client commands: the command lines ddlbench gives Slurm and reading what they print.

Every call goes through :class:`~ddlbench.execute.slurm.client.SlurmClient` (imported from
here too). Every command line ddlbench gives Slurm is built here (``*_args``), and the parsers
are plain functions over text so that recorded outputs (tests/fixtures/slurm/) exercise them.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional

from ddlbench.campaign import states as S
from ddlbench.execute.slurm.client import Result, SlurmClient, no_sbatch_error  # noqa: F401
from ddlbench.execute.slurm.messages import (  # noqa: F401 - also imported from here
    is_client_trouble,
    is_no_accounting,
    is_transient,
)

# -- records ----------------------------------------------------------------------------


@dataclass
class JobRecord:
    """What one source says about one job (or one task of a job array)."""

    key: str  # "123", or "123_4" for an array task: how ddlbench names the job
    slurm_state: str
    state: str
    own_id: Optional[str] = None  # the task's own job id (= SLURM_JOB_ID)
    array_job_id: Optional[str] = None
    array_task_id: Optional[int] = None
    reason: Optional[str] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    nodelist: Optional[str] = None
    submit_time: Optional[float] = None
    start_time: Optional[float] = None
    end_time: Optional[float] = None
    comment: Optional[str] = None
    name: Optional[str] = None
    source: str = ""


def parse_time(text: Optional[str]) -> Optional[float]:
    """Slurm's ``2024-05-01T12:00:00`` (local time) to epoch seconds; None for Unknown/N/A."""
    if not text:
        return None
    text = text.strip()
    if not re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$", text):
        return None
    return float(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))


def parse_utc_epoch(value: object) -> Optional[float]:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def _none(text: Optional[str]) -> Optional[str]:
    if text is None:
        return None
    text = text.strip()
    return None if text in ("", "(null)", "None", "N/A", "Unknown", "None assigned") else text


def parse_exit(text: Optional[str]) -> tuple[Optional[int], Optional[int]]:
    """``3:0`` (exit code:signal) to ``(3, 0)``."""
    if not text:
        return None, None
    m = re.match(r"^\s*(\d+):(\d+)\s*$", text)
    if not m:
        return None, None
    return int(m.group(1)), int(m.group(2))


def expand_task_ids(text: str) -> List[int]:
    """Array task expressions: ``0-4``, ``[1-3,7]``, ``2-9%1``, ``1-9:2``."""
    text = text.strip().strip("[]").split("%", 1)[0]
    out: List[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        step = 1
        if ":" in part:
            part, st = part.split(":", 1)
            step = int(st)
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1, step))
        elif part.isdigit():
            out.append(int(part))
    return out


def _array_keys(job_field: str) -> tuple[Optional[str], List[Optional[int]]]:
    """``123_[1-3]`` -> ("123", [1, 2, 3]); ``123_4`` -> ("123", [4]); ``123`` -> (None, [None])."""
    m = re.match(r"^(\d+)_(.+)$", job_field.strip())
    if not m:
        return None, [None]
    ids = expand_task_ids(m.group(2))
    return m.group(1), (ids or [None])


# squeue -o format: fixed fields first; the user-controlled comment and name come last
SQUEUE_FORMAT = "%i|%A|%F|%K|%T|%r|%N|%V|%S|%e|%k|%j"


def squeue_args(job_ids: Optional[Iterable[str]] = None, *, me: bool = False) -> List[str]:
    args = ["squeue", "--noheader", "--array", "--states=all", f"--format={SQUEUE_FORMAT}"]
    if me or not job_ids:
        args.append("--me")
    else:
        args.append("--jobs=" + ",".join(sorted(set(job_ids), key=_num_key)))
    return args


#: ``ddlbench recover``'s squeue: job, state, working folder, own job id, name (last)
RECOVER_SQUEUE_FORMAT = "%i|%T|%Z|%A|%j"


def squeue_recover_args() -> List[str]:
    """This user's jobs, one line per array task, as :data:`RECOVER_SQUEUE_FORMAT`."""
    fmt = f"--format={RECOVER_SQUEUE_FORMAT}"
    return ["squeue", "--me", "--noheader", "--array", "--states=all", fmt]


#: a job's comment: ``ddlbench:<token>`` names the submission (as does ``~<token>`` at the
#: end of its name), so that an interrupted submit finds its jobs again
COMMENT_PREFIX = "ddlbench:"


def token_of(comment: Optional[str], name: Optional[str]) -> Optional[str]:
    """The submission token a job carries in its comment, else at the end of its name."""
    if comment and comment.startswith(COMMENT_PREFIX):
        return comment[len(COMMENT_PREFIX) :].strip() or None
    m = re.search(r"~([0-9a-f]{12})$", name or "")
    return m.group(1) if m else None


def sbatch_args(
    script: str,
    *,
    token: str,
    name: str,
    after: Optional[str] = None,
    array: Optional[str] = None,
) -> List[str]:
    """``sbatch --parsable`` of ``script``, named and commented with the submission's token;
    ``array``: the ``--array`` task range; ``after``: the job it waits for (afterany)."""
    args = ["sbatch", "--parsable"]
    if array is not None:
        args.append(f"--array={array}")
    args += [f"--comment={COMMENT_PREFIX}{token}", f"--job-name={name}"]
    if after:
        args.append(f"--dependency=afterany:{after}")
    return args + [script]


#: the Slurm variables sbatch is still given: which cluster and configuration to talk to, and
#: how dates are printed; none of them is a job option (docs/launching.md#the-submit-environment)
SBATCH_ENV_KEEP = frozenset({"SLURM_CONF", "SLURM_CLUSTERS", "SLURM_TIME_FORMAT"})


def sbatch_env(environ: Mapping[str, str]) -> Dict[str, str]:
    """The environment sbatch runs in: the caller's less every ``SLURM_*``, ``SBATCH_*`` and
    ``SRUN_*`` variable outside :data:`SBATCH_ENV_KEEP`.

    sbatch reads ``SBATCH_*`` as options that override the script's ``#SBATCH`` lines, and hands
    its whole environment to the job: from inside an ``salloc --gpus-per-node=1``, the job would
    inherit ``SLURM_GPUS_PER_NODE`` and every srun of it ask for one GPU per node."""
    return {
        k: v
        for k, v in environ.items()
        if k in SBATCH_ENV_KEEP or not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))
    }


def sinfo_nodes_args(nodelist: Optional[str]) -> List[str]:
    """Each node of ``nodelist`` with its state (``n2 down*``), one a line."""
    return ["sinfo", "--noheader", "--Node", f"--nodes={nodelist or ''}", "--format=%N %T"]


def scancel_args(job_ids: Iterable[str]) -> List[str]:
    return ["scancel", *sorted(set(job_ids), key=_job_sort)]


def scontrol_config_args() -> List[str]:
    return ["scontrol", "show", "config"]


def scontrol_jobs_args() -> List[str]:
    """Every job the controller still knows, one per line."""
    return ["scontrol", "-o", "show", "job"]


def _job_sort(text: str):
    m = re.match(r"^(\d+)(?:_(\d+))?", text)
    return (int(m.group(1)), int(m.group(2) or -1)) if m else (0, 0)


def _num_key(text: str) -> tuple[int, str]:
    m = re.match(r"^(\d+)", text)
    return (int(m.group(1)) if m else 0, text)


def parse_squeue(text: str) -> List[JobRecord]:
    out: List[JobRecord] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 11)
        if len(parts) < 12:
            continue
        jid, own, arr, task, st, reason, nodes, sub, start, end, comment, name = parts
        jid = jid.strip()
        array_job_id, array_task_id = None, None
        if task.strip().isdigit():
            array_job_id, array_task_id = arr.strip(), int(task)
            key = f"{array_job_id}_{array_task_id}"
        else:
            key = jid
        state = S.from_slurm(st)
        out.append(
            JobRecord(
                key=key,
                slurm_state=st.strip(),
                state=state,
                own_id=own.strip() or None,
                array_job_id=array_job_id,
                array_task_id=array_task_id,
                reason=_none(reason),
                nodelist=_none(nodes),
                submit_time=parse_time(sub),
                start_time=parse_time(start) if state != S.PENDING else None,
                end_time=parse_time(end) if state in S.FINAL else None,
                comment=_none(comment),
                name=name,
                source="squeue",
            )
        )
    return out


#: the fields sacct prints, in this order (``--format``); the job's name, which a user
#: chooses, comes last so that a ``|`` in it cannot shift the others
SACCT_FIELDS = (
    "JobID",
    "JobIDRaw",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "NodeList",
    "JobName",
)
_SACCT_FORMAT = "--format=" + ",".join(SACCT_FIELDS)


def sacct_args(job_ids: Iterable[str]) -> List[str]:
    """One sacct call for ``job_ids``: the jobs' records and their steps' (batch, 0, 1...)."""
    ids = ",".join(sorted(set(job_ids), key=_num_key))
    return ["sacct", "--noheader", "--parsable2", _SACCT_FORMAT, f"--jobs={ids}"]


def sacct_since_args(start: str) -> List[str]:
    """One sacct call for this user's jobs (no steps) that started since ``start``."""
    since = f"--starttime={start}"
    return ["sacct", "--noheader", "--parsable2", "--allocations", since, _SACCT_FORMAT]


def sacct_row(line: str) -> Optional[Dict[str, str]]:
    """One line of sacct's ``--parsable2`` output as {field: text}; None if it is short."""
    parts = line.split("|", len(SACCT_FIELDS) - 1)
    if len(parts) < len(SACCT_FIELDS):
        return None
    return dict(zip(SACCT_FIELDS, parts))


@dataclass
class StepRecord:
    """How one step of a job ended, by sacct (``123.0``, ``123_4.1``, ``123.batch``)."""

    step: str  # sacct's JobID of the step
    state: str
    exit_code: Optional[int]
    signal: Optional[int]  # None for 0
    nodelist: Optional[str]

    @property
    def is_task_step(self) -> bool:
        """An srun step (``.0``, ``.1``...), not the batch script or the extern step."""
        return self.step.rsplit(".", 1)[-1].isdigit()


def parse_sacct_steps(text: str) -> Dict[str, List[StepRecord]]:
    """The step lines of sacct's output (without --allocations), by job key, in order."""
    out: Dict[str, List[StepRecord]] = {}
    for line in text.splitlines():
        row = sacct_row(line)
        if row is None or "." not in row["JobID"]:
            continue
        code, sig = parse_exit(row["ExitCode"])
        step, state = row["JobID"].strip(), row["State"].strip()
        rec = StepRecord(step, state, code, sig or None, _none(row["NodeList"]))
        out.setdefault(rec.step.split(".", 1)[0], []).append(rec)
    return out


def parse_sacct(text: str) -> List[JobRecord]:
    out: List[JobRecord] = []
    for line in text.splitlines():
        row = sacct_row(line)
        if row is None or "." in row["JobID"]:  # a step (batch, extern, 0...)
            continue
        jid, raw, st, name = row["JobID"], row["JobIDRaw"], row["State"], row["JobName"]
        arr, tasks = _array_keys(jid)
        code, sig = parse_exit(row["ExitCode"])
        state = S.from_slurm(st, finished=True)
        for task in tasks:
            key = f"{arr}_{task}" if arr is not None and task is not None else jid
            out.append(
                JobRecord(
                    key=key,
                    slurm_state=st,
                    state=state,
                    own_id=raw if len(tasks) == 1 else None,
                    array_job_id=arr,
                    array_task_id=task,
                    exit_code=code,
                    signal=sig,
                    nodelist=_none(row["NodeList"]),
                    submit_time=parse_time(row["Submit"]),
                    start_time=parse_time(row["Start"]),
                    end_time=parse_time(row["End"]),
                    name=name,
                    reason=st.strip() if st.strip().startswith("CANCELLED by") else None,
                    source="sacct",
                )
            )
    return out


_KV = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_kv_line(line: str) -> Dict[str, str]:
    """``Key=value Key2=value with spaces Key3=...`` (scontrol -o, jobcomp/filetxt)."""
    out: Dict[str, str] = {}
    matches = list(_KV.finditer(line))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out.setdefault(m.group(1), line[m.end() : end].strip())
    return out


def _kv_records(line: str, source: str) -> List[JobRecord]:
    kv = parse_kv_line(line)
    jid = kv.get("JobId")
    if not jid:
        return []
    st = kv.get("JobState", "")
    finished = source == "jobcomp"
    state = S.from_slurm(st, finished=finished)
    code, sig = parse_exit(kv.get("ExitCode"))
    arr = _none(kv.get("ArrayJobId"))
    task_text = _none(kv.get("ArrayTaskId"))
    tasks: List[Optional[int]] = [None]
    if arr and task_text:
        tasks = list(expand_task_ids(task_text)) or [None]
    out = []
    for task in tasks:
        key = f"{arr}_{task}" if arr and task is not None else jid
        out.append(
            JobRecord(
                key=key,
                slurm_state=st,
                state=state,
                own_id=jid if len(tasks) == 1 else None,
                array_job_id=arr if task is not None else None,
                array_task_id=task,
                reason=_none(kv.get("Reason")),
                exit_code=code,
                signal=sig,
                nodelist=_none(kv.get("NodeList")),
                submit_time=parse_time(kv.get("SubmitTime")),
                start_time=parse_time(kv.get("StartTime")),
                end_time=parse_time(kv.get("EndTime")) if state in S.FINAL else None,
                comment=_none(kv.get("Comment")),
                name=kv.get("JobName") or kv.get("Name"),
                source=source,
            )
        )
    return out


def parse_scontrol_jobs(text: str) -> List[JobRecord]:
    """``scontrol -o show job`` (one job per line)."""
    out: List[JobRecord] = []
    for line in text.splitlines():
        if line.strip():
            out.extend(_kv_records(line, "scontrol"))
    return out


def parse_jobcomp(text: str) -> List[JobRecord]:
    """The ``jobcomp/filetxt`` log: one line per ended job, oldest first."""
    out: List[JobRecord] = []
    for line in text.splitlines():
        if line.startswith("JobId="):
            out.extend(_kv_records(line, "jobcomp"))
    return out


def parse_config(text: str) -> Dict[str, str]:
    """``scontrol show config``: ``Key = value`` lines."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s*=\s?(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def parse_sbatch_parsable(text: str) -> Optional[str]:
    """``sbatch --parsable`` prints ``jobid`` or ``jobid;cluster``."""
    for line in text.splitlines():
        m = re.match(r"^\s*(\d+)(?:;\S+)?\s*$", line)
        if m:
            return m.group(1)
    return None


def utc_to_epoch(text: str) -> Optional[float]:
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None
