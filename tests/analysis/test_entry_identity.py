"""Configurations that differ only in the framework entry's label and options (sync vs
backup1) or in the spec variant (compute vs cpushare stragglers) are never merged: not in the
scaling series, not in the large-batch study (docs/metrics.md, Scaling and Convergence)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import List

import pandas as pd
import pytest

from ddlbench.analyse.analysis import analyse
from ddlbench.analyse.large_batch import margin_table, sentences, study_keys
from ddlbench.collect.collector import collect_campaign
from ddlbench.collect.run_table import plan_row
from ddlbench.report.narrative import _convergence_sentences
from ddlbench.report.sections import CONVERGENCE
from tests.support.synth import SynthRun, write_campaign

TAGS = ("-compute", "-cpushare")


def _runs(tags=TAGS) -> List[SynthRun]:
    return [
        SynthRun("pytorch", model="lenet", tasks_per_node=tp, batch_size=32, repeat=rep, tag=tag)
        for tag in tags
        for tp in (2, 3)
        for rep in (0, 1)
    ]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory):
    root: Path = tmp_path_factory.mktemp("results")
    return collect_campaign(write_campaign(root, "entries", _runs()))


def _as_labels(data):
    """The same campaign as if its two groups of runs were two labelled entries of one
    framework (sync and backup1), in one variant."""
    runs = data.runs.copy()
    backup = runs["group"].str.endswith("cpushare")
    runs["label"] = ["backup1" if b else "sync" for b in backup]
    runs["framework_options"] = [json.dumps({"backup_workers": 1}) if b else "{}" for b in backup]
    runs["variant"] = "compute"
    data.runs = runs
    return data


def _as_convergence(data, target: float = 0.9):
    """The labelled campaign as convergence runs: sync keeps 93 % at every scale, backup1
    loses accuracy with scale; one backup1 run per configuration reaches the target."""
    data = _as_labels(data)
    runs = data.runs.copy()
    backup = runs["label"] == "backup1"
    runs["mode"] = "convergence"
    runs["warmup_epochs"] = 0.0
    runs["target_accuracy"] = target
    acc = 0.93 - backup * (0.05 * (runs["world_size"] - 2) + 0.01 * runs["repeat"])
    runs["final_accuracy"] = acc
    runs["best_accuracy"] = acc
    reached = ~backup | (runs["repeat"] == 0)
    runs["time_to_accuracy_s"] = [
        10.0 + r if ok else math.nan for r, ok in zip(runs["repeat"], reached)
    ]
    data.runs = runs
    return data


def test_collector_keeps_the_entry_label_and_the_variant() -> None:
    row = plan_row({"run_id": "backup1-lenet-n1x2-b32-compute-r0", "label": "backup1"}, {})
    assert row["label"] == "backup1"
    row = plan_row({"run_id": "x-r0"}, {"variant": "compute"})
    assert row["variant"] == "compute"


def test_variants_are_separate_series_named_by_their_variant(data) -> None:
    assert set(data.runs["variant"]) == {"compute", "cpushare"}
    a = analyse(data)
    assert len(a.series) == 2, a.series[["series", "label"]]
    labels = sorted(a.series["label"])
    assert labels[0].endswith("compute") and labels[1].endswith("cpushare"), labels
    # each series: one point per scale, its own base
    assert sorted(a.points.groupby("label")["devices"].apply(tuple)) == [(2, 3), (2, 3)]


def test_labelled_entries_are_separate_series_named_by_their_label(data) -> None:
    a = analyse(_as_labels(data))
    # backup1's series is of the applied samples per second (docs/metrics.md#scaling)
    assert sorted(a.series["label"]) == ["backup1 (pytorch), applied samples/s", "sync (pytorch)"]
    assert (a.points["speedup"][a.points["devices"] == 2] == 1.0).all()


def test_large_batch_study_per_entry(data) -> None:
    a = analyse(_as_convergence(data))
    t = margin_table(a.convergence, 0.01, 0.05)
    assert len(t) == 2, t
    for _, r in t.iterrows():  # every configuration against the baseline of its own entry
        assert r["group"].split("-")[-1] == r["baseline_group"].split("-")[-1]
    words = sentences(t, 0.01, 0.95)
    assert len(words) == 2
    assert words[0].startswith("backup1 (pytorch) lenet") and "sync (pytorch) lenet" in words[1]
    assert "only the no warmup arm ran" in words[0]


def test_backup_workers_batch_applied_per_step(data) -> None:
    a = analyse(_as_convergence(data))
    c = a.convergence.set_index("world_size")
    backup = c[c["label"] == "backup1"]
    sync = c[c["label"] == "sync"]
    assert backup.loc[3, "global_batch_size"] == 96 and backup.loc[3, "applied_batch_size"] == 64
    assert sync.loc[3, "applied_batch_size"] == 96
    text = " ".join(sentences(margin_table(a.convergence, 0.01, 0.05), 0.01, 0.95))
    assert "96 (applied 64)" in text and "64 (applied 32)" in text


def test_variant_that_names_the_warmup_arm_is_one_study() -> None:
    conv = pd.DataFrame(
        {
            "group": ["a-nowarmup", "b-nowarmup", "a-warmup", "b-warmup"],
            "framework": "pytorch",
            "label": "pytorch",
            "model": "lenet",
            "variant": ["nowarmup", "nowarmup", "warmup", "warmup"],
            "warmup": ["no warmup", "no warmup", "gradual warmup", "gradual warmup"],
        }
    )
    assert study_keys(conv)["study"].nunique() == 1
    conv["warmup"] = "no warmup"  # variants that change something else: two studies
    assert study_keys(conv)["study"].nunique() == 2


def test_summary_says_how_many_runs_reached_the_target(data) -> None:
    a = analyse(_as_convergence(data, target=0.9))
    first = _convergence_sentences(a)[0]
    assert first.startswith("Convergence: target 90.0 % reached by 6 of 8 complete run(s); ")
    assert "highest final accuracy 93.00 % (mean over the complete repeats" in first
    a = analyse(_as_convergence(data, target=0.97))
    a.convergence["reached"] = 0  # nothing reached 97 %
    assert _convergence_sentences(a)[0].startswith(
        "Convergence: target 97.0 % reached by 0 of 8 complete run(s); highest final accuracy"
    )
    a = analyse(_as_convergence(data))
    t = CONVERGENCE.table(a.convergence)
    assert t is not None
    cells = {row[0]: row for row in t.rows}
    backup3 = next(v for k, v in cells.items() if "cpushare" in k and "n1x3" in k)
    assert "1 of 2" in backup3 and "10.00 (median of the 1 that reached it)" in backup3


def test_time_to_target_names_the_runs_that_reached_it() -> None:
    conv = pd.DataFrame(
        {
            "group": ["g1", "g2", "g3"],
            "global_batch_size": [64, 64, 96],
            "lr": 0.1,
            "warmup": "no warmup",
            "repeats": [2, 2, 2],
            "final_accuracy_mean": 0.9,
            "final_accuracy_ci95_low": 0.8,
            "final_accuracy_ci95_high": 0.95,
            "best_accuracy": 0.9,
            "time_to_accuracy_s": [1.5, 2.5, float("nan")],
            "reached": [2, 1, 0],
            "target_accuracy": 0.9,
        }
    )
    t = CONVERGENCE.table(conv)
    assert t is not None
    text = " | ".join(" | ".join(map(str, row)) for row in t.rows)
    assert "2 of 2" in text and "1 of 2" in text and "0 of 2" in text
    assert "2.500 (median of the 1 that reached it)" in text
    assert "not reached" in text


def test_language_model_modes_and_shapes_are_separate_series(data) -> None:
    """DDP and FSDP (or two sequence lengths) of one model are two series even in one variant,
    named by what differs; before, six sharding variants at 2 ranks were one series whose
    'speedups' were one mode's throughput over another's."""
    data = copy.copy(data)  # the module's campaign stays as the other tests left it
    runs = data.runs.copy()
    fsdp = runs["group"].str.endswith("cpushare")
    runs["mode"] = "throughput"
    runs["label"] = runs["framework"]
    runs["framework_options"] = "{}"
    runs["variant"] = "one"
    runs["parallel"] = ["fsdp" if f else "ddp" for f in fsdp]
    runs["activation_checkpointing"] = "none"
    runs["seq_len"] = 128.0
    data.runs = runs
    a = analyse(data)
    assert sorted(a.series["label"]) == ["pytorch ddp", "pytorch fsdp"], a.series["label"]
    assert (a.points["speedup"][a.points["devices"] == 2] == 1.0).all()
    runs["parallel"] = "ddp"
    runs["seq_len"] = [2048.0 if f else 128.0 for f in fsdp]
    a = analyse(data)
    assert sorted(a.series["label"]) == ["pytorch seq 128", "pytorch seq 2048"]
