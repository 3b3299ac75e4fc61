"""The transformer memory model's terms (docs/memory.md), checked by hand against what the
workload's PyTorch code allocates: gradient accumulation's gradients (whole under DDP and
ZeRO-1, sharded under FSDP2, which reduce-scatters every micro-batch), the optimizer step
after FSDP2 has resharded, the loss's 12 bytes per logit in every precision, and what mixed
precision keeps in float32. The shapes' parameter counts are checked against the published
ones."""

from __future__ import annotations

import pandas as pd
import pytest

from ddlbench.analyse.lm_memory import memory_fixes, predict_memory
from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES, transformer_params

P_LLAMA = transformer_params(TRANSFORMER_SHAPES["llama3-8b"])["total"]
P_MPT = transformer_params(TRANSFORMER_SHAPES["mpt-13b"])["total"]


def test_parameter_counts_are_the_published_ones():
    """Meta's Llama 3 (8.03B, 70.6B), Hugging Face's GPT-2 checkpoints and the n_params of LLM
    Foundry's benchmark table (scripts/train/benchmarking/README.md, seq 2048: learned
    positions of 2048 and biases, as its yamls build them)."""
    published = {
        "llama3-8b": 8_030_261_248,
        "llama3-70b": 70_553_706_496,
        "gpt2-124m": 124_439_808,
        "gpt2-350m": 354_823_168,
        "gpt2-760m": 774_030_080,
        "gpt2-1.5b": 1_557_611_200,
        "mpt-125m": 125_311_488,
        "mpt-350m": 355_985_408,
        "mpt-760m": 760_470_528,
        "mpt-1b": 1_315_950_592,
        "mpt-3b": 2_651_837_440,
        "mpt-7b": 6_658_859_008,
        "mpt-13b": 12_853_954_560,
        "mpt-30b": 29_975_214_080,
        "mpt-70b": 64_862_437_376,
    }
    for name, count in published.items():
        assert transformer_params(TRANSFORMER_SHAPES[name])["total"] == count, name


@pytest.mark.parametrize("mode", ["ddp", "zero1"])
def test_accumulation_keeps_four_bytes_per_parameter_through_backward(mode):
    """DDP and ZeRO-1 (``no_sync``) keep the whole float32 ``.grad`` through the later
    micro-batches' backward."""
    args = ("llama3-8b", 2048, 1, "bf16", mode, "selective", 8, 8)
    one, four = predict_memory(*args), predict_memory(*args, grad_accum=4)
    assert one["accumulated"] == 0
    assert four["accumulated"] == 4 * P_LLAMA
    assert four["backward_peak"] - one["backward_peak"] == 4 * P_LLAMA
    assert four["step_peak"] == one["step_peak"]


@pytest.mark.parametrize("mode", ["fsdp", "fsdp-grad-op", "hsdp"])
def test_fsdp_accumulates_into_its_sharded_gradients(mode):
    """The FSDP2 modes reduce-scatter every micro-batch (the workload's ``gradient_sync``):
    through the later micro-batches they keep their gradient shards, not 4 bytes per
    parameter (measured on 2 CPU ranks: tests/workloads/test_lm_torch_memory.py)."""
    args = ("llama3-8b", 2048, 1, "bf16", mode, "selective", 16, 8)
    one, four = predict_memory(*args), predict_memory(*args, grad_accum=4)
    assert four["accumulated"] == one["gradients"] == four["gradients"] > 0
    assert four["accumulated"] <= 4 * P_LLAMA / 8
    assert four["backward_peak"] - one["backward_peak"] == four["gradients"]


def test_shipped_llama3_spec_is_predicted_with_its_four_micro_batches():
    """configs/llama3-8b.yaml runs grad_accum 4: under fsdp each rank keeps its 3.7 GiB of
    float32 gradient shards through the later micro-batches."""
    args = ("llama3-8b", 8192, 1, "bf16", "fsdp", "selective", 8, 8)
    four, one = predict_memory(*args, grad_accum=4), predict_memory(*args)
    assert four["total"] - one["total"] == pytest.approx(4 * P_LLAMA / 8)


