"""The runs table: one row per planned run (docs/columns.md, docs/metrics.md).

A run's configuration (what identifies it: framework, model, device, precision, backend, LR
scaling, warmup, data...) comes from the plan, never from whichever rank or repeat happened to
run. What ran comes from the rank meta records: where a rank ran something else than was
planned (``amp`` asked on a CPU runs ``fp32``), the run is labelled by what ran, the plan is
kept in the ``*_requested`` columns and ``mismatches`` says what differs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from ddlbench.analyse.run_metrics import run_metrics
from ddlbench.analyse.training_health import training_columns
from ddlbench.campaign.causes import end_cause
from ddlbench.campaign.paths import RunPaths

from . import run_states as RS
from .columns import RUNS, names
from .planned import PLAN_FIELDS, group_of, planned_config
from .reader import RankFile
from .states import iso_time
from .tables import str_or_none, typed

STDERR_TAIL_LINES = 20
#: planned settings that the rank meta records also hold: (field, meta field)
CHECKED = ("precision", "world_size", "backend", "device")
#: planned backends that name no particular backend (nothing to compare)
UNSPECIFIC_BACKENDS = ("", "auto")


def fmt_ranks(ranks, limit: int = 12) -> str:
    ranks = sorted(ranks)
    if len(ranks) <= limit:
        return ",".join(str(r) for r in ranks)
    return ",".join(str(r) for r in ranks[:limit]) + f",... ({len(ranks)} ranks)"


class RunRanks:
    """Column slices of the ranks table for one run (rows sorted by rank)."""

    def __init__(self, cols: Dict[str, np.ndarray], a: int, b: int):
        self._cols, self._a, self._b = cols, a, b

    def __len__(self) -> int:
        return self._b - self._a

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols[name][self._a : self._b]

    def values(self, name: str) -> list:
        """Non-missing values of a column, in rank order."""
        return [v for v in self[name].tolist() if v is not None and v is not pd.NA and v == v]

    def distinct(self, name: str) -> List[str]:
        return sorted(set(str(v) for v in self.values(name)))

    def ranks_where(self, name: str) -> set:
        return set(self["rank"][self[name].astype(bool)].tolist())


_FLOAT_RANK_COLUMNS = (
    "step_time_median_s",
    "step_time_jitter_s",
    "samples_measured",
    "t_first",
    "t_last",
    "throughput",
    "start_time",
    "summary_samples_measured",
    "compute_median_s",
)


def split_by_run(ranks: pd.DataFrame) -> Dict[str, RunRanks]:
    cols = {c: ranks[c].to_numpy(dtype=object) for c in ranks.columns}
    for c in ("rank", "has_summary", "has_error"):
        cols[c] = ranks[c].to_numpy()
    for c in _FLOAT_RANK_COLUMNS:
        cols[c] = ranks[c].to_numpy(dtype=float)
    by_run: Dict[str, RunRanks] = {}
    rid_arr = cols["run_id"]
    if len(rid_arr):
        cuts = np.flatnonzero(rid_arr[1:] != rid_arr[:-1]) + 1
        edges = np.concatenate(([0], cuts, [len(rid_arr)]))
        for a, b in zip(edges[:-1], edges[1:]):
            by_run[str(rid_arr[a])] = RunRanks(cols, int(a), int(b))
    return by_run


def stderr_tail(run_dir: Path, lines: int = STDERR_TAIL_LINES) -> str:
    """The last lines of the run's newest scheduler error output (``*.err``; else ``*.out``)."""
    outputs = [p for p in RunPaths(run_dir).scheduler_outputs() if p.stat().st_size > 0]
    for suffix in (".err", ".out"):
        found = [p for p in outputs if p.suffix == suffix]
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


# ------------------------------------------------------------------ the plan


def plan_row(entry: dict, cfg: dict) -> Dict[str, Any]:
    """The planned columns of a run: manifest entry first, then its config (run.json)."""
    row: Dict[str, Any] = {"run_id": entry["run_id"]}
    for c in PLAN_FIELDS:
        row[c] = entry.get(c, cfg.get(c))
    row["group"] = row["group"] or group_of(entry["run_id"])
    data = entry.get("data", cfg.get("data"))
    row["data_kind"] = data.get("kind") if isinstance(data, dict) else data
    row["data"] = json.dumps(data, sort_keys=True) if data is not None else None
    row["in_manifest"] = bool(entry.get("in_manifest", True))
    sched = cfg.get("lr_schedule") or {}
    planned_sched = entry.get("lr_scaling") if isinstance(entry.get("lr_scaling"), dict) else {}
    opt = cfg.get("optimizer") or {}
    planned_opt = entry.get("optimizer") if isinstance(entry.get("optimizer"), dict) else {}
    row["base_lr"] = planned_opt.get("lr", opt.get("base_lr"))
    row["lr_scaling"] = planned_sched.get("rule", sched.get("scaling"))
    row["warmup_epochs"] = planned_sched.get("warmup_epochs", sched.get("warmup_epochs"))
    row["epochs"] = cfg.get("epochs")
    row["target_accuracy"] = cfg.get("target_accuracy")
    st = cfg.get("steps") or {}
    row["planned_warmup_steps"] = st.get("warmup")
    row["planned_measure_steps"] = st.get("measure")
    fo = entry.get("framework_options", cfg.get("framework_options"))
    row["framework_options"] = json.dumps(fo, sort_keys=True) if fo is not None else None
    row["precision_requested"] = row["precision"]
    row["device_requested"] = entry.get("device", cfg.get("device"))
    row["backend_requested"] = entry.get("backend", cfg.get("backend"))
    row["device"] = row["device_requested"]
    row["backend"] = row["backend_requested"]
    return row


