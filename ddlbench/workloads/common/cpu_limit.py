"""``cpu-share`` by a cgroup CPU limit (docs/stragglers.md).

A rank that may be slowed moves itself (its whole process: every thread, including torch's
intra-op and gloo's threads, and any process it starts afterwards) into a child cgroup of
its own cgroup, ``ddlbench-<pid>``, and writes that child's CPU quota and weight per step:

- cgroup v1 (``cpu`` controller): ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` (``-1``
  for a normal step) and ``cpu.shares`` (1024 for a normal step);
- cgroup v2 (a delegated subtree with the ``cpu`` controller): ``cpu.max`` (``max`` for a
  normal step) and ``cpu.weight`` (100). The rank's own cgroup must hold no other process
  (v2 forbids processes beside a child with a controller), as a Slurm task cgroup or a
  per-rank scope does.

A step slowed ``n = round(factor)`` times gets a quota of ``allowance / n`` cores, the
allowance being the cores the rank may use when nothing limits it (its CPU affinity, the
quotas of its own cgroup and of those above it, and the threads it computes with), and
``1 / n`` of the weight of its threads (one normal thread's weight per core of the
allowance): the quota slows it ``n`` times where it has its cores to itself, the weight where
it competes for them (a cap alone would slow a rank that gets only part of a core anyway by
less). In a normal step the child has that whole weight, as its threads had beside others.

At the end (:meth:`CgroupLimit.close`, also from :func:`release_all` before the rank's
``os._exit``, and at interpreter exit) the rank moves back and removes the child; a child
left by a rank that was killed is removed by the next rank that starts there once its
process is gone.

``DDLBENCH_CGROUP_DIR`` names the cgroup directory to make the child in, instead of the
rank's own cgroup (tests point it at a missing or unsuitable directory to check the fallback).

Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import re
from pathlib import Path
from typing import List, Optional, Tuple

#: the environment variable that names the cgroup directory to make the child in
ENV_DIR = "DDLBENCH_CGROUP_DIR"
#: the children's name prefix (``ddlbench-<pid>``)
PREFIX = "ddlbench-"
#: the kernel's smallest quota (us)
MIN_QUOTA_US = 1000
#: the default period (us): short, so that a slowed step of tens of ms is throttled evenly
PERIOD_US = 20000
#: the weight of one thread that nothing slows (v1 ``cpu.shares``, v2 ``cpu.weight``) ...
WEIGHT = {1: 1024, 2: 100}
#: ... and the least and the most the kernel takes
WEIGHT_MIN = {1: 2, 2: 1}
WEIGHT_MAX = {1: 262144, 2: 10000}
#: a directory of each hierarchy holds this file
MARKER = {1: "cpu.cfs_quota_us", 2: "cgroup.controllers"}

_OPEN: List[CgroupLimit] = []


class Unavailable(Exception):
    """No cgroup CPU limit here; the message says why."""


def _write(path: Path, text: str) -> None:
    with open(path, "w") as fh:  # one write() call, as cgroupfs expects
        fh.write(text)


def _unescape(field: str) -> str:
    """A path of /proc/self/mountinfo (spaces and such are octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounts() -> List[Tuple[str, str, str, List[str]]]:
    """``(fstype, root, mount point, super options)`` of every mount of this process."""
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            f, r = left.split(), right.split()
            if len(f) >= 5 and len(r) >= 3:
                out.append((r[0], _unescape(f[3]), _unescape(f[4]), r[2].split(",")))
    return out


def _under(mounts: List[Tuple[str, str, str, List[str]]], fstype: str, path: str) -> Path:
    """The directory of cgroup ``path`` in the mount of ``fstype`` (v1: the ``cpu`` one)."""
    for kind, root, point, opts in mounts:
        if kind != fstype or (fstype == "cgroup" and "cpu" not in opts):
            continue
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return Path(point) / os.path.relpath(path, root)
    raise Unavailable(f"no {fstype} mount of this process holds its cgroup {path}")


def find_cgroup() -> Tuple[Path, int]:
    """The cgroup directory to make the child in, and its version (1 or 2)."""
    given = os.environ.get(ENV_DIR)
    if given:
        d = Path(given)
        for version, marker in MARKER.items():
            if (d / marker).is_file():
                return d, version
        raise Unavailable(f"{ENV_DIR}={given} is not a cgroup directory with a cpu controller")
    return own_cgroup()


def own_cgroup() -> Tuple[Path, int]:
    """This process's own cgroup directory of the cpu controller, and its version."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = [ln.rstrip("\n").split(":", 2) for ln in fh if ln.count(":") >= 2]
        mounts = _mounts()
    except OSError as exc:
        raise Unavailable(f"cannot read this process's cgroups: {exc}") from exc
    for _hid, ctrls, path in lines:
        if "cpu" in ctrls.split(","):
            return _under(mounts, "cgroup", path), 1
    for hid, ctrls, path in lines:
        if hid == "0" and not ctrls:
            return _under(mounts, "cgroup2", path), 2
    raise Unavailable("this process is in no cgroup with a cpu controller")


def _quota_cores(d: Path, version: int) -> Optional[float]:
    """The cores ``d``'s own quota allows (None: unlimited or unreadable)."""
    try:
        if version == 1:
            quota = int((d / "cpu.cfs_quota_us").read_text())
            period = int((d / "cpu.cfs_period_us").read_text())
        else:
            q, p = (d / "cpu.max").read_text().split()
            quota, period = (-1 if q == "max" else int(q)), int(p)
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def allowance(home: Path, version: int, threads: Optional[int] = None) -> float:
    """The cores a process in ``home`` may use: its affinity, the quotas of ``home`` and of
    every cgroup above it, and ``threads`` (the threads it computes with), the least."""
    cores = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    d = home
    while True:
        limit = _quota_cores(d, version)
        cores = min(cores, limit) if limit else cores
        if d.parent == d or not (d.parent / MARKER[version]).is_file():
            break
        d = d.parent
    return min(cores, float(threads)) if threads else cores


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(home: Path) -> List[Path]:
    """Remove the children a killed rank left in ``home`` (their process is gone); returns
    those removed. A child still holding a process is left alone (rmdir refuses it)."""
    removed = []
    for d in home.glob(PREFIX + "*"):
        pid = d.name[len(PREFIX) :]
        if not pid.isdigit() or _alive(int(pid)) or not d.is_dir():
            continue
        try:
            d.rmdir()
            removed.append(d)
        except OSError:
            pass
    return removed


def _origin(home: Path, version: int) -> Path:
    """Where the process returns at the end: its own cgroup (``home`` unless
    ``DDLBENCH_CGROUP_DIR`` names another one of the same hierarchy)."""
    try:
        own, own_version = own_cgroup()
    except Unavailable:
        return home
    return own if own_version == version and own.is_dir() else home


class CgroupLimit:
    """This process in its own child cgroup whose CPU quota :meth:`set` writes per step
    (see the module docstring). Raises :class:`Unavailable` where it cannot be made; then
    nothing is left behind."""

    def __init__(self, most: float, threads: Optional[int] = None) -> None:
        self.home, self.version = find_cgroup()
        self.by = f"cgroup-v{self.version}"
        sweep(self.home)
        self.cores = allowance(self.home, self.version, threads)
        # the smallest quota (most's) stays above the kernel's minimum
        self.period = max(PERIOD_US, math.ceil(MIN_QUOTA_US * max(1, round(most)) / self.cores))
        self.dir = self.home / f"{PREFIX}{os.getpid()}"
        self.origin = _origin(self.home, self.version)
        self.quota = -1
        self.made = self.moved = self.enabled_cpu = self.closed = False
        try:
            self._make()
        except (OSError, Unavailable) as exc:
            self.close()
            if isinstance(exc, Unavailable):
                raise
            raise Unavailable(f"{self.dir}: {exc.strerror or exc}") from exc
        _OPEN.append(self)
        atexit.register(self.close)

    def _make(self) -> None:
        if self.version == 2:
            available = (self.home / "cgroup.controllers").read_text().split()
            if "cpu" not in available:
                raise Unavailable(
                    f"the cpu controller is not available in {self.home} "
                    f"(cgroup.controllers: {' '.join(available) or 'none'})"
                )
        self.dir.mkdir(exist_ok=True)
        self.made = True
        if self.version == 1:
            _write(self.dir / "cpu.cfs_quota_us", "-1")
            _write(self.dir / "cpu.cfs_period_us", str(self.period))
        _write(self.dir / "cgroup.procs", str(os.getpid()))  # the whole process moves
        self.moved = True
        # v2: the home may enable cpu for its children only once no process is left in it
        control = self.home / "cgroup.subtree_control"
        if self.version == 2 and "cpu" not in control.read_text().split():
            _write(control, "+cpu")
            self.enabled_cpu = True
        self._write_quota(-1)

    def _write_quota(self, quota: int, n: int = 1) -> None:
        """The quota (-1: none) and the weight of a step slowed ``n`` times."""
        # a normal step: the weight of the allowance's threads, as beside the others
        base = WEIGHT[self.version] * max(1, math.ceil(self.cores))
        weight = min(WEIGHT_MAX[self.version], max(WEIGHT_MIN[self.version], round(base / n)))
        if self.version == 1:
            _write(self.dir / "cpu.cfs_quota_us", str(quota))
            _write(self.dir / "cpu.shares", str(weight))
        else:
            _write(self.dir / "cpu.max", f"{'max' if quota < 0 else quota} {self.period}")
            _write(self.dir / "cpu.weight", str(weight))
        self.quota = quota

    def quota_for(self, factor: float) -> int:
        """The quota (us per period; -1: none) of a step slowed by ``factor``."""
        n = max(1, int(round(factor)))
        if n <= 1:
            return -1
        return max(MIN_QUOTA_US, int(self.cores * self.period / n))

    def set(self, factor: float) -> None:
        """The quota of a step slowed by ``factor`` (1: no limit) from now on."""
        quota = self.quota_for(factor)
        if quota != self.quota:
            self._write_quota(quota, max(1, int(round(factor))))

    def close(self) -> None:
        """No limit, back in the cgroup the process came from, the child removed; every part
        is attempted (a child that cannot be removed now is removed by a later :func:`sweep`)."""
        if self.closed:
            return
        self.closed = True
        steps = [lambda: self._write_quota(-1)] if self.made else []
        if self.enabled_cpu and not self._siblings():
            steps.append(lambda: _write(self.home / "cgroup.subtree_control", "-cpu"))
        if self.moved:
            steps.append(lambda: _write(self.origin / "cgroup.procs", str(os.getpid())))
        if self.made:
            steps.append(self.dir.rmdir)
        for step in steps:
            with contextlib.suppress(OSError):
                step()
        if self in _OPEN:
            _OPEN.remove(self)

    def _siblings(self) -> bool:
        """Whether another live rank has a child beside this one (it needs cpu enabled)."""
        names = [d.name[len(PREFIX) :] for d in self.home.glob(PREFIX + "*") if d != self.dir]
        return any(n.isdigit() and _alive(int(n)) for n in names)


def release_all() -> None:
    """Close every open :class:`CgroupLimit` (before an ``os._exit``, which skips atexit)."""
    for limit in list(_OPEN):
        limit.close()
