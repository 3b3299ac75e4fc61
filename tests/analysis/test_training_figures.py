"""The large-batch study's figure and sentences (ddlbench/report/plots_training.py,
ddlbench/analyse/large_batch.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection

from ddlbench.report import plots_training


def _conv() -> pd.DataFrame:
    # one line: batch 256 has 3 repeats (an interval), 1024 only 1 (none)
    return pd.DataFrame(
        {
            "framework": "pytorch",
            "model": "lenet",
            "warmup": "no warmup",
            "global_batch_size": [256, 1024],
            "final_accuracy_mean": [0.75, 0.70],
            "final_accuracy_ci95_low": [0.74, np.nan],
            "final_accuracy_ci95_high": [0.76, np.nan],
            "target_accuracy": 0.7,
        }
    )


def _bars(ax) -> list:
    """The vertical error-bar segments drawn, as (x, y_low, y_high)."""
    out = []
    for coll in ax.collections:
        if isinstance(coll, LineCollection):
            for seg in coll.get_segments():
                out.append((seg[0][0], min(seg[0][1], seg[1][1]), max(seg[0][1], seg[1][1])))
    return out


def test_no_error_bar_where_a_configuration_has_no_interval() -> None:
    ax = plots_training.accuracy_batch_figure(_conv()).axes[0]
    bars = _bars(ax)
    # a zero-length bar with caps would read as an interval of no width: certainty
    assert len(bars) == 1
    x, lo, hi = bars[0]
    assert abs(x - 256) < 1 and abs(lo - 74) < 1e-9 and abs(hi - 76) < 1e-9


def test_interval_bars_add_no_legend_entry() -> None:
    ax = plots_training.accuracy_batch_figure(_conv()).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["pytorch lenet, no warmup"]
    assert "95 % CI" in ax.get_title()


def _curves(groups: list) -> pd.DataFrame:
    rows = []
    for i, grp in enumerate(groups):
        for epoch in (0, 1):
            rows.append(
                {
                    "run_id": f"{grp}-r0",
                    "group": grp,
                    "epoch": float(epoch),
                    "accuracy": 0.2 + 0.1 * i + 0.2 * epoch,
                    "global_batch_size": 64,
                    "warmup": "gradual warmup",
                }
            )
    return pd.DataFrame(rows)


def test_curves_of_two_frameworks_at_one_batch_are_told_apart() -> None:
    conv = _curves(["mxnet-lenet-n1x2-b32", "pytorch-lenet-n1x2-b32"])
    ax = plots_training.curves_figure(conv).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["GBS 64: mxnet-lenet-n1x2-b32", "GBS 64: pytorch-lenet-n1x2-b32"]
    assert len({line.get_linestyle() for line in ax.lines}) == 2


def test_curves_of_one_configuration_keep_the_short_label() -> None:
    ax = plots_training.curves_figure(_curves(["pytorch-lenet-n1x2-b32"])).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["GBS 64"]
