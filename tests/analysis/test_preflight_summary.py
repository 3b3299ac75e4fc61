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
