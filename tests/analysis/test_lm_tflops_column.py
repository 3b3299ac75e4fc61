"""The runs table's ``tflops_per_device`` and ``mfu`` of a transformer run: the collector fills
them by the report's one formula (``lm_tflops``, PaLM's FLOPs per token), the report reads the
column, an image model keeps its per-sample figure, and data of the collector version before
is collected again (docs/mfu.md#language-models, docs/columns.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ddlbench.analyse.device_peaks import peak_tflops
from ddlbench.analyse.lm_mfu import lm_tflops
from ddlbench.campaign.paths import COLLECT_INFO, CampaignPaths
from ddlbench.collect.collector import collect_campaign
from ddlbench.collect.freshness import COLLECTOR_VERSION, is_stale
from ddlbench.report.efficiency import EFFICIENCY
from ddlbench.report.format import fsig
from ddlbench.report.lm import LANGUAGE_MODELS
from tests.support.synth import SynthRun, write_campaign

SEQ = 64
FLOPS = {"palm": 41_371_392, "megatron": 41_174_784, "hfu": 41_371_392}
CNN_FLOPS = 3.0e9  # training FLOPs per sample of the image model's meta record


def _runs():
    lm = {"seq_len": SEQ, "parallel": "ddp", "grad_accum": 1, "activation_checkpointing": "none"}
    ran = {"lm": lm, "tokens_per_sample": SEQ, "flops_per_token": FLOPS}
    out = [
        SynthRun(
            model="gpt-tiny",
            device="gpu",
            tasks_per_node=2,
            batch_size=4,
            repeat=rep,
            tag="-ddp",
            step_time=0.1,
            ran=ran,
        )  # fmt: skip
        for rep in range(2)
    ]
    out.append(
        SynthRun(
            model="lenet",
            device="gpu",
            tasks_per_node=2,
            batch_size=32,
            step_time=0.01,
            ran={"flops_per_sample": CNN_FLOPS},
        )  # fmt: skip
    )
    return out


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory):
    campaign = write_campaign(tmp_path_factory.mktemp("lm-tflops"), "lm-tflops", _runs())
    return campaign, collect_campaign(campaign)


def test_a_transformers_tflops_and_mfu_are_in_the_runs_table(collected) -> None:
    _, data = collected
    runs = data.runs.set_index("run_id")
    lm = runs[runs["parallel"].notna()]
    assert len(lm) == 2
    for _, r in lm.iterrows():
        want = lm_tflops(r["tokens_per_s_per_device"], r["flops_per_token_palm"])
        assert want is not None and want > 0
        assert r["tflops_per_device"] == pytest.approx(want)
        assert r["tokens_per_s_per_device"] == pytest.approx(r["throughput_per_device"] * SEQ)
        # the A100's peak: MFU is PaLM's, as mfu_palm (null above 100 %)
        assert r["peak_tflops"] > 0 and pd.notna(r["mfu_palm"])
        assert r["mfu"] == pytest.approx(r["mfu_palm"])
        assert r["mfu"] == pytest.approx(r["tflops_per_device"] / r["peak_tflops"])
    cnn = runs[runs["parallel"].isna()].iloc[0]  # an image model: its per-sample figure
    assert cnn["tflops_per_device"] == pytest.approx(
        cnn["throughput_per_device"] * CNN_FLOPS / 1e12
    )
    assert cnn["mfu"] == pytest.approx(
        cnn["tflops_per_device"] / peak_tflops(cnn["device_name"], cnn["precision"])
    )
    assert str(data.runs["tflops_per_device"].dtype) == "float64"


def test_the_report_reads_the_column(collected) -> None:
    _, data = collected
    runs = data.runs
    lm = runs[runs["parallel"].notna()].sort_values("run_id")
    table = LANGUAGE_MODELS.table(runs)
    assert table is not None
    cells = {row[0]: dict(zip(table.columns, row)) for row in table.rows}
    for _, r in lm.iterrows():
        assert cells[r["run_id"]]["TFLOP/s per device"] == fsig(r["tflops_per_device"])
    table = EFFICIENCY.table(runs)
    assert table is not None
    rows = {row[0]: dict(zip(table.columns, row)) for row in table.rows}
    group = lm["group"].iloc[0]
    assert rows[group]["TFLOP/s per device"] == fsig(lm["tflops_per_device"].median())
    assert rows[group]["MFU"] not in ("", "-")


def test_data_of_the_collector_version_before_is_collected_again(collected) -> None:
    campaign, _ = collected
    assert not is_stale(campaign)
    info_path = CampaignPaths.of(Path(campaign)).data / COLLECT_INFO
    info = json.loads(info_path.read_text())
    assert info["collector_version"] == COLLECTOR_VERSION
    info_path.write_text(json.dumps({**info, "collector_version": COLLECTOR_VERSION - 1}))
    try:
        assert is_stale(campaign)
    finally:
        info_path.write_text(json.dumps(info))
