"""Supervisor of one local job: what slurmstepd does for a batch job on a cluster.

``python -m ddlbench.execute.local.job CAMPAIGN_DIR ATTEMPT_ID TOKEN`` waits for one of the
user's machine-wide slots (execute/local/machine.py), claims the attempt
(PENDING -> RUNNING, atomically, so a job never starts twice), runs ``bash <job script>`` in its own
process group with the job-level SLURM_* variables and the shims first on PATH, sends its
output where Slurm would, stops it at its time limit (TIMEOUT) or when cancelled (CANCELLED),
kills what is left of it when the script ends, and records the result.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple

from ddlbench.campaign import states as S
from ddlbench.campaign.hangs import hung_values
from ddlbench.campaign.manifest import load_campaign
from ddlbench.campaign.paths import SLURM_OUTPUT_PATTERN
from ddlbench.campaign.rank_errors import error_values
from ddlbench.campaign.stops import stopped_values
from ddlbench.diskfull import is_disk_full, looks_full
from ddlbench.execute.hostlist import compress
from ddlbench.execute.local.executor import NODE_ADDR, NODE_PREFIX, install_shims
from ddlbench.execute.local.machine import Slot, holders, wait_for_slot
from ddlbench.execute.local.records import write_end_record
from ddlbench.execute.sbatchfile import JobScript, expand_pattern
from ddlbench.execute.settings import ExecuteSettings
from ddlbench.execute.store import CampaignStore
from ddlbench.execute.task_failure import find_task_failure

_STOP = {"why": None}
WATCHDOG = Path(__file__).with_name("watchdog.py")


def job_dir(campaign_dir: Path, job_id: str) -> Path:
    from ddlbench.campaign.paths import CampaignPaths

    return CampaignPaths.of(campaign_dir).local_job_dir(job_id)


def read_pgid(campaign_dir: Path, job_id: str) -> Optional[int]:
    """The process group of a local job, as its supervisor recorded it; None once that group
    is gone, also when its id now names another group (after a reboot, or reused)."""
    from ddlbench.execute.local.watchdog import same_group

    try:
        pgid, _, recorded = (job_dir(campaign_dir, job_id) / "pgid").read_text().partition(" ")
        group = int(pgid.strip())
    except (OSError, ValueError):
        return None
    return group if same_group(group, recorded.strip()) else None


def kill_group(pgid: int, grace: float, children: Sequence[subprocess.Popen] = ()) -> None:
    """SIGTERM (with SIGCONT) the process group, then SIGKILL after ``grace`` seconds.

    ``children``: this process's own children in the group, reaped while waiting (an unreaped
    child would keep the group in existence)."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for child in children:
            child.poll()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def _per_node(value: int, nodes: int) -> str:
    return f"{value}(x{nodes})" if nodes > 1 else str(value)


def _user_name() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001
        return str(os.getuid())