def _ran(row: Dict[str, Any], g: Optional[RunRanks], ranks: Optional[int]) -> Optional[str]:
    """Label the run by what ran (rank meta records); returns the mismatches, in words.
    ``ranks``: the planned ranks (the world size over the devices each rank drives)."""
    if g is None or not len(g):
        return None
    found = []
    for field in CHECKED:
        ran = g.distinct(field)
        planned = row[f"{field}_requested"] if field != "world_size" else ranks
        if not ran:
            continue
        if field != "world_size":
            row[field] = ",".join(ran)
        if planned is None or (isinstance(planned, float) and np.isnan(planned)):
            continue
        if field == "backend" and (
            str(planned) in UNSPECIFIC_BACKENDS or row.get("framework") == "horovod"
        ):
            continue  # horovod's planned backend names its controller, not the allreduce's
        if ran != [str(planned)]:
            found.append(f"{field}: planned {planned}, ran {','.join(ran)}")
    return "; ".join(found) or None


# ------------------------------------------------------------------ completeness and state


def _completeness(row, g, ws, no_meta, nfiles, problems) -> bool:
    rid = row["run_id"]
    present = set() if g is None else set(g["rank"].tolist())
    with_summary = set() if g is None else g.ranks_where("has_summary")
    with_error = set() if g is None else g.ranks_where("has_error")
    expected = set(range(ws)) if ws else set()
    extra = present - expected if expected else set()
    missing = expected - present - no_meta
    unreadable = (expected - present) & no_meta
    no_summary = (expected - with_summary - with_error) - missing
    row["rank_files"] = nfiles.get(rid, 0)
    row["ranks_present"] = len(present & expected) if expected else len(present)
    row["ranks_with_summary"] = len(with_summary & expected) if expected else 0
    row["ranks_with_error"] = len(with_error)
    row["missing_ranks"] = fmt_ranks(missing)
    row["ranks_without_summary"] = fmt_ranks(no_summary)
    row["error_ranks"] = fmt_ranks(with_error)
    if extra:
        problems.append(f"ranks outside world_size: {fmt_ranks(extra)}")
    if unreadable:
        problems.append(f"unreadable logs (no meta record) for ranks {fmt_ranks(unreadable)}")
    short = _ranks_missing_steps(g, problems) if g is not None else set()
    row["complete"] = bool(expected) and with_summary >= expected and not with_error and not short
    return bool(present) or bool(no_meta)


def _ranks_missing_steps(g: RunRanks, problems: List[str]) -> set:
    """Ranks whose summary counts more measured steps than their log's readable step records
    (a damaged line in the middle): the run's figures would miss those steps, so it is not
    complete, and the problem names the file."""
    said = g["summary_steps_measured"]
    read = g["steps_measured"]
    short = set()
    for i, rank in enumerate(g["rank"].tolist()):
        want = said[i]
        if want is None or want != want or read[i] >= want:  # no summary, or all there
            continue
        short.add(rank)
        bad = int(g["bad_lines"][i] or 0)
        why = f"; {bad} unreadable line(s)" if bad else ""
        problems.append(
            f"rank {rank}: {int(read[i])} of the {int(want)} measured steps its summary "
            f"counts are in {g['file'][i]}{why}"
        )
    return short


def _store_fields(row, g, srow) -> Optional[str]:
    """Slurm fields of the newest attempt; returns the state in the campaign's vocabulary."""
    word = RS.state_word(None if srow is None else srow["state"])
    row["slurm_state"] = word
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
    # how the run ended in the words status uses; a queue reason is not one (campaign/causes.py)
    row["slurm_reason"] = end_cause({**row, "state": word, "reason": row["slurm_reason"]})
    job_ids = [] if g is None else g.distinct("slurm_job_id")
    store_job = None if srow is None else str_or_none(srow["job_id"])
    row["job_id"] = store_job or (",".join(job_ids) or None)
    if row["nodelist"] is None and g is not None:
        nl = g.values("slurm_nodelist")
        row["nodelist"] = str(nl[0]) if nl else None
    for key in ("job_start", "job_end"):
        row[key] = iso_time(row[key])
    return RS.vocabulary_state(word)


