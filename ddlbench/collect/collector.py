"""``ddlbench collect``: rank logs of a campaign -> ``data/*.parquet``.

Outputs (see ``docs/metrics.md`` for every column):

- ``steps.parquet``: one row per rank per step (warmup steps included, ``phase`` says which);
- ``ranks.parquet``: one row per rank per run: meta, summary, per-rank step statistics;
- ``runs.parquet`` / ``runs.csv``: one row per run: spec fields from campaign.json and run.json,
  Slurm state and attempts, completeness, and the run's throughput figures;
- ``evals.parquet``, ``allreduce.parquet``: eval and allreduce records, one row per rank;
- ``files.parquet``: every log file found, and what was done with it;
- ``collect.json``: the input fingerprint (staleness), counts and warnings.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import __version__
from .errors import CollectError
from .gpu_columns import add_gpu_columns
from .paths import COLLECT_INFO, COLLECTOR_VERSION, DATA_DIR, fingerprint, read_collect_info
from .reader import STEP_SCHEMA, RankFile, read_rank_files
from .states import iso_time

Progress = Optional[Callable[[str], None]]
RunStates = Union[None, pd.DataFrame, Callable[[Path], Optional[pd.DataFrame]]]

# the campaign store's vocabulary (Slurm's job states; see ddlbench/campaign/states.py)
FAILED_STATES = {
    "FAILED",
    "TIMEOUT",
    "CANCELLED",
    "OUT_OF_MEMORY",
    "NODE_FAIL",
    "SUBMIT_FAILED",
    "LOST",
    "BOOT_FAIL",
    "DEADLINE",
}
ACTIVE_STATES = {
    "SUBMITTING",
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "REQUEUED",
    "PREEMPTED",
    "CONFIGURING",
    "COMPLETING",
}
STATE_COLUMNS = ["job_id", "state", "exit_code", "start", "end", "nodelist", "reason"]
SPEC_COLUMNS = [
    "framework",
    "workload",
    "model",
    "mode",
    "nodes",
    "tasks_per_node",
    "gpus_per_node",
    "world_size",
    "batch_size",
    "global_batch_size",
    "lr",
    "repeat",
    "precision",
    "scaling",
    "group",
    "run_dir",
]
STDERR_TAIL_LINES = 20


@dataclass
class CampaignData:
    """Everything collected from one campaign (as written to, or read from, ``data/``)."""

    campaign_dir: Path
    manifest: dict
    runs: pd.DataFrame
    ranks: pd.DataFrame
    evals: pd.DataFrame
    allreduce: pd.DataFrame
    files: pd.DataFrame
    info: dict = field(default_factory=dict)
    _steps: Optional[pa.Table] = None
    _steps_written: Optional[Callable[[], None]] = None  # waits for a pending steps write

    @property
    def name(self) -> str:
        return str(self.manifest.get("campaign") or self.campaign_dir.name)

    @property
    def data_dir(self) -> Path:
        return self.campaign_dir / DATA_DIR

    def steps_table(self) -> pa.Table:
        """The step rows (loaded from steps.parquet on first use)."""
        if self._steps is None:
            self._steps = pq.read_table(self.data_dir / "steps.parquet")
        return self._steps

    def steps(self, run_id: Optional[str] = None) -> pd.DataFrame:
        """Step rows as a DataFrame, optionally of one run only."""
        t = self.steps_table()
        if run_id is not None:
            t = t.filter(pc.equal(t.column("run_id").cast(pa.string()), run_id))
        return t.to_pandas()


# ---------------------------------------------------------------- inputs


def load_manifest(campaign_dir: Path) -> dict:
    path = campaign_dir / "campaign.json"
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise CollectError(f"{path} does not exist (not a campaign folder)") from None
    except (OSError, ValueError) as e:
        raise CollectError(f"{path} is not readable JSON: {e}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("runs", []), list):
        raise CollectError(f"{path}: expected an object with a 'runs' list")
    return manifest


def _read_json(path: Path) -> Optional[dict]:
    try:
        v = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return v if isinstance(v, dict) else None


def _group_of(run_id: str) -> str:
    import re

    return re.sub(r"-r\d+$", "", run_id)


def _planned_runs(campaign_dir: Path, manifest: dict) -> List[dict]:
    """Manifest runs, plus run folders that the manifest does not list."""
    runs = []
    seen = set()
    for entry in manifest.get("runs", []):
        if not isinstance(entry, dict) or not entry.get("run_id"):
            continue
        rid = str(entry["run_id"])
        if rid in seen:
            continue
        seen.add(rid)
        e = dict(entry)
        e.setdefault("run_dir", f"runs/{rid}")
        e["in_manifest"] = True
        runs.append(e)
    known_dirs = {(campaign_dir / r["run_dir"]).resolve() for r in runs}
    runs_root = campaign_dir / "runs"
    if runs_root.is_dir():
        for d in sorted(runs_root.iterdir()):
            if not d.is_dir() or d.resolve() in known_dirs:
                continue
            cfg = _read_json(d / "run.json") or {}
            rid = str(cfg.get("run_id") or d.name)
            if rid in seen:
                rid = d.name
            seen.add(rid)
            e = {k: cfg.get(k) for k in SPEC_COLUMNS if k in cfg}
            e.update(run_id=rid, run_dir=f"runs/{d.name}", in_manifest=False)
            e.setdefault("group", _group_of(rid))
            runs.append(e)
    runs.sort(key=lambda r: r["run_id"])
    return runs


def _normalise_states(states: RunStates, campaign_dir: Path) -> Optional[pd.DataFrame]:
    """One row per run_id: the latest attempt's state, and the number of attempts."""
    if callable(states):
        states = states(campaign_dir)
    if states is None or len(states) == 0:
        return None
    df = pd.DataFrame(states).copy()
    if "run_id" not in df.columns:
        raise CollectError("run states: a 'run_id' column is required")
    for c in STATE_COLUMNS:
        if c not in df.columns:
            df[c] = None
    order = [c for c in ("attempt", "start") if c in df.columns]
    if order:
        df = df.sort_values(["run_id"] + order, kind="stable", na_position="first")
    attempts = df.groupby("run_id", sort=False).size()
    if "attempts" in df.columns:
        given = df.groupby("run_id", sort=False)["attempts"].max()
        attempts = given.fillna(attempts)
    last = df.groupby("run_id", sort=False).tail(1).set_index("run_id")
    last = last[STATE_COLUMNS].copy()
    last["attempts"] = attempts
    return last