def test_zero2_accumulates_into_its_gradient_partition():
    args = ("mpt-13b", 2048, 2, "bf16", "zero2", "none", 8, 8)
    m = predict_memory(*args, grad_accum=2)
    assert m["accumulated"] == m["gradients"] == pytest.approx(2 * P_MPT / 8)


def test_halving_the_micro_batch_counts_the_accumulation_it_adds():
    """ "micro-batch N/2 (grad_accum x2)" is predicted with twice the micro-batches: under FSDP
    the unsharded gradients then cost more than the activations saved, so it is not offered."""
    fixes = dict(memory_fixes("llama3-8b", 2048, 2, "bf16", "fsdp", "full", 8, 8))
    assert "micro-batch 1 (grad_accum x2)" not in fixes
    big = dict(memory_fixes("llama3-8b", 8192, 4, "bf16", "ddp", "none", 8, 8))
    with_accum = predict_memory("llama3-8b", 8192, 2, "bf16", "ddp", "none", 8, 8, grad_accum=2)
    assert big["micro-batch 2 (grad_accum x2)"] == with_accum["total"]


def test_optimizer_step_after_fsdp_resharded():
    """FSDP2 reshards every unit after backward (``reshard_after_backward``, default True),
    also under ``fsdp-grad-op``: the step holds shards, gradients and AdamW's temporary only.
    mpt-13b, 8 ranks, full checkpointing: (4 + 8 + 4 + 4) / 8 bytes per parameter."""
    for mode in ("fsdp", "fsdp-grad-op"):
        m = predict_memory("mpt-13b", 2048, 2, "bf16", mode, "full", 8, 8)
        assert m["step_peak"] == pytest.approx(20 * P_MPT / 8), mode
    grad_op = predict_memory("mpt-13b", 2048, 2, "bf16", "fsdp-grad-op", "full", 8, 8)
    assert grad_op["backward_peak"] < 48.0 * 2**30  # was 54.9 GiB
    # built sharded block by block: the build is far below training (it was 4 bytes per
    # parameter, above backward, while every rank built the whole float32 model)
    assert grad_op["total"] == grad_op["backward_peak"] > 3 * grad_op["build_peak"]
    ddp = predict_memory("gpt2-124m", 1024, 8, "bf16", "ddp", "none", 2, 8)
    assert ddp["step_peak"] == pytest.approx(
        24 * transformer_params(TRANSFORMER_SHAPES["gpt2-124m"])["total"]
    )


def test_the_build_holds_the_whole_model_only_where_training_does():
    """DDP and ZeRO-1 build the whole float32 model on each rank (4 bytes per parameter,
    which their training holds anyway); the FSDP modes shard each block as the build creates
    it: the token and position tables, one block and the shards of the others (mpt-30b under
    fsdp: 1.3 + 2.5 GiB and 104/N GiB of shards), so no scale is held back by the build, and
    nowhere does the build set the peak; DeepSpeed's zero2 is not the workload's build."""
    shape = TRANSFORMER_SHAPES["mpt-30b"]
    counts = transformer_params(shape)
    block = (counts["blocks"] - 2 * shape.d_model) / shape.layers
    for world in (8, 64, 512):
        m = predict_memory("mpt-30b", 2048, 1, "bf16", "fsdp", "full", world, 8)
        want = 4 * (counts["embedding"] + block + (shape.layers - 1) * block / world)
        assert m["build_peak"] == pytest.approx(want), world
        assert m["total"] == max(m["backward_peak"], m["step_peak"]) > m["build_peak"]
    hsdp = predict_memory("mpt-30b", 2048, 1, "bf16", "hsdp", "full", 64, 8)
    assert hsdp["build_peak"] == pytest.approx(
        4 * (counts["embedding"] + block + (shape.layers - 1) * block / 8)
    )
    ddp = predict_memory("gpt2-124m", 1024, 8, "bf16", "ddp", "none", 8, 8)
    assert ddp["build_peak"] == 4 * counts_of("gpt2-124m") < ddp["total"]
    assert predict_memory("mpt-30b", 2048, 1, "bf16", "zero2", "full", 64, 8)["build_peak"] == 0


