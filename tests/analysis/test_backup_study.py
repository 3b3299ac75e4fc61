"""docs/studies/backup_workers_study.py: its pairs, and its censored time to accuracy."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pandas as pd
import pytest

from tests.support.repo import ROOT


@pytest.fixture(scope="module")
def study():
    path = ROOT / "docs" / "studies" / "backup_workers_study.py"
    spec = importlib.util.spec_from_file_location("backup_workers_study", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _configs(*pairs):
    return pd.DataFrame(
        [{"ranks": r, "backups": b} for r, b in pairs], columns=["ranks", "backups"]
    )


def test_pairs_leave_out_backups_that_keep_one_gradient(study):
    """b = 1 at 2 ranks keeps N = 1: not data-parallel SGD, so no pair is formed with it."""
    df = _configs((2, None), (3, None), (2, 0), (3, 0), (2, 1), (3, 1))
    assert study.pairs(df) == [
        ("backup0@2", "sync@2", "the mechanism's cost"),
        ("backup1@3", "backup0@3", "same path, b = 0"),
        ("backup1@3", "sync@2", "DDP with N ranks"),
        ("backup0@3", "sync@3", "the mechanism's cost"),
    ]


def test_pairs_of_the_sweep_keep_b_up_to_n_minus_2(study):
    df = _configs((3, 0), (3, 1), (3, 2))
    assert [p[:2] for p in study.pairs(df)] == [
        ("backup1@3", "backup0@3"),
        ("backup1@3", "sync@2"),
        ("backup0@3", "sync@3"),
    ]


def test_km_median_keeps_censored_runs(study):
    """Dropping the two runs that never reached the target would give the median of the
    others (3.0); kept at risk until they end (9 s), they move the median to 4.0."""
    times = np.array([2.0, 3.0, 4.0, 9.0, 9.0])
    reached = np.array([True, True, True, False, False])
    assert study.km_median(times, reached) == 4.0
    assert float(np.median(times[reached])) == 3.0
    # half never reach: no median
    assert study.km_median(times, np.array([True, False, False, False, False])) is None
    # censored early (at 1.5 s) the run leaves the risk set before any event
    times = np.array([1.5, 2.0, 3.0, 4.0])
    reached = np.array([False, True, True, True])
    assert study.km_median(times, reached) == 3.0


def test_logrank_separates_and_agrees(study):
    t = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    e = np.ones(5, bool)
    assert study.logrank_p(t, e, t, e) == pytest.approx(1.0)
    fast = np.array([1.0, 1.1, 1.2, 1.3, 1.4, 1.5])
    slow = np.array([5.0, 5.1, 5.2, 5.3, 5.4, 5.5])
    p = study.logrank_p(fast, np.ones(6, bool), slow, np.zeros(6, bool))
    assert p is not None and p < 0.01
    assert not math.isnan(p)