def _norm_state(s: Any) -> str:
    if s is None or (isinstance(s, float) and np.isnan(s)) or str(s).strip() == "":
        return "unknown"
    return str(s).split()[0].upper().rstrip("+")


def _stderr_tail(run_dir: Path, lines: int = STDERR_TAIL_LINES) -> str:
    """The last lines of the run's newest stderr file (``*.err``; else ``*.out``)."""
    for pattern in ("*.err", "*stderr*", "*.out"):
        found = [p for p in run_dir.glob(pattern) if p.is_file() and p.stat().st_size > 0]
        if found:
            newest = max(found, key=lambda p: (p.stat().st_mtime_ns, p.name))
            with open(newest, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 16384))
                text = fh.read().decode("utf-8", "replace")
            tail = text.splitlines()[-lines:]
            return f"[{newest.name}]\n" + "\n".join(tail)
    return ""


# ---------------------------------------------------------------- per-rank statistics

RANK_STAT_COLUMNS = [
    "steps",
    "steps_measured",
    "samples_measured",
    "t_first",
    "t_last",
    "measure_time_s",
    "throughput",
    "step_time_mean_s",
    "step_time_p5_s",
    "step_time_p25_s",
    "step_time_median_s",
    "step_time_p75_s",
    "step_time_p95_s",
    "step_time_mad_s",
    "step_time_jitter_s",
    "compute_median_s",
    "comm_median_s",
]


def _quantile_sorted(d: np.ndarray, q: float) -> float:
    """Quantile of sorted ``d`` by linear interpolation (numpy's default, "type 7")."""
    pos = q * (len(d) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(d) - 1)
    return float(d[lo] + (d[hi] - d[lo]) * (pos - lo))


