"""The reader's fast path: step lines in the layout of ddlbench's own logger, cut by pyarrow's
CSV reader instead of parsed by its JSON reader (``docs/reports.md#performance``).

The logger writes every step record without extra fields in one layout
(``workloads.common.logger.encode_step``): ``{"type": "step", "step": 12, ..., "comm_s": null}``,
the fields of :data:`~ddlbench.collect.step_schema.STEP_FIELDS` in their order, each as
``"key": value`` after ``", "``. Such a line is eleven comma-separated fields whose beginnings
are fixed, so the CSV reader (no quoting) can cut it, and each value is its field with the key
sliced off. That takes about half the CPU time of the JSON reader, which tokenises every byte.

Two passes over the same bytes, both multi-threaded in pyarrow:

1. every non-empty line as one value: which rows are step lines (by their first bytes), and
   the few other lines (``meta``, ``summary``, ``eval``...), whose ``type`` is decoded here;
2. the lines of eleven fields as eleven columns (the others skipped): every key checked, the
   values sliced off and converted in two threads.

:func:`cut_steps` returns ``None`` whenever anything does not fit: a step line in another
layout (extra fields, other spacing, a phase with an escape or a comma), a line that is not
JSON, a value the conversion refuses. The JSON reader then reads everything, as before, so
the result never depends on the path. What the fast path accepts that the JSON reader would
not: a number that the CSV conversion reads and JSON does not write (``+1``, ``.5``,
``1.``); the logger writes none of them. NaN and infinity send everything to the JSON reader.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from .step_schema import STEP_FIELDS, STEP_SCHEMA

#: the fixed beginning of each comma-separated field of a step line, in order
FIELD_KEYS: Tuple[bytes, ...] = (b'{"type": "step"',) + tuple(
    f' "{name}": '.encode() for name, _ in STEP_FIELDS
)
_STEP_PREFIX = FIELD_KEYS[0] + b", "
_NAMES = [f"f{i}" for i in range(len(FIELD_KEYS))]
_BLOCK = 4 << 20  # streamed: small blocks keep one batch converting while the next is cut
_TYPE_RE = re.compile(rb'\{"type": "([a-z_]+)"[,}]')
_NULL = pa.scalar(None, pa.binary())
_BLANK = object()  # a whitespace-only line
_PROBE = 4096  # bytes read at a probe: a step line in the layout is a few hundred


class _NotLayout(Exception):
    """Some line does not fit the fast path."""


def _batches(data: pa.Buffer, columns: int) -> pcsv.CSVStreamingReader:
    """The lines of ``data`` as batches of ``columns`` binary columns (one: whole lines; more:
    only the lines of that many comma-separated fields, the others skipped). Streamed, so that
    no second copy of all the bytes is held at once."""
    names = _NAMES[:columns] if columns > 1 else ["line"]
    return pcsv.open_csv(
        data,
        read_options=pcsv.ReadOptions(column_names=names, block_size=_BLOCK),
        parse_options=pcsv.ParseOptions(
            # one column: a delimiter that valid JSON text never holds unescaped
            delimiter="," if columns > 1 else "\x1e",
            quote_char=False,
            escape_char=False,
            invalid_row_handler=(lambda _row: "skip") if columns > 1 else None,
        ),
        convert_options=pcsv.ConvertOptions(column_types={n: pa.binary() for n in names}),
    )


def _line_types(data: pa.Buffer) -> Tuple[np.ndarray, List[Optional[str]]]:
    """Pass 1: every non-blank line's type code (an index into the returned names, whose
    first is ``step``; -1: an object without a string ``type``). Step lines are told by their
    first bytes; only the few others are decoded."""
    flags: List[np.ndarray] = []
    others: List[Tuple[int, bytes]] = []
    seen = 0
    for batch in _batches(data, 1):
        lines = batch.column(0)
        step = pc.starts_with(lines, pattern=_STEP_PREFIX).to_numpy(zero_copy_only=False)
        flags.append(np.asarray(step, dtype=bool))
        rows = np.flatnonzero(~flags[-1])
        others.extend(zip((rows + seen).tolist(), lines.take(pa.array(rows)).to_pylist()))
        seen += len(lines)
    is_step = np.concatenate(flags) if flags else np.zeros(0, dtype=bool)
    names: List[Optional[str]] = ["step"]
    codes = np.zeros(len(is_step), dtype=np.int32)
    blank: List[int] = []
    for row, line in others:
        kind = _record_type(line)
        if kind is _BLANK:
            blank.append(row)
            continue
        if kind not in names:
            names.append(kind)
        codes[row] = names.index(kind) if kind is not None else -1
    if blank:  # the JSON reader skips whitespace-only lines: so do the rows
        codes = np.delete(codes, blank)
    return codes, names


def _record_type(line: bytes):
    """The ``type`` of a line that is not a step line in the layout; raises when the line is
    not one JSON object (the JSON reader would refuse the whole buffer)."""
    if not line.strip():
        return _BLANK
    m = _TYPE_RE.match(line)
    if m is not None and m.group(1) == b"meta":
        return "meta"  # decoded by the reader already, or a restart it decodes itself
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise _NotLayout("not JSON") from None
    if not isinstance(rec, dict):
        raise _NotLayout("not an object")
    if rec.get("type") == "step":
        raise _NotLayout("a step line in another layout")
    kind = rec.get("type")
    return kind if isinstance(kind, str) else None


def _field(table: pa.Table, k: int) -> pa.ChunkedArray:
    """Column ``k`` of the step lines: its key checked and sliced off, its value converted."""
    raw = table.column(k)
    key = FIELD_KEYS[k]
    if not pc.all(pc.starts_with(raw, pattern=key)).as_py():
        raise _NotLayout(f"field {k}")
    value = pc.binary_slice(raw, len(key), 1 << 30)
    if k == len(FIELD_KEYS) - 1:
        if not pc.all(pc.ends_with(value, pattern=b"}")).as_py():
            raise _NotLayout("more after the last field")
        value = pc.binary_slice(value, 0, -1)
    value = pc.if_else(pc.equal(value, b"null"), _NULL, value)
    kind = STEP_FIELDS[k - 1][1]
    if pa.types.is_string(kind):
        quoted = pc.and_(pc.starts_with(value, pattern=b'"'), pc.ends_with(value, pattern=b'"'))
        plain = pc.equal(pc.count_substring(value, pattern=b'"'), 2)
        no_escape = pc.invert(pc.match_substring(value, pattern=b"\\"))
        if not pc.all(pc.and_(pc.and_(quoted, plain), no_escape)).as_py():
            raise _NotLayout("a string with an escape")
        return pc.binary_slice(value, 1, -1).cast(pa.string())
    out = value.cast(pa.string()).cast(kind)
    if pa.types.is_floating(kind) and pc.any(pc.invert(pc.is_finite(out))).as_py():
        raise _NotLayout("NaN and infinity are not JSON numbers")
    return out


def _convert(batch: pa.RecordBatch) -> List[pa.Array]:
    """One batch of pass 2: its step lines' values, one array per step field."""
    table = pa.Table.from_batches([batch])
    is_step = pc.equal(table.column(0), FIELD_KEYS[0])
    if not pc.all(is_step).as_py():  # an other record of eleven fields
        table = table.filter(is_step)
    if not table.num_rows:
        return [pa.array([], type=kind) for _, kind in STEP_FIELDS]
    return [_field(table, k).combine_chunks() for k in range(1, len(FIELD_KEYS))]


