"""``ddlbench collect``: rank logs of a campaign -> ``data/*.parquet``.

Outputs (every column: ``docs/columns.md``, generated from :mod:`ddlbench.collect.columns`;
formulas: ``docs/metrics.md``):

- ``steps.parquet``: one row per rank per step (warmup steps included, ``phase`` says which);
- ``ranks.parquet``: one row per rank per run: meta, summary, per-rank step statistics;
- ``runs.parquet`` / ``runs.csv``: one row per run: the plan (campaign.json, run.json), what
  ran, Slurm state and attempts, completeness, and the run's throughput figures;
- ``evals.parquet``, ``allreduce.parquet``: eval and allreduce records, one row per rank;
- ``files.parquet``: every log file found, and what was done with it;
- ``collect.json``: the input fingerprint (staleness), counts and warnings.

The work is split by table: :mod:`.planned` (the runs planned), :mod:`.reader` (the rank logs),
:mod:`.rank_stats` and :mod:`.rank_tables` (per rank), :mod:`.run_table` (per run, with
``ddlbench.analyse.run_metrics``), :mod:`.data_files` (the files) and :mod:`.freshness`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ddlbench.campaign.paths import CampaignPaths, RunPaths

from .. import __version__
from . import data_files as files_io
from .columns import RUNS
from .freshness import COLLECTOR_VERSION, fingerprint, is_stale, read_collect_info
from .gpu_columns import add_gpu_columns
from .lm_columns import add_lm_columns
from .placement import add_placement_columns
from .planned import load_manifest, planned_runs
from .rank_stats import rank_stats, run_losses
from .rank_tables import allreduce_frame, evals_frame, files_frame, ranks_frame
from .reader import STEP_SCHEMA, RankFile, read_rank_files
from .run_states import RunStates, normalise_states
from .run_table import runs_frame
from .tables import typed

__all__ = [
    "CampaignData",
    "RunStates",
    "collect_campaign",
    "ensure_collected",
    "finish_write",
    "load_data",
    "load_manifest",
    "write_data",
]

Progress = Optional[Callable[[str], None]]


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
        return CampaignPaths.of(self.campaign_dir).data

    def steps_table(self) -> pa.Table:
        """The step rows (loaded from steps.parquet on first use)."""
        if self._steps is None:
            self._steps = files_io.read_steps(self.data_dir)
        return self._steps

    def steps(self, run_id: Optional[str] = None) -> pd.DataFrame:
        """Step rows as a DataFrame, optionally of one run only."""
        t = self.steps_table()
        if run_id is not None:
            t = t.filter(pc.equal(t.column("run_id").cast(pa.string()), run_id))
        return t.to_pandas()


# ---------------------------------------------------------------- rank files


def _discover(campaign_dir: Path, runs: List[dict]) -> List[RankFile]:
    files = []
    for r in runs:
        found = []
        for p in RunPaths(campaign_dir / r["run_dir"]).rank_logs():
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


# ---------------------------------------------------------------- collection


def _choose(files: List[RankFile], planned: List[dict]):
    """One file per (run, rank): ``(kept files, duplicates per kept file, started ranks without
    a readable meta record per run)``; marks the others ``duplicate`` or ``no_meta``."""
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
    return kept, dup_count, started_no_meta


def _step_rows(steps: pa.Table, fidx, files, kept, planned):
    """The kept files' step rows ordered by (run, rank): ``(steps, steps table with run and
    rank columns, row bounds of each kept file)``."""
    run_order = {r["run_id"]: i for i, r in enumerate(planned)}
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
    return steps, steps_out, bounds


def _info(manifest, campaign_dir, inputs, runs, ranks, files_df, steps_rows: int) -> dict:
    n_files = len(files_df)
    return {
        "collector_version": COLLECTOR_VERSION,
        "ddlbench_version": __version__,
        "campaign": str(manifest.get("campaign") or campaign_dir.name),
        "inputs": inputs,
        "counts": {
            "runs": int(len(runs)),
            "runs_ok": int((runs["status"] == "ok").sum()) if len(runs) else 0,
            "rank_files": int(n_files),
            "ranks": int(len(ranks)),
            "steps": int(steps_rows),
            "duplicate_files": int((files_df["status"] == "duplicate").sum()) if n_files else 0,
            "truncated_lines": int(files_df["truncated_lines"].sum()) if n_files else 0,
            "bad_lines": int(files_df["bad_lines"].sum()) if n_files else 0,
        },
        "warnings": _warnings(runs, files_df) + _rejected_warning(ranks),
    }


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
    planned = planned_runs(campaign_dir, manifest)
    files = _discover(campaign_dir, planned)
    steps, fidx = read_rank_files(files, campaign_dir, progress=say)

    say("assembling tables")
    kept, dup_count, started_no_meta = _choose(files, planned)
    steps, steps_out, bounds = _step_rows(steps, fidx, files, kept, planned)
    data_dir = CampaignPaths.of(campaign_dir).data
    write_steps = write or defer_write
    steps_written = files_io.start_steps_write(data_dir, steps_out) if write_steps else None
    ranks = ranks_frame(kept, rank_stats(steps, bounds), dup_count, campaign_dir)
    states = normalise_states(run_states, campaign_dir)
    losses = run_losses(steps, bounds, [f.run_key for f in kept])
    runs = runs_frame(campaign_dir, planned, ranks, states, started_no_meta, files, losses)
    runs = add_lm_columns(add_gpu_columns(runs, kept, campaign_dir), kept)
    runs = add_placement_columns(runs, campaign_dir)
    runs = typed(runs, RUNS)
    files_df = files_frame(files, campaign_dir)
    data = CampaignData(
        campaign_dir=campaign_dir,
        manifest=manifest,
        runs=runs,
        ranks=ranks,
        evals=evals_frame(kept),
        allreduce=allreduce_frame(kept),
        files=files_df,
        info=_info(manifest, campaign_dir, inputs, runs, ranks, files_df, steps_out.num_rows),
        _steps=steps_out,
        _steps_written=steps_written,
    )
    if write and not defer_write:
        say("writing data files")
        write_data(data)
    return data


def _files_with(files: pd.DataFrame, count: str, shown: int = 3) -> str:
    """The first ``shown`` log files whose ``count`` column is above 0, and how many more."""
    where = files.loc[files[count] > 0, "file"].tolist()
    more = f" and {len(where) - shown} more file(s)" if len(where) > shown else ""
    return ", ".join(where[:shown]) + more


def _warnings(runs: pd.DataFrame, files: pd.DataFrame) -> List[str]:
    out = []
    if len(files):
        n = int((files["status"] == "duplicate").sum())
        if n:
            out.append(f"{n} duplicate log file(s) ignored (same run and rank as another file)")
        n = int(files["truncated_lines"].sum())
        if n:
            where = _files_with(files, "truncated_lines")
            out.append(f"{n} truncated last line(s) skipped (killed ranks), in {where}")
        n = int(files["bad_lines"].sum())
        if n:
            out.append(f"{n} unreadable line(s) skipped, in {_files_with(files, 'bad_lines')}")
        n = int((files["status"] == "no_meta").sum())
        if n:
            out.append(f"{n} log file(s) without a meta record")
    for status in ("failed", "hung", "cancelled", "incomplete", "running", "pending", "not_run"):
        n = int((runs["status"] == status).sum()) if len(runs) else 0
        if n:
            out.append(f"{n} run(s) {status.replace('_', ' ')}")
    return out


def _rejected_warning(ranks: pd.DataFrame) -> List[str]:
    """Step reports of users' own programs that their wrapper could not use (skipped, each
    explained on the rank's stderr; docs/your-own-workload.md)."""
    col = "summary_rejected_reports"
    if not len(ranks) or col not in ranks:
        return []
    counts = pd.to_numeric(ranks[col], errors="coerce").fillna(0)
    if not counts.sum():
        return []
    where = sorted(set(ranks.loc[counts > 0, "run_id"].astype(str)))
    more = f" and {len(where) - 3} more" if len(where) > 3 else ""
    return [
        f"{int(counts.sum())} step report(s) of own programs skipped as unusable, in "
        f"{', '.join(where[:3])}{more} (each rank's stderr says why)"
    ]


