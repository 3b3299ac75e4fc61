"""A report made on a busy machine says so in its summary, beside the figures
(docs/telemetry.md#the-interference-pre-flight)."""

from __future__ import annotations

import pandas as pd

from ddlbench.report.narrative import preflight_sentences

BUSY = "started on a busy node: other processes kept 1.98 of 2 CPUs busy over 0.5 s"


def _runs(busy, notes, status=None) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(len(busy))],
            "status": status or ["ok"] * len(busy),
            "preflight_busy": busy,
            "interference": notes,
        }
    )


def test_busy_runs_are_counted_with_the_reason():
    (line,) = preflight_sentences(_runs([True, False, True], [BUSY, None, BUSY]))
    assert line.startswith(f"Pre-flight: 2 of 3 measured run(s) {BUSY}")
    assert "repeat them on a quiet machine" in line


def test_quiet_runs_and_runs_without_a_pre_flight():
    assert preflight_sentences(_runs([False, False], [None, None])) == [
        "Pre-flight: all 2 measured run(s) started on a quiet node."
    ]
    assert preflight_sentences(_runs([None, None], [None, None])) == []  # pre-flight off
    failed = _runs([True, False], [BUSY, None], status=["failed", "ok"])
    assert preflight_sentences(failed) == [
        "Pre-flight: all 1 measured run(s) started on a quiet node."
    ]


def test_the_summary_says_how_long_the_complete_runs_measured():
    from ddlbench.report.narrative import window_sentences

    runs = pd.DataFrame(
        {
            "status": ["ok", "ok", "ok", "failed"],
            "measure_time_s": [10.01, 11.12, 10.05, 0.3],  # the failed run's is not counted
        }
    )
    (line,) = window_sentences(runs)
    assert line == (
        "Measured window per complete run: 10.0-11.1 s (median 10.1 s), warmup excluded."
    )
    runs.loc[1, "measure_time_s"] = 0.61  # the old quickstart's 40 steps
    (short,) = window_sentences(runs)
    assert "0.6-10.1 s" in short and "1 below 5 s, which shows mostly the moment" in short
    assert window_sentences(runs.drop(columns=["measure_time_s"])) == []
    assert window_sentences(runs[runs["status"] == "failed"]) == []
