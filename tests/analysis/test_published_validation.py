"""The scaling model against published multi-GPU tables: the validation table of
docs/scaling-model.md is reproduced from ``ddlbench/analyse/reference/published_scaling.csv``, so a
model change that breaks it fails here."""

from __future__ import annotations

from pathlib import Path

from ddlbench.analyse import validation

DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling-model.md"


def test_every_table_in_the_target_meets_it():
    points = validation.rows()
    targeted = [p for p in points if p["in_target"] == "yes"]
    summary = validation.summary(targeted)
    for table, s in summary.items():
        assert s["mean_abs"] <= validation.TARGET_MEAN_ABS, (table, s)
        assert s["max_abs"] <= validation.TARGET_MAX_ABS, (table, s)
    # at least three independent publishers, and a table that spans several nodes
    publishers = {str(p["source"]).split()[0] for p in targeted}
    assert len(publishers) >= 3, publishers
    assert any(int(p["nodes"]) > 1 for p in targeted)
    # every point names its source and every preset is the shared one
    assert all(p["source"] and p["intra"] and p["inter"] for p in points)


def test_the_documented_table_is_what_the_model_computes():
    doc = DOC.read_text()
    assert validation.markdown(validation.rows()) in doc
    for table, s in validation.summary(validation.rows()).items():
        line = (
            f"| {table} | {int(s['points'])} | {100 * s['mean_abs']:.1f} "
            f"| {100 * s['max_abs']:.1f} |"
        )
        assert line in doc, line
