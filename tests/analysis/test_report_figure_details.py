"""Report details: job ids in numeric order and named after the scheduler that ran them,
integer rank ticks on the per-rank figure, legend entries only for what is drawn."""

from __future__ import annotations

import pandas as pd

from ddlbench.analyse.analysis import analyse
from ddlbench.collect.collector import collect_campaign
from ddlbench.report import plots
from ddlbench.report.narrative import provenance
from tests.support.synth import SynthRun, write_campaign


def test_job_ids_sorted_as_numbers_and_named_after_the_scheduler(results):
    runs = [SynthRun(repeat=r, job_id=j, measure_steps=4) for r, j in enumerate((10, 9, 100, 11))]
    a = analyse(collect_campaign(write_campaign(results, "jobs", runs)))
    assert a.provenance["job_ids"] == ["9", "10", "11", "100"]
    rows = dict(provenance(a))
    assert rows["Slurm job ids"] == "9, 10, 11, 100"
    a.provenance["scheduler"] = "local"
    rows = dict(provenance(a))
    assert "Slurm job ids" not in rows and rows["local job ids"] == "9, 10, 11, 100"


def _labels(ax) -> list:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def test_rank_ticks_are_integers():
    ranks = pd.DataFrame(
        {
            "rank": [0, 1, 2],
            "host": ["n1", "n1", "n2"],
            **{
                f"step_time_{q}_s": [0.1, 0.11, 0.12] for q in ("p5", "p25", "median", "p75", "p95")
            },
        }
    )
    fig = plots.rank_distribution_figure(ranks, "r")
    ax = fig.axes[0]
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)


def _series(knee_low, knee_high, points=2):
    devices = [1, 2, 4][:points]
    pts = pd.DataFrame(
        {
            "series": "s",
            "devices": devices,
            "throughput_gmean": [100.0 * d * 0.9 for d in devices],
            "ci95_low": [90.0 * d * 0.8 for d in devices],
            "ci95_high": [90.0 * d * 1.2 for d in devices],
            "ideal_throughput": [100.0 * d for d in devices],
            "efficiency": [1.0, 0.9, 0.85][:points],
            "efficiency_ci95_low": [1.0, 0.7, 0.6][:points],
            "efficiency_ci95_high": [1.0, 1.3, 1.4][:points],
        }
    )
    ser = pd.DataFrame(
        [
            {
                "series": "s",
                "label": "pytorch",
                "framework": "pytorch",
                "mode": "throughput",
                "base_devices": 1,
                "knee_devices": knee_low,
                "knee_low": knee_low,
                "knee_high": knee_high,
            }
        ]
    )
    return pts, ser


def test_legend_entries_only_for_what_is_drawn():
    # a knee range and no star: no "knee" entry
    pts, ser = _series(1, 2)
    labels = _labels(plots.efficiency_figure(pts, ser, 0.8).axes[0])
    assert "knee" not in labels and "knee range (the data cannot tell)" in labels
    # a star and no range: no range entry
    pts, ser = _series(2, 2)
    labels = _labels(plots.efficiency_figure(pts, ser, 0.8).axes[0])
    assert "knee" in labels and not any("range" in x for x in labels)
    # one point: no ideal line is drawn, so no "ideal" entry
    pts, ser = _series(1, 1, points=1)
    labels = _labels(plots.throughput_figure(pts, ser).axes[0])
    assert labels == ["pytorch"]
    pts, ser = _series(2, 2)
    labels = _labels(plots.throughput_figure(pts, ser).axes[0])
    assert labels == ["pytorch", "ideal (linear from base)"]


def test_efficiency_axis_holds_every_interval():
    pts, ser = _series(2, 2, points=3)
    ax = plots.efficiency_figure(pts, ser, 0.8).axes[0]
    assert ax.get_ylim()[1] >= 140 and ax.get_ylim()[0] == 0
