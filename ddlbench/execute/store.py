"""The campaign store: ``results/<campaign>/state.sqlite``.

One SQLite database per campaign, in WAL mode, written in short ``BEGIN IMMEDIATE``
transactions with a generous busy timeout, so that ``ddlbench submit``, ``status``, ``wait``,
``cancel`` and the local runner can all use it at once from separate processes.

Tables: ``runs`` (one row per run of campaign.json), ``attempts`` (every submission of a run,
never deleted: a retry adds a row), ``counters`` (local job ids) and ``meta`` (cached scheduler
facts, the local runner's pid, ...). See docs/campaigns.md.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence

from ddlbench.campaign import states as S
from ddlbench.campaign.paths import CampaignPaths
from ddlbench.execute.store_guard import (
    check_store_file,
    damaged,
    is_new_store,
    patient,
    refuse_new_store_over_output,
    storage_error,
)

SCHEMA_VERSION = 2  # 2: attempts.restarts and the events table (state history)
# attempt columns added since (serial, depends_on, cause_source) are added in place by
# _add_missing_columns: a store of any 2.x ddlbench opens unchanged

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs(
    run_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    script TEXT NOT NULL,
    run_dir TEXT NOT NULL,
    nodes INTEGER,
    tasks_per_node INTEGER,
    added REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    number INTEGER NOT NULL,
    token TEXT NOT NULL UNIQUE,
    batch_token TEXT NOT NULL,
    scheduler TEXT NOT NULL,
    state TEXT NOT NULL,
    job_id TEXT,
    array_job_id TEXT,
    array_task_id INTEGER,
    exit_code INTEGER,
    signal INTEGER,
    reason TEXT,
    message TEXT,
    created REAL NOT NULL,
    submit_time REAL,
    start_time REAL,
    end_time REAL,
    nodelist TEXT,
    pid INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    missing_since REAL,
    updated REAL NOT NULL,
    source TEXT,
    slurm_state TEXT,
    failed_task INTEGER,
    failed_signal INTEGER,
    cause TEXT,
    restarts INTEGER NOT NULL DEFAULT 0,
    serial INTEGER,
    depends_on TEXT,
    cause_source TEXT,
    UNIQUE(run_id, number)
);
CREATE INDEX IF NOT EXISTS attempts_state ON attempts(state);
CREATE INDEX IF NOT EXISTS attempts_job ON attempts(job_id);
CREATE INDEX IF NOT EXISTS attempts_batch ON attempts(batch_token);
CREATE TABLE IF NOT EXISTS events(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    attempt_id INTEGER NOT NULL REFERENCES attempts(id),
    time REAL NOT NULL,
    state TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS events_attempt ON events(attempt_id);
CREATE TABLE IF NOT EXISTS counters(
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""


@dataclass
class Attempt:
    id: int
    run_id: str
    number: int
    token: str
    batch_token: str
    scheduler: str
    state: str
    job_id: Optional[str] = None
    array_job_id: Optional[str] = None
    array_task_id: Optional[int] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    reason: Optional[str] = None
    message: Optional[str] = None
    created: float = 0.0
    submit_time: Optional[float] = None
    start_time: Optional[float] = None
    end_time: Optional[float] = None
    nodelist: Optional[str] = None
    pid: Optional[int] = None
    cancel_requested: int = 0
    missing_since: Optional[float] = None
    updated: float = 0.0
    #: where the newest state came from: squeue, sacct, jobcomp, scontrol (Slurm) or local
    source: Optional[str] = None
    #: Slurm's own word for how the job ended (BOOT_FAIL, PREEMPTED, NODE_FAIL...)
    slurm_state: Optional[str] = None
    #: the first task (rank) that failed, and the signal that ended it (None: it exited)
    failed_task: Optional[int] = None
    failed_signal: Optional[int] = None
    #: what ended the run, in words ("task 1 on n2: Killed"), when it was not its exit code
    cause: Optional[str] = None
    #: how many times the scheduler restarted this job (Slurm requeue: same job id, the job
    #: script starts again and logs into a new logs/attempt-<k>/ folder)
    restarts: int = 0
    #: submitted chained (``--serial``): runs of the campaign never overlap; kept so that an
    #: infrastructure resubmission is chained again (execute/infra_retry.py)
    serial: Optional[int] = None
    #: the job this attempt waited for (``--dependency=afterany:<job>``), if any
    depends_on: Optional[str] = None
    #: where ``cause``/``failed_task`` came from: ``sacct`` (step records) or ``srun``
    #: (srun's lines in the job's stderr); execute/task_failure.py
    cause_source: Optional[str] = None

    @property
    def final(self) -> bool:
        return self.state in S.FINAL

    @property
    def base_job_id(self) -> Optional[str]:
        """The id to give ``squeue --jobs``/``sacct -j``: the array job's for array tasks."""
        return self.array_job_id or self.job_id

    def as_dict(self) -> Dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_ATTEMPT_COLS = [f.name for f in fields(Attempt)]
