"""Fixtures of the collector/analysis/report tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.sweeps import small_sweep
from tests.support.synth import write_campaign


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    root.mkdir()
    return root


@pytest.fixture
def sweep_campaign(results: Path) -> Path:
    return write_campaign(results, "sweep", small_sweep())
