"""A site template that names a workload module from the old flat layout is refused before
anything is written (docs/architecture.md#the-workloads-folder, ddlbench/render/template_check.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ddlbench.errors import InputError
from ddlbench.render.template_check import line_problems
from tests.support.render import render
from tests.support.repo import ROOT


def test_a_line_naming_moved_modules_gets_their_places_now():
    found = list(line_problems("  python -m ddlbench.workloads.rank_start mxnet run.json"))
    assert found == [
        "no module ddlbench.workloads.rank_start in ddlbench's workloads "
        "(did you mean ddlbench.workloads.node.rank_start?)"
    ]
    (entry,) = line_problems('srun python -m ddlbench.workloads.pytorch "$RUN"')  # a package
    assert entry.endswith("(did you mean ddlbench.workloads.pytorch.torch_main?)")
    assert list(line_problems("python -m ddlbench.workloads.mxnet run.json")) == [
        "no module ddlbench.workloads.mxnet in ddlbench's workloads "
        "(did you mean ddlbench.workloads.mx.mxnet_main?)"
    ]
    (dynamic,) = line_problems("python -m ddlbench.workloads.{{ run.workload }} x")
    assert "did you mean {{ workload_module }}?" in dynamic
    assert list(line_problems("python -m ddlbench.workloads.nowhere x")) == [
        "no module ddlbench.workloads.nowhere in ddlbench's workloads"
    ]
    assert not list(line_problems("python -m ddlbench.workloads.node.ports --count 1"))
    assert not list(line_problems("{{ python }} -m {{ workload_module }} run.json"))


def _old_site_templates(tmp_path):
    """The shipped templates as a site kept them from the flat layout."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "slurm_templates", site)
    for name in ("base.sh.j2", "pytorch.sh.j2"):
        text = (site / name).read_text()
        for tool in ("node.ports", "node.rank_start"):
            text = text.replace(f"ddlbench.workloads.{tool}", "ddlbench.workloads." + tool[5:])
        (site / name).write_text(text)
    return site


def test_old_site_templates_are_refused_with_file_and_line(tmp_path, monkeypatch):
    site = _old_site_templates(tmp_path)
    monkeypatch.setenv("DDLBENCH_TEMPLATES", str(site))
    with pytest.raises(InputError) as err:
        render(ROOT / "configs" / "quickstart.yaml", "local", tmp_path / "results")
    lines = [str(p) for p in err.value.problems]
    base = (site / "base.sh.j2").read_text().splitlines()
    ports = [i for i, ln in enumerate(base, 1) if "ddlbench.workloads.ports" in ln]
    assert len(ports) >= 2 and [ln for ln in lines if "base.sh.j2" in ln] == [
        f"{site / 'base.sh.j2'}:{i}: no module ddlbench.workloads.ports in ddlbench's "
        "workloads (did you mean ddlbench.workloads.node.ports?)"
        for i in ports
    ]
    assert any("pytorch.sh.j2:" in ln and "node.rank_start?)" in ln for ln in lines), lines
    assert not (tmp_path / "results").exists()  # nothing written


def test_submit_with_old_site_templates_exits_2_without_a_traceback(tmp_path):
    site = _old_site_templates(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDLBENCH_")}
    env.update(DDLBENCH_TEMPLATES=str(site), DDLBENCH_RESULTS=str(tmp_path / "results"))
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "submit", str(ROOT / "configs" / "quickstart.yaml"),
         "--cluster", "local", "--dry-run"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pytorch.sh.j2:" in proc.stderr and "ddlbench.workloads.node.rank_start" in proc.stderr
    assert not (tmp_path / "results").exists()
