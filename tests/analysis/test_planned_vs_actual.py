"""Planned vs actual: the rank meta records say what ran; results are labelled by it."""

from __future__ import annotations

import re

import pandas as pd

from ddlbench.analyse.analysis import analyse
from ddlbench.collect.collector import collect_campaign
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign


def _campaign(results):
    cpu = dict(device="cpu", precision="amp", nodes=1, measure_steps=6)
    runs = [
        # amp asked on a CPU: the workload falls back to fp32 and says so in its meta record
        SynthRun(tasks_per_node=1, repeat=r, ran={"precision": "fp32"}, **cpu)
        for r in (1, 2)
    ]
    runs.append(SynthRun(tasks_per_node=1, repeat=0, not_run=True, **cpu))  # never ran
    runs += [
        SynthRun(tasks_per_node=2, repeat=0, ran={"backend": "gloo"}),  # nccl planned
        SynthRun(tasks_per_node=4, repeat=0, ran={"world_size": 2}, missing_ranks=(2, 3)),
        SynthRun(tasks_per_node=4, repeat=1),  # as planned
    ]
    return write_campaign(results, "pva", runs)


def test_every_checked_field_is_compared_and_kept(results):
    camp = _campaign(results)
    data = collect_campaign(camp)
    runs = data.runs.set_index("run_id")
    amp = runs.loc["pytorch-resnet50-n1x1-b32-r1"]
    assert (amp["precision"], amp["precision_requested"]) == ("fp32", "amp")
    assert amp["mismatches"] == "precision: planned amp, ran fp32"
    assert "ran other settings than planned" in amp["problems"]
    never = runs.loc["pytorch-resnet50-n1x1-b32-r0"]
    assert (never["precision"], never["precision_requested"]) == ("amp", "amp")
    assert pd.isna(never["mismatches"])
    gloo = runs.loc["pytorch-resnet50-n1x2-b32-r0"]
    assert (gloo["backend"], gloo["backend_requested"]) == ("gloo", "nccl")
    assert gloo["mismatches"] == "backend: planned nccl, ran gloo"
    small = runs.loc["pytorch-resnet50-n1x4-b32-r0"]
    assert small["mismatches"] == "world_size: planned 4, ran 2"
    ok = runs.loc["pytorch-resnet50-n1x4-b32-r1"]
    assert pd.isna(ok["mismatches"]) and ok["precision_requested"] == "fp32"
    assert ok["device_requested"] == ok["device"] == "gpu"
    # the rank meta record's own precision_requested is kept per rank, as precision_fallback_from
    ranks = data.ranks[data.ranks["run_id"] == "pytorch-resnet50-n1x1-b32-r1"]
    assert list(ranks["precision_fallback_from"]) == ["amp"]
    assert list(ranks["precision"]) == ["fp32"]


def test_results_are_labelled_by_what_ran_and_the_report_flags_each_mismatch(results):
    camp = _campaign(results)
    data = collect_campaign(camp)
    a = analyse(data)
    cfg = a.configs.set_index("group").loc["pytorch-resnet50-n1x1-b32"]
    assert cfg["precision"] == "fp32"  # even though its lowest repeat (amp planned) never ran
    assert cfg["repeats"] == 2
    md = build_report(camp, formats=("md",)).files["md"].read_text()
    summary = md.split("## Summary")[1].split("##")[0].replace("planned amp", "")
    assert not re.search(r"\bamp\b", summary), "the summary labels a result amp, which never ran"
    for text in (
        "precision: planned amp, ran fp32",
        "backend: planned nccl, ran gloo",
        "world_size: planned 4, ran 2",
    ):
        assert f"did not run as planned ({text})" in md
        assert text in md.split("Failed, hung, cancelled, incomplete and flagged runs")[1]