def _rank_stats(steps: pa.Table, bounds: np.ndarray) -> Dict[str, np.ndarray]:
    """Per-rank statistics of the measured steps; rows of rank k are bounds[k]:bounds[k+1]."""
    k = len(bounds) - 1
    out = {c: np.full(k, np.nan) for c in RANK_STAT_COLUMNS}
    if steps.num_rows == 0 or k == 0:
        out["steps"] = np.diff(bounds).astype(float)
        out["steps_measured"] = np.zeros(k)
        out["samples_measured"] = np.zeros(k)
        return out
    ts = steps.column("t_start").to_numpy()
    te = steps.column("t_end").to_numpy()
    samples = steps.column("samples").to_numpy()
    meas = np.asarray(
        pc.fill_null(pc.equal(steps.column("phase"), "measure"), False).to_numpy(
            zero_copy_only=False
        ),
        dtype=bool,
    )
    comp = steps.column("compute_s")
    comm = steps.column("comm_s")
    comp = comp.to_numpy() if comp.null_count < len(comp) else None
    comm = comm.to_numpy() if comm.null_count < len(comm) else None
    if comp is not None:
        comp = np.asarray(comp, dtype=float)
    if comm is not None:
        comm = np.asarray(comm, dtype=float)
    dt_all = te - ts
    out["steps"] = np.diff(bounds).astype(float)
    # sums and extremes over the measured steps, vectorised over ranks
    idx = np.repeat(np.arange(k), np.diff(bounds))
    midx = idx[meas]
    nmeas = np.bincount(midx, minlength=k)
    out["steps_measured"] = nmeas.astype(float)
    out["samples_measured"] = np.bincount(midx, weights=samples[meas], minlength=k)
    mts, mte = ts[meas], te[meas]
    mb = np.concatenate(([0], np.cumsum(nmeas)))
    has = nmeas > 0
    starts = mb[:-1][has]
    if len(starts):
        out["t_first"][has] = np.minimum.reduceat(mts, starts)
        out["t_last"][has] = np.maximum.reduceat(mte, starts)
    out["measure_time_s"] = out["t_last"] - out["t_first"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["throughput"] = np.where(
            out["measure_time_s"] > 0, out["samples_measured"] / out["measure_time_s"], np.nan
        )
    mdt = dt_all[meas]
    mcomp = comp[meas] if comp is not None else None
    mcomm = comm[meas] if comm is not None else None
    if len(starts):
        out["step_time_mean_s"][has] = np.add.reduceat(mdt, starts) / nmeas[has]
    cols = [out[c] for c in ("step_time_p5_s", "step_time_p25_s", "step_time_median_s")]
    cols += [out["step_time_p75_s"], out["step_time_p95_s"]]
    qs = (0.05, 0.25, 0.5, 0.75, 0.95)
    for r in np.flatnonzero(has):
        a, b = mb[r], mb[r + 1]
        d = np.sort(mdt[a:b])
        for col, q in zip(cols, qs):
            col[r] = _quantile_sorted(d, q)
        mad = _quantile_sorted(np.sort(np.abs(d - out["step_time_median_s"][r])), 0.5)
        out["step_time_mad_s"][r] = mad
        for name, arr in (("compute_median_s", mcomp), ("comm_median_s", mcomm)):
            if arr is not None:
                v = arr[a:b]
                v = v[~np.isnan(v)]
                if len(v):
                    out[name][r] = float(np.median(v))
    out["step_time_jitter_s"] = 1.4826 * out["step_time_mad_s"]
    return out


# ---------------------------------------------------------------- collection


def _discover(campaign_dir: Path, runs: List[dict]) -> List[RankFile]:
    files = []
    for r in runs:
        logs = campaign_dir / r["run_dir"] / "logs"
        if not logs.is_dir():
            continue
        found = []
        for p in logs.rglob("rank-*.jsonl"):
            if p.is_file():
                st = p.stat()
                found.append(RankFile(p, r["run_id"], size=st.st_size, mtime_ns=st.st_mtime_ns))
        # rank order (rank-2 before rank-10): the step rows then need no reordering
        found.sort(key=lambda f: (f.name_rank if f.name_rank is not None else -1, str(f.path)))
        files.extend(found)
    return files


def _pick(files: List[RankFile]) -> RankFile:
    """Of several files claiming the same run and rank, the most complete (deterministic)."""

    def key(f: RankFile):
        meta_time = f.meta.get("time") if f.meta else None
        return (
            f.summary is not None,
            not f.errors,
            f.steps,
            meta_time if isinstance(meta_time, (int, float)) else float("-inf"),
            -f.truncated_lines - f.bad_lines,
            # identical copies: the shortest, then alphabetically first, path
            -len(str(f.path)),
            tuple(-ord(c) for c in str(f.path)),
        )

    return max(files, key=key)


def collect_campaign(
    campaign_dir: Union[str, Path],
    *,
    run_states: RunStates = None,
    progress: Progress = None,
    write: bool = True,
    defer_write: bool = False,
) -> CampaignData:
    """Collect one campaign folder; writes ``data/`` unless ``write`` is False.

    ``run_states``: the campaign store's view of the runs, as a DataFrame or a callable
    ``f(campaign_dir) -> DataFrame``, one row per attempt with the columns ``run_id``, and
    optionally ``attempt``/``attempts``, ``job_id``, ``state``, ``exit_code``, ``start``,
    ``end``, ``nodelist``. Without it every Slurm state is ``unknown``.

    ``defer_write``: start writing steps.parquet but leave the other files to a later
    :func:`write_data` (so that the caller can overlap its own work with the writing).

    Raises :class:`CollectError` (incl. ``LogFormatError``) for input it refuses.
    """
    say = progress or (lambda _m: None)
    campaign_dir = Path(campaign_dir)
    manifest = load_manifest(campaign_dir)
    inputs = fingerprint(campaign_dir)
    planned = _planned_runs(campaign_dir, manifest)
    files = _discover(campaign_dir, planned)
    steps, fidx = read_rank_files(files, campaign_dir, progress=say)

    say("assembling tables")
    # ---- choose one file per (run, rank)
    run_order = {r["run_id"]: i for i, r in enumerate(planned)}
    by_key: Dict[tuple, List[RankFile]] = {}
    for f in files:
        if f.meta is None or f.rank is None:
            f.status = "no_meta"
            continue
        by_key.setdefault((f.run_key, f.rank), []).append(f)
    kept: List[RankFile] = []
    dup_count: Dict[int, int] = {}
    for key in sorted(by_key, key=lambda k: (run_order[k[0]], k[1])):
        cands = by_key[key]
        best = _pick(cands)
        for f in cands:
            if f is not best:
                f.status = "duplicate"
        kept.append(best)
        dup_count[id(best)] = len(cands) - 1
    # ranks that left a file without any readable record still count as started
    started_no_meta: Dict[str, set] = {}
    for f in files:
        if f.status == "no_meta" and f.name_rank is not None:
            started_no_meta.setdefault(f.run_key, set()).add(f.name_rank)

    # ---- step rows of the kept files, ordered by (run, rank)
    index_of = {id(f): i for i, f in enumerate(files)}
    pos_of_file = np.full(len(files) + 1, -1, dtype=np.int64)
    for pos, f in enumerate(kept):
        pos_of_file[index_of[id(f)]] = pos
    row_pos = pos_of_file[fidx] if len(fidx) else np.zeros(0, dtype=np.int64)
    keep_rows = row_pos >= 0
    if not keep_rows.all():
        steps = steps.filter(pa.array(keep_rows))
        row_pos = row_pos[keep_rows]
    if len(row_pos) > 1 and np.any(np.diff(row_pos) < 0):
        order = np.argsort(row_pos, kind="stable")
        steps = steps.take(pa.array(order))
        row_pos = row_pos[order]
    counts = np.bincount(row_pos, minlength=len(kept)) if len(kept) else np.zeros(0, int)
    bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    run_ids = [r["run_id"] for r in planned]
    run_index = np.array([run_order[f.run_key] for f in kept], dtype=np.int32)
    rank_of = np.array([f.rank for f in kept], dtype=np.int32)
    row_file = np.repeat(np.arange(len(kept)), counts)
    steps_out = pa.table(
        [
            pa.DictionaryArray.from_arrays(
                pa.array(run_index[row_file], type=pa.int32()), pa.array(run_ids, pa.string())
            ),
            pa.array(rank_of[row_file], type=pa.int32()),
        ]
        + [steps.column(n) for n in STEP_SCHEMA.names],
        names=["run_id", "rank"] + STEP_SCHEMA.names,
    )

    steps_written = (
        _start_steps_write(campaign_dir / DATA_DIR, steps_out) if write or defer_write else None
    )
    stats = _rank_stats(steps, bounds)
    ranks = _ranks_frame(kept, stats, dup_count, campaign_dir)
    evals = _records_frame(kept, "evals", EVAL_COLUMNS)
    allreduce = _records_frame(kept, "allreduce", ALLREDUCE_COLUMNS)
    states = _normalise_states(run_states, campaign_dir)
    runs = _runs_frame(campaign_dir, planned, ranks, states, started_no_meta, files)
    runs = add_gpu_columns(runs, kept, campaign_dir)
    files_df = _files_frame(files, campaign_dir, dup_count)

    warnings = _warnings(runs, files_df)
    info = {
        "collector_version": COLLECTOR_VERSION,
        "ddlbench_version": __version__,
        "campaign": str(manifest.get("campaign") or campaign_dir.name),
        "inputs": inputs,
        "counts": {
            "runs": int(len(runs)),
            "runs_ok": int((runs["status"] == "ok").sum()) if len(runs) else 0,
            "rank_files": int(len(files)),
            "ranks": int(len(ranks)),
            "steps": int(steps_out.num_rows),
            "duplicate_files": int((files_df["status"] == "duplicate").sum()) if len(files) else 0,
            "truncated_lines": int(files_df["truncated_lines"].sum()) if len(files) else 0,
            "bad_lines": int(files_df["bad_lines"].sum()) if len(files) else 0,
        },
        "warnings": warnings,
    }
    data = CampaignData(
        campaign_dir=campaign_dir,
        manifest=manifest,
        runs=runs,
        ranks=ranks,
        evals=evals,
        allreduce=allreduce,
        files=files_df,
        info=info,
        _steps=steps_out,
        _steps_written=steps_written,
    )
    if write and not defer_write:
        say("writing data files")
        write_data(data)
    return data


EVAL_COLUMNS = ["epoch", "t", "elapsed_s", "accuracy", "loss", "samples"]
ALLREDUCE_COLUMNS = ["bytes", "dtype", "iters", "time_s", "algbw_gbps", "busbw_gbps"]


def _records_frame(kept: Sequence[RankFile], attr: str, columns: List[str]) -> pd.DataFrame:
    rows = []
    for f in kept:
        for rec in getattr(f, attr):
            row = {"run_id": f.run_key, "rank": f.rank}
            for c in columns:
                row[c] = rec.get(c)
            rows.append(row)
    df = pd.DataFrame(rows, columns=["run_id", "rank"] + columns)
    for c in columns:
        if c != "dtype":
            df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    if "bytes" in df:
        df["bytes"] = df["bytes"].astype("Int64")
    if "dtype" in df:
        df["dtype"] = df["dtype"].astype(object)
    df["rank"] = df["rank"].astype("int64")
    return _canonical(df)


META_COLUMNS = [
    "host",
    "local_rank",
    "node_rank",
    "world_size",
    "pid",
    "device",
    "device_name",
    "framework",
    "workload",
    "framework_version",
    "backend",
    "model",
    "param_count",
    "batch_size",
    "global_batch_size",
    "precision",
    "repeat",
    "mode",
    "slurm_job_id",
    "slurm_nodelist",
    "ddlbench_version",
    "python_version",
    "format_version",
]
SUMMARY_COLUMNS = [
    "status",
    "steps_measured",
    "samples_measured",
    "measure_time_s",
    "throughput",
    "final_loss",
    "final_accuracy",
    "best_accuracy",
    "time_to_accuracy_s",
    "param_sum",
    "param_sha256",
]


def _ranks_frame(
    kept: Sequence[RankFile], stats: Dict[str, np.ndarray], dup_count, campaign_dir: Path
) -> pd.DataFrame:
    rows = []
    for f in kept:
        meta = f.meta or {}
        row: Dict[str, Any] = {"run_id": f.run_key, "rank": f.rank}
        for c in META_COLUMNS:
            v = meta.get(c)
            row[c] = v if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True)
        row["start_time"] = meta.get("time")
        row["meta_run_id"] = meta.get("run_id")
        row["file"] = f.path.relative_to(campaign_dir).as_posix()
        row["duplicates"] = dup_count.get(id(f), 0)
        row["truncated_lines"] = f.truncated_lines
        row["bad_lines"] = f.bad_lines
        row["restarts"] = f.restarts
        s = f.summary
        row["has_summary"] = s is not None
        for c in SUMMARY_COLUMNS:
            row["summary_" + c] = None if s is None else s.get(c)
        row["has_error"] = bool(f.errors)
        row["error_message"] = f.errors[0].get("message") if f.errors else None
        row["evals"] = len(f.evals)
        row["allreduce_records"] = len(f.allreduce)
        rows.append(row)
    df = pd.DataFrame(rows)
    if not len(df):
        df = pd.DataFrame(
            columns=["run_id", "rank"]
            + META_COLUMNS
            + ["start_time", "file", "has_summary", "has_error"]
            + ["summary_" + c for c in SUMMARY_COLUMNS]
        )
    for c, v in stats.items():
        df[c] = v
    num = [
        "local_rank",
        "node_rank",
        "world_size",
        "pid",
        "param_count",
        "batch_size",
        "global_batch_size",
        "repeat",
        "format_version",
    ]
    for c in num:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    for c in ["start_time"] + [
        "summary_" + c for c in SUMMARY_COLUMNS if c not in ("status", "param_sha256")
    ]:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    for c in ["rank", "duplicates", "truncated_lines", "bad_lines", "restarts", "evals"]:
        if c in df:
            df[c] = df[c].astype("int64")
    for c in ("has_summary", "has_error"):
        df[c] = df[c].astype(bool)
    for c in ("steps", "steps_measured", "samples_measured"):
        df[c] = np.nan_to_num(df[c].to_numpy(dtype=float)).astype("int64")
    return _canonical(df)


