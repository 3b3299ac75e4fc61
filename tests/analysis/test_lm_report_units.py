"""A transformer campaign's report in its own units: tokens/s in the summary and the throughput
axis, achieved TFLOP/s on a CPU, no image layout in the precision table, integers as integers
and memory to three significant figures, and comparisons whose side started on a busy node
saying so instead of a verdict (docs/reports.md, docs/mfu.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ddlbench.analyse.analysis import CONFIG_FIELDS, Settings, analyse, config_stats
from ddlbench.analyse.lm_mfu import lm_tflops
from ddlbench.analyse.lm_verdicts import COLUMNS, lm_comparisons
from ddlbench.collect.collector import ensure_collected
from ddlbench.report import plots
from ddlbench.report.efficiency import EFFICIENCY
from ddlbench.report.format import fbytes
from ddlbench.report.lm import LANGUAGE_MODELS, LM_COMPARISONS, seq_len_of
from ddlbench.report.narrative import throughput_words
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign

SEQ = 64
STEP = {"ddp": 0.100, "fsdp": 0.120}
FLOPS = {"palm": 41_371_392, "megatron": 41_174_784, "hfu": 41_371_392}


def _run(label: str, repeat: int) -> SynthRun:
    lm = {"seq_len": SEQ, "parallel": label, "grad_accum": 1, "activation_checkpointing": "none"}
    ran = {"lm": lm, "tokens_per_sample": SEQ, "flops_per_token": FLOPS}
    return SynthRun(model="gpt-tiny", device="cpu", nodes=1, tasks_per_node=2, batch_size=4,
                    repeat=repeat, tag=f"-{label}", step_time=STEP[label], ran=ran)  # fmt: skip


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    runs = [_run(label, rep) for rep in range(3) for label in STEP]
    return write_campaign(tmp_path_factory.mktemp("lm-units"), "lm-units", runs)


@pytest.fixture(scope="module")
def analysis(campaign):
    return analyse(ensure_collected(campaign))


def test_memory_to_three_significant_figures():
    assert fbytes(402.539 * 2**20) == "403 MiB"
    assert fbytes(1.2512 * 2**30) == "1.25 GiB"
    assert fbytes(64 * 2**20) == "64 MiB" and fbytes(1536) == "1.5 KiB"
    assert fbytes(1024) == "1 KiB" and fbytes(100) == "100 B" and fbytes(None) == "-"
    assert fbytes(3 * 2**40) == "3 TiB"


def test_achieved_tflops_needs_no_peak():
    assert lm_tflops(500.0, FLOPS["palm"]) == pytest.approx(500.0 * FLOPS["palm"] / 1e12)
    assert lm_tflops(None, FLOPS["palm"]) is None and lm_tflops(500.0, None) is None
    assert lm_tflops(float("nan"), 1.0) is None and lm_tflops(0.0, 1.0) is None


def test_language_model_table_integers_tflops_and_memory(analysis):
    table = LANGUAGE_MODELS.table(analysis.runs)
    assert table is not None and len(table.rows) == 6
    cells = dict(zip(table.columns, table.rows[0]))
    assert cells["seq"] == "64"
    run = analysis.runs[analysis.runs["run_id"] == cells["run"]].iloc[0]
    want = run["tokens_per_s_per_device"] * FLOPS["palm"] / 1e12
    assert float(cells["TFLOP/s per device"]) == pytest.approx(want, rel=5e-3)


def test_precision_table_shows_what_a_transformer_applied(analysis):
    runs = analysis.runs.assign(layout="NHWC", compile="tf.function")
    cnn = runs.iloc[[0]].assign(group="lenet", parallel=None, tflops_per_device=0.5)
    table = EFFICIENCY.table(pd.concat([runs, cnn], ignore_index=True))
    assert table is not None
    cells = {c["configuration"]: c for c in (dict(zip(table.columns, r)) for r in table.rows)}
    lm = next(c for g, c in cells.items() if g.endswith("-ddp"))
    assert lm["layout"] == "" and lm["compile"] == "tf.function"
    assert lm["TFLOP/s per device"] not in ("", "-")  # a CPU run: TFLOP/s, no MFU
    assert lm["MFU"] == "-"
    assert cells["lenet"]["layout"] == "NHWC" and cells["lenet"]["TFLOP/s per device"] == "0.500"
    assert "PaLM" in table.note and "no image layout" in table.note


def test_summary_and_figure_in_tokens_per_second(campaign, analysis):
    group = analysis.points["group"].iloc[0]
    assert seq_len_of(analysis.runs, group) == SEQ
    assert throughput_words(6.5, 128) == "832.0 tokens/s (6.5 sequences/s of 128 tokens)"
    assert throughput_words(6.5, None) == "6.5 samples/s"
    md = build_report(campaign, formats=("md",)).files["md"].read_text()
    assert f"sequences/s of {SEQ} tokens) on 2 devices" in md
    assert md.count("| tokens/s (geo. mean) |") == 2  # the scaling and the repeats tables
    pts, ser = analysis.points, analysis.series
    # the points carry their sequence length: the figure is in tokens/s
    assert pts["seq_len"].notna().all()
    assert plots.throughput_unit(pts.drop(columns="seq_len"), ser)[1] == "sequences/s"
    tokens, unit = plots.throughput_unit(pts, ser)
    assert unit == "tokens/s"
    assert list(tokens["throughput_gmean"]) == pytest.approx(list(SEQ * pts["throughput_gmean"]))
    ax = plots.throughput_figure(pts.assign(seq_len=SEQ), ser).axes[0]
    assert ax.get_ylabel() == "global throughput (tokens/s)"
    assert plots.throughput_unit(pts, ser.assign(model="resnet50"))[1] == "samples/s"


def test_a_busy_side_makes_the_comparison_inconclusive(analysis):
    runs = analysis.runs
    clean = lm_comparisons(runs, config_stats(runs, Settings()), CONFIG_FIELDS)
    assert list(clean["verdict"]) == ["slower"] and clean["busy"].isna().all()
    busy = runs.assign(preflight_busy=runs["parallel"] == "ddp")
    c = lm_comparisons(busy, config_stats(busy, Settings()), CONFIG_FIELDS)
    assert list(c.columns) == COLUMNS
    r = c.iloc[0]
    assert r["verdict"] == "inconclusive" and r["reference_busy"] == 3 and r["variant_busy"] == 0
    assert r["busy"] == "started on a busy node (ddp: 3 of 3 complete run(s))"
    assert "the test alone says slower" in r["reason"]
    assert r["change"] == pytest.approx(clean.iloc[0]["change"])  # the figure stays
    table = LM_COMPARISONS.table(c, analysis.settings)
    assert table is not None
    assert dict(zip(table.columns, table.rows[0]))["verdict"] == "inconclusive (busy node)"
