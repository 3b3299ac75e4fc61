"""The local executor's runner: drains a campaign's queue of PENDING local attempts.

Started detached by ``ddlbench submit`` (and restarted by status/wait when it is gone). One
runner per campaign: it holds ``.ddlbench/runner.lock`` (an flock, released when the process
dies, so a dead runner never blocks a new one). It starts supervisors
(``ddlbench.execute.local.job``) up to ``local.max_parallel`` at once and exits when nothing
is left to run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from ddlbench.campaign import states as S
from ddlbench.campaign.manifest import load_campaign
from ddlbench.execute.local.executor import pid_runs, runner_lock
from ddlbench.execute.local.records import write_end_record
from ddlbench.execute.local.watchdog import group_members
from ddlbench.execute.settings import ExecuteSettings
from ddlbench.execute.store import CampaignStore

MAX_START_FAILURES = 3


def _log(msg: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{stamp} runner {os.getpid()}: {msg}", flush=True)


def _take_lock(campaign_dir: Path):
    """The campaign's runner lock, or None when another runner is draining it."""
    lock = runner_lock(campaign_dir)
    # a status poll may be testing the lock this very moment: try a few times before leaving
    for _ in range(10):
        if lock.acquire():
            return lock
        time.sleep(0.05)
    return None


def _reap_supervisors(
    store: CampaignStore,
    children: Dict[int, subprocess.Popen],
    failures: Dict[int, int],
    exits: Dict[int, int],
) -> None:
    """Forget the supervisors that exited. A RUNNING attempt a supervisor left unrecorded is
    noted in ``exits`` (its exit status) for :func:`_alive_attempts` to end; a PENDING one is
    failed only after MAX_START_FAILURES tries."""
    for aid, proc in list(children.items()):
        if proc.poll() is None:
            continue
        del children[aid]
        a = store.get_attempt(aid)
        if a is None:
            continue
        if a.state == S.RUNNING and a.pid == proc.pid:
            exits[aid] = proc.returncode
        elif a.state == S.PENDING:
            failures[aid] = failures.get(aid, 0) + 1
            if failures[aid] >= MAX_START_FAILURES:
                store.update_attempt(
                    aid,
                    if_state_in=[S.PENDING],
                    state=S.FAILED,
                    end_time=time.time(),
                    message="the job could not be started (see .ddlbench/runner.log)",
                )


def _alive_attempts(
    store: CampaignStore, campaign, children: Dict[int, subprocess.Popen], exits: Dict[int, int]
) -> list:
    """RUNNING local attempts whose supervisor lives, or whose job is still being stopped; the
    others' supervisors died: they are LOST once nothing of their job is left."""
    alive = []
    for a in store.attempts(states=[S.RUNNING], scheduler="local"):
        if a.id in children or pid_runs(a.pid, a.token):
            alive.append(a)
        elif _end_orphan(store, campaign, a, exits.get(a.id)):
            exits.pop(a.id, None)
        else:
            alive.append(a)  # still being stopped: it keeps its place (never two at once)
    return alive


def _died(code: Optional[int]) -> str:
    if code is None:
        return "died"
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with {code}"


def _end_orphan(store: CampaignStore, campaign, a, code: Optional[int]) -> bool:
    """The supervisor of RUNNING attempt ``a`` is gone: stop what is left of its job (its
    process group: the job's watchdog does so too), then record it LOST. False while some of
    the job still runs: the attempt stays RUNNING, so it is never retried beside itself."""
    from ddlbench.execute.local.job import kill_group, read_pgid

    pgid = read_pgid(campaign.dir, a.job_id) if a.job_id else None
    if pgid:
        kill_group(pgid, grace=ExecuteSettings.from_env().local_kill_wait_s)
        deadline = time.monotonic() + 2.0
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if group_members(pgid):
            _log(f"job {a.job_id}: its supervisor died and its processes do not end yet")
            return False
    message = (
        f"the job's supervisor {_died(code)} before recording how the job ended; what was "
        "left of the job was stopped (see .ddlbench/runner.log)"
    )
    _log(f"job {a.job_id}: {message}")
    if store.update_attempt(
        a.id, if_state_in=[S.RUNNING], state=S.LOST, end_time=time.time(), message=message
    ):
        write_end_record(campaign.dir, store.get_attempt(a.id))
    return True


def _parallel_limit(store: CampaignStore, campaign) -> int:
    """How many jobs may run at once: ``local.max_parallel``, or 1 for a serial campaign."""
    limit = int(campaign.local_setting("max_parallel", 1) or 1)
    return 1 if store.get_meta("local_serial") else limit


def run(campaign_dir: Path) -> int:
    lock = _take_lock(campaign_dir)
    if lock is None:
        return 0  # another runner is draining this campaign
    campaign = load_campaign(campaign_dir)
    store = CampaignStore.open(campaign_dir)
    store.wait_when_full = ExecuteSettings.from_env().diskfull_wait_s  # once, for this runner
    store.set_meta("local_runner", {"pid": os.getpid(), "started": time.time()})
    _log(f"draining {campaign.dir}")
    children: Dict[int, subprocess.Popen] = {}
    failures: Dict[int, int] = {}
    exits: Dict[int, int] = {}  # attempt id -> exit status of a supervisor that left it RUNNING
    while True:
        _reap_supervisors(store, children, failures, exits)
        alive = _alive_attempts(store, campaign, children, exits)
        limit = _parallel_limit(store, campaign)
        busy = len(alive) + sum(1 for aid in children if aid not in {a.id for a in alive})
        pending = store.attempts(states=[S.PENDING], scheduler="local")
        for a in pending:
            if busy >= limit:
                break
            if a.id in children:
                continue
            children[a.id] = _spawn(campaign.dir, a.id, a.token)
            busy += 1
        if not children and not pending and not alive:
            lock.release()
            left = store.attempts(states=[S.PENDING], scheduler="local")
            if left and lock.acquire():
                continue
            _log("nothing left to run; exiting")
            return 0
        time.sleep(0.1 if pending and busy < limit else 0.25)


def _spawn(campaign_dir: Path, attempt_id: int, token: str) -> subprocess.Popen:
    _log(f"starting attempt {attempt_id}")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ddlbench.execute.local.job",
            str(campaign_dir),
            str(attempt_id),
            token,
        ],
        stdin=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=True,
    )


def main(argv: List[str]) -> int:
    detach = "--detach" in argv
    args = [a for a in argv if a != "--detach"]
    if len(args) != 1:
        print(
            "usage: python -m ddlbench.execute.local.runner [--detach] CAMPAIGN_DIR",
            file=sys.stderr,
        )
        return 2
    if detach and os.fork() > 0:
        os._exit(0)  # the caller waits for this first process only; the runner lives on
    return run(Path(args[0]).resolve())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
