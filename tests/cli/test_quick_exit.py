"""``report`` and ``collect`` as programs end without the interpreter's teardown once every
file is written (``ddlbench.cli.run``): their output still arrives whole, their exit codes are
kept, and the files are complete."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.cli import ddlbench
from tests.support.synth import SynthRun, write_campaign


def test_report_and_collect_as_programs(tmp_path):
    results = tmp_path
    runs = [SynthRun(tasks_per_node=n, repeat=r) for n in (1, 2) for r in range(2)]
    camp = write_campaign(results, "quick", runs)
    col = ddlbench("collect", "quick", "--json", results=results)
    assert col.returncode == 0, col.stderr
    assert json.loads(col.stdout)["data_dir"] == str(camp / "data")  # the whole JSON came
    rep = ddlbench("report", "quick", "--format", "md,html", results=results)
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.splitlines() == [
        f"report: {camp / 'report' / 'report.md'}",
        f"report: {camp / 'report' / 'report.html'}",
    ]
    assert "plotting" in rep.stderr and "writing report" in rep.stderr  # progress, flushed
    md = (camp / "report" / "report.md").read_text()
    assert "## Data files" in md  # the last section: the file is whole
    assert (camp / "report" / "plots" / "throughput.svg").read_text().rstrip().endswith("</svg>")
    # stdout closed early by its reader: no traceback, the exit code of the command
    proc = subprocess.run(
        f"{sys.executable} -m ddlbench report quick --results {results} -q | head -c 1",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_exit_code_kept(tmp_path):
    results = tmp_path
    runs = [SynthRun(tasks_per_node=2, repeat=r, failed_ranks=(0,)) for r in (0, 1)]
    write_campaign(results, "failed", runs)
    rep = ddlbench("report", "failed", "--format", "md", results=results)
    assert rep.returncode == 3, rep.stderr  # nothing complete: the report of failures, exit 3
    assert "has no complete run" in rep.stderr and "report: " in rep.stdout
