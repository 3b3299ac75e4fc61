"""A full disk (or quota), said once and naming the folder; outputs that appear whole or not.

Every writer of ddlbench output goes through :func:`atomic_path` (write a temporary file next
to the target, rename it into place) so that a full disk never leaves half a table or report
behind, and turns ``ENOSPC``/``EDQUOT`` (and SQLite's "database or disk is full") into
:class:`DiskFull`: one line, the folder, and what to do. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Iterator, Optional, Union

from ddlbench.errors import DDLBenchError

_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full")


class DiskFull(DDLBenchError):
    """No space left where ddlbench had to write."""

    def __init__(self, folder: Union[str, Path], detail: str = ""):
        self.folder = Path(folder)
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"no space left on the disk that holds {self.folder}{why}; nothing half-written "
            f"was kept. Free some space (`df -h {self.folder}`) and run the same command again"
        )


#: the exit code when ddlbench's own output (stdout, stderr) could not be written (EX_IOERR)
EXIT_OUTPUT_NOT_WRITTEN = 74


class OutputNotWritten(DDLBenchError):
    """A write to stdout or stderr failed (``> /dev/full``, a full disk under ``> FILE``):
    the output is lost, the campaign's own files are not concerned."""

    exit_code = EXIT_OUTPUT_NOT_WRITTEN

    def __init__(self, stream: str, detail: str = ""):
        self.stream = stream
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"could not write the output to {stream}{why}; send {stream} where it can be "
            "written (a file on a disk with room, a terminal) and run the same command again"
        )


def failed_stream(exc: BaseException) -> Optional[str]:
    """``"stdout"`` or ``"stderr"`` when ``exc`` is a failed write to it, else None: an
    ``OSError`` naming no file, raised by a write whose stream (or a console or wrapper of it)
    is the innermost frame's, or one while that stream's file is ``/dev/full``."""
    if not isinstance(exc, OSError) or exc.filename or exc.errno not in _ERRNOS | {errno.EIO}:
        return None
    streams = (("stdout", sys.stdout, 1), ("stderr", sys.stderr, 2))
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in frames[-2:]:
        for name, stream, _fd in streams:
            if any(_holds(v, stream) for v in frame.f_locals.values()):
                return name
    for name, _stream, fd in streams:
        if _fd_full(fd):
            return name
    return None


def _holds(value: object, stream: object, depth: int = 3) -> bool:
    """``value`` is ``stream``, or wraps it (a rich Console's ``file``, a wrapper's ``_out``)."""
    if value is stream:
        return True
    if depth == 0 or value is None or isinstance(value, (str, bytes, int, float)):
        return False
    for attr in ("file", "_file", "_out", "wrapped", "_wrapped"):
        inner = getattr(value, attr, None) if hasattr(type(value), "__dict__") else None
        if inner is not None and _holds(inner, stream, depth - 1):
            return True
    return False


def _fd_full(fd: int) -> bool:
    """The file descriptor is ``/dev/full``. (A file on a full disk is no evidence: the
    campaign's files may be on that disk too, and a write to them is what failed.)"""
    try:
        st = os.fstat(fd)
        return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 7)  # Linux's /dev/full
    except (OSError, AttributeError, ValueError):
        return False


def is_disk_full(exc: BaseException) -> bool:
    """ENOSPC/EDQUOT, or SQLite's "database or disk is full", here or in the cause chain."""
    seen = set()
    cur: Optional[BaseException] = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, DiskFull):
            return True
        if isinstance(cur, OSError) and cur.errno in _ERRNOS:
            return True
        said = str(cur).lower()
        if isinstance(cur, (OSError, sqlite3.OperationalError)) and any(w in said for w in _WORDS):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def detail_of(exc: BaseException) -> str:
    """One short line: copytree's shutil.Error lists every file that failed; keep the first."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        first = exc.args[0][0] if exc.args[0] else None
        if isinstance(first, tuple) and len(first) == 3:
            why = re.sub(r"^\[Errno \d+\] ", "", str(first[2])).split(": '")[0]
            return f"{why}, copying {len(exc.args[0])} file(s)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": {exc.filename}" if exc.filename else "")
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def as_disk_full(exc: BaseException, folder: Union[str, Path]) -> DiskFull:
    if isinstance(exc, DiskFull):
        return exc
    return DiskFull(folder, detail_of(exc))


def folder_of(exc: BaseException, default: Union[str, Path] = ".") -> Path:
    """The folder a failed write was in: the error's file name's parent, else ``default``."""
    name = getattr(exc, "filename", None)
    if name:
        return Path(os.fsdecode(name)).resolve().parent
    return Path(default).resolve()


@contextlib.contextmanager
def atomic_path(path: Union[str, Path]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it over ``path``.

    On any error the temporary file is removed and ``path`` is left as it was; a full disk
    becomes :class:`DiskFull` naming the folder.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        _remove(tmp)
        if is_disk_full(exc):
            raise as_disk_full(exc, path.parent) from None
        raise


def _remove(tmp: Path) -> None:
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            tmp.unlink()


def free_bytes(folder: Union[str, Path]) -> Optional[int]:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def looks_full(folder: Union[str, Path], slack: int = 64 * 1024) -> bool:
    """Whether the disk holding ``folder`` has (almost) no space left for this user."""
    free = free_bytes(folder)
    return free is not None and free <= slack