_UPDATABLE = set(_ATTEMPT_COLS) - {"id", "run_id", "number", "token", "created"}


def new_token() -> str:
    """A short random token that names one submission (sbatch --comment and job name)."""
    return secrets.token_hex(6)


class CampaignStore:
    """Access to one campaign's ``state.sqlite``. Not shared between threads."""

    #: seconds a write waits for disk space before it raises DiskFull (0: at once)
    wait_when_full: float = 0.0
    _told_full = False
    _depth = 0

    def __init__(self, path: Path, *, timeout: float = 60.0, rebuild: bool = False):
        self.path = Path(path)
        if not rebuild and is_new_store(self.path):
            refuse_new_store_over_output(self.path.parent)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        suspect = check_store_file(self.path)
        try:
            self._open(timeout)
            if suspect is not None:
                ok = self.conn.execute("PRAGMA quick_check(1)").fetchone()
                if ok is None or ok[0] != "ok":
                    self.conn.close()
                    raise damaged(self.path, suspect)
        except sqlite3.OperationalError as exc:
            full = storage_error(self.path, exc)
            if full is not None:
                with contextlib.suppress(Exception):
                    self.conn.close()
                raise full from None
            raise
        except sqlite3.DatabaseError as exc:  # not a database, malformed image
            with contextlib.suppress(Exception):
                self.conn.close()
            raise damaged(self.path, exc) from None

    def _open(self, timeout: float) -> None:
        self.conn = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        self.journal_mode = str(mode).lower()
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._depth = 0
        try:  # an existing store: no write needed just to open it
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is not None:
                if str(row[0]) == "1":
                    self._migrate_from_1()
                self._add_missing_columns()
                return
        except sqlite3.OperationalError:
            pass
        with self.tx():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self.conn.execute(stmt)
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self.conn.execute(
                    "INSERT INTO meta(key, value) VALUES('schema', ?)", (str(SCHEMA_VERSION),)
                )

    def _add_missing_columns(self) -> None:
        """A store written by an older ddlbench gains the attempt columns added since."""
        have = {row[1] for row in self.conn.execute("PRAGMA table_info(attempts)")}
        types = {f.name: f.type for f in fields(Attempt)}
        missing = [c for c in _ATTEMPT_COLS if c not in have]
        if not missing:
            return
        with self.tx():
            have = {row[1] for row in self.conn.execute("PRAGMA table_info(attempts)")}
            for col in missing:
                if col not in have:
                    kind = "INTEGER" if "int" in str(types[col]) else "TEXT"
                    kind = "REAL" if "float" in str(types[col]) else kind
                    self.conn.execute(f"ALTER TABLE attempts ADD COLUMN {col} {kind}")

    def _migrate_from_1(self) -> None:
        """Schema 1 -> 2: add ``attempts.restarts`` and the ``events`` table."""
        with self.tx():
            cols = {r[1] for r in self.conn.execute("PRAGMA table_info(attempts)")}
            if "restarts" not in cols:
                self.conn.execute(
                    "ALTER TABLE attempts ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0"
                )
            for stmt in _SCHEMA.split(";"):
                if "events" in stmt:
                    self.conn.execute(stmt)
            self.conn.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION),))

    @classmethod
    def open(cls, campaign_dir: Path, *, rebuild: bool = False) -> CampaignStore:
        """The campaign's store. A missing or empty store is created only where no run folder
        holds output yet (else :class:`StoreLostError`); ``rebuild`` is for ``ddlbench recover``."""
        return cls(CampaignPaths.of(campaign_dir).store, rebuild=rebuild)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> CampaignStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield self.conn
            finally:
                self._depth -= 1
            return
        self._begin("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self.conn
            self._depth = 0
            self.conn.execute("COMMIT")
        except BaseException as exc:
            self._depth = 0
            if self.conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
            full = storage_error(self.path, exc) if isinstance(exc, sqlite3.Error) else None
            if full is not None:
                raise full from None
            raise

    def _begin(self, statement: str) -> None:
        """Start a transaction; a full disk (reported as an I/O error) is said as such."""
        try:
            self.conn.execute(statement)
        except sqlite3.OperationalError as exc:
            full = storage_error(self.path, exc)
            if full is not None:
                raise full from None
            raise

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several reads see one consistent state."""
        if self._depth:
            yield self.conn
            return
        self._begin("BEGIN")
        self._depth = 1
        try:
            yield self.conn
        finally:
            self._depth = 0
            self.conn.execute("COMMIT")

    # -- meta and counters ----------------------------------------------------------------

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    @patient
    def set_meta(self, key: str, value: Any) -> None:
        with self.tx():
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES(?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, json.dumps(value)),
            )

    @patient
    def del_meta(self, key: str) -> None:
        with self.tx():
            self.conn.execute("DELETE FROM meta WHERE key=?", (key,))

    @patient
    def next_counter(self, name: str, start: int = 1) -> int:
        """Next value of a counter that never repeats within this store."""
        with self.tx():
            row = self.conn.execute("SELECT value FROM counters WHERE name=?", (name,)).fetchone()
            value = start if row is None else int(row[0]) + 1
            self.conn.execute(
                "INSERT INTO counters(name, value) VALUES(?, ?) "
                "ON CONFLICT(name) DO UPDATE SET value=excluded.value",
                (name, value),
            )
        return value

    # -- runs -----------------------------------------------------------------------------

    def sync_runs(self, runs: Iterable[Any]) -> None:
        """Insert the campaign's runs (``RunInfo``); runs already known keep their attempts."""
        now = time.time()
        with self.tx():
            for r in runs:
                self.conn.execute(
                    "INSERT INTO runs(run_id, seq, script, run_dir, nodes, tasks_per_node, added) "
                    "VALUES(?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
                    "seq=excluded.seq, script=excluded.script, run_dir=excluded.run_dir, "
                    "nodes=excluded.nodes, tasks_per_node=excluded.tasks_per_node",
                    (
                        r.run_id,
                        r.seq,
                        str(r.script),
                        str(r.run_dir),
                        r.nodes,
                        r.tasks_per_node,
                        now,
                    ),
                )

    def run_ids(self) -> List[str]:
        return [row[0] for row in self.conn.execute("SELECT run_id FROM runs ORDER BY seq")]

    # -- attempts -------------------------------------------------------------------------

    @patient
    def new_attempt(
        self,
        run_id: str,
        scheduler: str,
        state: str,
        *,
        token: Optional[str] = None,
        batch_token: Optional[str] = None,
        **values: Any,
    ) -> Attempt:
        now = time.time()
        token = token or new_token()
        with self.tx():
            row = self.conn.execute(
                "SELECT COALESCE(MAX(number), 0) FROM attempts WHERE run_id=?", (run_id,)
            ).fetchone()
            number = int(row[0]) + 1
            cols = {
                "run_id": run_id,
                "number": number,
                "token": token,
                "batch_token": batch_token or token,
                "scheduler": scheduler,
                "state": state,
                "created": now,
                "updated": now,
            }
            for key, val in values.items():
                if key not in _UPDATABLE:
                    raise KeyError(key)
                cols[key] = val
            names = ", ".join(cols)
            marks = ", ".join("?" for _ in cols)
            cur = self.conn.execute(
                f"INSERT INTO attempts({names}) VALUES({marks})", tuple(cols.values())
            )
            attempt_id = int(cur.lastrowid)
            self._event(attempt_id, now, state, values.get("reason"))
        got = self.get_attempt(attempt_id)
        assert got is not None
        return got

    @patient
    def new_attempt_after(
        self, previous: Attempt, scheduler: str, state: str, **values: Any
    ) -> Optional[Attempt]:
        """A new attempt of ``previous``'s run, only while ``previous`` is still the run's
        newest (one transaction): of two processes that both try, one gets it, the other
        None."""
        with self.tx():
            row = self.conn.execute(
                "SELECT MAX(number) FROM attempts WHERE run_id=?", (previous.run_id,)
            ).fetchone()
            if int(row[0] or 0) != previous.number:
                return None
            return self.new_attempt(previous.run_id, scheduler, state, **values)

    @patient
    def discard_intents(self, attempt_ids: Iterable[int]) -> None:
        """Forget SUBMITTING attempts whose sbatch could not run at all (no job can exist):
        their runs are not submitted, as before the submit."""
        with self.tx():
            for aid in attempt_ids:
                row = self.conn.execute(
                    "SELECT 1 FROM attempts WHERE id=? AND state=? AND job_id IS NULL",
                    (aid, S.SUBMITTING),
                ).fetchone()
                if row:
                    self.conn.execute("DELETE FROM events WHERE attempt_id=?", (aid,))
                    self.conn.execute("DELETE FROM attempts WHERE id=?", (aid,))

    def get_attempt(self, attempt_id: int) -> Optional[Attempt]:
        row = self.conn.execute("SELECT * FROM attempts WHERE id=?", (attempt_id,)).fetchone()
        return _attempt(row) if row else None

    @patient
    def update_attempt(
        self,
        attempt_id: int,
        *,
        if_state_in: Optional[Sequence[str]] = None,
        if_live: bool = False,
        **values: Any,
    ) -> bool:
        """Set columns of one attempt; with a condition, only if the attempt still meets it.

        Returns whether a row changed. Final attempts are only changed when ``if_state_in``
        names their state: a late poll never overwrites how a run ended.
        """
        for key in values:
            if key not in _UPDATABLE:
                raise KeyError(key)
        values["updated"] = time.time()
        sets = ", ".join(f"{k}=?" for k in values)
        where = "id=?"
        params: List[Any] = list(values.values()) + [attempt_id]
        if if_state_in is not None:
            where += " AND state IN ({})".format(", ".join("?" for _ in if_state_in))
            params += list(if_state_in)
        elif if_live:
            where += " AND state IN ({})".format(", ".join("?" for _ in S.LIVE))
            params += sorted(S.LIVE)
        with self.tx():
            before = None
            if "state" in values:
                row = self.conn.execute(
                    "SELECT state FROM attempts WHERE id=?", (attempt_id,)
                ).fetchone()
                before = row[0] if row else None
            cur = self.conn.execute(f"UPDATE attempts SET {sets} WHERE {where}", params)
            changed = cur.rowcount > 0
            if changed and "state" in values and values["state"] != before:
                detail = values.get("message") or values.get("reason")
                self._event(attempt_id, values["updated"], values["state"], detail)
        return changed

    def _event(self, attempt_id: int, when: float, state: str, detail: Any = None) -> None:
        self.conn.execute(
            "INSERT INTO events(attempt_id, time, state, detail) VALUES(?, ?, ?, ?)",
            (attempt_id, when, state, None if detail is None else str(detail)),
        )

    def record_restart(
        self, attempt_id: int, restarts: int, detail: str, when: Optional[float] = None
    ) -> bool:
        """Raise an attempt's restart count to ``restarts`` (never lowers it); one event per
        new restart, at ``when`` (the restart's start) if known. Returns whether it changed."""
        with self.tx():
            row = self.conn.execute(
                "SELECT restarts FROM attempts WHERE id=?", (attempt_id,)
            ).fetchone()
            if row is None or int(row[0] or 0) >= restarts:
                return False
            now = time.time()
            self.conn.execute(
                "UPDATE attempts SET restarts=?, updated=? WHERE id=?", (restarts, now, attempt_id)
            )
            for n in range(int(row[0] or 0) + 1, restarts + 1):
                self._event(attempt_id, when or now, "RESTARTED", f"restart {n}: {detail}")
        return True

    def history(self, attempt_id: int) -> List[Dict[str, Any]]:
        """The state history of one attempt, oldest first: time, state, detail."""
        rows = self.conn.execute(
            "SELECT time, state, detail FROM events WHERE attempt_id=? ORDER BY time, id",
            (attempt_id,),
        ).fetchall()
        return [dict(r) for r in rows]

    def attempts(
        self,
        run_id: Optional[str] = None,
        *,
        states: Optional[Iterable[str]] = None,
        scheduler: Optional[str] = None,
        batch_token: Optional[str] = None,
    ) -> List[Attempt]:
        where, params = [], []
        if run_id is not None:
            where.append("run_id=?")
            params.append(run_id)
        if states is not None:
            st = list(states)
            where.append("state IN ({})".format(", ".join("?" for _ in st)))
            params += st
        if scheduler is not None:
            where.append("scheduler=?")
            params.append(scheduler)
        if batch_token is not None:
            where.append("batch_token=?")
            params.append(batch_token)
        sql = "SELECT * FROM attempts"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        return [_attempt(row) for row in self.conn.execute(sql, params)]

    def live_attempts(self, scheduler: Optional[str] = None) -> List[Attempt]:
        return self.attempts(states=S.LIVE, scheduler=scheduler)

    def latest(self) -> Dict[str, Attempt]:
        """The newest attempt of every run that has one."""
        rows = self.conn.execute(
            "SELECT a.* FROM attempts a JOIN "
            "(SELECT run_id, MAX(number) AS n FROM attempts GROUP BY run_id) m "
            "ON a.run_id = m.run_id AND a.number = m.n"
        )
        return {row["run_id"]: _attempt(row) for row in rows}

    def counts(self) -> Dict[str, int]:
        """Runs per state of their newest attempt (``NOT_SUBMITTED`` for runs with none)."""
        with self.snapshot():
            latest = self.latest()
            ids = self.run_ids()
        out: Dict[str, int] = {}
        for run_id in ids:
            a = latest.get(run_id)
            state = a.state if a else S.NOT_SUBMITTED
            out[state] = out.get(state, 0) + 1
        return out


def _attempt(row: sqlite3.Row) -> Attempt:
    return Attempt(**{k: row[k] for k in _ATTEMPT_COLS})