def _fmt_ranks(ranks: Sequence[int], limit: int = 12) -> str:
    ranks = sorted(ranks)
    if len(ranks) <= limit:
        return ",".join(str(r) for r in ranks)
    return ",".join(str(r) for r in ranks[:limit]) + f",... ({len(ranks)} ranks)"


class _RunRanks:
    """Column slices of the ranks table for one run (rows sorted by rank)."""

    def __init__(self, cols: Dict[str, np.ndarray], a: int, b: int):
        self._cols, self._a, self._b = cols, a, b

    def __len__(self) -> int:
        return self._b - self._a

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols[name][self._a : self._b]

    def values(self, name: str) -> list:
        """Non-missing values of a column, in rank order."""
        return [v for v in self[name].tolist() if v is not None and v == v and v is not pd.NA]

    def ranks_where(self, name: str) -> set:
        return set(self["rank"][self[name].astype(bool)].tolist())


def _runs_frame(
    campaign_dir: Path,
    planned: List[dict],
    ranks: pd.DataFrame,
    states: Optional[pd.DataFrame],
    started_no_meta: Dict[str, set],
    files: Sequence[RankFile],
) -> pd.DataFrame:
    cols = {c: ranks[c].to_numpy(dtype=object) for c in ranks.columns}
    for c in ("rank", "has_summary", "has_error"):
        cols[c] = ranks[c].to_numpy()
    for c in ("step_time_median_s", "step_time_jitter_s", "samples_measured", "t_first"):
        cols[c] = ranks[c].to_numpy(dtype=float)
    for c in ("t_last", "throughput", "start_time", "summary_samples_measured", "compute_median_s"):
        cols[c] = ranks[c].to_numpy(dtype=float)
    by_run: Dict[str, _RunRanks] = {}
    rid_arr = cols["run_id"]
    if len(rid_arr):
        cuts = np.flatnonzero(rid_arr[1:] != rid_arr[:-1]) + 1
        edges = np.concatenate(([0], cuts, [len(rid_arr)]))
        for a, b in zip(edges[:-1], edges[1:]):
            by_run[str(rid_arr[a])] = _RunRanks(cols, int(a), int(b))
    nfiles: Dict[str, int] = {}
    for f in files:
        nfiles[f.run_key] = nfiles.get(f.run_key, 0) + 1
    rows = []
    for r in planned:
        rid = r["run_id"]
        run_dir = campaign_dir / r["run_dir"]
        cfg = _read_json(run_dir / "run.json") or {}
        row: Dict[str, Any] = {"run_id": rid}
        for c in SPEC_COLUMNS:
            v = r.get(c, cfg.get(c))
            row[c] = v
        row["group"] = row["group"] or _group_of(rid)
        data = r.get("data", cfg.get("data"))
        row["data_kind"] = data.get("kind") if isinstance(data, dict) else data
        row["data"] = json.dumps(data, sort_keys=True) if data is not None else None
        row["in_manifest"] = bool(r.get("in_manifest", True))
        row["device"] = cfg.get("device")
        sched = cfg.get("lr_schedule") or {}
        opt = cfg.get("optimizer") or {}
        row["base_lr"] = opt.get("base_lr")
        row["lr_scaling"] = sched.get("scaling")
        row["warmup_epochs"] = sched.get("warmup_epochs")
        row["epochs"] = cfg.get("epochs")
        row["target_accuracy"] = cfg.get("target_accuracy")
        st = cfg.get("steps") or {}
        row["planned_warmup_steps"] = st.get("warmup")
        row["planned_measure_steps"] = st.get("measure")
        fo = cfg.get("framework_options")
        row["framework_options"] = json.dumps(fo, sort_keys=True) if fo is not None else None

        g = by_run.get(rid)
        meta_ws = None
        if g is not None:
            vals = set(int(v) for v in g.values("world_size"))
            meta_ws = vals.pop() if len(vals) == 1 else None
        ws = row["world_size"]
        ws = int(ws) if ws is not None and not pd.isna(ws) else meta_ws
        row["world_size"] = ws
        problems: List[str] = []
        if meta_ws is not None and ws is not None and meta_ws != ws:
            problems.append(f"logs say world_size {meta_ws}, planned {ws}")
        if g is not None:
            other = sorted(set(g.values("meta_run_id")) - {rid})
            if other:
                problems.append(f"logs name another run: {', '.join(other)}")
        present = set() if g is None else set(g["rank"].tolist())
        with_summary = set() if g is None else g.ranks_where("has_summary")
        with_error = set() if g is None else g.ranks_where("has_error")
        expected = set(range(ws)) if ws else set()
        no_meta = started_no_meta.get(rid, set())
        extra = present - expected if expected else set()
        missing = expected - present - no_meta
        unreadable = (expected - present) & no_meta
        no_summary = (expected - with_summary - with_error) - missing
        row["rank_files"] = nfiles.get(rid, 0)
        row["ranks_present"] = len(present & expected) if expected else len(present)
        row["ranks_with_summary"] = len(with_summary & expected) if expected else 0
        row["ranks_with_error"] = len(with_error)
        row["missing_ranks"] = _fmt_ranks(missing)
        row["ranks_without_summary"] = _fmt_ranks(no_summary)
        row["error_ranks"] = _fmt_ranks(with_error)
        if extra:
            problems.append(f"ranks outside world_size: {_fmt_ranks(extra)}")
        if unreadable:
            problems.append(f"unreadable logs (no meta record) for ranks {_fmt_ranks(unreadable)}")
        log_complete = bool(expected) and with_summary >= expected and not with_error
        row["complete"] = log_complete

        # ---- Slurm state from the campaign store
        srow = None
        if states is not None and rid in states.index:
            srow = states.loc[rid]
        state = _norm_state(None if srow is None else srow["state"])
        row["slurm_state"] = state
        for key, col in (
            ("attempts", "attempts"),
            ("exit_code", "exit_code"),
            ("job_start", "start"),
            ("job_end", "end"),
            ("nodelist", "nodelist"),
            ("slurm_reason", "reason"),
        ):
            v = None if srow is None else srow[col]
            row[key] = None if v is None or (not isinstance(v, str) and pd.isna(v)) else v
        job_ids = [] if g is None else sorted(set(str(v) for v in g.values("slurm_job_id")))
        store_job = None if srow is None else _str_or_none(srow["job_id"])
        row["job_id"] = store_job or (",".join(job_ids) or None)
        if row["nodelist"] is None and g is not None:
            nl = g.values("slurm_nodelist")
            row["nodelist"] = str(nl[0]) if nl else None
        for key in ("job_start", "job_end"):
            row[key] = iso_time(row[key])

        if log_complete:
            status = "ok"
            if state in FAILED_STATES:
                problems.append(f"job ended {state} after every rank wrote its summary")
        elif with_error or state in FAILED_STATES:
            status = "failed"
        elif state in ACTIVE_STATES:
            status = "running" if state in ("RUNNING", "COMPLETING") else "pending"
        elif not present and not no_meta:
            status = "not_run"
        else:
            status = "incomplete"
        row["status"] = status
        err = None
        if g is not None and with_error:
            msgs = [m for m, e in zip(g["error_message"], g["has_error"]) if e and m is not None]
            err = str(msgs[0]) if msgs else None
        row["error_message"] = err

        # ---- provenance
        for c in ("framework_version", "backend", "device_name", "ddlbench_version"):
            vals = [] if g is None else sorted(set(str(v) for v in g.values(c)))
            row[c] = ",".join(vals) if vals else None
        if row["device"] is None and g is not None:
            vals = sorted(set(str(v) for v in g.values("device")))
            row["device"] = ",".join(vals) if vals else None
        hosts = [] if g is None else sorted(set(str(v) for v in g.values("host")))
        row["hosts"] = ",".join(hosts) if hosts else None
        row["n_hosts"] = len(hosts)
        starts = [] if g is None else g.values("start_time")
        row["start_time"] = min(starts) if starts else None

        # ---- measurement
        _run_metrics(row, g, ws, log_complete, problems)
        row["problems"] = "; ".join(problems) if problems else None
        row["stderr_tail"] = _stderr_tail(run_dir) if status != "ok" else None
        rows.append(row)
    df = pd.DataFrame(rows, columns=RUN_COLUMNS)
    return _typed_runs(df)


