"""What guards the campaign store's file: a new store over runs that already ran, a damaged
file, and a full disk.

SQLite does not always say "database or disk is full" when the disk is full: creating the
``-shm`` index or growing the write-ahead log on a full tmpfs fails as ``disk I/O error``.
:func:`storage_error` tells the two apart by asking the file system how much space is left,
and names the folder and what to do in :class:`StoreDiskFull`.
"""

from __future__ import annotations

import functools
import sqlite3
import sys
import time
from pathlib import Path
from typing import Optional

from ddlbench.campaign.paths import CampaignPaths
from ddlbench.campaign.resolve import campaign_words
from ddlbench.diskfull import DiskFull, is_disk_full, looks_full
from ddlbench.errors import DDLBenchError, InputError


class StoreLostError(DDLBenchError):
    """The store is missing or empty while run folders hold output: a new store would forget
    what ran and submit it again, over its logs."""

    exit_code = 2


class StoreDamaged(InputError):
    """``state.sqlite`` is not a readable SQLite database (garbage, truncated)."""


class StoreDiskFull(DiskFull):
    """The campaign store could not be written: the disk that holds it is full. The
    transaction was rolled back; what the store held before is intact."""

    def __init__(self, path: Path, said: object):
        self.path = Path(path)
        self.folder = self.path.parent
        name = self.folder.name
        DDLBenchError.__init__(
            self,
            f"no space left on the disk that holds {self.folder} (writing the campaign store "
            f"{self.path.name}; SQLite said: {said}); nothing was written, and nothing "
            f"recorded before is lost. Free some space (`df -h {self.folder}`), then run the "
            f"same command again (`ddlbench submit --resume {name}` submits the runs that "
            "were not submitted)",
        )


def storage_error(path: Path, exc: sqlite3.Error) -> Optional[StoreDiskFull]:
    """The full-disk error that ``exc`` stands for, or None when it is something else.

    "database or disk is full" is always a full disk; "disk I/O error" is one when the
    folder of the store has (almost) no space left."""
    if isinstance(exc, StoreDiskFull):
        return exc
    said = str(exc)
    if is_disk_full(exc):
        return StoreDiskFull(path, said)
    if "disk i/o error" in said.lower() and looks_full(Path(path).parent):
        return StoreDiskFull(path, said)
    return None


def is_new_store(path: Path) -> bool:
    """Whether ``path`` is missing or empty: opening it would make a new store."""
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return True


def refuse_new_store_over_output(campaign_dir: Path) -> None:
    """Raise :class:`StoreLostError` when a run folder of ``campaign_dir`` holds output."""
    paths = CampaignPaths.of(campaign_dir)
    used = [r for r in paths.run_folders() if r.has_output()]
    if not used:
        return
    state = "is empty" if paths.store.exists() else "is missing"
    raise StoreLostError(
        f"{paths.store}: the campaign store {state}, but {len(used)} run folder(s) under "
        f"{paths.runs}/ already hold output (first: {used[0].dir.name}/); ddlbench will not "
        "start a new store over them, as it would submit those runs again. Rebuild the store "
        f"from the run folders, the manifest and the scheduler with: ddlbench recover "
        f"{campaign_words(paths.root)} (or, to start the campaign over, remove {paths.root})"
    )


def store_is_intact(path: Path) -> bool:
    """A non-empty SQLite file with ddlbench's schema marker."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            row = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return row is not None


def damaged(path: Path, why: object) -> StoreDamaged:
    import shlex

    aside = f"mv {shlex.quote(str(path))} {shlex.quote(str(path) + '.damaged')}"
    return StoreDamaged(
        f"{path}: the campaign store is damaged ({why}); ddlbench neither reads nor changes "
        f"it. Move it aside (`{aside}`) and rebuild it from the run folders "
        f"with `ddlbench recover {campaign_words(path.parent)}`"
    )


def check_store_file(path: Path) -> Optional[str]:
    """Refuse a store file without SQLite's header; say if it is shorter than its header says.

    A short file is only suspect (a checkpoint of another process may be extending it right
    now): the caller then has SQLite check it.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if not head:
        return None  # empty: SQLite creates a database in it
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
        raise damaged(path, "file is not a database")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96]
    if valid and pages and size < page * pages:
        return f"truncated: {size} of {page * pages} bytes"
    return None


def patient(method):
    """Retry a one-transaction write while the disk is full, for ``wait_when_full`` seconds.

    The local executor's runner and job supervisors set it: a full disk then delays how a
    job's end is recorded, instead of losing it (the run would end LOST).
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        waited = 0.0
        while True:
            try:
                return method(self, *args, **kwargs)
            except DiskFull as exc:
                if self._depth or waited >= self.wait_when_full:
                    raise
                if not self._told_full:
                    self._told_full = True
                    print(
                        f"ddlbench: {exc}. Waiting up to {self.wait_when_full:g} s for space "
                        "to record it.",
                        file=sys.stderr,
                        flush=True,
                    )
                time.sleep(1.0)
                waited += 1.0

    return wrapper
