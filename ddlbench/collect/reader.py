"""Vectorised reader of per-rank logs (``docs/log-format.md``, format version 1).

The common case is fast: every file of a campaign is read into one contiguous buffer and
parsed by a single call of pyarrow's multi-threaded JSON reader with a fixed schema of the
``step`` fields (every other record type parses too: its step columns are null). Rows map
back to files by line counts. Only the few lines that are not steps (``meta`` first,
``summary`` last, ``eval``, ``allreduce``, ``error``) are decoded with :mod:`json`.

Anything unusual sends just that file to a line-by-line path: a truncated last line is cut
off before parsing (and counted); a corrupt line, records appended by a restarted rank, or a
complete last record without its newline are handled per file, so one broken file never
slows down or breaks the read of the others.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ddlbench.campaign.paths import RANK_LOG_GLOB

from .errors import LogFormatError
from .step_lines import cut_steps
from .step_schema import PARSE_SCHEMA, STEP_FIELDS, STEP_SCHEMA

SUPPORTED_VERSIONS = (1,)


#: the rank in a rank log's file name (``rank-<k>.jsonl``, campaign.paths.RANK_LOG_GLOB)
_RANK_RE = re.compile(re.escape(RANK_LOG_GLOB).replace(r"\*", r"(\d+)"))
_BLOCK = 16 << 20  # pyarrow block size: big blocks parse fastest; two cores share the blocks


@dataclass
class RankFile:
    """One ``rank-<k>.jsonl`` file and everything read from it except its steps."""

    path: Path
    run_key: str  # run directory name
    size: int = 0
    mtime_ns: int = 0
    meta: Optional[dict] = None
    summary: Optional[dict] = None
    errors: List[dict] = field(default_factory=list)
    evals: List[dict] = field(default_factory=list)
    allreduce: List[dict] = field(default_factory=list)
    lines: int = 0  # complete lines
    truncated_lines: int = 0  # an unterminated, unparseable last line (killed rank)
    bad_lines: int = 0  # unparseable or invalid lines elsewhere
    restarts: int = 0  # earlier attempts appended before the last meta (dropped)
    unknown_records: int = 0
    steps: int = 0
    detail: bool = False  # parsed line by line
    status: str = "used"  # used | duplicate | no_meta

    @property
    def name_rank(self) -> Optional[int]:
        m = _RANK_RE.search(self.path.name)
        return int(m.group(1)) if m else None

    @property
    def rank(self) -> Optional[int]:
        if self.meta is not None and isinstance(self.meta.get("rank"), int):
            return self.meta["rank"]
        return self.name_rank

    @property
    def format_version(self):
        return None if self.meta is None else self.meta.get("format_version")


def _loads(line) -> Optional[dict]:
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


def _readinto(path: Path, view: memoryview) -> int:
    """Read up to len(view) bytes (the size at stat time: a snapshot of a growing file)."""
    n = 0
    with open(path, "rb", buffering=0) as fh:
        while n < len(view):
            got = fh.readinto(view[n:])
            if not got:
                break
            n += got
    return n


_INT_FIELDS = {"step", "epoch", "samples"}
_FLOAT_FIELDS = {"t_start", "t_end", "loss", "lr", "compute_s", "comm_s"}


def _coerce_step(rec: dict) -> Optional[dict]:
    """A step record with the schema's types, or None when a required field is invalid."""
    out = {}
    try:
        for name, _ in STEP_FIELDS:
            v = rec.get(name)
            if v is None:
                out[name] = None
            elif name in _INT_FIELDS:
                if isinstance(v, bool) or float(v) != int(v):
                    return None
                out[name] = int(v)
            elif name in _FLOAT_FIELDS:
                out[name] = float(v)
            else:
                out[name] = str(v)
    except (TypeError, ValueError, OverflowError):
        return None
    if out["t_start"] is None or out["t_end"] is None or out["samples"] is None:
        return None
    return out


def _take_record(f: RankFile, rec: dict) -> None:
    kind = rec.get("type")
    if kind == "summary":
        f.summary = rec
    elif kind == "eval":
        f.evals.append(rec)
    elif kind == "allreduce":
        f.allreduce.append(rec)
    elif kind == "error":
        f.errors.append(rec)
    else:
        f.unknown_records += 1


