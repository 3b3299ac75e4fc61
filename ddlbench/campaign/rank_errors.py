"""A failed run's own words: the ``error`` records of its newest attempt's rank logs.

Read once, when an executor records that a job FAILED (as :mod:`ddlbench.campaign.hangs`
reads the ``hang`` records then), so ``status`` and ``wait`` show the rank's message from the
store without reading any log at poll time. The message chosen is the one the collector puts
in the runs table's ``error_message``: a rank that srun stopped because another failed
(``Terminated: ...``) says less than the one that failed, so it comes last; then rank order.

Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Collection, Dict, List, Optional, Tuple

from ddlbench.campaign.hangs import slurm_node
from ddlbench.campaign.paths import RANK_LOG_GLOB, RunPaths

#: where the source of a cause taken from a rank log's ``error`` record is recorded
CAUSE_SOURCE = "rank log"

#: the start of the message of a rank that srun (or the job's end) stopped
_STOPPED = "Terminated: "


def _error_of(data: bytes) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """``(meta, first error record)`` of one rank log's bytes."""
    meta, error = None, None
    for line in data.decode(errors="replace").splitlines():
        if '"meta"' not in line and '"error"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        if rec.get("type") == "meta" and meta is None:
            meta = rec
        elif rec.get("type") == "error" and error is None and rec.get("message"):
            error = rec
    return meta, error


def _logs_of(run_dir: Path, job_ids: Collection[str]) -> Optional[Path]:
    """The rank logs of the job ``job_ids`` names (its ``logs/attempt-<k>/job.txt`` says the
    job id), None when none of its attempt folders is that job's (it failed before making one:
    an earlier attempt's errors are not its own); without ``job_ids``, the newest logs."""
    files = RunPaths(Path(run_dir))
    if not job_ids:
        return files.log_dir()
    wanted = {str(j) for j in job_ids}
    recorded = {k: files.attempt_job(k).get("job_id") for k in files.attempts()}
    for k in sorted(recorded, reverse=True):
        if recorded[k] in wanted:
            return files.attempt(k)
    # no attempt folder says its job (run folders of earlier versions): the newest logs
    return None if any(recorded.values()) else files.log_dir()


def rank_errors(run_dir: Path, job_ids: Collection[str] = ()) -> List[Tuple[int, str, str]]:
    """``(rank, node, message)`` of every rank of the job ``job_ids`` names (else the newest
    attempt) that logged an error."""
    out: List[Tuple[int, str, str]] = []
    folder = _logs_of(run_dir, job_ids)
    for path in sorted(folder.glob(RANK_LOG_GLOB)) if folder is not None else ():
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b'"error"' not in data:  # most logs: found at memory speed, no line is parsed
            continue
        meta, error = _error_of(data)
        if error is None:
            continue
        meta = meta or {}
        rank = meta.get("rank")
        if not isinstance(rank, int):
            digits = path.stem.rpartition("-")[2]
            rank = int(digits) if digits.isdigit() else -1
        out.append((rank, str(slurm_node(meta) or "?"), str(error["message"])))
    out.sort(key=lambda e: (e[2].startswith(_STOPPED), e[0]))
    return out


def one_line(rank: int, node: str, message: str) -> str:
    """``rank 1 on n2: <the message's first line>`` (``[...]`` when it has more lines); the
    rank is not said twice when the message names it (``... on rank 1 (n2)``)."""
    lines = message.strip().splitlines() or [""]
    first = lines[0].rstrip(" :;")
    if len(lines) > 1:
        first += " [...]"
    if f"rank {rank}" in first:
        return first
    return f"rank {rank} on {node}: {first}"


def error_values(
    run_dir: Path, failure_signal: Any = None, job_ids: Collection[str] = ()
) -> Dict[str, Any]:
    """Store values for a FAILED job whose ranks logged an error: ``message`` (the chosen
    rank's whole message) and, unless a task died of a signal (then srun's words, the task
    and its signal, say more) or the only errors are ranks stopped by others, ``cause`` (its
    first line) with ``cause_source`` :data:`CAUSE_SOURCE`."""
    errors = rank_errors(run_dir, job_ids)
    if not errors:
        return {}
    rank, node, message = errors[0]
    values: Dict[str, Any] = {"message": f"rank {rank} on {node}: {message}"}
    if not failure_signal and not message.startswith(_STOPPED):
        values.update(cause=one_line(rank, node, message), cause_source=CAUSE_SOURCE)
    return values
