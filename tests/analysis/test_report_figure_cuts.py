"""The scaling and accuracy figures with series that would hide each other: a colour per
series (several of one framework too), intervals beyond an axis cut with a caret and said in
the caption, coincident accuracy lines side by side, and no efficiency figure without a
series measured at two device counts (docs/reports.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D

from ddlbench.report import limits, plots, plots_training
from ddlbench.report.figures import figure_plan
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign

NAMES = ("backup0", "backup1", "sync")


def _one_framework(eff_high=(1.4, 1.3, 1.2), devices=(2, 3)) -> tuple:
    """Three series of one framework (sync and backup workers), at ``devices``."""
    pts, ser = [], []
    for i, name in enumerate(NAMES):
        tp = np.array([3000.0 + 300 * i, 2800.0 + 200 * i])[: len(devices)]
        pts.append(
            pd.DataFrame(
                {
                    "series": name,
                    "devices": list(devices),
                    "throughput_gmean": tp,
                    "ci95_low": tp * 0.9,
                    "ci95_high": tp * 1.1,
                    "ideal_throughput": tp[0] * np.array(devices) / devices[0],
                    "efficiency": [1.0, 0.6 + 0.05 * i][: len(devices)],
                    "efficiency_ci95_low": [1.0, 0.3][: len(devices)],
                    "efficiency_ci95_high": [1.0, eff_high[i]][: len(devices)],
                }
            )
        )
        ser.append(
            {"series": name, "label": f"{name} (pytorch)", "framework": "pytorch"}
            | {"mode": "throughput", "base_devices": devices[0], "knee_reason": "none"}
        )
    return pd.concat(pts, ignore_index=True), pd.DataFrame(ser)


def _rgba(line: Line2D) -> tuple:
    return to_rgba(line.get_color())


def _bars(ax) -> dict:
    """Each errorbar's label -> its data line."""
    return {c.get_label(): c.lines[0] for c in ax.containers}


def _same(ydata, values: np.ndarray) -> bool:
    """A line's y values equal ``values`` (older matplotlib keeps them as objects)."""
    y = np.asarray(ydata, dtype=float)
    return y.shape == values.shape and bool(np.allclose(y, values))


def _carets(ax, marker: str = "^") -> list:
    return [x for x in ax.lines if x.get_marker() == marker]


def test_series_of_one_framework_get_distinct_colours_and_ideal_lines_keep_them():
    pts, ser = _one_framework()
    ax = plots.throughput_figure(pts, ser).axes[0]
    ideals = [g["ideal_throughput"].to_numpy() for _, g in pts.groupby("series")]
    ideal = [x for x in ax.lines if any(_same(x.get_ydata(), i) for i in ideals)]
    colours = [_rgba(x) for x in _bars(ax).values()]
    assert not set(plots.MARKERS) & {"^", "v", "*"}  # the carets and the knee stand out
    assert len(colours) == 3 and len(set(colours)) == 3
    assert set(colours) <= {to_rgba(c) for c in plots.PALETTE}  # the colour-blind-safe set
    assert sorted(_rgba(x) for x in ideal) == sorted(colours)
    ax = plots.efficiency_figure(pts, ser, 0.8).axes[0]
    eff = [
        _rgba(x) for x in ax.lines if x.get_label() in {f"{n} (pytorch) (base N=2)" for n in NAMES}
    ]
    assert len(set(eff)) == 3 and set(eff) == set(colours)


def test_efficiency_axis_is_capped_and_cut_intervals_get_a_caret_and_a_caption():
    # bw-trim: an interval of 1.3 % to 3053 % from 2 noisy repeats
    pts, ser = _one_framework(eff_high=(30.53, 1.3, 1.2))
    top, cap = limits.efficiency_top(pts)
    assert top == cap == limits.EFFICIENCY_TOP_MIN
    ax = plots.efficiency_figure(pts, ser, 0.8).axes[0]
    assert ax.get_ylim() == (0, limits.EFFICIENCY_TOP_MIN)
    carets = _carets(ax)
    assert len(carets) == 1 and list(carets[0].get_ydata()) == [top]
    assert _rgba(carets[0]) == to_rgba(plots.PALETTE[0])  # backup0's colour
    assert "caret" in ax.get_title() and plots.CUT_LABEL in _labels(ax)
    note = limits.figure_notes(pts, ser)["efficiency"]
    assert "1 interval(s)" in note and "150 %" in note
    # a high point lifts the cap; intervals that fit are drawn whole, with no caret
    pts, ser = _one_framework()
    ax = plots.efficiency_figure(pts, ser, 0.8).axes[0]
    assert ax.get_ylim()[1] == pytest.approx(145)
    assert not _carets(ax)
    assert "caret" not in ax.get_title() and "efficiency" not in limits.figure_notes(pts, ser)
    pts.loc[pts["devices"] == 3, "efficiency"] = [1.8, 1.9, 2.0]
    assert limits.efficiency_top(pts)[1] == pytest.approx(300)


