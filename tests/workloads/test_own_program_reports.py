"""What the wrapper of a spec's own program does with reports it cannot use
(ddlbench.workloads.own.own_program.StepSink): a step line whose number does not parse, a mark
that is not JSON, has a non-numeric field or impossible times. Each is skipped and counted,
later reports still count, and the rank log stays within the schema.
docs/your-own-workload.md#reports-that-cannot-be-used."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

from ddlbench.workloads.common.logger import RankLogger
from ddlbench.workloads.common.loop import Measurement
from ddlbench.workloads.own.own_program import ProgramFailed, StepSink, check_outcome


@pytest.fixture(autouse=True)
def _steps_written_at_once(monkeypatch):
    """These tests read the rank log while the sink's logger is open: every step written at
    its end (the logger's own tests cover keeping steps for STEP_FLUSH_S)."""
    from ddlbench.workloads.common import logger as logger_mod

    monkeypatch.setattr(logger_mod, "STEP_FLUSH_S", 0.0)


#: a good mark: 0.5 s, 8 samples
GOOD = {"t_start": 100.0, "t_end": 100.5, "samples": 8, "loss": 1.0}


def _sink(tmp: Path, measure: Any = "marks", warmup: int = 1) -> StepSink:
    logger = RankLogger(str(tmp / "logs"), 0)
    ctx = SimpleNamespace(
        cfg={"steps": {"warmup": warmup}, "batch_size": 4},
        info=SimpleNamespace(rank=0),
        measurement=lambda: Measurement(logger),
    )
    return StepSink(ctx, {"measure": measure})  # type: ignore[arg-type]


def _steps(tmp: Path) -> List[Dict[str, Any]]:
    lines = (tmp / "logs" / "rank-0.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == "step"]


def _mark(**fields: Any) -> bytes:
    return (json.dumps(dict(GOOD, **fields)) + "\n").encode()


@pytest.mark.parametrize(
    "line, why",
    [
        ("step 5 rate . loss 1.0", "could not convert string to float: '.'"),
        ("step 5 rate 0 loss 1.0", "a rate of 0 samples/s gives no step time"),
        ("step 5 rate 1e999 loss 1.0", "the captured value is '1e999', not a finite number >= 0"),
    ],
)
def test_a_step_line_that_makes_no_step_is_skipped_and_counted(tmp_path, capsys, line, why):
    measure = {"step": r"rate (\S+)", "unit": "samples/s", "samples": 4}
    sink = _sink(tmp_path, measure)
    for text in ("step 1 rate 400", line, "step 6 rate 200", "step 7 rate 100"):
        sink.line(text + "\n")
    assert sink.steps == 3 and sink.rejected == 1  # the steps after the bad line still count
    assert [round(s["t_end"] - s["t_start"], 6) for s in _steps(tmp_path)] == [0.01, 0.02, 0.04]
    assert f"ddlbench: rank 0: skipped a step line: {why}: {line!r}" in capsys.readouterr().err
    assert why in sink.first_rejection


def test_negative_times_and_samples_in_step_lines_are_rejected(tmp_path):
    measure = {"step": r"time (?P<value>\S+) s n (?P<samples>\S+)", "unit": "ms"}
    sink = _sink(tmp_path, measure)
    for text in ("time -3 s n 4", "time 3 s n -4", "time 3 s n x", "time 3 s n 4"):
        sink.line(text)
    assert sink.steps == 1 and sink.rejected == 3
    (step,) = _steps(tmp_path)
    assert step["samples"] == 4 and abs(step["t_end"] - step["t_start"] - 0.003) < 1e-6


def test_an_unreadable_loss_line_is_counted_and_the_step_kept_without_a_loss(tmp_path):
    measure = {"step": r"time (\S+) s", "unit": "s", "loss": r"loss (\S+)"}
    sink = _sink(tmp_path, measure)
    sink.line("time 0.1 s loss 2.0")
    sink.line("time 0.1 s loss ?")
    sink.line("time 0.1 s loss nan")  # kept: a diverged loss, written null
    assert sink.steps == 3 and sink.rejected == 1
    assert [s["loss"] for s in _steps(tmp_path)] == [2.0, None, None]


def test_only_the_first_rejections_are_explained_on_stderr(tmp_path, capsys):
    sink = _sink(tmp_path)
    for _ in range(5):
        sink.mark(b"not json\n")
    err = capsys.readouterr().err
    assert sink.rejected == 5 and err.count("skipped a mark") == 3
    assert "(later ones are only counted)" in err


@pytest.mark.parametrize(
    "raw, why",
    [
        (_mark(loss="abc"), "could not convert string to float: 'abc'"),
        (_mark(compute_s="x"), "could not convert string to float: 'x'"),
        (_mark(comm_s=-1), "comm_s is -1, not a finite number >= 0"),
        (_mark(t_end=99.0), "t_end 99.0 is before t_start 100.0"),
        (_mark(samples=-3), "samples is -3, not a finite number >= 0"),
        (_mark(samples=2.5), "samples is 2.5, not a whole number"),
        (_mark(samples=True), "samples is True, not a number"),
        (_mark(t_end=float("inf")), "t_end is inf, not a finite number >= 0"),
        (_mark(t_start=float("nan")), "t_start is nan, not a finite number >= 0"),
        (_mark(samples=None), "no samples"),
        (b'{"t_start": 5, "t_end": 1, "samples": -3, "loss": NaN}\n', "t_end 1.0 is before"),
        (b"[1, 2]\n", "not a JSON object"),
        (b"\xff\xfe\n", "can't decode"),
        (b"{\n", "Expecting property name"),
    ],
)
def test_a_bad_mark_is_rejected_and_the_next_one_counts(tmp_path, raw, why):
    sink = _sink(tmp_path, warmup=0)
    sink.mark(raw)
    sink.mark(_mark())
    assert sink.rejected == 1 and why in sink.first_rejection, sink.first_rejection
    assert sink.steps == 1  # the bad mark took no step, not even a warmup one
    (step,) = _steps(tmp_path)
    assert step["step"] == 0 and step["phase"] == "measure" and step["samples"] == 8
    assert sink.measurement.summary_fields()["measure_time_s"] == 0.5


def test_a_non_finite_loss_is_kept_as_a_diverged_step(tmp_path):
    sink = _sink(tmp_path, warmup=0)
    sink.mark(b'{"t_start": 1, "t_end": 2, "samples": 4, "loss": NaN}\n')
    sink.mark(b'{"t_start": 2, "t_end": 3, "samples": 4, "loss": Infinity}\n')
    assert sink.rejected == 0 and sink.steps == 2
    assert [s["loss"] for s in _steps(tmp_path)] == [None, None]  # as the shipped workloads
    assert not math.isfinite(sink.measurement.final_loss)  # the summary writes it null


def test_zero_length_steps_give_no_throughput_and_fail_the_rank(tmp_path):
    sink = _sink(tmp_path, warmup=0)
    sink.mark(_mark(t_end=100.0))
    with pytest.raises(ProgramFailed, match=r"1 measured steps on rank 0 \(h\) last 0 s in all"):
        check_outcome(0, sink, {"argv": ["python"]}, "on rank 0 (h)")


def test_the_failure_says_why_every_report_was_rejected(tmp_path):
    marks = _sink(tmp_path / "m")
    marks.mark(_mark(samples=-1))
    with pytest.raises(ProgramFailed) as failed:
        check_outcome(0, marks, {"argv": ["python"]}, "on rank 0 (h)")
    assert "never marked a step on rank 0 (h)" in str(failed.value)
    assert "1 rejected marks); skipped a mark: samples is -1" in str(failed.value)
    lines = _sink(tmp_path / "p", {"step": r"rate (\S+)", "unit": "samples/s"})
    lines.line("rate .")
    with pytest.raises(ProgramFailed, match=r"matched no line whose number makes a step \(1 rej"):
        check_outcome(0, lines, {"argv": ["python"]}, "on rank 0 (h)")
