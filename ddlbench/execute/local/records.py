"""The local executor's own record of how each job ended: ``.ddlbench/jobs/<job>/end.json``.

Whoever records a local job's end in the store (its supervisor, or the runner for a job whose
supervisor died) also writes the attempt's columns here, so that ``ddlbench recover`` can
rebuild a lost store with exactly what ``status`` said before (state, exit code, signal,
cause, whether it had started, whether the user cancelled it), instead of guessing from the
run folder. A full disk only costs this copy: the store is what counts.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Dict, Optional

from ddlbench.campaign.paths import CampaignPaths
from ddlbench.diskfull import is_disk_full

END_RECORD = "end.json"

#: the attempt columns kept (what status and the report read of an ended attempt)
END_FIELDS = (
    "state",
    "exit_code",
    "signal",
    "reason",
    "message",
    "cause",
    "cause_source",
    "failed_task",
    "failed_signal",
    "nodelist",
    "start_time",
    "end_time",
    "submit_time",
    "cancel_requested",
    "slurm_state",
)


def end_record_path(campaign_dir: Path, job_id: str) -> Path:
    return CampaignPaths.of(campaign_dir).local_job_dir(job_id) / END_RECORD


def write_end_record(campaign_dir: Path, attempt: Any) -> None:
    """Write ``attempt``'s end (an ended local attempt of the store) next to its job."""
    if attempt is None or not attempt.job_id:
        return
    path = end_record_path(campaign_dir, attempt.job_id)
    values = {k: getattr(attempt, k, None) for k in END_FIELDS}
    tmp = path.with_name(f".{END_RECORD}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(values, sort_keys=True))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if not is_disk_full(exc):
            raise


def read_end_record(campaign_dir: Path, job_id: str) -> Optional[Dict[str, Any]]:
    """The recorded end of local job ``job_id``, or None (none written, or unreadable)."""
    try:
        data = json.loads(end_record_path(campaign_dir, job_id).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("state"), str):
        return None
    return {k: data.get(k) for k in END_FIELDS if data.get(k) is not None}
