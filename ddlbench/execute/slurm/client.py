"""Running Slurm's client commands: :class:`SlurmClient` counts the calls (a poll of a whole
campaign costs one or two), retries with backoff while the controller cannot be reached, says
a call that is slow to answer, turns a missing client into a clear error and one that cannot
work here (its configuration, its authentication) into :class:`SlurmClientTrouble`."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, List, Mapping, Optional, Sequence

from ddlbench.errors import InputError
from ddlbench.execute.base import SchedulerUnreachable, seconds_to_deadline
from ddlbench.execute.settings import ExecuteSettings
from ddlbench.execute.slurm.messages import (
    POLL_THEN,
    client_trouble,
    is_client_trouble,
    is_transient,
)


def no_sbatch_error(what: str = "sbatch") -> InputError:
    return InputError(
        f"{what} was not found on PATH: this machine has no Slurm client. Run on the cluster's "
        "login node, or run the campaign on this machine with `--cluster local`."
    )


@dataclass
class Result:
    args: List[str]
    returncode: int
    stdout: str
    stderr: str
    #: killed at its timeout or the poll's deadline (``stderr``: what it had said by then)
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def message(self) -> str:
        """Slurm's own one-line explanation, from stderr."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        errs = [ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()]
        line = errs[-1] if errs else (lines[-1] if lines else f"exit code {self.returncode}")
        return re.sub(r"^\w+: (error|fatal): ", "", line)


class SlurmClient:
    """Runs Slurm commands, counting them and retrying transient failures."""

    def __init__(
        self,
        *,
        retries: Optional[int] = None,
        backoff: Optional[float] = None,
        timeout: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        settings: Optional[ExecuteSettings] = None,
    ):
        settings = settings or ExecuteSettings.from_env()
        self.retries = retries if retries is not None else settings.slurm_retries
        self.backoff = backoff if backoff is not None else settings.slurm_backoff
        self.timeout = timeout
        self.sleep = sleep
        self.calls = 0
        self.log: List[List[str]] = []
        #: told once when a call has not answered after ``slow_after_s`` s (submit sets it)
        self.notice: Optional[Callable[[str], None]] = None
        self.slow_after_s = 5.0

    def which(self, prog: str) -> Optional[str]:
        return shutil.which(prog)

    def run(
        self,
        args: Sequence[str],
        *,
        cwd: Optional[str] = None,
        retry: bool = True,
        check_reachable: bool = True,
        env: Optional[Mapping[str, str]] = None,
    ) -> Result:
        """Run one client command; on a transient failure retry with backoff.

        With ``check_reachable``, still failing after the retries raises SchedulerUnreachable.
        """
        args = list(args)
        if shutil.which(args[0]) is None:
            raise no_sbatch_error(args[0])
        delay = self.backoff
        tries = 1 + (self.retries if retry else 0)
        res = None
        started = time.monotonic()
        for attempt in range(tries):
            self.calls += 1
            self.log.append(args)
            res = self._once(args, cwd, env)
            if res.ok or not is_transient(res.stderr):
                return res
            left = seconds_to_deadline()
            if attempt + 1 < tries and (left is None or left > delay):
                self.sleep(delay)
                delay = min(delay * 2, 30.0)
            elif attempt + 1 < tries:  # wait's patience ends before the next try
                tries = attempt + 1
                break
        assert res is not None
        if check_reachable:
            took = time.monotonic() - started
            if is_client_trouble(res.stderr) and not res.timed_out:  # it gave up by itself
                raise client_trouble(res.message, " ".join(args[:2]), POLL_THEN)
            if is_client_trouble(res.stderr):  # cut off while it retried (a slow NFS slurm.conf?)
                raise SchedulerUnreachable(
                    f"`{' '.join(args[:2])}` had not reached the Slurm controller after "
                    f"{took:.0f} s, still retrying its own configuration ({res.message}). Check "
                    "SLURM_CONF and that `sinfo` answers, then run the same ddlbench command "
                    "again: nothing was lost."
                )
            raise SchedulerUnreachable(
                f"the Slurm controller did not answer `{' '.join(args[:2])}` after {tries} "
                f"tries over {took:.0f} s ({res.message}). Check `sinfo`/`scontrol ping`, then "
                "run the same ddlbench command again: nothing was lost."
            )
        return res

    def _once(
        self, args: List[str], cwd: Optional[str], env: Optional[Mapping[str, str]] = None
    ) -> Result:
        """One try, within the client's timeout and the current poll deadline, if any."""
        left = seconds_to_deadline()
        timeout = self.timeout if left is None else max(0.5, min(self.timeout, left))
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        try:
            out, err = self._communicate(proc, args, timeout)
        except subprocess.TimeoutExpired as cut:
            proc.kill()
            said = _said_so_far(proc, cut)
            why = f"{said}{args[0]}: timed out after {timeout:.0f}s (socket timed out)"
            return Result(args, 124, "", why, timed_out=True)
        return Result(args, proc.returncode, out, err)

    def _communicate(self, proc: subprocess.Popen, args: List[str], timeout: float):
        """The command's output; with a :attr:`notice`, one line once it is slow to answer."""
        first = min(timeout, self.slow_after_s) if self.notice else timeout
        try:
            return proc.communicate(timeout=first)
        except subprocess.TimeoutExpired:
            if first >= timeout or self.notice is None:
                raise
        self.notice(
            f"waiting for `{' '.join(args[:2])}`: no answer after {first:.0f} s "
            f"(it gives up after {timeout:.0f} s)"
        )
        return proc.communicate(timeout=timeout - first)


def _said_so_far(proc: subprocess.Popen, cut: subprocess.TimeoutExpired) -> str:
    """What a command killed at its timeout had written to stderr (Slurm's own reason for
    being slow, e.g. "cannot stat file .../slurm.conf ... retrying"), a line each: the output
    read before the timeout comes with it. Not waited for more: its children may hold the
    pipes open (as subprocess.run)."""
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    said = cut.stderr or b""
    err = said.decode("utf-8", "replace") if isinstance(said, bytes) else said
    return "".join(line.strip() + "\n" for line in err.splitlines() if line.strip())