def _parse_detail(f: RankFile, data: bytes, tail: bytes) -> pa.Table:
    """Line-by-line parse of one unusual file; returns its step rows."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if tail:
        lines.append(tail)
    recs: List[Tuple[int, dict]] = []
    f.bad_lines = 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        rec = _loads(line)
        if rec is None or not isinstance(rec.get("type"), str):
            if i == len(lines) - 1 and not (tail == b"" and data.endswith(b"\n")):
                f.truncated_lines += 1
            else:
                f.bad_lines += 1
            continue
        recs.append((i, rec))
    f.lines = len(lines) - f.truncated_lines
    metas = [k for k, (_, r) in enumerate(recs) if r["type"] == "meta"]
    if metas:
        f.restarts = len(metas) - 1
        recs = recs[metas[-1] :]
        f.meta = recs[0][1]
    else:
        f.meta = None
    f.summary = None
    f.errors, f.evals, f.allreduce = [], [], []
    f.unknown_records = 0
    steps = []
    for _, rec in recs[1:] if metas else recs:
        if rec["type"] == "step":
            s = _coerce_step(rec)
            if s is None:
                f.bad_lines += 1
            else:
                steps.append(s)
        elif rec["type"] == "meta":  # pragma: no cover - only the last meta is kept
            continue
        else:
            _take_record(f, rec)
    f.steps = len(steps)
    return pa.Table.from_pylist(steps, schema=STEP_SCHEMA)


def _parse_bulk(buf: memoryview) -> pa.Table:
    return pj.read_json(
        pa.py_buffer(buf),
        read_options=pj.ReadOptions(use_threads=True, block_size=_BLOCK),
        parse_options=pj.ParseOptions(
            explicit_schema=PARSE_SCHEMA, unexpected_field_behavior="ignore"
        ),
    )


def meta_and_summaries(
    kept: Sequence[RankFile],
) -> Tuple[Dict[str, List[dict]], Dict[str, List[dict]]]:
    """Each run's rank metas and summaries, by run key, in rank order."""
    metas: Dict[str, List[dict]] = {}
    summaries: Dict[str, List[dict]] = {}
    for f in sorted(kept, key=lambda f: (f.run_key, f.rank if f.rank is not None else 0)):
        if f.meta is not None:
            metas.setdefault(f.run_key, []).append(f.meta)
        if f.summary is not None:
            summaries.setdefault(f.run_key, []).append(f.summary)
    return metas, summaries


def check_versions(files: Sequence[RankFile], campaign_dir: Optional[Path] = None) -> None:
    """Refuse unknown log-format versions and campaigns that mix versions."""
    by_version: Dict[object, List[RankFile]] = {}
    for f in files:
        if f.meta is not None:
            by_version.setdefault(f.format_version, []).append(f)

    def rel(p: Path) -> str:
        if campaign_dir is not None:
            try:
                return str(p.relative_to(campaign_dir))
            except ValueError:
                pass
        return str(p)

    bad = {v: fs for v, fs in by_version.items() if v not in SUPPORTED_VERSIONS}
    if not bad:
        return
    known = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
    parts = []
    for v, fs in sorted(bad.items(), key=lambda kv: str(kv[0])):
        more = f" and {len(fs) - 1} more file(s)" if len(fs) > 1 else ""
        parts.append(
            f"{rel(sorted(fs, key=lambda x: str(x.path))[0].path)}{more} has version {v!r}"
        )
    msg = (
        f"unsupported log format version: {'; '.join(parts)} (this ddlbench reads version {known})"
    )
    if len(by_version) > 1:
        counts = ", ".join(
            f"{v!r}: {len(fs)} file(s)"
            for v, fs in sorted(by_version.items(), key=lambda kv: str(kv[0]))
        )
        msg = f"mixed log format versions in one campaign ({counts}); " + msg
    raise LogFormatError(msg)


#: a file's byte range in the read buffer: file index, start, end, lines
_Segment = Tuple[int, int, int, int]
#: one parsed table and what maps its rows to files: segments, rows per segment, type codes
#: per record; and, when the table holds only the step records (:mod:`.step_lines`), their rows
_Part = Tuple[
    pa.Table, List[_Segment], np.ndarray, np.ndarray, List[Optional[str]], Optional[np.ndarray]
]


