"""docs/studies/backup_workers_study.py runs on ddlbench's dependencies (no scipy), and its
Kaplan-Meier median and log-rank test are the report's."""

from __future__ import annotations

import ast
import importlib.util
import sys

import numpy as np
import pytest

from ddlbench.analyse import backups
from tests.support.repo import ROOT

PATH = ROOT / "docs" / "studies" / "backup_workers_study.py"


def _load():
    spec = importlib.util.spec_from_file_location("backup_workers_study_noscipy", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_scipy_import():
    names = set()
    for node in ast.walk(ast.parse(PATH.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    assert "scipy" not in names
    assert names <= {"__future__", "argparse", "math", "os", "re", "subprocess", "sys"} | {
        "pathlib",
        "typing",
        "numpy",
        "pandas",
        "ddlbench",
    }


def test_welch_p_without_scipy(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)  # import scipy raises ImportError
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    study = _load()
    a = np.array([10.0, 11.0, 12.0, 10.5])
    b = np.array([13.0, 12.5, 14.0, 13.5, 12.8])
    # scipy.stats.ttest_ind(a, b, equal_var=False) (scipy 1.17): t = -4.5438,
    # Welch-Satterthwaite df = 5.1899, p = 0.0056120
    assert study.welch_p(a, b) == pytest.approx(0.0056120, rel=1e-4)
    assert study.welch_p(b, a) == pytest.approx(study.welch_p(a, b))
    assert study.welch_p(a[:1], b) is None
    assert study.km_median is backups.km_median and study.logrank_p is backups.logrank_p


def test_welch_p_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    study = _load()
    rng = np.random.default_rng(3)
    for _ in range(5):
        a, b = rng.normal(1.0, 0.2, 6), rng.normal(1.1, 0.4, 9)
        ref = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
        assert study.welch_p(a, b) == pytest.approx(ref, rel=1e-6, abs=1e-9)