# ---------------------------------------------------------------- data files


def write_data(data: CampaignData) -> Path:
    """Write ``data/`` (atomically per file; deterministic content; collect.json last)."""
    steps_written, data._steps_written = data._steps_written, None
    out = data.data_dir
    out.mkdir(parents=True, exist_ok=True)
    if steps_written is None:
        files_io.write_atomic(
            out / files_io.STEPS_FILE, files_io.parquet_writer(data.steps_table())
        )
    frames = {
        "ranks": data.ranks,
        "runs": data.runs,
        "evals": data.evals,
        "allreduce": data.allreduce,
        "files": data.files,
    }
    files_io.write_tables(out, frames)
    if steps_written is not None:
        steps_written()
    files_io.write_info(out, data.info)
    return out


def load_data(campaign_dir: Union[str, Path]) -> CampaignData:
    """Read ``data/`` written by :func:`collect_campaign` (steps are loaded on demand)."""
    campaign_dir = Path(campaign_dir)
    d = CampaignPaths.of(campaign_dir).data
    return CampaignData(
        campaign_dir=campaign_dir,
        manifest=load_manifest(campaign_dir),
        runs=files_io.read_table(d, "runs"),
        ranks=files_io.read_table(d, "ranks"),
        evals=files_io.read_table(d, "evals"),
        allreduce=files_io.read_table(d, "allreduce"),
        files=files_io.read_table(d, "files"),
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