def _read_files(
    files: Sequence[RankFile], buf: bytearray
) -> Tuple[int, List[_Segment], Dict[int, Tuple[bytes, bytes]]]:
    """Read every file into ``buf``, back to back, up to its last newline.

    Returns the bytes used, the segments of the usual files and, per index of an unusual one
    (no meta first, or a complete last record without its newline), its bytes and tail.
    """
    mv = memoryview(buf)
    pos = 0
    segs: List[_Segment] = []
    detail: Dict[int, Tuple[bytes, bytes]] = {}
    for i, f in enumerate(files):
        n = _readinto(f.path, mv[pos : pos + f.size])
        end = pos + n
        last_nl = buf.rfind(b"\n", pos, end)
        seg_end = pos if last_nl < 0 else last_nl + 1
        tail = bytes(buf[seg_end:end])
        complete_tail = False
        if tail.strip():
            if _loads(tail) is not None:
                complete_tail = True  # a whole record without its newline
            else:
                f.truncated_lines = 1
        if seg_end == pos and not complete_tail:
            f.status = "no_meta"
            continue
        first_nl = buf.find(b"\n", pos, seg_end)
        meta = _loads(bytes(buf[pos:first_nl])) if first_nl >= 0 else None
        if complete_tail or meta is None or meta.get("type") != "meta":
            detail[i] = (bytes(buf[pos:seg_end]), tail if complete_tail else b"")
            continue
        f.meta = meta
        segs.append((i, pos, seg_end, 0))
        pos = seg_end
    return pos, segs, detail


def _bulk_part(buf: bytearray, used: int, segs: List[_Segment]) -> Optional[_Part]:
    """All usual files parsed at once: their step lines cut by the fast path where every line
    fits it (:func:`.step_lines.cut_steps`), else by one call of the JSON reader. None when
    that fails or rows do not map to files."""
    probes = [buf.find(b"\n", a, b) + 1 for _, a, b, _ in segs]  # each file's second line
    fast = cut_steps(memoryview(buf)[:used], probes)
    if fast is not None:
        table, codes, names = fast
        step_rows: Optional[np.ndarray] = np.flatnonzero(codes == _code(names, "step"))
    else:
        try:
            table = _parse_bulk(memoryview(buf)[:used])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        codes, names = _type_codes(table)
        step_rows = None
    counts = _rows_per_segment(codes, names, len(segs))
    if counts is None:
        # an extra meta record somewhere (an appended restart): count lines instead
        counts = np.array([buf.count(b"\n", a, b) for _, a, b, _ in segs])
        if int(counts.sum()) != len(codes):
            return None
    return table, segs, counts, codes, names, step_rows


def _per_file_parts(
    files: Sequence[RankFile],
    buf: bytearray,
    segs: List[_Segment],
    detail_tables: Dict[int, pa.Table],
) -> List[_Part]:
    """The slow path: each file parsed on its own, so a bad file only affects itself (it is
    parsed line by line into ``detail_tables``)."""
    mv = memoryview(buf)
    parts: List[_Part] = []
    for seg in segs:
        i, a, b, _ = seg
        try:
            t = _parse_bulk(mv[a:b])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            t = None
        if t is None:
            detail_tables[i] = _parse_detail(files[i], bytes(buf[a:b]), b"")
            files[i].detail = True
            continue
        codes, names = _type_codes(t)
        counts = np.array([t.num_rows], dtype=np.int64)
        parts.append((t, [seg], counts, codes, names, None))
    return parts


def _append_detail_tables(
    files: Sequence[RankFile],
    detail_tables: Dict[int, pa.Table],
    out_tables: List[pa.Table],
    out_fidx: List[np.ndarray],
) -> None:
    """Add the step rows of the files parsed line by line, in file order."""
    for i in sorted(detail_tables):
        t = detail_tables[i]
        out_tables.append(t)
        out_fidx.append(np.full(t.num_rows, i, dtype=np.int32))
        if files[i].meta is None:
            files[i].status = "no_meta"