def _step_columns(data: pa.Buffer, pool: ThreadPoolExecutor) -> pa.Table:
    """Pass 2: the step lines' values as a table of :data:`STEP_SCHEMA`. Each batch is
    converted in the pool while the reader cuts the next one."""
    pending = [pool.submit(_convert, batch) for batch in _batches(data, len(FIELD_KEYS))]
    parts = [f.result() for f in pending]
    columns = [
        pa.chunked_array([p[k] for p in parts], type=kind)
        for k, (_, kind) in enumerate(STEP_FIELDS)
    ]
    return pa.Table.from_arrays(columns, schema=STEP_SCHEMA)


def _probes_fit(data: memoryview, probes: Sequence[int]) -> bool:
    """False when a step line starting at one of the offsets ``probes`` is in another layout:
    a campaign whose steps carry optional fields (straggler injection, backup workers) has
    them on its first steps already, and then skips the fast path at once."""
    for start in probes:
        head = bytes(data[start : start + _PROBE])
        end = head.find(b"\n")
        line = head if end < 0 else head[:end]
        if line.startswith(_STEP_PREFIX) and line.count(b",") != len(FIELD_KEYS) - 1:
            return False
    return True


def cut_steps(
    data: memoryview, probes: Sequence[int] = ()
) -> Optional[Tuple[pa.Table, np.ndarray, List[Optional[str]]]]:
    """The step rows of ``data`` (complete lines of rank logs), read by the fast path: the
    steps as a table of :data:`STEP_SCHEMA`, the type code of every record (one per non-blank
    line, as the JSON reader has them) and the codes' names, ``step`` first. ``None`` when
    any line does not fit (the caller then uses the JSON reader), or a line at one of the
    offsets ``probes`` (say, each file's first step) shows it would not."""
    if not _probes_fit(data, probes):
        return None
    buffer = pa.py_buffer(data)
    try:
        with ThreadPoolExecutor(2) as pool:
            types = pool.submit(_line_types, buffer)
            steps = _step_columns(buffer, pool)
            codes, names = types.result()
    except (_NotLayout, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if steps.num_rows != int(np.count_nonzero(codes == 0)):
        return None  # a step line with more or fewer fields than the layout's
    return steps, codes, names