def _account_name() -> Optional[str]:
    """This uid's name in the password database (what a Slurm job's USER holds)."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return None


def _login_variables(env: Dict[str, str]) -> None:
    """USER and LOGNAME where the caller's environment lacks them (a cron job, a container,
    ``env -i``): a Slurm job has them, and tools such as ch-run refuse to start without."""
    missing = [key for key in ("USER", "LOGNAME") if not env.get(key)]
    name = (env.get("USER") or _account_name()) if missing else None
    for key in missing if name else ():
        env[key] = name


def _slurm_job_variables(
    *,
    job_id: str,
    job_name: str,
    names: List[str],
    tasks_per_node: int,
    ntasks: int,
    cpus_per_task: Optional[int],
    submit_dir: str,
) -> Dict[str, str]:
    """The SLURM_* variables that sbatch gives a job's script, on the job's first node."""
    nodes = len(names)
    nodelist = compress(names)
    cpn = tasks_per_node * (cpus_per_task or 1)
    return {
        "SLURM_JOB_ID": job_id,
        "SLURM_JOBID": job_id,
        "SLURM_JOB_NAME": job_name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NNODES": str(nodes),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_NTASKS_PER_NODE": str(tasks_per_node),
        "SLURM_TASKS_PER_NODE": _per_node(tasks_per_node, nodes),
        "SLURM_JOB_CPUS_PER_NODE": _per_node(cpn, nodes),
        "SLURM_CPUS_ON_NODE": str(cpn),
        "SLURM_SUBMIT_DIR": submit_dir,
        "SLURM_SUBMIT_HOST": socket.gethostname(),
        "SLURM_CLUSTER_NAME": "local",
        "SLURM_JOB_PARTITION": "local",
        "SLURM_JOB_USER": _user_name(),
        "SLURM_JOB_UID": str(os.getuid()),
        "SLURM_JOB_GID": str(os.getgid()),
        "SLURMD_NODENAME": names[0],
        "SLURM_TOPOLOGY_ADDR": names[0],
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_GTIDS": "0",
        "SLURM_EXPORT_ENV": "ALL",
    }


def job_environment(
    *,
    job_id: str,
    job_name: str,
    nodes: int,
    tasks_per_node: int,
    ntasks: int,
    cpus_per_task: Optional[int],
    gpus_per_node: int,
    submit_dir: str,
    bin_dir: Path,
    jdir: Path,
    base: Optional[Dict[str, str]] = None,
) -> Dict[str, str]:
    """The environment of a job's script: ``base`` (default: ours) without any Slurm
    variables, then the job's, and the shims first on PATH."""
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.startswith(("SLURM_", "SLURMD_", "SBATCH_", "SRUN_", "SALLOC_"))
    }
    _login_variables(env)
    env.update(
        _slurm_job_variables(
            job_id=job_id,
            job_name=job_name,
            names=[f"{NODE_PREFIX}{i + 1}" for i in range(nodes)],
            tasks_per_node=tasks_per_node,
            ntasks=ntasks,
            cpus_per_task=cpus_per_task,
            submit_dir=submit_dir,
        )
    )
    env.update(
        {
            "DDLBENCH_LOCAL_EXECUTOR": "1",
            "DDLBENCH_LOCAL_JOB_DIR": str(jdir),
            "DDLBENCH_LOCAL_NODE_ADDR": NODE_ADDR,
            "PATH": str(bin_dir) + os.pathsep + env.get("PATH", os.defpath),
        }
    )
    if cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(cpus_per_task)
    if gpus_per_node:
        env["SLURM_GPUS_ON_NODE"] = str(gpus_per_node)
    return env


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True)
class LocalJob:
    """One local job's shape, from its ``#SBATCH`` lines (else campaign.json)."""

    attempt_id: int
    run: Any
    script: JobScript
    job_id: str
    job_name: str
    nodes: int
    tasks_per_node: int
    ntasks: int
    cpus_per_task: Optional[int]
    submit_dir: str
    limit_s: Optional[float]
    #: seconds between SIGTERM and SIGKILL when the job is stopped (ExecuteSettings)
    kill_wait_s: float

    @property
    def names(self) -> List[str]:
        return [f"{NODE_PREFIX}{i + 1}" for i in range(self.nodes)]


def _job_of(campaign, a, settings: ExecuteSettings) -> LocalJob:
    run = campaign.run(a.run_id)
    script = JobScript.read(run.script)
    nodes = script.get_int("--nodes") or run.nodes or 1
    tpn = script.get_int("--ntasks-per-node") or run.tasks_per_node or 1
    limit_s = script.time_limit_s
    if limit_s is None and run.time_limit_min:
        limit_s = run.time_limit_min * 60.0
    return LocalJob(
        attempt_id=a.id,
        run=run,
        script=script,
        job_id=str(a.job_id),
        job_name=script.job_name or run.run_id,
        nodes=nodes,
        tasks_per_node=tpn,
        ntasks=script.get_int("--ntasks") or nodes * tpn,
        cpus_per_task=script.get_int("--cpus-per-task"),
        submit_dir=script.get("--chdir") or str(run.run_dir),
        limit_s=limit_s,
        kill_wait_s=settings.local_kill_wait_s,
    )