def counts_of(name):
    return transformer_params(TRANSFORMER_SHAPES[name])["total"]


def test_logits_are_twelve_bytes_in_every_precision():
    """Log-probabilities, their gradient and the logits' float32 gradient; the bf16 logits are
    freed after their float32 copy (measured with the resident set: 12.0 bytes per logit)."""
    for precision in ("fp32", "bf16"):
        m = predict_memory("gpt2-124m", 1024, 8, precision, "fsdp", "none", 8, 8)
        assert m["logits"] == 12 * 1024 * 8 * 50257


def test_mixed_precision_counts_the_float32_tensors_the_norms_save():
    """llama3-8b, seq 2048, micro-batch 1: 2 bytes per element of ``10 h + 3 kv + 4 ffn`` per
    layer and ``3 h`` outside, plus, under FSDP's bf16 weights, RMSNorm's float32 input (2
    more bytes per h, 65 norms); under autocast (DDP) the float32 residual stream as well
    (4 more bytes per h and norm)."""
    h, kv, f, layers, tokens = 4096, 1024, 14336, 32, 2048
    base = 2 * (layers * (10 * h + 3 * kv + 4 * f) + 3 * h)
    norms = 2 * layers + 1
    fsdp = predict_memory("llama3-8b", 2048, 1, "bf16", "fsdp", "none", 8, 8)
    assert fsdp["activations"] == tokens * (base + 2 * h * norms)
    ddp = predict_memory("llama3-8b", 2048, 1, "bf16", "ddp", "none", 8, 8)
    assert ddp["activations"] == tokens * (base + 4 * h * norms)
    gpt = predict_memory("mpt-13b", 2048, 2, "bf16", "fsdp", "none", 8, 8)
    h13 = 5120
    assert gpt["activations"] == 4096 * 2 * (40 * (7 * h13 + 2 * h13 + 2 * 4 * h13) + 2 * h13)
    fp32 = predict_memory("llama3-8b", 2048, 1, "fp32", "fsdp", "none", 8, 8)
    assert fp32["activations"] == tokens * 2 * base


def test_full_checkpointing_under_autocast_keeps_float32_block_inputs():
    h, layers = 768, 12
    m = predict_memory("gpt2-124m", 1024, 1, "bf16", "ddp", "full", 2, 8)
    elements = layers * h + (7 * h + 2 * h + 2 * 4 * h) + 2 * h
    assert m["activations"] == 1024 * (2 * elements + 2 * h * 3 + 2 * h * layers)


def test_report_predicts_each_run_with_its_micro_batches():
    from ddlbench.report.lm import lm_rows

    row = dict(
        run_id="r", group="g", model="gpt-tiny", seq_len=64, batch_size=4, precision="fp32",
        parallel="fsdp", activation_checkpointing="none", world_size=2, tasks_per_node=2,
    )  # fmt: skip
    runs = pd.DataFrame([dict(row, grad_accum=1), dict(row, run_id="s", grad_accum=2)])
    predicted = list(lm_rows(runs)["memory_predicted_bytes"])
    p = transformer_params(TRANSFORMER_SHAPES["gpt-tiny"])["total"]
    assert predicted[1] - predicted[0] == 4 * p / 2  # its shard of the gradients
    legacy = lm_rows(pd.DataFrame([row]))
    assert legacy is not None and legacy["memory_predicted_bytes"].notna().all()
