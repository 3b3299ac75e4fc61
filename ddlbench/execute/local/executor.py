"""The local executor: runs rendered jobs on this machine, no Slurm needed.

``submit`` queues one PENDING attempt per run (job numbers from a per-user counter, unique
across campaigns: ``execute/local/machine.py``) and makes
sure a detached runner process (``python -m ddlbench.execute.local.runner``) is draining the
queue. The runner starts one supervisor per job (``ddlbench.execute.local.job``), at most
``local.max_parallel`` at once; each supervisor first takes one of the user's machine-wide
slots (so ``max_parallel`` holds across campaigns), then plays slurmstepd: it sets the job's SLURM_*
variables, puts the ``srun``/``scontrol`` shims first on PATH, runs ``bash <job script>`` with
output where Slurm would write it, enforces the time limit and records how the job ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

from ddlbench.campaign import states as S
from ddlbench.campaign.manifest import Campaign
from ddlbench.execute.base import Executor, FileLock, RefreshResult, SubmitSummary
from ddlbench.execute.local.machine import next_job_id
from ddlbench.execute.settings import ExecuteSettings
from ddlbench.execute.store import Attempt

NODE_PREFIX = "node"
NODE_ADDR = "127.0.0.1"
SHIMS = ("srun", "scontrol")


def runner_lock(campaign_dir: Path) -> FileLock:
    from ddlbench.campaign.paths import CampaignPaths

    return FileLock(CampaignPaths.of(campaign_dir).runner_lock)


def install_shims(bin_dir: Path) -> Path:
    """Write the ``srun`` and ``scontrol`` shims (launchers of ddlbench.execute.local.shims)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    pkg_parent = str(Path(__file__).resolve().parents[3])
    for name in SHIMS:
        text = (
            f"#!{sys.executable} -Es\n"
            f"# ddlbench local executor: emulates Slurm's {name} (ddlbench docs executors)\n"
            "import sys\n"
            f"sys.path.insert(0, {pkg_parent!r})\n"
            f"from ddlbench.execute.local.shims.{name} import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        path = bin_dir / name
        if not path.exists() or path.read_text() != text:
            tmp = bin_dir / f".{name}.tmp"
            tmp.write_text(text)
            os.chmod(tmp, 0o755)
            os.replace(tmp, path)
    return bin_dir


def ensure_runner(campaign_dir: Path) -> Optional[int]:
    """Start the detached runner unless one holds the runner lock; return the new pid."""
    campaign_dir = Path(campaign_dir)
    if runner_lock(campaign_dir).is_held():
        return None
    from ddlbench.campaign.paths import CampaignPaths

    work = CampaignPaths.of(campaign_dir).work
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "runner.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ddlbench.execute.local.runner", "--detach", str(campaign_dir)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            close_fds=True,
            start_new_session=True,
            cwd=str(campaign_dir),
            env=_child_env(),
        )
        proc.wait()  # the first process forks the runner and exits at once
    return proc.pid


def _child_env() -> dict:
    """The runner's environment: ddlbench importable, and nothing more on PYTHONPATH.

    A source checkout's parent folder goes on PYTHONPATH. An installed ddlbench (a wheel in a
    site-packages folder) is importable without it, and must not be added: the jobs inherit
    PYTHONPATH, and a framework environment's Python would then import this interpreter's
    packages (numpy, ...) before its own.
    """
    env = dict(os.environ)
    pkg_parent = str(Path(__file__).resolve().parents[3])
    if not _is_site_dir(pkg_parent):
        env["PYTHONPATH"] = pkg_parent + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
    return env


def _is_site_dir(folder: str) -> bool:
    import site

    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    return any(os.path.realpath(d) == os.path.realpath(folder) for d in dirs)


