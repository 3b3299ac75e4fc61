"""Slurm's job-completion file (``JobCompType=jobcomp/filetxt``), read a little at a time.

Where ``sacct`` has no accounting storage to ask, the jobs that have left the controller are
found in this file. It only grows, so each poll reads what was appended since the last one:
the offset, the file's identity (path and inode: a rotated file is read again from the start)
and the records of the jobs still being watched are kept in the store's meta."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, Optional

from ddlbench.execute.slurm.commands import JobRecord, parse_jobcomp

META_KEY = "jobcomp_read"


def read_jobcomp(store: Any, path: Optional[Path], keys: Iterable[str]) -> Dict[str, JobRecord]:
    """Records for ``keys`` (job keys) from the file at ``path``; ``{}`` without one."""
    keys = set(keys)
    if path is None:
        return {}
    state = store.get_meta(META_KEY) or {}
    try:
        st = path.stat()
    except OSError:
        return {}
    offset = int(state.get("offset", 0))
    if state.get("path") != str(path) or st.st_size < offset or state.get("ino") != st.st_ino:
        offset = 0
    cache: Dict[str, dict] = state.get("records", {})
    live_keys = {a.job_id for a in store.live_attempts("slurm") if a.job_id} | keys
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    for rec in parse_jobcomp(data[:end].decode("utf-8", "replace")):
        if rec.key in live_keys:
            cache[rec.key] = rec.__dict__
    cache = {k: v for k, v in cache.items() if k in live_keys}
    store.set_meta(
        META_KEY, {"path": str(path), "ino": st.st_ino, "offset": offset + end, "records": cache}
    )
    return {k: JobRecord(**v) for k, v in cache.items() if k in keys}