def test_throughput_axis_is_not_blown_out_by_an_interval():
    pts, ser = _one_framework()
    assert limits.throughput_limits(pts) is None and limits.figure_notes(pts, ser) == {}
    pts.loc[5, ["ci95_low", "ci95_high"]] = [20.0, 260_000.0]  # sync at 3 devices
    low, high, cut_low, cut_high = limits.throughput_limits(pts)
    assert cut_low and cut_high
    assert low == pytest.approx(2800 / 4) and high == pytest.approx(
        pts["ideal_throughput"].max() * 4
    )
    ax = plots.throughput_figure(pts, ser).axes[0]
    assert ax.get_ylim() == pytest.approx((low, high))
    assert [list(x.get_ydata()) for x in _carets(ax)] == [[pytest.approx(high)]]
    assert [list(x.get_ydata()) for x in _carets(ax, "v")] == [[pytest.approx(low)]]
    assert _rgba(_carets(ax)[0]) == _rgba(_bars(ax)["sync (pytorch)"])
    assert "caret" in ax.get_title() and plots.CUT_LABEL in _labels(ax)
    assert "Carets" in limits.figure_notes(pts, ser)["throughput"]


def _labels(ax) -> list:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_coincident_accuracy_lines_are_both_visible_and_the_legend_says_so():
    conv = pd.DataFrame(
        {
            "study_label": ["backup0", "backup0", "sync", "sync", "backup1", "backup1"],
            "framework": "pytorch",
            "model": "lenet",
            "warmup": "no warmup",
            "global_batch_size": [64, 96, 64, 96, 32, 64],
            "final_accuracy_mean": [0.935, 0.925, 0.935, 0.925, 0.70, 0.87],
            "final_accuracy_ci95_low": np.nan,
            "final_accuracy_ci95_high": np.nan,
            "target_accuracy": 0.9,
        }
    )
    ax = plots_training.accuracy_batch_figure(conv).axes[0]
    lines = _bars(ax)
    b0 = lines["backup0, no warmup"]
    sync = lines["sync, no warmup (same points as backup0, no warmup)"]
    assert list(b0.get_ydata()) == list(sync.get_ydata())
    assert all(a < b for a, b in zip(b0.get_xdata(), sync.get_xdata()))  # side by side
    assert _rgba(b0) != _rgba(sync)
    assert "backup1, no warmup" in lines  # a line with its own points says nothing more
    assert plots_training.accuracy_dodge(1) == [1.0]
    assert plots_training.accuracy_dodge(2) == pytest.approx([1 / 1.03, 1.03], rel=1e-3)
    wide = plots_training.accuracy_dodge(40)
    assert np.log2(wide[-1] / wide[0]) == pytest.approx(plots_training.ACCURACY_SPREAD)


def test_no_efficiency_figure_without_a_series_at_two_device_counts(results):
    pts, ser = _one_framework(devices=(2,))
    assert not limits.has_scaling(pts, ser)
    assert limits.has_scaling(*_one_framework())
    runs = [
        SynthRun(framework=fw, tasks_per_node=2, repeat=r, measure_steps=4)
        for fw in ("pytorch", "horovod")
        for r in range(2)
    ]
    res = build_report(write_campaign(results, "one-scale", runs), formats=("md", "html"))
    assert "throughput" in res.figures and "efficiency" not in res.figures
    assert [k for k, _, _ in figure_plan(res.analysis)][:1] == ["throughput"]
    assert not (res.out_dir / "plots" / "efficiency.png").exists()
    for fmt in ("md", "html"):
        text = res.files[fmt].read_text()
        assert "No efficiency figure: no series has complete runs at two device counts" in text
