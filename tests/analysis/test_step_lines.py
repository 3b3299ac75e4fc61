"""The reader's fast path (collect/step_lines.py): the logger's step lines cut by pyarrow's CSV
reader give the JSON reader's table exactly, and anything else goes to the JSON reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv  # noqa: F401 - pa.csv, patched below
import pyarrow.json as pj
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddlbench.collect import reader
from ddlbench.collect.reader import PARSE_SCHEMA, RankFile, read_rank_files
from ddlbench.collect.step_lines import FIELD_KEYS, cut_steps
from ddlbench.workloads.common.logger import encode_record, encode_step

META = encode_record({"type": "meta", "format_version": 1, "rank": 0, "run_id": "r"})
SUMMARY = encode_record({"type": "summary", "t": 2.0, "steps_measured": 3})


def _step(i: int, **kw) -> bytes:
    args = dict(
        step=i, epoch=0, phase="measure", t_start=1.5 + i, t_end=1.75 + i, samples=32,
        loss=2.5, lr=0.1, compute_s=0.01, comm_s=None,
    )  # fmt: skip
    args.update(kw)
    return encode_step(**args).encode()


def _json_steps(data: bytes) -> pa.Table:
    table = pj.read_json(
        pa.py_buffer(data),
        parse_options=pj.ParseOptions(
            explicit_schema=PARSE_SCHEMA, unexpected_field_behavior="ignore"
        ),
    )
    return table.filter(pc.equal(table.column("type"), "step")).drop_columns(["type"])


def _check_same_as_json(data: bytes) -> bool:
    """The fast path's answer, when it gives one, is the JSON reader's; True when it did."""
    fast = cut_steps(memoryview(data))
    if fast is None:
        return False
    steps, codes, names = fast
    assert steps.equals(_json_steps(data).cast(steps.schema))
    types = pj.read_json(pa.py_buffer(data)).column("type").to_pylist()
    assert [names[c] if c >= 0 else None for c in codes] == types
    is_step = [c >= 0 and names[c] == "step" for c in codes]
    assert is_step == [t == "step" for t in types] and sum(is_step) == steps.num_rows
    return True


def test_the_loggers_step_lines_are_the_fast_paths_layout():
    line = _step(7, epoch=None, loss=None, lr=1e-05, compute_s=-0.0, comm_s=3.25e-07)
    fields = line.rstrip(b"\n").split(b",")
    assert len(fields) == len(FIELD_KEYS)
    assert all(f.startswith(k) for f, k in zip(fields, FIELD_KEYS))
    data = META + line + _step(8) + SUMMARY
    assert _check_same_as_json(data)


floats = st.one_of(
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-300, max_value=1e-300),
    st.integers(-(10**6), 10**6).map(float),
)
steps = st.builds(
    lambda i, epoch, phase, a, b, n, loss, lr, c, m: _step(
        i,
        epoch=epoch,
        phase=phase,
        t_start=a,
        t_end=b,
        samples=n,
        loss=loss,
        lr=lr,
        compute_s=c,
        comm_s=m,
    ),  # fmt: skip
    st.integers(0, 2**62),
    st.one_of(st.none(), st.integers(-5, 10**9)),
    st.sampled_from(["warmup", "measure", "train", "x y", "é", "a,b", 'q"t', "back\\slash"]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(0, 2**40),
    floats,
    floats,
    floats,
    floats,
)
others = st.sampled_from(
    [
        encode_record({"type": "eval", "epoch": 1, "accuracy": 0.5, "step": 3}),
        encode_record({"type": "allreduce", "bytes": 1024, "time_s": 0.001}),
        # eleven comma-separated fields, not a step
        encode_record({"type": "error", **{f"k{i}": i for i in range(10)}}),
        encode_record({"type": "step", "step": 1, "t_start": 1.0, "t_end": 2.0, "samples": 4}),
        encode_record(
            {
                "type": "step",
                "step": 1,
                "epoch": 0,
                "phase": "m",
                "t_start": 1.0,
                "t_end": 2.0,
                "samples": 4,
                "loss": 1.0,
                "lr": 0.1,
                "compute_s": 0.1,
                "comm_s": 0.0,
                "slowed_s": 0.5,
            }
        ),  # fmt: skip
        _step(3).replace(b'"step": 3', b'"step":3'),
        _step(3).replace(b"2.5", b"NaN"),
        _step(3).replace(b"}\n", b"} \n"),
        b"\n",
        b"   \n",
        b"{not json\n",
        b"[1, 2]\n",
        encode_record({"no_type": 1}),
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(steps, steps, steps, others), max_size=30))
def test_the_fast_path_gives_the_json_readers_table_or_steps_aside(body):
    data = META + b"".join(body) + SUMMARY
    try:
        _json_steps(data)
    except pa.ArrowInvalid:
        assert cut_steps(memoryview(data)) is None  # what the JSON reader refuses
        return
    _check_same_as_json(data)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"step","step":1,"epoch":0,"phase":"m","t_start":1.0,"t_end":2.0,'
        b'"samples":4,"loss":1.0,"lr":0.1,"compute_s":0.1,"comm_s":0.0}\n',
        _step(3, phase='q"t'),
        _step(3, phase="a,b"),
        _step(3).replace(b"2.5", b"NaN"),
        _step(3).replace(b"2.5", b"Infinity"),
        _step(3).replace(b'"comm_s": null}', b'"comm_s": null, "slowed_s": 0.5}'),
        b"{not json\n",
    ],
    ids=["spacing", "escape", "comma", "nan", "inf", "extra-field", "not-json"],
)
def test_a_line_out_of_the_layout_sends_everything_to_the_json_reader(line):
    data = META + _step(1) + line + _step(2) + SUMMARY
    assert cut_steps(memoryview(data)) is None


def test_blank_lines_and_eleven_field_records_stay_on_the_fast_path():
    eleven = encode_record({"type": "error", **{f"k{i}": i for i in range(10)}})
    assert len(eleven.split(b",")) == len(FIELD_KEYS)
    data = META + _step(1) + b"\n  \n" + eleven + _step(2) + SUMMARY
    assert _check_same_as_json(data)


def _files(tmp_path: Path, texts) -> list:
    out = []
    for k, text in enumerate(texts):
        path = tmp_path / f"rank-{k}.jsonl"
        path.write_bytes(text)
        out.append(RankFile(path=path, run_key="r", size=len(text)))
    return out


def _read(tmp_path: Path, texts, monkeypatch, fast: bool):
    taken = []

    def spy(data, probes=()):
        out = cut_steps(data, probes) if fast else None
        taken.append(out is not None)
        return out

    with monkeypatch.context() as m:
        m.setattr(reader, "cut_steps", spy)
        files = _files(tmp_path, texts)
        steps, fidx = read_rank_files(files)
    assert taken == [fast]  # one bulk read, by the path asked for
    keep = ("lines", "bad_lines", "truncated_lines", "restarts", "steps", "detail", "status")
    return (
        steps,
        fidx,
        [({k: getattr(f, k) for k in keep}, f.summary, f.evals, f.errors) for f in files],
    )


def test_the_reader_gives_the_same_with_and_without_the_fast_path(tmp_path, monkeypatch):
    """Damaged files among good ones: invalid steps, a restart, a second meta, an eval."""
    no_time = json.loads(_step(5))
    no_time["t_start"] = None
    texts = [
        META + _step(0) + _step(1) + encode_record({"type": "eval", "epoch": 0}) + SUMMARY,
        META + _step(0) + encode_record(no_time) + _step(6) + SUMMARY,
        META + _step(0) + META + _step(0) + _step(1) + SUMMARY,  # a requeued rank's restart
        META + _step(0, loss=None, lr=None) + b"\n" + _step(1),  # killed before its summary
        META + _step(0) + META[:30] + b"\n" + _step(1) + SUMMARY,  # a damaged second meta
        META + _step(0) + _step(1) + SUMMARY,
    ]
    a = _read(tmp_path, texts, monkeypatch, fast=True)
    b = _read(tmp_path, texts, monkeypatch, fast=False)
    assert a[0].equals(b[0]) and np.array_equal(a[1], b[1])
    assert a[2] == b[2]
    assert a[2][1][0]["bad_lines"] == 1 and a[2][2][0]["restarts"] == 1
    assert a[2][4][0]["detail"] and not a[2][5][0]["detail"]


def test_a_first_step_with_optional_fields_skips_the_fast_path_at_once(monkeypatch):
    """Straggler injection writes its fields on every step: the probe of each file's first
    step sees them, and no line is cut in vain before the JSON reader reads them all."""
    record = json.loads(_step(1))
    record.update(injected_s=0.0, slowdown=1)
    data = META + encode_record(record) + _step(2) + SUMMARY

    def no_cut(*args, **kwargs):
        raise AssertionError("the CSV reader ran")

    monkeypatch.setattr(pa.csv, "open_csv", no_cut)
    assert cut_steps(memoryview(data), [len(META)]) is None
    with pytest.raises(AssertionError, match="ran"):  # in the layout: it would have cut
        cut_steps(memoryview(META + _step(2) + SUMMARY), [len(META)])
