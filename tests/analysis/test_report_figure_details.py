"""Report details: job ids in numeric order and named after the scheduler that ran them,
integer rank ticks on the per-rank figure, legend entries and titles only for what is drawn
and as it is drawn, throughput axes with values one can read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D

from ddlbench.analyse.analysis import analyse
from ddlbench.collect.collector import collect_campaign
from ddlbench.report import figures, plots, plots_training
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


def _ranks(n: int, hosts_per: int = 4) -> pd.DataFrame:
    times = 0.1 + 0.001 * np.arange(n)
    return pd.DataFrame(
        {
            "rank": range(n),
            "host": [f"n{r // hosts_per}" for r in range(n)],
            **{f"step_time_{q}_s": times for q in ("p5", "p25", "median", "p75", "p95")},
        }
    )


def _in_view(ax, values, axis: str = "x") -> list:
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    return [v for v in values if lo <= v <= hi]


@pytest.mark.parametrize("n", [1, 2, 3, 64])
def test_rank_ticks_are_ranks_that_exist(n):
    # the quickstart's 2-rank run had ticks at -1 and 2; the campaign has 64-rank runs
    fig = figures.rank_distribution_figure(_ranks(n), "r", threshold=1.1)
    ax = fig.axes[0]
    fig.canvas.draw()
    ticks = _in_view(ax, ax.get_xticks())
    assert ticks and all(float(t).is_integer() and 0 <= t <= n - 1 for t in ticks)
    assert 0 in ticks and len(ticks) <= 10
    assert {str(int(t)) for t in ticks} <= {t.get_text() for t in ax.get_xticklabels()}
    if n <= 10:
        assert ticks == list(range(n))  # a few ranks: every one labelled
    title = ax.get_title()
    assert ("colour alternates per host" in title) == (n > 4)  # one host: no colours named
    assert all(len(line) <= 110 for line in title.splitlines())  # wrapped to the width


def test_rank_ticks_step_in_powers_of_two():
    assert figures.rank_ticks(range(64)) == list(range(0, 64, 8))
    assert figures.rank_ticks(range(1000)) == list(range(0, 1000, 128))
    assert figures.rank_ticks([3, 4, 5]) == [3, 4, 5]
    assert figures.rank_ticks(range(5, 40)) == list(range(8, 40, 4))


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


def test_knee_range_bars_of_several_series_do_not_cover_each_other():
    """Three series whose knees lie in the same range: three bars along the threshold, each
    at its own height on the page, none hidden under another."""
    parts = [_series(1, 2) for _ in range(3)]
    pts = pd.concat([p.assign(series=f"s{i}") for i, (p, _) in enumerate(parts)])
    ser = pd.concat(
        [s.assign(series=f"s{i}", label=f"pytorch {i}") for i, (_, s) in enumerate(parts)]
    )
    fig = plots.efficiency_figure(pts, ser, 0.8)
    ax = fig.axes[0]
    fig.canvas.draw()
    bars = [ln for ln in ax.get_lines() if ln.get_linewidth() == plots.KNEE_BAR["linewidth"]]
    assert len(bars) == 3
    heights = {round(float(b.get_transform().transform((1, 80))[1]), 1) for b in bars}
    assert len(heights) == 3  # display heights differ by the bar's width
    assert all(list(b.get_ydata()) == [80.0, 80.0] for b in bars)  # all on the threshold


def test_efficiency_axis_holds_every_interval():
    pts, ser = _series(2, 2, points=3)
    ax = plots.efficiency_figure(pts, ser, 0.8).axes[0]
    assert ax.get_ylim()[1] >= 140 and ax.get_ylim()[0] == 0


def _labelled(ax) -> list:
    """The values of the y axis's labelled ticks in view, read back from their texts."""
    ax.figure.canvas.draw()
    scale = {"k": 1e3, "M": 1e6}
    out = []
    for tick, label in zip(ax.get_yticks(), ax.get_yticklabels()):
        text = label.get_text()
        if text and _in_view(ax, [tick], "y"):
            value = float(text[:-1]) * scale[text[-1]] if text[-1] in scale else float(text)
            assert value == pytest.approx(tick, rel=1e-3), (text, tick)
            out.append(value)
    return out


def _throughput(low: float, high: float, ci=(0.7, 1.45), frameworks=("pytorch",)):
    """Two scales per framework, throughputs ``low`` and ``high``."""
    pts, ser = [], []
    for i, fw in enumerate(frameworks):
        tp = np.array([low, high])
        pts.append(
            pd.DataFrame(
                {
                    "series": f"s{i}",
                    "devices": [1, 2],
                    "throughput_gmean": tp,
                    "ci95_low": tp * ci[0] if ci else np.nan,
                    "ci95_high": tp * ci[1] if ci else np.nan,
                    "ideal_throughput": [low, 2 * low],
                }
            )
        )
        ser.append(
            {"series": f"s{i}", "label": fw, "framework": fw, "mode": "throughput"}
            | {"base_devices": 1}
        )
    return pd.concat(pts, ignore_index=True), pd.DataFrame(ser)


@pytest.mark.parametrize(
    "low, high, ci",
    [(8655.0, 8868.0, (0.7, 1.44)), (8655.0, 8868.0, None), (8600.0, 8650.0, None)],
)
def test_throughput_axis_labels_values_in_a_narrow_range(low, high, ci):
    # the quickstart: 1 and 2 ranks at about 8,700 samples/s, interval 6,019 to 12,447
    pts, ser = _throughput(low, high, ci)
    pts["ideal_throughput"] = np.nan  # the data alone span less than a decade
    values = _labelled(plots.throughput_figure(pts, ser).axes[0])
    data_lo = pts[["throughput_gmean", "ci95_low"]].min().min()
    data_hi = pts[["throughput_gmean", "ci95_high"]].max().max()
    assert len([v for v in values if data_lo <= v <= data_hi]) >= 2, values
    assert len(values) <= 12


