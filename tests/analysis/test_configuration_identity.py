"""A configuration's identity comes from the plan, never from whichever repeat ran."""

from __future__ import annotations

import pytest

from ddlbench.analyse.analysis import analyse
from ddlbench.collect.collector import collect_campaign
from tests.support.sweeps import strong_sweep
from tests.support.synth import SynthRun, write_campaign


def test_config_whose_lowest_repeat_never_ran_stays_in_its_series(results):
    camp = write_campaign(results, "strong", strong_sweep())
    data = collect_campaign(camp)
    runs = data.runs.set_index("run_id")
    never = runs.loc["pytorch-resnet50-n2x4-g256-r0"]
    assert never["status"] == "not_run"
    # the planned identity of a run that never ran
    for field, value in (
        ("device", "gpu"),
        ("lr_scaling", "sqrt"),
        ("warmup_epochs", 2.0),
        ("data_kind", "synthetic"),
        ("backend", "nccl"),
        ("precision", "fp32"),
    ):
        assert never[field] == value, field
    a = analyse(data)
    assert len(a.series) == 1, a.series[["series", "label"]]
    s = a.series.iloc[0]
    assert s["max_devices"] == 8
    assert s["efficiency_at_max"] == pytest.approx(0.35, rel=1e-6)
    assert s["peak_devices"] == 4
    assert bool(s["saturates"])
    eff = a.points.set_index("devices")["efficiency"]
    assert eff[8] == pytest.approx(0.35, rel=1e-6)
    assert eff[4] == pytest.approx(0.75, rel=1e-6)
    assert eff[1] == 1.0


def test_config_that_never_ran_at_all_keeps_its_planned_fields(results):
    runs = [SynthRun(nodes=1, tasks_per_node=2, repeat=r, not_run=True) for r in range(2)]
    data = collect_campaign(write_campaign(results, "never", runs))
    a = analyse(data)
    c = a.configs.iloc[0]
    assert (c["device"], c["backend"], c["data_kind"], c["lr_scaling"]) == (
        "gpu",
        "nccl",
        "synthetic",
        "linear",
    )
    assert c["runs"] == 2 and c["repeats"] == 0