RUN_METRIC_COLUMNS = [
    "samples_measured",
    "window_start",
    "window_end",
    "measure_time_s",
    "throughput",
    "throughput_per_device",
    "throughput_rank0_x_n",
    "step_time_median_s",
    "step_time_jitter_s",
    "straggler_index",
    "compute_straggler_index",
    "slowest_rank",
    "slowest_host",
    "slowest_ranks",
    "params_consistent",
    "final_accuracy",
    "best_accuracy",
    "time_to_accuracy_s",
    "final_loss",
]


RUN_COLUMNS = [
    "run_id",
    "framework",
    "workload",
    "model",
    "mode",
    "nodes",
    "tasks_per_node",
    "gpus_per_node",
    "world_size",
    "batch_size",
    "global_batch_size",
    "lr",
    "repeat",
    "precision",
    "scaling",
    "group",
    "run_dir",
    "data_kind",
    "data",
    "in_manifest",
    "device",
    "base_lr",
    "lr_scaling",
    "warmup_epochs",
    "epochs",
    "target_accuracy",
    "planned_warmup_steps",
    "planned_measure_steps",
    "framework_options",
    "rank_files",
    "ranks_present",
    "ranks_with_summary",
    "ranks_with_error",
    "missing_ranks",
    "ranks_without_summary",
    "error_ranks",
    "complete",
    "slurm_state",
    "attempts",
    "exit_code",
    "job_start",
    "job_end",
    "nodelist",
    "slurm_reason",
    "job_id",
    "status",
    "error_message",
    "framework_version",
    "backend",
    "device_name",
    "ddlbench_version",
    "hosts",
    "n_hosts",
    "start_time",
    "samples_measured",
    "window_start",
    "window_end",
    "measure_time_s",
    "throughput",
    "throughput_per_device",
    "throughput_rank0_x_n",
    "step_time_median_s",
    "step_time_jitter_s",
    "straggler_index",
    "compute_straggler_index",
    "slowest_rank",
    "slowest_host",
    "slowest_ranks",
    "params_consistent",
    "final_accuracy",
    "best_accuracy",
    "time_to_accuracy_s",
    "final_loss",
    "problems",
    "stderr_tail",
]


