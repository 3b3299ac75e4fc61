"""The transformer language models of the PyTorch workload: 2 real ranks on the CPU (gloo).

Every sharding mode trains gpt-tiny; DDP, FSDP (both reshard settings), HSDP and ZeRO-1
give the same losses step by step for the same seed (within LOSS_RTOL: the modes differ only
in the order of the floating-point sums of their collectives); the loss on real text falls;
torch.compile of the DDP and the FSDP2 model gives the eager losses, and without a C++ compiler
for inductor the run says it trained eagerly.
"""

from __future__ import annotations

import pytest

from tests.support.lm_runs import lm_config

pytestmark = pytest.mark.frameworks

#: relative tolerance between the modes' step losses (float32 sums in another order;
#: measured differences are below 1e-6 over these steps)
LOSS_RTOL = 1e-4
MODES = ("ddp", "fsdp", "fsdp-grad-op", "hsdp", "zero1")


def _losses(result, rank):
    return [s["loss"] for s in result.records(rank, "step")]


@pytest.fixture(scope="module")
def mode_losses(tmp_path_factory):
    """Each mode's run (2 ranks), once for the module."""
    from tests.support.ranks import base_run_config, launch

    out = {}
    for mode in MODES:
        cfg = lm_config(base_run_config, mode)
        result = launch(tmp_path_factory.mktemp(mode), "pytorch", cfg, world_size=2)
        result.check_ok()
        out[mode] = result
    return out


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_trains_and_reports_tokens(mode_losses, mode):
    result = mode_losses[mode]
    for rank in range(2):
        meta = result.logs[rank][0]
        assert meta["model"] == "gpt-tiny" and meta["param_count"] == 6_862_464
        assert meta["lm"]["parallel"] == mode and meta["tokens_per_step"] == 4 * 64
        assert set(meta["startup"]) == {"import_s", "process_group_s", "build_shard_s"}
        assert meta["flops_per_token"]["palm"] > meta["flops_per_token"]["megatron"]
        summary = result.summary(rank)
        assert summary["status"] == "ok" and summary["tokens_measured"] == 4 * 4 * 64
        assert summary["tokens_per_s"] == pytest.approx(
            summary["tokens_measured"] / summary["measure_time_s"]
        )
        assert summary["peak_rss_model_bytes"] > 0
        assert summary["first_step_s"] > 0
    # the parameters after training are the same on both ranks
    assert result.summary(0)["param_sha256"] == result.summary(1)["param_sha256"]


def test_modes_agree_step_by_step(mode_losses):
    reference = _losses(mode_losses["ddp"], 0)
    assert len(reference) == 5 and reference[-1] < reference[0]
    for mode in MODES[1:]:
        for rank in range(2):
            got = _losses(mode_losses[mode], rank)
            assert got == pytest.approx(_losses(mode_losses["ddp"], rank), rel=LOSS_RTOL), mode


def test_memory_prediction_within_15_percent_of_the_measured_peak(mode_losses):
    """The CPU runs' peak resident set above the one before the model was built (float32; the
    allocator set to return freed tensors, ``lm_torch.exact_rss``) of the busiest rank against
    ``analyse.lm_memory.predict_memory`` for the same run (which predicts the busiest rank)."""
    from ddlbench.analyse.lm_memory import predict_memory

    for mode in ("ddp", "fsdp", "zero1"):
        predicted = predict_memory("gpt-tiny", 64, 4, "fp32", mode, "none", 2, 2)["total"]
        summaries = [mode_losses[mode].summary(rank) for rank in range(2)]
        assert all(s["malloc_mmap_threshold"] == 128 * 1024 for s in summaries)
        measured = max(s["peak_rss_model_bytes"] for s in summaries)
        assert measured == pytest.approx(predicted, rel=0.15), (mode, measured, predicted)


