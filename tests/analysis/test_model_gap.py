"""A campaign given an allreduce sweep that yields no model: the fit says which layout failed
and why, the report's model section and a warning say so, and ``predict --from`` warns that
the calibration was not used."""

from __future__ import annotations

import pandas as pd

from ddlbench.analyse.alpha_beta import fit_sweep
from tests.support.cli import invoke
from tests.support.synth import SynthRun, write_campaign


def _sweep(times_ms, n=2, nodes=1) -> pd.DataFrame:
    sizes = [1024 * 4**k for k in range(len(times_ms))]
    return pd.DataFrame(
        {"world_size": n, "nodes": nodes, "bytes": sizes, "time_s": [t / 1e3 for t in times_ms]}
    )


def test_a_sweep_whose_time_does_not_grow_with_size_has_no_fit_and_says_why():
    fits, gaps = fit_sweep(_sweep([0.9, 0.4, 0.5, 0.3, 0.35, 0.3]))  # noise over a 1 MiB range
    assert fits == []
    assert gaps[0].startswith("2 ranks on 1 node: the time does not grow with the message size")
    assert "1 KiB to 1 MiB" in gaps[0] and "allreduce.max_bytes" in gaps[0]
    fits, gaps = fit_sweep(_sweep([0.1, 0.2]))
    assert fits == [] and gaps == ["2 ranks on 1 node: 2 message size(s), 3 or more are needed"]
    fits, gaps = fit_sweep(_sweep([0.05, 0.1, 0.4, 1.6, 6.4]))
    assert len(fits) == 1 and gaps == [] and fits[0].busbw_gbps > 0
    assert fit_sweep(_sweep([1, 2, 3], n=1))[1] == ["the sweep has no layout of more than one rank"]


def test_report_with_a_calibration_that_gives_no_fit_says_so(results):
    write_campaign(
        results, "thin",
        [SynthRun("pytorch", model="allreduce", mode="allreduce", nodes=1, tasks_per_node=2,
                  allreduce_sizes=[1024, 2048], workload="allreduce_torch")],
    )  # fmt: skip
    train = [SynthRun("pytorch", nodes=1, tasks_per_node=t, repeat=r, measure_steps=20)
             for t in (1, 2) for r in range(2)]  # fmt: skip
    write_campaign(results, "train", train)
    res = invoke(["report", "train", "--calibration", "thin", "--results", results, "-q"])
    assert res.exit_code == 0, res.output
    want = "no layout of the calibration campaign thin's allreduce sweep could be fitted"
    assert f"warning: no scaling model: {want}" in res.stderr
    md = (results / "train" / "report" / "report.md").read_text()
    section = md.split("## Scaling model", 1)[1].split("\n## ", 1)[0]
    assert f"No scaling model: {want}: 2 ranks on 1 node: 2 message size(s)" in section
    assert "Rows in bold" not in section  # no table: nothing about its rows
    html = (results / "train" / "report" / "report.html").read_text()
    assert 'href="#model"' in html and "No scaling model:</strong>" in html

    pred = invoke(["predict", "--from", "train", "--calibration", "thin", "--results", results,
                   "--nodes", "1,2", "--no-plot"])  # fmt: skip
    assert pred.exit_code == 0, pred.output
    assert "warning: --calibration thin: no link could be fitted (2 ranks on 1 node" in pred.stderr