def supervise(campaign_dir: Path, attempt_id: int, token: str) -> int:
    settings = ExecuteSettings.from_env()  # once, for this job's supervisor
    store = CampaignStore.open(campaign_dir)
    store.wait_when_full = settings.diskfull_wait_s
    a = store.get_attempt(attempt_id)
    if a is None or a.token != token or a.state != S.PENDING:
        return 0
    campaign = load_campaign(campaign_dir)
    job = _job_of(campaign, a, settings)

    def stop(signum, _frame):
        _STOP["why"] = _STOP["why"] or "cancel"

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)

    slot = _take_slot(store, campaign, attempt_id, job.job_id)
    if slot is None:
        return 0  # cancelled while waiting for a slot
    try:
        return _run_job(store, campaign, job, slot)
    finally:
        slot.release()  # (the kernel releases it too, however this process ends)


def _slot_limit(store: CampaignStore, campaign) -> int:
    if store.get_meta("local_serial"):
        return 1
    return max(1, int(campaign.local_setting("max_parallel", 1) or 1))


def _take_slot(store: CampaignStore, campaign, attempt_id: int, job_id: str) -> Optional[Slot]:
    """Wait for one of the user's machine-wide slots (docs/executors.md); None if cancelled."""
    limit = _slot_limit(store, campaign)
    holder = f"job {job_id} of campaign {campaign.name} (pid {os.getpid()})"

    def give_up() -> bool:
        if _STOP["why"] is not None:
            return True
        fresh = store.get_attempt(attempt_id)
        return fresh is None or fresh.state != S.PENDING or bool(fresh.cancel_requested)

    def on_wait() -> None:
        busy = "; ".join(holders(limit)) or "other jobs"
        store.update_attempt(
            attempt_id,
            if_state_in=[S.PENDING],
            reason=f"waiting for a free local slot ({limit} per machine; held by {busy})",
        )

    slot = wait_for_slot(limit, holder, give_up, on_wait)
    fresh = store.get_attempt(attempt_id) if slot is None else None
    if fresh is not None and fresh.state == S.PENDING:
        # ddlbench cancel: the documented words (campaign/causes.py); else say what stopped it
        why = None if fresh.cancel_requested else "its supervisor was stopped"
        store.update_attempt(
            attempt_id,
            if_state_in=[S.PENDING],
            state=S.CANCELLED,
            end_time=time.time(),
            reason=why and f"cancelled while waiting for a free local slot ({why})",
        )
    return slot


def _claim(store: CampaignStore, job: LocalJob) -> bool:
    """PENDING -> RUNNING; False when cancelled, or another supervisor got it first."""
    return store.update_attempt(
        job.attempt_id,
        if_state_in=[S.PENDING],
        state=S.RUNNING,
        pid=os.getpid(),
        start_time=time.time(),
        nodelist=compress(job.names),
        reason=None,
    )


def _output_paths(job: LocalJob) -> Tuple[Path, Optional[Path]]:
    """The job's ``--output`` and ``--error`` files (None: stderr goes to the output)."""
    pat = dict(job_id=job.job_id, job_name=job.job_name, node=job.names[0])
    output = job.script.get("--output") or SLURM_OUTPUT_PATTERN
    out_path = Path(job.submit_dir, expand_pattern(output, **pat))
    err_pat = job.script.get("--error")
    err_path = Path(job.submit_dir, expand_pattern(err_pat, **pat)) if err_pat else None
    return out_path, err_path