def test_loss_on_real_text_falls(launch_ranks, run_config):
    """Shakespeare tokenized with cl100k (offline), 2 ranks, DDP: the loss falls from about
    ln(50257) = 10.8 by more than 1.5 nats in 16 steps (about 1.9 measured)."""
    cfg = lm_config(run_config, "ddp", data={"kind": "text", "path": None, "samples": 1024})
    cfg["steps"] = {"warmup": 1, "measure": 15}
    result = launch_ranks("pytorch", cfg, world_size=2)
    result.check_ok()
    for rank in range(2):
        losses = _losses(result, rank)
        assert losses[0] == pytest.approx(10.8, abs=0.3)
        assert sum(losses[-3:]) / 3 < losses[0] - 1.5, losses
    # the ranks read different windows of the text
    assert _losses(result, 0) != _losses(result, 1)


COUNTS = r"""
import json, torch
from ddlbench.workloads.pytorch.models_lm_torch import build_lm
from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES
out = {}
for name in TRANSFORMER_SHAPES:
    with torch.device("meta"):
        model = build_lm(name, 128)
    out[name] = sum(p.numel() for p in model.parameters())
model = build_lm("llama-tiny", 16, seed=0)
out["llama_logits"] = list(model(torch.zeros(2, 16, dtype=torch.long)).shape)
print(json.dumps(out))
"""


def test_every_shape_builds_with_its_parameter_count(framework_python):
    import json
    import os
    import subprocess

    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES, transformer_params
    from tests.support.repo import ROOT

    python = framework_python("torch")
    if python is None:
        pytest.skip("torch environment not built")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([python, "-c", COUNTS], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)
    for name, shape in TRANSFORMER_SHAPES.items():
        assert counts[name] == transformer_params(shape)["total"], name
    assert counts["llama3-8b"] == 8_030_261_248 and counts["gpt2-124m"] == 124_439_808
    assert counts["llama_logits"] == [2, 16, 50257]


def test_bf16_accumulation_and_selective_checkpointing_train(launch_ranks, run_config):
    """FSDP in bf16 (float32 reduction), 2 micro-batches per step, selective recomputation, on
    llama-tiny (RoPE, RMSNorm, SwiGLU, grouped-query attention)."""
    lm = {"parallel": "fsdp", "activation_checkpointing": "selective", "grad_accum": 2}
    cfg = lm_config(run_config, "fsdp", lm=lm, model="llama-tiny", precision="bf16")
    result = launch_ranks("pytorch", cfg, world_size=2)
    result.check_ok()
    meta = result.logs[0][0]
    assert meta["precision"] == "bf16" and meta["tokens_per_step"] == 2 * 4 * 64
    assert meta["param_count"] == 13_235_072
    assert result.summary(0)["tokens_measured"] == 4 * 2 * 4 * 64
    losses = _losses(result, 0)
    assert losses[-1] < losses[0]
    assert all(s["samples"] == 8 for s in result.records(0, "step"))


def test_one_rank_in_bf16_trains_under_autocast_in_every_mode(launch_ranks, run_config):
    """One rank has no process group, so no mode wraps the model: FSDP's and ZeRO-1's runs
    train as DDP's, under bf16 autocast, step for step (an FSDP run at one rank had trained
    in float32 while its meta said bf16, 1.46x slower than DDP on an H100)."""
    losses = {}
    for mode in ("ddp", "fsdp", "zero1"):
        steps = {"warmup": 1, "measure": 2}
        cfg = lm_config(run_config, mode, precision="bf16", steps=steps, run_id=f"one-{mode}")
        result = launch_ranks("pytorch", cfg, world_size=1)
        result.check_ok()
        assert result.logs[0][0]["precision"] == "bf16"
        losses[mode] = _losses(result, 0)
    assert losses["fsdp"] == losses["ddp"] and losses["zero1"] == losses["ddp"]
    cfg = lm_config(run_config, "ddp", steps={"warmup": 1, "measure": 2}, run_id="one-fp32")
    fp32 = launch_ranks("pytorch", cfg, world_size=1)
    assert _losses(fp32, 0) != losses["ddp"]  # the comparison can tell bf16 from float32