def _run_metrics(row: dict, g: Optional[_RunRanks], ws, complete: bool, problems) -> None:
    for k in RUN_METRIC_COLUMNS:
        row[k] = None
    if g is None or not len(g):
        return
    hashes = set(g.values("summary_param_sha256"))
    if hashes:
        row["params_consistent"] = len(hashes) == 1
        if len(hashes) > 1:
            problems.append(f"ranks disagree on param_sha256 ({len(hashes)} distinct values)")
    # convergence results are global: take them from the lowest rank that has them
    for c in ("final_accuracy", "best_accuracy", "time_to_accuracy_s", "final_loss"):
        v = g.values("summary_" + c)
        row[c] = float(v[0]) if v else None
    med = g["step_time_median_s"]
    ok = ~np.isnan(med)
    if ok.any():
        centre = float(np.median(med[ok]))
        row["step_time_median_s"] = centre
        row["step_time_jitter_s"] = float(np.nanmedian(g["step_time_jitter_s"]))
        if centre > 0:
            row["straggler_index"] = float(med[ok].max() / centre)
        rk, host = g["rank"][ok], g["host"][ok]
        order = np.lexsort((rk, -med[ok]))  # slowest first, ties by rank
        row["slowest_rank"] = int(rk[order[0]])
        row["slowest_host"] = host[order[0]]
        row["slowest_ranks"] = "; ".join(
            f"{int(rk[i])}@{host[i]} {med[ok][i] * 1e3:.1f} ms" for i in order[:3]
        )
    comp = g["compute_median_s"]
    okc = ~np.isnan(comp)
    if okc.any():
        centre = float(np.median(comp[okc]))
        if centre > 0:
            row["compute_straggler_index"] = float(comp[okc].max() / centre)
    if not complete:
        return
    # global throughput: all measured samples over the union of the measured windows
    samples = float(g["samples_measured"].sum())
    start = float(np.nanmin(g["t_first"])) if (~np.isnan(g["t_first"])).any() else None
    end = float(np.nanmax(g["t_last"])) if (~np.isnan(g["t_last"])).any() else None
    row["samples_measured"] = samples
    if start is None or end is None:
        if row.get("mode") != "allreduce":
            problems.append("no measured steps")
        return
    row["window_start"] = start
    row["window_end"] = end
    row["measure_time_s"] = end - start
    if end > start and samples > 0:
        row["throughput"] = samples / (end - start)
        row["throughput_per_device"] = row["throughput"] / ws
    r0 = g["throughput"][g["rank"] == 0]
    if len(r0) and not np.isnan(r0[0]):
        row["throughput_rank0_x_n"] = float(r0[0]) * ws
    logged = g["summary_samples_measured"]
    if not np.isnan(logged).any() and float(logged.sum()) != samples:
        problems.append(
            f"summaries report {int(logged.sum())} measured samples, step records {int(samples)}"
        )


