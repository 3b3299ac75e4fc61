"""The scaling model against published multi-GPU tables: the acceptance rule of the model
(relative error, bias, interval coverage) over every table of
``ddlbench/analyse/reference/published_scaling.csv``, with the same constants for all, and the
tables of docs/scaling-model.md reproduced from it, so a model change that moves them fails
here."""

from __future__ import annotations

from pathlib import Path

from ddlbench.analyse import hierarchy, validation

DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling-model.md"


def test_the_acceptance_rule_over_every_published_table():
    points = validation.rows()
    a = validation.acceptance(points)
    assert a["points"] == len(points) >= 55
    assert a["mean_abs"] <= validation.TARGET_MEAN_ABS, a
    assert abs(a["mean_signed"]) <= validation.TARGET_MEAN_SIGNED, a  # no bias
    assert a["inside"] >= validation.TARGET_INSIDE, a
    # intervals no wider than they must be: a few efficiency points on average
    assert 0 < a["mean_width"] <= 0.12, a
    # the largest error: every point within the target except the documented misses
    beyond = {
        (str(p["table"]), int(p["devices"]))  # type: ignore[call-overload]
        for p in points
        if abs(float(p["throughput_error"])) > validation.TARGET_MAX_ABS  # type: ignore[arg-type]
    }
    assert beyond == set(validation.KNOWN_MISSES)
    # transformers under FSDP are among the tables, and several multi-node tables
    assert any(p["parallel"] == "fsdp" and int(p["nodes"]) > 1 for p in points)
    assert len({p["table"] for p in points if int(p["nodes"]) > 1}) >= 4


def test_every_point_names_its_source_and_uses_the_shared_presets():
    known = hierarchy.presets()
    for p in validation.rows():
        assert p["source"] and p["intra"] in known and p["inter"] in known
        assert p["efficiency_low"] <= p["predicted_efficiency"] <= p["efficiency_high"]


def test_the_documented_tables_are_what_the_model_computes():
    doc = DOC.read_text()
    points = validation.rows()
    assert validation.markdown(points) in doc
    assert validation.summary_markdown(points) in doc
