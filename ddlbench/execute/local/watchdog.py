"""A local job's watchdog: stops the job when the job's supervisor dies.

``python -Es watchdog.py SUPERVISOR_PID GRACE_S`` is the first process of a local job's process
group (its leader: the group's id is this process's pid), started by the job's supervisor
(job.py) before ``bash <job script>``, which joins the group; the ``srun`` shim's tasks and
everything else the script starts are in it too. It holds the supervisor's machine-wide slot
(an inherited, ``flock``-ed file descriptor, machine.py), so the slot stays taken while it
lives.

* While the supervisor lives, it sleeps (woken by ``PR_SET_PDEATHSIG`` when the supervisor
  dies; it looks again every few seconds in case that was missed).
* When the supervisor stops the job (SIGTERM to the group: a cancel, the time limit, the end
  of the script), it exits as soon as nothing else is left in the group.
* When the supervisor dies first (killed, crashed), it says so in the job's error file,
  sends SIGTERM to the group, waits up to GRACE_S seconds for the rest of the group to end,
  then SIGKILLs the group, itself included: nothing of the job outlives its supervisor by
  more than the grace, and the slot is free only once the job is gone.

Standard library only, and it imports nothing of ddlbench (it starts with ``-Es``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import List

PR_SET_PDEATHSIG = 1
#: what wakes the watchdog: its parent's death (PR_SET_PDEATHSIG), or the group being stopped
_WAKE = {signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
_STOPS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def group_members(pgid: int, *, but: int = 0) -> List[int]:
    """The live (not zombie) processes of process group ``pgid``, but pid ``but``."""
    pids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    for entry in entries:
        if not entry.isdigit() or int(entry) == but:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            pids.append(int(entry))
    return pids


def identity(pid: int) -> str:
    """``"BOOT_ID START_TICKS"`` of process ``pid`` ("" when it cannot be read): a pid, and so a
    process group id, is reused after a reboot or once its processes are gone; this says
    whether a recorded group is still the one it was."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        with open(f"/proc/{pid}/stat", "rb") as fh:
            start = fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""
    return f"{boot} {start}"


def same_group(pgid: int, recorded: str) -> bool:
    """Whether group ``pgid`` is still the one whose leader had identity ``recorded``: its
    leader is that process, or the leader is gone but the machine was not restarted (an id
    stays taken while any process of its group lives; a new leader would be another process)."""
    if not recorded:
        return True  # recorded before identities were: trust the id, as before
    now = identity(pgid)
    if now:
        return now == recorded
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip() == recorded.split(" ", 1)[0]
    except OSError:
        return False


def _wake_on_parent_death() -> None:
    """Ask Linux for SIGUSR1 when the parent dies (best effort: the loop looks anyway)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _stop_group(grace: float) -> None:
    """SIGTERM the group, wait up to ``grace`` s for the others to end, then SIGKILL it all."""
    me, pgid = os.getpid(), os.getpgrp()
    for sig in (signal.SIGCONT, signal.SIGTERM):  # SIGTERM is blocked here: not for us
        os.killpg(pgid, sig)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and group_members(pgid, but=me):
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)


def watch(parent: int, grace: float) -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAKE)
    _wake_on_parent_death()
    pause = 5.0  # while the job runs; once it is being stopped, from 20 ms, 1.5 times longer
    while os.getppid() == parent:
        if pause < 5.0 and not group_members(os.getpgrp(), but=os.getpid()):
            return 0  # the supervisor stopped the job, and it is gone
        got = signal.sigtimedwait(_WAKE, pause)
        if pause < 5.0:
            pause = min(pause * 1.5, 1.0)
        elif got is not None and got.si_signo in _STOPS:
            pause = 0.02
    sys.stderr.write(
        f"ddlbench: error: the job's supervisor (pid {parent}) died; stopping the job "
        f"(SIGTERM, then SIGKILL after {grace:g} s)\n"
    )
    sys.stderr.flush()
    _stop_group(grace)
    return 0


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: watchdog.py SUPERVISOR_PID GRACE_S\n")
        return 2
    return watch(int(argv[0]), float(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
