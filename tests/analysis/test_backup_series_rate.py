"""A backup-worker entry's scaling series is of the applied samples per second, not of the
throughput that counts the dropped ranks' samples too; b = 0 and plain DDP keep the throughput
(docs/metrics.md#scaling, docs/backup-workers.md). And logs written before the summaries
counted applied samples get them from each rank's dropped steps."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Dict, List

import numpy as np
import pandas as pd
import pytest

from ddlbench.analyse.analysis import analyse
from ddlbench.analyse.run_metrics import run_metrics
from ddlbench.analyse.series import RATE_APPLIED, RATE_THROUGHPUT
from ddlbench.collect.collector import collect_campaign
from ddlbench.report.format import fnum_in
from ddlbench.report.narrative import summary
from ddlbench.report.sections import SCALES, SERIES
from tests.support.synth import SynthRun, write_campaign

#: the framework entries of configs/backup-workers-mini.yaml: label -> backup workers
ENTRIES = {"sync": None, "backup0": 0, "backup1": 1}
SCALES_RANKS = (2, 3)


def _runs() -> List[SynthRun]:
    return [
        SynthRun(
            "pytorch",
            model="lenet",
            tasks_per_node=tp,
            batch_size=32,
            repeat=rep,
            tag=f"-{label}",
            step_time=0.02 * (1 + 0.1 * tp) * (1 + 0.01 * rep),
        )  # fmt: skip
        for label in ENTRIES
        for tp in SCALES_RANKS
        for rep in range(3)
    ]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory):
    """Three labelled entries of one framework in one variant, as the collector leaves them;
    backup1 applies R - 1 of R gradients (and a little less, so that the applied rate is not
    a fixed share of the throughput); backup0's applied rate is made lower too, which a
    series with b = 0 must not read."""
    root: Path = tmp_path_factory.mktemp("results")
    data = collect_campaign(write_campaign(root, "series-rate", _runs()))
    runs = data.runs.copy()
    label = runs["group"].str.rsplit("-", n=1).str[-1]
    runs["label"] = label
    runs["framework_options"] = [
        json.dumps({} if ENTRIES[x] is None else {"backup_workers": ENTRIES[x]}) for x in label
    ]
    runs["variant"] = "compute"
    world = runs["world_size"].astype(float)
    share = np.where(label == "backup1", (world - 1) / world * (0.99 - 0.01 * runs["repeat"]), 1)
    share = np.where(label == "backup0", 0.5, share)
    runs["applied_samples_per_s"] = runs["throughput"] * share
    data.runs = runs
    return data


def _gmean(x: pd.Series) -> float:
    return float(np.exp(np.log(x.astype(float)).mean()))


def _points(a, label: str) -> pd.DataFrame:
    return a.points[a.points["group"].str.endswith(f"-{label}")].set_index("devices")


def test_backup_series_is_of_the_applied_rate(data) -> None:
    a = analyse(data)
    runs = data.runs
    for label, b in ENTRIES.items():
        pts = _points(a, label)
        assert sorted(pts.index) == list(SCALES_RANKS)
        column = "applied_samples_per_s" if b else "throughput"  # b = 0: throughput, unchanged
        for n in SCALES_RANKS:
            mine = runs[runs["group"].str.endswith(f"n1x{n}-b32-{label}")]
            assert len(mine) == 3
            assert pts.loc[n, "throughput_gmean"] == pytest.approx(_gmean(mine[column]))
            assert pts.loc[n, "rate"] == (RATE_APPLIED if b else RATE_THROUGHPUT)
        # speedup and efficiency are ratios of that rate
        t2, t3 = pts.loc[2, "throughput_gmean"], pts.loc[3, "throughput_gmean"]
        assert pts.loc[3, "speedup"] == pytest.approx(t3 / t2)
        assert pts.loc[3, "efficiency"] == pytest.approx((t3 / 3) / (t2 / 2))
        assert pts.loc[3, "ideal_throughput"] == pytest.approx(t2 * 3 / 2)
    b1 = _points(a, "backup1")
    thr = _points(a, "sync")
    assert (b1["throughput_gmean"] < 0.7 * thr["throughput_gmean"]).all()  # what trains
    # the series' base and peak, and the repeat statistics (all samples) stay apart
    s = a.series.set_index("label")
    assert s.loc["backup1 (pytorch), applied samples/s", "rate"] == RATE_APPLIED
    assert s.loc["backup1 (pytorch), applied samples/s", "base_throughput"] == pytest.approx(
        b1.loc[2, "throughput_gmean"]
    )
    assert s.loc["backup0 (pytorch)", "rate"] == RATE_THROUGHPUT
    c = a.configs.set_index("group").loc[b1.loc[2, "group"]]
    mine = runs[runs["group"] == b1.loc[2, "group"]]
    assert c["throughput_gmean"] == pytest.approx(_gmean(mine["throughput"]))
    assert c["rate_gmean"] == pytest.approx(_gmean(mine["applied_samples_per_s"]))


def test_the_report_says_the_figure_is_the_applied_rate(data) -> None:
    a = analyse(data)
    assert sorted(a.series["label"]) == [
        "backup0 (pytorch)",
        "backup1 (pytorch), applied samples/s",
        "sync (pytorch)",
    ]
    for spec, source in ((SCALES, a.points), (SERIES, a.series)):
        table = spec.table(source, a.settings)
        assert table is not None and "samples counted" in table.columns
        cells = [dict(zip(table.columns, row)) for row in table.rows]
        counted = {c["series"]: c["samples counted"] for c in cells}
        assert counted["backup1 (pytorch), applied samples/s"] == "applied only"
        assert counted["sync (pytorch)"] == counted["backup0 (pytorch)"] == "all"
    words = [w for w in summary(a, data) if w.startswith("backup1 (pytorch), applied")]
    assert len(words) == 1
    pt = _points(a, "backup1").loc[3]
    gmean = fnum_in(pt["throughput_gmean"], pt["ci95_low"], pt["ci95_high"])
    assert f"{gmean} applied samples/s on 3 devices" in words[0], words[0]
    plain = [w for w in summary(a, data) if w.startswith("sync (pytorch)")]
    assert "applied" not in plain[0]


def test_without_backups_or_the_column_the_series_is_of_the_throughput(data) -> None:
    plain = copy.copy(data)
    plain.runs = data.runs[~data.runs["label"].str.startswith("backup")]
    a = analyse(plain)
    assert (a.points["rate"] == RATE_THROUGHPUT).all()
    table = SCALES.table(a.points, a.settings)
    assert table is not None and "samples counted" not in table.columns
    # a runs table collected before applied_samples_per_s existed: the throughput, and the
    # label does not claim the applied rate
    old = copy.copy(data)
    old.runs = data.runs.drop(columns="applied_samples_per_s")
    a = analyse(old)
    assert (a.points["rate"] == RATE_THROUGHPUT).all()
    assert not a.series["label"].str.contains("applied").any()


class _Ranks:
    """A run's per-rank columns as the collector hands them to run_metrics."""

    def __init__(self, cols: Dict[str, list]) -> None:
        self._cols = {k: np.asarray(v, dtype=object) for k, v in cols.items()}
        self._n = len(next(iter(cols.values())))

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols.get(name, np.full(self._n, None, dtype=object))

    def values(self, name: str) -> list:
        return [v for v in self[name].tolist() if v is not None and v == v]