def pid_runs(pid: Optional[int], token: Optional[str] = None) -> bool:
    """Whether ``pid`` is alive (and, where /proc says, is the supervisor of ``token``)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    proc = Path(f"/proc/{pid}")
    if proc.exists():
        try:
            stat = (proc / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                return False
            if token is not None:
                return token in (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return False
    return True


class LocalExecutor(Executor):
    name = "local"
    poll_interval = (0.5, 5.0)

    def __init__(self, campaign: Campaign, store, echo=print):
        super().__init__(campaign, store, echo)

    def submit_runs(self, runs, intents, *, serial, array, summary: SubmitSummary, advance):
        install_shims(self.campaign.paths.shims)
        if serial:
            self.store.set_meta("local_serial", True)
        if array:
            summary.notes.append("--array has no effect on the local executor")
        for run in runs:
            if self.store.get_meta("cancel_requested"):
                summary.stopped = "the campaign was cancelled (ddlbench cancel) meanwhile"
                break
            # unique for the user on this machine, across campaigns (execute/local/machine.py)
            job_id = str(next_job_id(at_least=self.store.next_counter("local_job_id")))
            self.store.new_attempt(
                run.run_id, "local", S.PENDING, job_id=job_id, submit_time=time.time()
            )
            summary.add_submitted(run.run_id, job_id)
            advance(1)
        ensure_runner(self.campaign.dir)
        limit = 1 if serial else int(self.campaign.local_setting("max_parallel", 1) or 1)
        summary.notes.append(
            f"runs execute on this machine, {limit} at a time "
            "(across all your campaigns on this machine); "
            f"`ddlbench wait {self.campaign.name}` blocks until they are done"
        )

    def refresh(self) -> RefreshResult:
        result = RefreshResult()
        live = self.store.live_attempts("local")
        if live and not runner_lock(self.campaign.dir).is_held():
            pid = ensure_runner(self.campaign.dir)
            if pid:
                result.notes.append("the local runner had stopped; restarted it")
        return result

    def pending_reason(self) -> Optional[str]:
        """The runner starts a run by recording it in the store; on a full disk that write
        waits for space (DDLBENCH_DISKFULL_WAIT), so the run stays PENDING: say why."""
        from ddlbench.diskfull import looks_full

        if not looks_full(self.campaign.dir):
            return None
        return (
            f"waiting for disk space: no space left on the disk that holds {self.campaign.dir}; "
            "the runner starts it once space is freed"
        )

    def cancel(self, attempts: List[Attempt]) -> List[str]:
        stopping: List[Attempt] = []
        for a in attempts:
            if a.state == S.PENDING and self.store.update_attempt(
                a.id,
                if_state_in=[S.PENDING],
                state=S.CANCELLED,
                cancel_requested=1,
                end_time=time.time(),  # campaign/causes.py words it, as for Slurm
            ):
                continue
            self.store.update_attempt(a.id, if_live=True, cancel_requested=1)
            fresh = self.store.get_attempt(a.id)
            if fresh and fresh.state == S.RUNNING and pid_runs(fresh.pid, fresh.token):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(fresh.pid, signal.SIGTERM)  # the supervisor stops the job
                stopping.append(fresh)
        return self._await_stopped(stopping)

    def _await_stopped(self, stopping: List[Attempt]) -> List[str]:
        """Wait for the supervisors to stop the running jobs and record them CANCELLED
        (SIGTERM, then SIGKILL after the grace), so that ``status`` right after ``cancel``
        reads what happened instead of RUNNING; a job not stopped by then is named."""
        grace = ExecuteSettings.from_env().local_kill_wait_s
        deadline = time.monotonic() + grace + 5.0
        live = stopping
        while live and time.monotonic() < deadline:
            time.sleep(0.1)
            fresh = (self.store.get_attempt(a.id) for a in live)
            live = [a for a in fresh if a is not None and not a.final]
        return [
            f"{a.run_id} (job {a.job_id}) is still stopping; `ddlbench status` shows when it "
            "has ended"
            for a in live
        ]
