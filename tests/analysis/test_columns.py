"""The column table is the one source of the collected tables' columns and of docs/columns.md."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ddlbench.collect import columns
from ddlbench.collect.collector import collect_campaign
from tests.support.synth import SynthRun, write_campaign

DOC = Path(__file__).resolve().parents[2] / "docs" / "columns.md"


def test_committed_column_reference_is_the_generated_one():
    assert DOC.read_text() == columns.markdown(), (
        "docs/columns.md is out of date: python -m ddlbench.collect.columns --markdown "
        "> docs/columns.md"
    )


def test_data_files_have_exactly_the_tables_columns_and_types(results):
    runs = [
        SynthRun(nodes=1, tasks_per_node=2, compute_fraction=0.8),
        SynthRun(model="lenet", mode="convergence", epochs=2, measure_steps=4, warmup_steps=0),
        SynthRun(mode="allreduce", model="allreduce", batch_size=1, allreduce_sizes=[1024]),
    ]
    camp = write_campaign(results, "cols", runs)
    collect_campaign(camp)
    data = camp / "data"
    for name, cols in (
        ("runs", columns.RUNS),
        ("ranks", columns.RANKS),
        ("evals", columns.EVALS),
        ("allreduce", columns.ALLREDUCE),
        ("files", columns.FILES),
    ):
        schema = pq.read_schema(data / f"{name}.parquet")
        assert schema.names == columns.names(cols), name
        for col in cols:
            got = schema.field(col.name).type
            want = [pa.type_for_alias(col.arrow_type)]
            if col.kind == "text":  # a text column that is null in every row has no type
                want += [pa.large_string(), pa.null()]
            assert got in want, (name, col.name, got)


def test_usage_errors_exit_2(capsys):
    assert columns.main([]) == 2
    assert "usage" in capsys.readouterr().err