@dataclass
class _Started:
    """A job's script process, its watchdog (the leader of the job's process group) and the
    files its output goes to."""

    proc: subprocess.Popen
    watchdog: subprocess.Popen
    out: BinaryIO
    err: Optional[BinaryIO]

    @property
    def pgid(self) -> int:
        return self.watchdog.pid

    def log(self, text: str) -> None:
        """Write a line where slurmstepd writes its errors: the job's stderr file."""
        fh = self.err or self.out
        fh.write(text.encode())
        fh.flush()

    def stop(self, grace: float) -> None:
        """Stop what is left of the job (the script, its tasks, the watchdog) and reap it."""
        kill_group(self.pgid, grace, children=(self.proc, self.watchdog))

    def close(self) -> None:
        for fh in (self.out, self.err):
            if fh is not None:
                fh.close()


def _start_watchdog(job: LocalJob, log: BinaryIO, slot: Optional[Slot]) -> subprocess.Popen:
    """The job's watchdog (watchdog.py), leader of a new process group; it holds the slot."""
    return subprocess.Popen(
        [sys.executable, "-Es", str(WATCHDOG), str(os.getpid()), f"{job.kill_wait_s:g}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        pass_fds=slot.fds() if slot is not None else (),
        preexec_fn=os.setpgrp,  # (this process runs no threads)
    )


def _start_script(
    job: LocalJob,
    env: Dict[str, str],
    out_path: Path,
    err_path: Optional[Path],
    slot: Optional[Slot] = None,
) -> _Started:
    """``bash <job script>`` in the watchdog's process group, output appended where Slurm
    would put it."""
    Path(job.submit_dir).mkdir(parents=True, exist_ok=True)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # append, as sbatch --open-mode=append: an existing output file is never truncated
    out = open(out_path, "ab")  # noqa: SIM115 - closed when the job ends
    err = open(err_path, "ab") if err_path and err_path != out_path else None  # noqa: SIM115
    watchdog = _start_watchdog(job, err or out, slot)
    pgid = watchdog.pid
    try:
        proc = subprocess.Popen(
            ["bash", str(job.run.script)],
            cwd=job.submit_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err if err is not None else subprocess.STDOUT,
            preexec_fn=lambda: os.setpgid(0, pgid),  # the watchdog's group
        )
    except OSError:
        kill_group(pgid, 0.0, children=(watchdog,))
        raise
    return _Started(proc, watchdog, out, err)


def _record_pgid(jdir: Path, pid: int) -> None:
    from ddlbench.execute.local.watchdog import identity

    try:
        (jdir / "pgid").write_text(f"{pid} {identity(pid)}".strip())
    except OSError as exc:  # a full disk: the job runs on; only a dead runner's clean-up lacks it
        if not is_disk_full(exc):
            raise


def _wait_script(store: CampaignStore, job: LocalJob, started: _Started) -> int:
    """Wait for the script to end, stopping it at its time limit or when cancelled."""
    proc = started.proc
    begun = time.monotonic()
    last_check = 0.0
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if _STOP["why"] is None and job.limit_s is not None and now - begun >= job.limit_s:
            _STOP["why"] = "timeout"
        if _STOP["why"] is None and now - last_check >= 1.0:
            last_check = now
            fresh = store.get_attempt(job.attempt_id)
            if fresh is not None and fresh.cancel_requested:
                _STOP["why"] = "cancel"
        if _STOP["why"] is not None:
            note = " DUE TO TIME LIMIT" if _STOP["why"] == "timeout" else ""
            started.log(
                f"slurmstepd: error: *** JOB {job.job_id} ON {job.names[0]} "
                f"CANCELLED AT {_stamp()}{note} ***\n"
            )
            started.stop(job.kill_wait_s)
            return proc.wait()


def _run_job(store: CampaignStore, campaign, job: LocalJob, slot: Optional[Slot] = None) -> int:
    if not _claim(store, job):
        return 0
    bin_dir = install_shims(campaign.paths.shims)
    jdir = job_dir(campaign.dir, job.job_id)
    jdir.mkdir(parents=True, exist_ok=True)
    env = job_environment(
        job_id=job.job_id,
        job_name=job.job_name,
        nodes=job.nodes,
        tasks_per_node=job.tasks_per_node,
        ntasks=job.ntasks,
        cpus_per_task=job.cpus_per_task,
        gpus_per_node=job.run.gpus_per_node,
        submit_dir=job.submit_dir,
        bin_dir=bin_dir,
        jdir=jdir,
    )
    out_path, err_path = _output_paths(job)
    try:
        started = _start_script(job, env, out_path, err_path, slot)
    except OSError as exc:
        store.update_attempt(
            job.attempt_id,
            if_state_in=[S.RUNNING],
            state=S.FAILED,
            end_time=time.time(),
            message=f"could not start the job: {exc}",
        )
        return 1
    _record_pgid(jdir, started.pgid)
    rc = _wait_script(store, job, started)
    started.stop(grace=0.5)  # what the script left behind dies with the job
    started.close()
    values = _ending(rc)
    if values["state"] == S.FAILED:
        values.update(_failure_cause(Path(job.submit_dir), err_path or out_path, job.job_id))
    if store.update_attempt(job.attempt_id, if_state_in=[S.RUNNING], **values):
        write_end_record(campaign.dir, store.get_attempt(job.attempt_id))
    store.close()
    return 0


def _failure_cause(run_dir: Path, stderr_file: Path, job_id: str) -> Dict[str, object]:
    """Why a job failed, beyond its exit code: the first failing task and its signal (from
    srun's stderr lines), a hang, the failing rank's error record, and a full disk."""
    values: Dict[str, object] = {}
    failure = find_task_failure([stderr_file])
    if failure is not None:
        values.update(
            failed_task=failure.task,
            failed_signal=failure.signal,
            cause=failure.describe(),
            cause_source="srun",
        )
    code = failure.exit_code if failure else None
    ended = stopped_values(code) or hung_values(run_dir, code)
    # not hung or stopped: the failing rank's own message, when it logged one
    values.update(ended or error_values(run_dir, failure.signal if failure else None, [job_id]))
    values.update(_disk_full_cause(run_dir, stderr_file))
    return values


def _ending(rc: int) -> Dict[str, object]:
    """The store values for how a job ended (its script's return code, or why it was stopped)."""
    values: Dict[str, object] = {"end_time": time.time()}
    if _STOP["why"] == "timeout":
        values.update(state=S.TIMEOUT, reason="TimeLimit", exit_code=0, signal=15)
    elif _STOP["why"] == "cancel":
        values.update(state=S.CANCELLED, exit_code=0, signal=15)
    elif rc == 0:
        values.update(state=S.COMPLETED, exit_code=0, signal=0)
    elif rc > 0:
        values.update(state=S.FAILED, exit_code=rc, signal=0, reason="NonZeroExitCode")
    else:
        values.update(state=S.FAILED, exit_code=0, signal=-rc, reason=f"signal {-rc}")
    return values


def _disk_full_cause(run_dir: Path, stderr_file: Path) -> Dict[str, object]:
    """A failed job on a full disk: say so, naming the folder (the job's own error is in
    its stderr file)."""
    said = ""
    with contextlib.suppress(OSError), open(stderr_file, "rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(0, fh.tell() - 65536))
        said = fh.read().decode("utf-8", "replace").lower()
    if looks_full(run_dir) or "no space left on device" in said or "disk is full" in said:
        return {
            "reason": "DiskFull",
            "message": f"no space left on the disk that holds {run_dir} while the job ran",
        }
    return {}


def main(argv: List[str]) -> int:
    if len(argv) != 3:
        print(
            "usage: python -m ddlbench.execute.local.job CAMPAIGN_DIR ATTEMPT_ID TOKEN",
            file=sys.stderr,
        )
        return 2
    return supervise(Path(argv[0]).resolve(), int(argv[1]), argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
