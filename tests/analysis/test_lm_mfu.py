"""MFU of the language models under each convention, checked by hand for gpt2-124m at
sequence 1024, and the >100 % flag for a wrong peak."""

from __future__ import annotations

import pytest

from ddlbench.analyse.device_peaks import peak_tflops
from ddlbench.analyse.lm_mfu import lm_utilisation
from ddlbench.workloads.flops_lm import flops_per_token, matmul_params
from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES

GPT2 = TRANSFORMER_SHAPES["gpt2-124m"]


def test_flops_per_token_by_hand():
    # N: 124,439,808 parameters less the 1024 x 768 position table (the token table is the
    # tied output projection, a matmul: counted)
    n = 124_439_808 - 1024 * 768
    assert matmul_params(GPT2) == n == 123_653_376
    attn = 12 * 12 * 768 * 1024  # 12 L d S
    f = flops_per_token(GPT2, 1024, "full")
    assert f["palm"] == 6 * n + attn == 855_166_464
    assert f["megatron"] == 6 * n + attn // 2 == 798_543_360
    assert f["hfu"] == 855_166_464 + 2 * n + 4 * 12 * 768 * 1024 == 1_140_221_952
    assert flops_per_token(GPT2, 1024, "none")["hfu"] == f["palm"]
    assert flops_per_token(GPT2, 1024, "selective")["hfu"] == f["palm"] + attn // 3


def test_llama_untied_token_table_is_not_counted():
    shape = TRANSFORMER_SHAPES["llama3-8b"]
    assert matmul_params(shape) == 8_030_261_248 - 128_256 * 4096


def test_mfu_by_hand_on_an_a100():
    peak = peak_tflops("NVIDIA A100-SXM4-80GB", "bf16")
    assert peak == 312.0
    got = lm_utilisation(100_000.0, flops_per_token(GPT2, 1024, "full"), peak)
    assert got["mfu_palm"] == pytest.approx(100_000 * 855_166_464 / 312e12)  # 0.2741
    assert got["mfu_megatron"] == pytest.approx(100_000 * 798_543_360 / 312e12)
    assert got["hfu"] == pytest.approx(100_000 * 1_140_221_952 / 312e12)
    assert got["mfu_flag"] is None


def test_a_wrong_peak_is_flagged_not_reported():
    # the V100's FP32 rate for an A100 bf16 run: every convention lands above 100 %
    flops = flops_per_token(GPT2, 1024, "none")
    got = lm_utilisation(100_000.0, flops, peak_tflops("Tesla V100-SXM2-16GB", "fp32"))
    assert got["mfu_palm"] is None and got["mfu_megatron"] is None and got["hfu"] is None
    assert "above 100 %" in got["mfu_flag"] and "palm 545 %" in got["mfu_flag"]
    assert "not a result" in got["mfu_flag"]


def test_only_the_convention_above_100_percent_is_withheld():
    flops = {"palm": 1_000, "megatron": 500, "hfu": 1_000}
    got = lm_utilisation(1.5e9, flops, 1.0)  # 1.5 and 0.75 of a 1 TFLOP/s peak
    assert got["mfu_palm"] is None and got["mfu_megatron"] == pytest.approx(0.75)
    assert "palm 150 %" in got["mfu_flag"] and "megatron" not in got["mfu_flag"]


def test_unknown_peak_gives_no_mfu_and_no_flag():
    got = lm_utilisation(1e5, flops_per_token(GPT2, 1024), None)
    assert got == {"mfu_palm": None, "mfu_megatron": None, "hfu": None, "mfu_flag": None}


def test_report_table_shows_memory_predicted_against_measured():
    import pandas as pd

    from ddlbench.analyse.lm_memory import predict_memory
    from ddlbench.report.lm import LANGUAGE_MODELS

    predicted = predict_memory("gpt-tiny", 64, 4, "fp32", "fsdp", "none", 2, 2)["total"]
    row = dict(
        run_id="pytorch-gpt-tiny-n1x2-b4-s64-r0", group="g", model="gpt-tiny", seq_len=64,
        batch_size=4, precision="fp32", parallel="fsdp", activation_checkpointing="none",
        world_size=2, tasks_per_node=2, tokens_per_s=1000.0, tokens_per_s_per_device=500.0,
        mfu_palm=None, mfu_megatron=None, hfu=None, mfu_flag=None, peak_allocated_bytes=None,
        peak_rss_model_bytes=1.1 * predicted, startup_import_s=1.0, startup_process_group_s=0.1,
        startup_build_shard_s=0.5, compile_s=None,
    )  # fmt: skip
    cnn = dict(row, run_id="lenet", parallel=None)
    table = LANGUAGE_MODELS.table(pd.DataFrame([row, cnn]))
    assert table is not None and len(table.rows) == 1
    cells = dict(zip(table.columns, table.rows[0]))
    assert cells["ratio"] == "1.10" and cells["parallel"] == "fsdp"
    assert LANGUAGE_MODELS.table(pd.DataFrame([cnn])) is None