def test_throughput_axis_stays_clean_over_a_wide_range():
    pts, ser = _throughput(100.0, 60_000.0)
    values = _labelled(plots.throughput_figure(pts, ser).axes[0])
    assert 3 <= len(values) <= 12
    # 1-2-5 per decade, as before
    assert all(round(v / 10 ** np.floor(np.log10(v)), 6) in (1, 2, 5) for v in values)
    pts, ser = _throughput(10.0, 5e8, ci=None)
    values = _labelled(plots.throughput_figure(pts, ser).axes[0])
    assert 3 <= len(values) <= 12


def _line_style(line: Line2D) -> tuple:
    color = to_rgba(line.get_color())
    return color, line.get_linestyle(), line.get_linewidth(), line.get_alpha()


@pytest.mark.parametrize("frameworks", [("pytorch",), ("horovod", "pytorch", "tensorflow")])
def test_ideal_legend_entry_looks_like_the_ideal_lines(frameworks):
    pts, ser = _throughput(8655.0, 8868.0, frameworks=frameworks)
    ax = plots.throughput_figure(pts, ser).axes[0]
    ideal = [
        line
        for line in ax.lines
        if np.allclose(np.asarray(line.get_ydata(), float), [8655.0, 2 * 8655.0])
    ]
    assert len(ideal) == len(frameworks)
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()][-1] == "ideal (linear from base)"
    # the legend's lines but the series' own (solid): the ideal swatch, one per colour drawn
    shown = [_line_style(x) for x in legend.findobj(Line2D) if x.get_linestyle() != "-"]
    shown = [s for s in shown if s[1] != "None"]  # marker-only parts of the errorbar swatch
    assert sorted(shown) == sorted({_line_style(x) for x in ideal})
    assert "dotted: ideal scaling" in ax.get_title()


def test_throughput_title_names_only_what_is_drawn():
    pts, ser = _throughput(8655.0, 8868.0, ci=None)
    pts["ideal_throughput"] = [8655.0, np.nan]
    title = plots.throughput_figure(pts, ser).axes[0].get_title()
    assert "CI" not in title and "ideal" not in title


def test_efficiency_title_and_legend_name_only_what_is_drawn():
    # the quickstart: the knee is one point (a star at N=1), no range bar
    pts, ser = _series(1, 1)
    ax = plots.efficiency_figure(pts, ser, 0.8).axes[0]
    assert "knee range" not in ax.get_title() and "bar" not in ax.get_title()
    assert "star: knee" in ax.get_title()
    stars = [to_rgba(x.get_color()) for x in ax.lines if x.get_marker() == "*"]
    legend = ax.get_legend().findobj(Line2D)
    assert stars and [to_rgba(x.get_color()) for x in legend if x.get_marker() == "*"] == stars
    # a range: the bar and no star
    pts, ser = _series(1, 2)
    title = plots.efficiency_figure(pts, ser, 0.8).axes[0].get_title()
    assert "bar on the threshold: knee range" in title and "star" not in title
    # no knee, no interval: neither named
    pts, ser = _series(None, None)
    pts["efficiency_ci95_low"] = np.nan
    ax = plots.efficiency_figure(pts, ser, 0.8).axes[0]
    assert ax.get_title() == "Scaling efficiency vs devices"
    assert _labels(ax) == ["pytorch (base N=1)"]


def test_accuracy_title_names_the_interval_only_when_drawn():
    conv = pd.DataFrame(
        {
            "framework": "pytorch",
            "model": "lenet",
            "warmup": ["no warmup", "gradual warmup"] * 2,
            "global_batch_size": [256, 256, 1024, 1024],
            "final_accuracy_mean": [0.75, 0.75, 0.7, 0.72],
            "final_accuracy_ci95_low": np.nan,
            "final_accuracy_ci95_high": np.nan,
            "target_accuracy": 0.7,
        }
    )
    assert "CI" not in plots_training.accuracy_batch_figure(conv).axes[0].get_title()
    conv["final_accuracy_ci95_low"] = conv["final_accuracy_mean"] - 0.01
    conv["final_accuracy_ci95_high"] = conv["final_accuracy_mean"] + 0.01
    assert "95 % CI" in plots_training.accuracy_batch_figure(conv).axes[0].get_title()


def test_model_legend_draws_the_model_in_the_series_colours():
    pred = pd.concat(
        pd.DataFrame(
            {
                "series": sid,
                "label": sid,
                "devices": [1, 2, 4],
                "measured": [True, True, False],
                "predicted_throughput": [100.0, 190.0, 360.0],
                "throughput_gmean": [100.0, 180.0, np.nan],
                "predicted_efficiency": [1.0, 0.95, 0.9],
                "efficiency": [1.0, 0.9, np.nan],
            }
        )
        for sid in ("a", "b")
    )
    ax = plots.model_figure(pred).axes[0]
    dashed = {to_rgba(x.get_color()) for x in ax.lines if x.get_linestyle() == "--"}
    legend = ax.get_legend().findobj(Line2D)
    shown = {to_rgba(x.get_color()) for x in legend if x.get_linestyle() == "--"}
    assert len(dashed) == 2 and shown == dashed
    assert len(_labelled(ax)) >= 2