def test_horovod_trains_the_transformer_like_ddp(launch_ranks, run_config, mode_losses):
    """Horovod (gloo controller) wrapping PyTorch: data-parallel gpt-tiny, the same losses as
    DDP for the same seed."""
    from tests.support.envs import env_python

    if env_python("horovod") is None:
        pytest.skip("horovod environment not built")
    cfg = lm_config(run_config, "ddp", framework="horovod")
    cfg["framework_options"] = {"wraps": "pytorch", "controller": "gloo"}
    server = ["ddlbench.workloads.hvd.horovod_rendezvous", "--tasks-per-node", "2"]
    result = launch_ranks(
        "horovod_torch", cfg, world_size=2, env="horovod", background=server, timeout=300
    )
    result.check_ok()
    meta = result.logs[0][0]
    assert meta["framework_version"].startswith("horovod 0.") and meta["controller"] == "gloo"
    assert meta["tokens_per_step"] == 4 * 64
    # the same rank-log fields as the pytorch path: start-up split, tokens/s, memory
    assert set(meta["startup"]) == {"import_s", "process_group_s", "build_shard_s"}
    assert all(v > 0 for v in meta["startup"].values())
    summary = result.summary(0)
    assert summary["tokens_per_s"] == pytest.approx(
        summary["tokens_measured"] / summary["measure_time_s"]
    )
    assert summary["peak_rss_model_bytes"] > 0 and summary["first_step_s"] > 0
    for rank in range(2):
        got = _losses(result, rank)
        assert got == pytest.approx(_losses(mode_losses["ddp"], rank), rel=LOSS_RTOL)
    assert result.summary(0)["param_sha256"] == result.summary(1)["param_sha256"]


#: compiled against eager step losses: inductor fuses the float32 arithmetic into other kernels
#: (measured on this CPU: DDP's losses identical, FSDP's within 2e-7 relative)
COMPILE_RTOL = 1e-5


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory):
    """One inductor cache for the compiled runs of this module (cold at first: the first run
    compiles from scratch)."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path_factory.mktemp("inductor"))}


@pytest.mark.parametrize("mode", ("ddp", "fsdp"))
def test_compiled_step_matches_eager(mode_losses, inductor_cache, launch_ranks, run_config, mode):
    """torch.compile (inductor, CPU, g++) of the DDP and the FSDP2 model: the compilation is
    logged with the start-up split (compile_s inside first_step_s), Dynamo compiled graphs, and
    the losses equal the eager run's step by step."""
    cfg = lm_config(run_config, mode, compile=True, steps={"warmup": 1, "measure": 2})
    result = launch_ranks("pytorch", cfg, world_size=2, timeout=900, extra_env=inductor_cache)
    result.check_ok()
    eager = mode_losses[mode]
    for rank in range(2):
        meta, summary = result.logs[rank][0], result.summary(rank)
        assert meta["compile"] == "torch.compile(mode=default)" and meta["fallbacks"] == []
        assert meta["warmup_steps"] == 5  # raised so that compilation stays out of the window
        assert set(meta["startup"]) == {"import_s", "process_group_s", "build_shard_s"}
        assert 0 < summary["compile_s"] <= summary["first_step_s"]
        assert summary["compiled_graphs"] >= 1 and summary["graph_breaks"] >= 0
        assert eager.summary(rank)["compile_s"] is None
        assert "compiled_graphs" not in eager.summary(rank)
        got = _losses(result, rank)
        assert len(got) == 7
        assert got[:5] == pytest.approx(_losses(eager, rank), rel=COMPILE_RTOL)


def test_compile_without_a_cpp_compiler_runs_eagerly_and_says_so(launch_ranks, run_config):
    """No C++ compiler for inductor on the node: the run trains eagerly, and the fallback is in
    the rank log (meta fallbacks) and on stderr."""
    cfg = lm_config(run_config, "ddp", compile=True, steps={"warmup": 1, "measure": 1})
    result = launch_ranks("pytorch", cfg, world_size=1, extra_env={"CXX": "/nonexistent/c++"})
    result.check_ok()
    meta, summary = result.logs[0][0], result.summary(0)
    assert meta["compile"] == "eager" and meta["knobs_requested"]["compile"] is True
    assert summary["compile_s"] is None and "compiled_graphs" not in summary
    assert "warmup_steps" not in meta and len(_losses(result, 0)) == 2  # warmup not raised
    (fallback,) = meta["fallbacks"]
    assert "C++ compiler" in fallback and "'/nonexistent/c++' is not on" in fallback
    assert "runs eagerly" in fallback and "runs eagerly" in result.stderr[0]
