"""The Slurm executor: sbatch to submit, one squeue (+ one sacct or scontrol) per poll.

The commands are built in commands.py and what a poll decides for each attempt is in poll.py;
this module runs the commands and writes the store."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ddlbench.campaign import states as S
from ddlbench.campaign.hangs import hung_values
from ddlbench.campaign.manifest import RunInfo
from ddlbench.campaign.paths import RunPaths
from ddlbench.campaign.rank_errors import error_values
from ddlbench.campaign.stops import stopped_values
from ddlbench.errors import DDLBenchError
from ddlbench.execute.base import Executor, RefreshResult, SchedulerUnreachable, SubmitSummary
from ddlbench.execute.infra_retry import parse_limit
from ddlbench.execute.sbatchfile import JobScript
from ddlbench.execute.settings import ExecuteSettings, exclude_args
from ddlbench.execute.slurm import poll
from ddlbench.execute.slurm.arrays import write_array_script
from ddlbench.execute.slurm.commands import (
    JobRecord,
    SlurmClient,
    StepRecord,
    is_no_accounting,
    is_transient,
    no_sbatch_error,
    parse_config,
    parse_jobcomp,
    parse_sacct,
    parse_sacct_steps,
    parse_sbatch_parsable,
    parse_scontrol_jobs,
    parse_squeue,
    sacct_args,
    sacct_since_args,
    sbatch_args,
    sbatch_env,
    scancel_args,
    scontrol_config_args,
    scontrol_jobs_args,
    sinfo_nodes_args,
    squeue_args,
    token_of,
)
from ddlbench.execute.slurm.jobcomp import read_jobcomp
from ddlbench.execute.slurm.messages import (
    CANCEL_THEN,
    POLL_THEN,
    is_client_trouble,
    stop_on_client_trouble,
)
from ddlbench.execute.store import Attempt, new_token
from ddlbench.execute.task_failure import TaskFailure, bad_nodes, find_cause, node_failure_cause


class SlurmExecutor(Executor):
    name = "slurm"
    poll_interval = (2.0, 30.0)

    def __init__(
        self,
        campaign,
        store,
        echo=print,
        client: Optional[SlurmClient] = None,
        settings: Optional[ExecuteSettings] = None,
    ):
        super().__init__(campaign, store, echo)
        #: the environment's overrides, read once per command (settings.py)
        self.settings = settings or ExecuteSettings.from_env()
        self.client = client or SlurmClient(settings=self.settings)
        #: sacct's step records of the jobs of this poll, by job key (accounting only)
        self.steps: Dict[str, List[StepRecord]] = {}

    @property
    def scheduler_calls(self) -> int:
        return self.client.calls

    def infra_retry_limit(self) -> int:
        value = self.settings.infra_retries
        return parse_limit(
            value if value is not None else self.campaign.slurm_setting("infra_retries")
        )

    # -- configuration ---------------------------------------------------------------------

    def check(self) -> None:
        if self.client.which("sbatch") is None:
            raise no_sbatch_error("sbatch")

    def slurm_config(self, *, fetch: bool = True) -> Dict[str, str]:
        """The few ``scontrol show config`` facts ddlbench uses, cached in the store."""
        cached = self.store.get_meta("slurm_config")
        if cached is not None or not fetch:
            return cached or {}
        res = self.client.run(scontrol_config_args())
        if not res.ok:  # a warning beside an answer (a slow NFS slurm.conf) is no trouble
            stop_on_client_trouble(
                res.stderr, res.message, "scontrol show config", self.campaign.dir
            )
        conf = parse_config(res.stdout) if res.ok else {}
        keep = {
            k: conf.get(k, "")
            for k in (
                "AccountingStorageType",
                "JobCompType",
                "JobCompLoc",
                "MinJobAge",
                "ClusterName",
                "SLURM_VERSION",
            )
        }
        self.store.set_meta("slurm_config", keep)
        return keep

    def sacct_mode(self) -> str:
        """``yes`` or ``no``: whether finished jobs are looked up with sacct."""
        forced = self.settings.sacct
        setting = forced or str(self.campaign.slurm_setting("sacct", "auto")).lower()
        if setting in ("no", "false", "0", "off"):
            return "no"
        if setting in ("yes", "true", "1", "on"):
            return "yes"
        if self.store.get_meta("sacct_works") is False:
            return "no"
        conf = self.slurm_config(fetch=False)
        if conf.get("AccountingStorageType", "").endswith("/none"):
            return "no"
        return "yes"

    def jobcomp_path(self) -> Optional[Path]:
        loc = self.settings.jobcomp or self.campaign.slurm_setting("jobcomp_loc")
        if loc == "none":
            return None  # told not to read it
        if not loc:
            conf = self.slurm_config(fetch=False)
            if conf.get("JobCompType", "").endswith("filetxt"):
                loc = conf.get("JobCompLoc")
        if loc and os.access(str(loc), os.R_OK):
            return Path(str(loc))
        return None

    # -- submitting --------------------------------------------------------------------------

    def _cancelled(self) -> bool:
        return bool(self.store.get_meta("cancel_requested"))

    def _sbatch(self, args: List[str], cwd: Path, token: str, made_now: List[int]):
        """sbatch with care: after a transient failure, look for the job before trying again.
        When Slurm's client cannot work at all, the attempts ``made_now`` for it (no job can
        exist) are forgotten and the submission stops (SlurmClientTrouble)."""
        delay = self.client.backoff
        for attempt in range(1 + self.client.retries):
            res = self.client.run(
                args,
                cwd=str(cwd),
                retry=False,
                check_reachable=False,
                env=sbatch_env(os.environ),
            )
            if res.ok or not is_transient(res.stderr):
                if not res.ok and is_client_trouble(res.stderr):  # an accepted job is kept
                    self.store.discard_intents(made_now)
                    stop_on_client_trouble(res.stderr, res.message, "sbatch", self.campaign.dir)
                return res, None
            if attempt < self.client.retries:
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
                found = self._find_by_token({token}, check_reachable=False)
                if found.get(token):
                    return res, found[token]
        raise SchedulerUnreachable(
            f"sbatch could not reach the Slurm controller ({res.message}). Nothing is lost: "
            f"once `sinfo` answers, run `ddlbench submit --resume {self.campaign.name}`."
        )

    def submit_runs(self, runs, intents, *, serial, array, summary: SubmitSummary, advance):
        self.client.notice = self.notice  # a slow Slurm call is said, not waited out silently
        self.slurm_config()  # one call; tells later polls where ended jobs are recorded
        units = self._units(runs, intents, array)
        previous = self.last_live_job() if serial else None
        for unit in units:
            if self._cancelled():
                summary.stopped = "the campaign was cancelled (ddlbench cancel) meanwhile"
                break
            intent = unit[0][1]
            if len(unit) == 1 and (intent is None or intent.array_task_id is None):
                # an interrupted resubmission of a serial run stays chained (infra_retry.py)
                chained = serial or bool(intent and intent.serial)
                after = previous if serial else (self.last_live_job() if chained else None)
                job = self.submit_attempt(
                    unit[0][0], intent, after=after, serial=chained, summary=summary
                )
            else:
                job = self._submit_array(unit, previous, serial, summary)
            if job and serial:
                previous = job
            advance(len(unit))

    def _units(
        self, runs: List[RunInfo], intents: List[Attempt], array: bool
    ) -> List[List[Tuple[RunInfo, Optional[Attempt]]]]:
        units: List[List[Tuple[RunInfo, Optional[Attempt]]]] = []
        by_batch: Dict[str, List[Tuple[RunInfo, Optional[Attempt]]]] = {}
        for a in intents:  # interrupted submissions go again as they were, same tokens
            by_batch.setdefault(a.batch_token, []).append((self.campaign.run(a.run_id), a))
        for batch in by_batch.values():
            batch.sort(key=lambda ra: ra[1].array_task_id or 0)  # type: ignore[union-attr]
            units.append(batch)
        if not array:
            units.extend([(r, None)] for r in runs)
            return units
        groups: Dict[tuple, List[RunInfo]] = {}
        for r in runs:
            groups.setdefault(JobScript.read(r.script).shape_key(), []).append(r)
        for group in groups.values():
            if len(group) == 1:
                units.append([(group[0], None)])
            else:
                units.append([(r, None) for r in group])
        units.sort(key=lambda u: min(r.seq for r, _ in u))
        return units

    def last_live_job(self) -> Optional[str]:
        """The campaign's newest live job (the array's id for array tasks): what a serial
        submission, or the resubmission of a serial run, waits for (afterany)."""
        live = [a for a in self.store.live_attempts("slurm") if a.job_id]
        if not live:
            return None
        last = max(live, key=lambda a: a.id)
        return last.base_job_id

    def submit_attempt(
        self,
        run: RunInfo,
        intent: Optional[Attempt],
        *,
        after: Optional[str],
        serial: bool,
        summary: SubmitSummary,
    ) -> Optional[str]:
        """sbatch one run (its recorded ``intent``, else a new attempt), after job ``after``."""
        token = intent.token if intent else new_token()
        made_now = intent is None  # an interrupted submit's intent is kept (reconcile)
        if intent is None:
            intent = self.store.new_attempt(run.run_id, "slurm", S.SUBMITTING, token=token)
        script = JobScript.read(run.script)
        name = f"{script.job_name or run.run_id}~{token}"
        args = sbatch_args(str(run.script), token=token, name=name, after=after)
        args[1:1] = exclude_args(self.settings.exclude_nodes)
        res, found = self._sbatch(args, run.run_dir, token, [intent.id] if made_now else [])
        if found:
            self._apply(intent, found[0])
            summary.add_adopted(run.run_id, found[0].key)
            return found[0].key
        job_id = parse_sbatch_parsable(res.stdout) if res.ok else None
        if job_id is None:
            msg = res.message
            self.store.update_attempt(
                intent.id, state=S.SUBMIT_FAILED, message=msg, end_time=time.time()
            )
            summary.add_failed(run.run_id, msg)
            self._progress(f"sbatch rejected {run.run_id}: {msg}")
            return None
        self.store.update_attempt(
            intent.id,
            if_state_in=[S.SUBMITTING],
            state=S.PENDING,
            job_id=job_id,
            submit_time=time.time(),
            serial=int(serial),
            depends_on=after,
        )
        summary.add_submitted(run.run_id, job_id)
        return job_id

    def _array_attempts(self, unit) -> Tuple[str, List[Attempt]]:
        """The array's token and its attempts: the recorded intents, else new SUBMITTING
        attempts, one per array task."""
        intents = [a for _, a in unit if a is not None]
        if intents:
            return intents[0].batch_token, intents
        token = new_token()
        attempts: List[Attempt] = []
        with self.store.tx():
            for i, (run, _) in enumerate(unit):
                attempts.append(
                    self.store.new_attempt(
                        run.run_id,
                        "slurm",
                        S.SUBMITTING,
                        token=f"{token}-{i}",
                        batch_token=token,
                        array_task_id=i,
                    )
                )
        return token, attempts

    def _progress(self, line: str) -> None:  # stderr, as it happens; the summary lists it
        (self.notice or (lambda _line: None))(line)

    def _array_rejected(self, attempts: List[Attempt], runs, msg: str, summary) -> None:
        with self.store.tx():
            for a in attempts:
                self.store.update_attempt(
                    a.id, state=S.SUBMIT_FAILED, message=msg, end_time=time.time()
                )
        for r in runs:
            summary.add_failed(r.run_id, msg)
        self._progress(f"sbatch rejected the array of {len(runs)} runs: {msg}")

    def _submit_array(self, unit, previous, serial, summary) -> Optional[str]:
        token, attempts = self._array_attempts(unit)
        runs = [r for r, _ in unit]
        path = write_array_script(self.campaign, token, runs)
        throttle = "%1" if serial else ""
        name = f"{self.campaign.name}.array~{token}"
        tasks = f"0-{len(runs) - 1}{throttle}"
        args = sbatch_args(str(path), token=token, name=name, after=previous, array=tasks)
        args[1:1] = exclude_args(self.settings.exclude_nodes)
        made_now = not any(a for _, a in unit)  # not an interrupted submit's intents
        res, found = self._sbatch(args, path.parent, token, [a.id for a in attempts if made_now])
        if found:
            self._adopt(attempts, found, summary)
            return found[0].array_job_id or found[0].key
        array_id = parse_sbatch_parsable(res.stdout) if res.ok else None
        if array_id is None:
            self._array_rejected(attempts, runs, res.message, summary)
            return None
        self._record_array(attempts, array_id, serial, previous, summary)
        return array_id

    def _record_array(
        self,
        attempts: List[Attempt],
        array_id: str,
        serial: bool,
        previous: Optional[str],
        summary: SubmitSummary,
    ) -> None:
        """The array's tasks are PENDING as ``<array>_<task>`` (one transaction)."""
        now = time.time()
        with self.store.tx():
            for a in attempts:
                self.store.update_attempt(
                    a.id,
                    if_state_in=[S.SUBMITTING],
                    state=S.PENDING,
                    job_id=f"{array_id}_{a.array_task_id}",
                    array_job_id=array_id,
                    submit_time=now,
                    serial=int(serial),
                    depends_on=previous,
                )
        for a in attempts:
            summary.add_submitted(a.run_id, f"{array_id}_{a.array_task_id}")
        summary.array_jobs.append(array_id)

    # -- reconciling interrupted submissions ----------------------------------------------

    def _find_by_token(self, tokens, check_reachable: bool = True) -> Dict[str, List[JobRecord]]:
        """This user's jobs whose comment or name carries one of ``tokens`` (one squeue)."""
        res = self.client.run(squeue_args(me=True), check_reachable=check_reachable)
        found: Dict[str, List[JobRecord]] = {}
        if not res.ok:
            return found
        for rec in parse_squeue(res.stdout):
            tok = token_of(rec.comment, rec.name)
            if tok in tokens:
                found.setdefault(tok, []).append(rec)
        return found

    def _adopt(self, attempts: List[Attempt], records: List[JobRecord], summary=None) -> None:
        by_task = {r.array_task_id: r for r in records}
        for a in attempts:
            rec = by_task.get(a.array_task_id) if a.array_task_id is not None else records[0]
            if rec is None:
                continue
            self._apply(a, rec)
            if summary is not None:
                summary.add_adopted(a.run_id, rec.key)

    def reconcile(self) -> List[Tuple[str, str]]:
        intents = self.store.attempts(states=[S.SUBMITTING], scheduler="slurm")
        if not intents:
            return []
        tokens = {a.batch_token for a in intents}
        found = self._find_by_token(tokens)
        missing = tokens - set(found)
        if missing:
            for rec in self._ended_records_by_token(missing):
                tok = token_of(rec.comment, rec.name)
                if tok:
                    found.setdefault(tok, []).append(rec)
        adopted: List[Tuple[str, str]] = []
        for a in intents:
            recs = found.get(a.batch_token)
            if not recs:
                continue
            if a.array_task_id is not None:
                recs = [r for r in recs if r.array_task_id == a.array_task_id]
                if not recs:
                    continue
            self._apply(a, recs[0])
            adopted.append((a.run_id, recs[0].key))
        return adopted

    def _ended_records_by_token(self, tokens) -> List[JobRecord]:
        """Jobs that already ended and left squeue: the jobcomp file, else sacct by name."""
        out: List[JobRecord] = []
        path = self.jobcomp_path()
        if path is not None:
            out = [r for r in parse_jobcomp(_read_text(path)) if token_of(None, r.name) in tokens]
        elif self.sacct_mode() == "yes":
            since = min(a.created for a in self.store.attempts(states=[S.SUBMITTING]))
            start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 300))
            res = self.client.run(sacct_since_args(start))
            if res.ok:
                out = [r for r in parse_sacct(res.stdout) if token_of(None, r.name) in tokens]
        return out

    # -- polling -------------------------------------------------------------------------------

    def _apply(self, attempt: Attempt, rec: JobRecord) -> bool:
        """Write what ``rec`` says of ``attempt`` (poll.record_values), with the failing task."""
        values = poll.record_values(attempt, rec)
        if poll.needs_cause(attempt, rec):
            values.update(self._task_failure(attempt, rec))
        changed = poll.changes(attempt, values)
        if not changed:
            return False
        return self.store.update_attempt(attempt.id, if_live=True, **changed)

    def _task_failure(self, attempt: Attempt, rec: JobRecord) -> Dict[str, object]:
        """The first failing task (or step) and its signal: sacct's step records when this
        poll read them, else srun's lines in the job's output (task_failure.py)."""
        try:
            run_dir = self.campaign.run(attempt.run_id).run_dir
        except DDLBenchError:
            return {}
        ids = {i for i in (rec.own_id, rec.key, attempt.job_id) if i}
        files = RunPaths(run_dir)
        paths = [files.slurm_output(i, s) for i in sorted(ids) for s in ("err", "out")]
        steps = self.steps.get(rec.key) if rec.source == "sacct" else None
        found = find_cause(steps, (p for p in paths if p.is_file()))
        code = found[0].exit_code if found else rec.exit_code
        hung = stopped_values(code) or hung_values(run_dir, code)
        hung = hung if rec.state == S.FAILED else {}
        out: Dict[str, object] = {}
        if found is not None:
            failure, source = found
            out.update(failed_task=failure.task, failed_signal=failure.signal)
            out.update(cause=failure.describe(), cause_source=source)
        if rec.state == S.FAILED and not hung:  # the failing rank's own message, if it logged one
            out.update(error_values(run_dir, found[0].signal if found else None, ids))
        out.update(hung)  # a stop on SIGUSR1 or a hang says why better than srun's exit line
        node_down = self._node_failure(rec, found[0] if found else None)
        if node_down:  # the node's end first; srun's first failing task after it
            out.update(cause=node_down, cause_source="slurm")
        return out

    def _node_failure(self, rec: JobRecord, failure: Optional[TaskFailure]) -> Optional[str]:
        """A NODE_FAIL/BOOT_FAIL said as a node that went down, naming it if sinfo still does."""
        if node_failure_cause(rec.slurm_state, None, None) is None:
            return None
        res = self.client.run(sinfo_nodes_args(rec.nodelist), check_reachable=False)
        down = bad_nodes(res.stdout) if res.ok and rec.nodelist else []
        return node_failure_cause(rec.slurm_state, failure, rec.nodelist, down)

    def refresh(self) -> RefreshResult:
        result = RefreshResult()
        calls0 = self.client.calls
        live = self.store.live_attempts("slurm")
        if not live:
            return result
        with_id = [a for a in live if a.job_id]
        intents = [a for a in live if not a.job_id]
        ids = {a.base_job_id for a in with_id if a.base_job_id}
        res = self.client.run(squeue_args(ids, me=bool(intents) or not ids))
        if res.ok:
            records = parse_squeue(res.stdout)
        elif "invalid job id" in res.stderr.lower():
            records = []  # every job asked about has left the controller
        else:
            stop_on_client_trouble(res.stderr, res.message, "squeue", self.campaign.dir, POLL_THEN)
            raise DDLBenchError(f"squeue failed: {res.message}")
        by_key = {r.key: r for r in records}
        by_token: Dict[str, List[JobRecord]] = {}
        for r in records:
            tok = token_of(r.comment, r.name)
            if tok:
                by_token.setdefault(tok, []).append(r)

        need: List[Tuple[Attempt, Optional[JobRecord]]] = []
        now = time.time()
        with self.store.tx():
            for a in intents:
                recs = by_token.get(a.batch_token) or []
                if a.array_task_id is not None:
                    recs = [r for r in recs if r.array_task_id == a.array_task_id]
                if recs:
                    result.changed += self._apply(a, recs[0])
            for a in with_id:
                rec = by_key.get(a.job_id or "")
                if poll.needs_accounting(rec):
                    need.append((a, rec))
                else:
                    result.changed += self._apply(a, rec)  # type: ignore[arg-type]
        if need:
            result.changed += self._details(need, now, calls_left=2 - (self.client.calls - calls0))
        result.calls = self.client.calls - calls0
        return result

    def _details(
        self, need: List[Tuple[Attempt, Optional[JobRecord]]], now: float, calls_left: int
    ) -> int:
        """How jobs ended: sacct, else the jobcomp file (no call), else scontrol."""
        recs: Dict[str, JobRecord] = {}
        tried_sacct = sacct_answered = False
        if calls_left > 0 and self.sacct_mode() == "yes":
            tried_sacct = True
            res = self.client.run(sacct_args({a.base_job_id for a, _ in need if a.base_job_id}))
            if res.ok:
                sacct_answered = True
                recs.update({r.key: r for r in parse_sacct(res.stdout)})
                self.steps.update(parse_sacct_steps(res.stdout))
            elif is_no_accounting(res.stderr + res.stdout):
                self.store.set_meta("sacct_works", False)
            calls_left -= 1
        missing = {a.job_id for a, _ in need if a.job_id not in recs}
        if missing:
            recs.update(self._jobcomp_records(missing))
        missing = {a.job_id for a, _ in need if a.job_id not in recs}
        listed = any(sq is not None for a, sq in need if a.job_id in missing)
        if missing and calls_left > 0 and not tried_sacct and listed:
            # no accounting, no jobcomp: the controller still knows the jobs squeue listed
            res = self.client.run(scontrol_jobs_args())
            if res.ok:
                recs.update({r.key: r for r in parse_scontrol_jobs(res.stdout) if r.key in missing})
        lost_after = self.settings.lost_after_s
        changed = 0
        with self.store.tx():
            for a, sq in need:
                acct = recs.get(a.job_id or "")
                update = poll.decide(a, sq, acct, now, sacct_answered, lost_after=lost_after)
                if update.record is not None:
                    changed += self._apply(a, update.record)
                elif update.values:
                    changed += self.store.update_attempt(a.id, if_live=True, **update.values)
        return changed

    def _jobcomp_records(self, keys) -> Dict[str, JobRecord]:
        """Records for ``keys`` from the jobcomp file, read incrementally (offset in meta)."""
        return read_jobcomp(self.store, self.jobcomp_path(), keys)

    # -- cancelling ------------------------------------------------------------------------------

    def cancel(self, attempts: List[Attempt]) -> List[str]:
        ids = [a.job_id for a in attempts if a.job_id]
        msgs: List[str] = []
        if ids:
            res = self.client.run(scancel_args(ids))
            if not res.ok:  # nothing was cancelled: the jobs stay as they were
                stop_on_client_trouble(
                    res.stderr, res.message, "scancel", self.campaign.dir, CANCEL_THEN
                )
            if not res.ok and "invalid job id" not in res.stderr.lower():
                msgs.append(f"scancel: {res.message}")
            with self.store.tx():
                for a in attempts:
                    if a.job_id:
                        self.store.update_attempt(a.id, if_live=True, cancel_requested=1)
        return msgs


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