def _str_or_none(v: Any) -> Optional[str]:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return str(v)


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns as text (missing: null), then through Arrow, so that a frame fresh from
    collection and one read back from its parquet file have the same dtypes and values."""
    df = df.reset_index(drop=True)
    for c in df.columns:
        if df[c].dtype == object or str(df[c].dtype) in ("str", "string"):
            df[c] = df[c].map(_str_or_none).astype(object)
    return pa.Table.from_pandas(df, preserve_index=False).to_pandas()


def _typed_runs(df: pd.DataFrame) -> pd.DataFrame:
    ints = [
        "nodes",
        "tasks_per_node",
        "gpus_per_node",
        "world_size",
        "batch_size",
        "global_batch_size",
        "repeat",
        "rank_files",
        "ranks_present",
        "ranks_with_summary",
        "ranks_with_error",
        "n_hosts",
        "attempts",
        "exit_code",
        "epochs",
        "planned_warmup_steps",
        "planned_measure_steps",
        "slowest_rank",
    ]
    floats = [
        "lr",
        "base_lr",
        "warmup_epochs",
        "target_accuracy",
        "start_time",
        "samples_measured",
        "window_start",
        "window_end",
        "measure_time_s",
        "throughput",
        "throughput_per_device",
        "throughput_rank0_x_n",
        "step_time_median_s",
        "step_time_jitter_s",
        "straggler_index",
        "compute_straggler_index",
        "final_accuracy",
        "best_accuracy",
        "time_to_accuracy_s",
        "final_loss",
    ]
    for c in ints:
        if c in df:
            df[c] = pd.to_numeric(df[c], errors="coerce").round().astype("Int64")
    for c in floats:
        if c in df:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    for c in ("in_manifest", "complete"):
        df[c] = df[c].astype(bool)
    df["params_consistent"] = df["params_consistent"].astype("boolean")
    return _canonical(df)


def _files_frame(files: Sequence[RankFile], campaign_dir: Path, dup_count) -> pd.DataFrame:
    rows = [
        {
            "file": f.path.relative_to(campaign_dir).as_posix(),
            "run_id": f.run_key,
            "rank": f.rank,
            "size": f.size,
            "status": f.status,
            "format_version": f.format_version,
            "steps": f.steps,
            "truncated_lines": f.truncated_lines,
            "bad_lines": f.bad_lines,
            "restarts": f.restarts,
            "line_by_line": f.detail,
        }
        for f in files
    ]
    df = pd.DataFrame(
        rows,
        columns=[
            "file",
            "run_id",
            "rank",
            "size",
            "status",
            "format_version",
            "steps",
            "truncated_lines",
            "bad_lines",
            "restarts",
            "line_by_line",
        ],
    )
    df = df.sort_values("file", kind="stable").reset_index(drop=True)
    for c in ("rank", "format_version"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    for c in ("size", "steps", "truncated_lines", "bad_lines", "restarts"):
        df[c] = df[c].astype("int64")
    df["line_by_line"] = df["line_by_line"].astype(bool)
    return _canonical(df)


def _warnings(runs: pd.DataFrame, files: pd.DataFrame) -> List[str]:
    out = []
    if len(files):
        n = int((files["status"] == "duplicate").sum())
        if n:
            out.append(f"{n} duplicate log file(s) ignored (same run and rank as another file)")
        n = int(files["truncated_lines"].sum())
        if n:
            out.append(f"{n} truncated last line(s) skipped (killed ranks)")
        n = int(files["bad_lines"].sum())
        if n:
            out.append(f"{n} unreadable line(s) skipped")
        n = int((files["status"] == "no_meta").sum())
        if n:
            out.append(f"{n} log file(s) without a meta record")
    for status in ("failed", "incomplete", "running", "pending", "not_run"):
        n = int((runs["status"] == status).sum()) if len(runs) else 0
        if n:
            out.append(f"{n} run(s) {status.replace('_', ' ')}")
    return out


# ---------------------------------------------------------------- data files


def _write_atomic(path: Path, writer) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        writer(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _df_to_table(df: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(df, preserve_index=False)


def _pq_writer(table: pa.Table):
    return lambda p: pq.write_table(table, p, compression="zstd")


def _start_steps_write(data_dir: Path, steps: pa.Table):
    """Write steps.parquet in a thread (Arrow's encoder runs without the GIL, so this
    overlaps with the Python work that follows); returns a function that waits for it."""
    import threading

    data_dir.mkdir(parents=True, exist_ok=True)
    error: List[BaseException] = []

    def run() -> None:
        try:
            _write_atomic(data_dir / "steps.parquet", _pq_writer(steps))
        except BaseException as exc:  # noqa: BLE001 - re-raised by wait()
            error.append(exc)

    th = threading.Thread(target=run, name="steps.parquet", daemon=True)
    th.start()

    def wait() -> None:
        th.join()
        if error:
            raise error[0]

    return wait


def write_data(data: CampaignData) -> Path:
    """Write ``data/`` (atomically per file; deterministic content; collect.json last)."""
    steps_written, data._steps_written = data._steps_written, None
    out = data.data_dir
    out.mkdir(parents=True, exist_ok=True)
    pq_writer = _pq_writer
    if steps_written is None:
        _write_atomic(out / "steps.parquet", pq_writer(data.steps_table()))
    for name, df in (
        ("ranks", data.ranks),
        ("runs", data.runs),
        ("evals", data.evals),
        ("allreduce", data.allreduce),
        ("files", data.files),
    ):
        _write_atomic(out / f"{name}.parquet", pq_writer(_df_to_table(df)))
    _write_atomic(out / "runs.csv", lambda p: data.runs.to_csv(p, index=False))
    if steps_written is not None:
        steps_written()
    text = json.dumps(data.info, indent=2, sort_keys=True) + "\n"
    _write_atomic(out / COLLECT_INFO, lambda p: p.write_text(text))
    return out


def load_data(campaign_dir: Union[str, Path]) -> CampaignData:
    """Read ``data/`` written by :func:`collect_campaign` (steps are loaded on demand)."""
    campaign_dir = Path(campaign_dir)
    d = campaign_dir / DATA_DIR

    def read(name):
        return pq.read_table(d / f"{name}.parquet").to_pandas()

    return CampaignData(
        campaign_dir=campaign_dir,
        manifest=load_manifest(campaign_dir),
        runs=read("runs"),
        ranks=read("ranks"),
        evals=read("evals"),
        allreduce=read("allreduce"),
        files=read("files"),
        info=read_collect_info(campaign_dir) or {},
    )


def ensure_collected(
    campaign_dir: Union[str, Path],
    *,
    run_states: RunStates = None,
    progress: Progress = None,
    force: bool = False,
    defer_write: bool = False,
) -> CampaignData:
    """The campaign's data: collected now if ``data/`` is missing or stale, else loaded.

    ``defer_write``: see :func:`collect_campaign`; then call :func:`finish_write`."""
    from .paths import is_stale

    campaign_dir = Path(campaign_dir)
    if force or is_stale(campaign_dir):
        return collect_campaign(
            campaign_dir, run_states=run_states, progress=progress, defer_write=defer_write
        )
    return load_data(campaign_dir)


def finish_write(data: CampaignData) -> None:
    """Write the data files of a collection made with ``defer_write`` (no-op otherwise)."""
    if data._steps_written is not None:
        write_data(data)