def _status(row, state: Optional[str], started: bool, problems: List[str]) -> str:
    if row["complete"]:
        if RS.is_unsuccessful(state):
            problems.append(f"job ended {row['slurm_state']} after every rank wrote its summary")
        return "ok"
    if RS.is_cancelled(state):  # its ranks' errors are how they took the cancel
        return "cancelled"
    if RS.is_hung(state):  # its ranks' errors are how they were stopped
        return "hung"
    if row["ranks_with_error"] or RS.is_unsuccessful(state):
        return "failed"
    if RS.is_live(state):
        return "running" if RS.is_running(state) else "pending"
    if not started:
        return "not_run"
    return "incomplete"


def _provenance(row, g) -> None:
    for c in ("framework_version", "device_name", "ddlbench_version"):
        vals = [] if g is None else g.distinct(c)
        row[c] = ",".join(vals) if vals else None
    hosts = [] if g is None else g.distinct("host")
    row["hosts"] = ",".join(hosts) if hosts else None
    row["n_hosts"] = len(hosts)
    starts = [] if g is None else g.values("start_time")
    row["start_time"] = min(starts) if starts else None


# ------------------------------------------------------------------ the table


def _world_size(row, g, problems) -> Optional[int]:
    """The ranks the run should have; ``row["world_size"]`` stays its devices (an MXNet
    worker per node drives ``devices_per_worker`` of them; 1 in older logs)."""
    meta_ws = None
    per_worker = 1
    if g is not None:
        vals = set(int(v) for v in g.values("world_size"))
        meta_ws = vals.pop() if len(vals) == 1 else None
        per_worker = max([int(v) for v in g.values("devices_per_worker")] or [1])
    ws = row["world_size"]
    ws = int(ws) if ws is not None and not pd.isna(ws) else None
    if ws is None:
        ws = meta_ws * per_worker if meta_ws is not None else None
    row["world_size"] = ws
    ranks = ws // per_worker if ws is not None else None
    if meta_ws is not None and ranks is not None and meta_ws != ranks:
        problems.append(f"logs say world_size {meta_ws}, planned {ranks}")
    return ranks


def run_row(campaign_dir, entry, g, srow, no_meta, nfiles, losses=()) -> Dict[str, Any]:
    row = plan_row(entry, planned_config(campaign_dir, entry))
    problems: List[str] = []
    ws = _world_size(row, g, problems)
    if g is not None:
        other = sorted(set(g.values("meta_run_id")) - {row["run_id"]})
        if other:
            problems.append(f"logs name another run: {', '.join(other)}")
    row["mismatches"] = _ran(row, g, ws)
    if row["mismatches"]:
        problems.append(f"ran other settings than planned: {row['mismatches']}")
    started = _completeness(row, g, ws, no_meta, nfiles, problems)
    state = _store_fields(row, g, srow)
    row["status"] = _status(row, state, started, problems)
    err = None
    if row["status"] in ("cancelled", "hung"):
        # "cancelled by the user while pending (...)"; the hang, in the words of status
        err = row.get("slurm_reason")
        if not started:  # a job that never started has no ranks to miss
            row["missing_ranks"] = row["ranks_without_summary"] = None
    elif g is not None and row["ranks_with_error"]:
        msgs = [m for m, e in zip(g["error_message"], g["has_error"]) if e and m is not None]
        # a rank that srun stopped because another failed says less than the one that failed
        msgs.sort(key=lambda m: str(m).startswith("Terminated: "))
        err = str(msgs[0]) if msgs else None
    if err is None and row["status"] == "failed":
        err = row.get("slurm_reason")  # e.g. "task 1 on n2: Killed (SIGKILL)"
    row["error_message"] = err
    _provenance(row, g)
    run_metrics(row, g, ws, row["complete"], problems)
    training_columns(row, losses, problems)  # diverged training is a problem, said in words
    row["problems"] = "; ".join(problems) if problems else None
    run_dir = campaign_dir / row["run_dir"]
    row["stderr_tail"] = stderr_tail(run_dir) if row["status"] != "ok" else None
    return row


def runs_frame(
    campaign_dir: Path,
    planned: List[dict],
    ranks: pd.DataFrame,
    states: Optional[pd.DataFrame],
    started_no_meta: Dict[str, set],
    files: Sequence[RankFile],
    losses: Optional[Dict[str, List[np.ndarray]]] = None,
) -> pd.DataFrame:
    """One row per planned run; ``losses``: each run's per-rank loss series
    (:func:`~ddlbench.collect.rank_stats.run_losses`), for the ``training`` columns."""
    by_run = split_by_run(ranks)
    nfiles: Dict[str, int] = {}
    for f in files:
        nfiles[f.run_key] = nfiles.get(f.run_key, 0) + 1
    rows = []
    for entry in planned:
        rid = entry["run_id"]
        srow = states.loc[rid] if states is not None and rid in states.index else None
        no_meta = started_no_meta.get(rid, set())
        loss = (losses or {}).get(rid, ())
        rows.append(run_row(campaign_dir, entry, by_run.get(rid), srow, no_meta, nfiles, loss))
    df = pd.DataFrame(rows, columns=names(RUNS))
    return typed(df, RUNS)