def read_rank_files(
    files: Sequence[RankFile],
    campaign_dir: Optional[Path] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> Tuple[pa.Table, np.ndarray]:
    """Parse ``files`` (filling in their meta, summary, evals, ...).

    Returns the step rows of all files as one table with :data:`STEP_SCHEMA` and, per row,
    the index of its file in ``files``. Rows of one file are contiguous and in file order.
    Raises :class:`LogFormatError` for unknown or mixed format versions.
    """
    say = progress or (lambda _m: None)
    total = sum(f.size for f in files)
    buf = bytearray(total)
    say(f"reading {len(files)} rank logs ({total / 1e6:.1f} MB)")
    used, segs, detail = _read_files(files, buf)
    # unusual files are few: parse them now, so that their meta joins the version check
    detail_tables: Dict[int, pa.Table] = {}
    for i, (data, tail) in detail.items():
        files[i].detail = True
        detail_tables[i] = _parse_detail(files[i], data, tail)
    check_versions(files, campaign_dir)

    say("parsing step records")
    tables: List[pa.Table] = []
    fidx_parts: List[np.ndarray] = []
    if segs:
        bulk = _bulk_part(buf, used, segs)
        parts = [bulk] if bulk is not None else _per_file_parts(files, buf, segs, detail_tables)
        for part in parts:
            _finish_bulk(part, files, buf, detail_tables, tables, fidx_parts)
        del parts, bulk
    del buf
    _append_detail_tables(files, detail_tables, tables, fidx_parts)
    check_versions(files, campaign_dir)
    if not tables:
        return STEP_SCHEMA.empty_table(), np.zeros(0, dtype=np.int32)
    steps = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    fidx = np.concatenate(fidx_parts) if len(fidx_parts) > 1 else fidx_parts[0]
    return steps, fidx


def _type_codes(table: pa.Table) -> Tuple[np.ndarray, List[Optional[str]]]:
    """The ``type`` column as small integer codes (-1: null) and the code's names."""
    enc = pc.dictionary_encode(table.column("type")).combine_chunks()
    codes = enc.indices.to_numpy(zero_copy_only=False)
    if enc.indices.null_count:
        codes = np.where(np.isnan(codes.astype(float)), -1, codes)
    return np.asarray(codes, dtype=np.int32), enc.dictionary.to_pylist()


def _code(names: List[Optional[str]], name: str) -> int:
    return names.index(name) if name in names else -2


def _rows_per_segment(codes: np.ndarray, names, nsegs: int) -> Optional[np.ndarray]:
    """Rows of each file, from the positions of the ``meta`` records (one first per file).

    None when the metas do not line up with the files (a file holding a second meta)."""
    metas = np.flatnonzero(codes == _code(names, "meta"))
    if len(metas) != nsegs or (nsegs and metas[0] != 0):
        return None
    return np.diff(np.append(metas, len(codes))).astype(np.int64)


def _drop_invalid_steps(
    table: pa.Table,
    is_step: np.ndarray,
    step_rows: Optional[np.ndarray],
    seg_of_row: np.ndarray,
    segs: List[_Segment],
    files: Sequence[RankFile],
) -> Tuple[np.ndarray, np.ndarray]:
    """A step without its required fields is invalid: dropped and counted per file.
    ``step_rows``: the records' rows of the table's rows, when it holds only the steps.

    Returns the step mask without the invalid rows, and the invalid rows' indices.
    """
    invalid = None
    for name in ("t_start", "t_end", "samples"):
        col = table.column(name)
        if col.null_count:
            nulls = np.asarray(pc.is_null(col).to_numpy(zero_copy_only=False), dtype=bool)
            invalid = nulls if invalid is None else (invalid | nulls)
    if invalid is None:
        return is_step, np.zeros(0, dtype=np.int64)
    if step_rows is not None:  # one flag per record, not per step
        per_record = np.zeros(len(is_step), dtype=bool)
        per_record[step_rows[invalid]] = True
        invalid = per_record
    invalid &= is_step
    if invalid.any():
        for s_idx, n_bad in enumerate(np.bincount(seg_of_row[invalid], minlength=len(segs))):
            files[segs[s_idx][0]].bad_lines += int(n_bad)
        is_step = is_step & ~invalid
    return is_step, np.flatnonzero(invalid)


def _locate_other_records(
    other: np.ndarray,
    other_types: List[Optional[str]],
    seg_of_row: np.ndarray,
    first_row: np.ndarray,
    counts: np.ndarray,
    segs: List[_Segment],
    files: Sequence[RankFile],
    buf: bytearray,
    bad_segments: set,
) -> Dict[int, List[Tuple[int, Optional[str]]]]:
    """Place the rows that are not steps: the meta first and the summary last are expected
    (the summary is decoded here); the others are returned per segment, as (line, type), to
    be decoded from their lines. Segments whose rows do not line up with their records go to
    ``bad_segments``."""
    need_lines: Dict[int, List[Tuple[int, Optional[str]]]] = {}
    for row, kind in zip(other.tolist(), other_types):
        s = int(seg_of_row[row])
        local = row - int(first_row[s])
        nl = int(counts[s])
        if local == 0:
            if kind != "meta":
                bad_segments.add(s)  # rows do not line up with lines
            continue
        if local == nl - 1 and kind == "summary":
            i, a, b, _ = segs[s]
            start = buf.rfind(b"\n", a, b - 1) + 1
            rec = _loads(bytes(buf[start : b - 1]))
            if rec is None or rec.get("type") != "summary":
                bad_segments.add(s)
            else:
                files[i].summary = rec
            continue
        if kind == "meta":
            bad_segments.add(s)  # a restarted rank appended a second attempt
            continue
        need_lines.setdefault(s, []).append((local, kind))
    return need_lines


def _take_line_records(
    need_lines: Dict[int, List[Tuple[int, Optional[str]]]],
    counts: np.ndarray,
    segs: List[_Segment],
    files: Sequence[RankFile],
    buf: bytearray,
    bad_segments: set,
) -> None:
    """Decode the wanted records (eval, allreduce, error...) from their lines."""
    for s, wanted in need_lines.items():
        if s in bad_segments:
            continue
        i, a, b, _ = segs[s]
        # pyarrow skips whitespace-only lines: so do we, then row k is line k
        lines = [ln for ln in bytes(buf[a:b]).split(b"\n") if ln.strip()]
        if len(lines) != int(counts[s]):
            bad_segments.add(s)  # e.g. two records on one line: parse line by line
            continue
        f = files[i]
        for local, kind in wanted:
            rec = _loads(lines[local]) if local < len(lines) else None
            if rec is None or rec.get("type") != kind:
                bad_segments.add(s)  # rows do not line up with lines: parse line by line
                break
            if not isinstance(kind, str):
                f.bad_lines += 1  # an object without a type
                continue
            _take_record(f, rec)


def _reparse_bad_segments(
    bad_segments: set,
    is_step: np.ndarray,
    first_row: np.ndarray,
    counts: np.ndarray,
    segs: List[_Segment],
    files: Sequence[RankFile],
    buf: bytearray,
    detail_tables: Dict[int, pa.Table],
) -> np.ndarray:
    """Parse the bad segments' files line by line; returns the mask of the bulk rows kept."""
    keep = is_step
    for s in sorted(bad_segments):
        i, a, b, _ = segs[s]
        f = files[i]
        f.summary, f.errors, f.evals, f.allreduce = None, [], [], []
        detail_tables[i] = _parse_detail(f, bytes(buf[a:b]), b"")
        f.detail = True
        r0 = int(first_row[s])
        keep = keep.copy() if keep is is_step else keep
        keep[r0 : r0 + int(counts[s])] = False
    return keep


def _finish_bulk(
    part: _Part,
    files: Sequence[RankFile],
    buf: bytearray,
    detail_tables: Dict[int, pa.Table],
    out_tables: List[pa.Table],
    out_fidx: List[np.ndarray],
) -> None:
    """Split one parsed table into step rows and the few other records, per file."""
    table, segs, counts, codes, names, step_rows = part
    seg_of_row = np.repeat(np.arange(len(segs), dtype=np.int32), counts)
    first_row = np.concatenate(([0], np.cumsum(counts)[:-1]))
    is_step_np = codes == _code(names, "step")
    for s_idx, (i, _, _, _) in enumerate(segs):
        files[i].lines = int(counts[s_idx])
    is_step_np, invalid = _drop_invalid_steps(table, is_step_np, step_rows, seg_of_row, segs, files)
    other = np.setdiff1d(np.flatnonzero(~is_step_np), invalid, assume_unique=True)
    other_types = [names[c] if c >= 0 else None for c in codes[other].tolist()]
    bad_segments: set = set()
    need_lines = _locate_other_records(
        other, other_types, seg_of_row, first_row, counts, segs, files, buf, bad_segments
    )
    _take_line_records(need_lines, counts, segs, files, buf, bad_segments)
    keep = _reparse_bad_segments(
        bad_segments, is_step_np, first_row, counts, segs, files, buf, detail_tables
    )
    seg_file = np.fromiter((sg[0] for sg in segs), dtype=np.int32, count=len(segs))
    fidx = seg_file[seg_of_row[keep]]
    if step_rows is None:  # every record's row: keep the steps'
        steps = table.drop_columns(["type"]).filter(pa.array(keep))
    else:
        kept = keep[step_rows]
        steps = table if kept.all() else table.filter(pa.array(kept))
    nsteps = np.bincount(fidx, minlength=len(files))
    for s, (i, _, _, _) in enumerate(segs):
        if s not in bad_segments:
            files[i].steps = int(nsteps[i])
    out_tables.append(steps)
    out_fidx.append(fidx.astype(np.int32, copy=False))