def _backup_run(summaries: Dict[str, list]) -> Dict[str, object]:
    """A 3-rank backup run, 10 measured steps of 32 samples per rank over 1 s."""
    cols = {
        "rank": [0, 1, 2],
        "host": ["n1"] * 3,
        "samples_measured": [320.0] * 3,
        "steps_measured": [10] * 3,
        "t_first": [100.0] * 3,
        "t_last": [101.0] * 3,
        "throughput": [320.0] * 3,
        "step_time_median_s": [0.1] * 3,
        "step_time_jitter_s": [0.0] * 3,
        "compute_median_s": [math.nan] * 3,
        "summary_samples_measured": [320.0] * 3,
        **summaries,
    }
    row: Dict[str, object] = {"world_size": 3, "mode": "throughput"}
    run_metrics(row, _Ranks(cols), 3, True, [])
    return row


def test_older_backup_logs_count_applied_samples_from_dropped_steps() -> None:
    # logs of 2026-11-24: backup_workers and dropped_steps, no applied/dropped samples
    old = _backup_run({"summary_backup_workers": [1.0] * 3, "summary_dropped_steps": [0, 1, 9]})
    assert old["throughput"] == pytest.approx(960.0)
    assert old["dropped_samples"] == pytest.approx(320.0)  # 10 dropped steps x 32
    assert old["applied_samples_per_s"] == pytest.approx(640.0)  # (R - b) / R of 960
    # today's logs: the summaries' own counts
    new = _backup_run(
        {
            "summary_backup_workers": [1.0] * 3,
            "summary_dropped_steps": [0, 1, 9],
            "summary_applied_samples": [320.0, 288.0, 32.0],
            "summary_dropped_samples": [0.0, 32.0, 288.0],
        }
    )
    assert new["applied_samples_per_s"] == pytest.approx(640.0)
    assert new["dropped_samples"] == pytest.approx(320.0)
    plain = _backup_run({})  # plain DDP: every sample is applied
    assert plain["applied_samples_per_s"] == pytest.approx(960.0)
    assert plain["dropped_samples"] == 0.0


def test_the_scaling_model_leaves_backup_series_out_and_says_so(data) -> None:
    """The model predicts every sample's throughput; a backup series is of the applied rate,
    so neither the report's model nor ``predict --from`` takes it."""
    from ddlbench.analyse.alpha_beta import AlphaBeta
    from ddlbench.analyse.scaling_model import campaign_series, predict

    a = analyse(data)
    labels = [c.label for c in campaign_series(a)]
    assert labels and not any("applied samples/s" in x or x.startswith("backup1") for x in labels)
    fits = [AlphaBeta(3, 1, 1e-4, 5.0, 5, 0.01)]
    model = predict(a, data, fits, None, 8)
    assert any(x.startswith("backup1 (pytorch), applied samples/s: not modelled (backup workers")
               for x in model.assumptions), model.assumptions  # fmt: skip
    assert len(model.predictions) and not model.predictions["label"].str.contains("applied").any()
