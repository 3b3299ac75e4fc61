"""The transformer path against what PyTorch really holds (docs/memory.md): the
tensors the models save for backward under each precision, counted with saved-tensor hooks;
the loss's peak per logit, measured with the resident set; FSDP2's sharded gradients under
gradient accumulation, on 2 CPU ranks; and a precision that fell back to amp, which the
transformer path cannot train."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.lm_runs import lm_config

pytestmark = pytest.mark.frameworks

SAVED = r"""
import contextlib, json, sys, torch
from ddlbench.workloads.vocabulary import TransformerShape
from ddlbench.workloads.pytorch.models_lm_torch import DecoderLM, lm_loss

SHAPES = {
    "gpt2": TransformerShape("gpt2", 2, 128, 4, 4, 512, 1000, 256, "test"),
    "llama": TransformerShape("llama", 2, 128, 4, 2, 352, 1000, 0, "test"),
}
T = 96  # 2 sequences of 48 tokens: no activation has the weights' sizes
out = {}
for style, shape in SHAPES.items():
    for how in ("fp32", "bf16-weights", "autocast"):
        for ckpt in ("none", "selective"):
            torch.manual_seed(0)
            model = DecoderLM(shape, 48)
            model.set_recompute(ckpt)
            if how == "bf16-weights":
                model = model.to(torch.bfloat16)
            weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
            saved = {}

            def pack(t):
                st = t.untyped_storage()
                if st.data_ptr() not in weights:
                    saved[st.data_ptr()] = (st.nbytes(), tuple(t.shape))
                return t

            ids = torch.randint(0, shape.vocab, (2, 49))
            cast = torch.autocast("cpu", dtype=torch.bfloat16) if how == "autocast" else None
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                with cast or contextlib.nullcontext():
                    lm_loss(model(ids[:, :-1]), ids[:, 1:])
            # the token activations: not the logits' log-probabilities (last dimension the
            # vocabulary), not autocast's weight copies (2-D, first dimension not a token's)
            acts = sum(
                n
                for n, s in saved.values()
                if s and s[-1] != shape.vocab and not (len(s) == 2 and s[0] != T)
            )
            out[f"{style} {how} {ckpt}"] = acts / T
print(json.dumps(out))
"""

LOGITS = r"""
import json, sys, torch
from ddlbench.workloads.common.lm_common import RssPeak
from ddlbench.workloads.pytorch.models_lm_torch import lm_loss
torch.set_num_threads(1)
T, V = 512, 50257
dtype = getattr(torch, sys.argv[1])  # one dtype per process: the resident set starts clean
peak = RssPeak()
y = torch.randint(0, V, (1, T))
h = torch.randn(1, T, 64, dtype=dtype, requires_grad=True)
w = (torch.randn(V, 64, dtype=dtype) * 0.02).requires_grad_(True)
lm_loss(h @ w.t(), y).backward()  # warm, and the gradients' own buffers exist
peak.start()
logits = h @ w.t()
loss = lm_loss(logits, y)
del logits
loss.backward()
print(json.dumps({"per_logit": peak.fields()["peak_rss_model_bytes"] / (T * V)}))
"""

AMP = r"""
import json, torch
from ddlbench.workloads.common.knobs import Knobs, resolve_precision
from ddlbench.workloads.pytorch.torch_main import TorchKnobs
from ddlbench.workloads.pytorch.lm_torch import lm_precision
knobs = Knobs.from_config({"precision": "bf16"})
got = resolve_precision(knobs, True, tf32_ok=False, bf16_ok=False)  # a V100: bf16 -> amp
knobs.extra.update(autocast_dtype="float16", loss_scaling=True)
torch_knobs = TorchKnobs(knobs, got, False, None)
ran = lm_precision(torch_knobs, torch.device("cpu"))
print(json.dumps({"asked": got, "ran": ran, "knob": torch_knobs.precision, "meta": knobs.meta()}))
"""


def _run(framework_python, script: str, *args: str) -> dict:
    from tests.support.repo import ROOT

    python = framework_python("torch")
    if python is None:
        pytest.skip("torch environment not built")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([python, "-c", script, *args], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_saved_activations_match_the_prediction_in_every_precision(framework_python):
    """Bytes per token the models save for backward (saved-tensor hooks, one storage once)
    against ``activation_elements`` and ``float32_extra_bytes``: bf16 weights stand for FSDP's
    ``param_dtype``, autocast for DDP's. Measured: llama style exact in fp32 (48.3 h-sized
    elements per token for 48.0 counted), 11 % above the old count with bf16 weights (RMSNorm's
    float32 input) and 25 % above it under autocast (the float32 residual stream); gpt2 style
    5 % below the count (the attention output's reshape is a view on this backend)."""
    from ddlbench.analyse.lm_memory import activation_elements, float32_extra_bytes
    from ddlbench.workloads.vocabulary import TransformerShape

    measured = _run(framework_python, SAVED)
    shapes = {
        "gpt2": TransformerShape("gpt2", 2, 128, 4, 4, 512, 1000, 256, "test"),
        "llama": TransformerShape("llama", 2, 128, 4, 2, 352, 1000, 0, "test"),
    }
    modes = {
        "fp32": ("fp32", "fsdp"),
        "bf16-weights": ("bf16", "fsdp"),
        "autocast": ("bf16", "ddp"),
    }
    for key, got in measured.items():
        style, how, ckpt = key.split()
        precision, parallel = modes[how]
        shape = shapes[style]
        per_element = 4 if precision == "fp32" else 2
        want = per_element * activation_elements(shape, ckpt)
        want += float32_extra_bytes(shape, ckpt, precision, parallel)
        assert got == pytest.approx(want, rel=0.08), (key, got, want)


def test_the_loss_peaks_at_twelve_bytes_per_logit(framework_python):
    """The resident set over the loss's forward and backward, per logit (the float32 copy of
    bf16 logits, the log-probabilities, their gradient, the logits' gradient): 12 bytes in
    float32 and in bf16, where the model had counted 14 for mixed precision."""
    from ddlbench.analyse.lm_memory import predict_memory

    for precision, dtype in (("fp32", "float32"), ("bf16", "bfloat16")):
        measured = _run(framework_python, LOGITS, dtype)["per_logit"]
        predicted = predict_memory("gpt-tiny", 64, 4, precision, "fsdp", "none", 2, 2)
        per_logit = predicted["logits"] / (64 * 4 * 50257)
        assert measured == pytest.approx(per_logit, abs=0.5), (dtype, measured, per_logit)


def test_a_fallback_to_amp_trains_and_is_recorded_as_fp32(framework_python):
    """bf16 on a GPU without bfloat16 falls back to amp (``precision_fallback``), which the
    transformer path has no autocast for: the run trains in float32, so it says fp32 (MFU then
    reads the fp32 peak, not fp16's), with the reason among its fallbacks."""
    got = _run(framework_python, AMP)
    assert got["asked"] == "amp" and got["ran"] == "fp32" and got["knob"] == "fp32"
    meta = got["meta"]
    assert meta["precision"] == "fp32" and meta["precision_requested"] == "bf16"
    assert meta["loss_scaling"] is False and meta["autocast_dtype"] is None
    assert any("transformer path" in f and "fp32" in f for f in meta["fallbacks"])


def test_fsdp_accumulation_holds_sharded_gradients(launch_ranks, run_config):
    """gpt-tiny under FSDP on 2 CPU ranks, float32, seq 64, micro-batch 4: FSDP2
    reduce-scatters every micro-batch, so with 2 micro-batches per step the busiest rank's
    peak grows by its *shard* of the float32 gradients, 4 bytes per parameter over 2 ranks
    (measured 223 -> 237 MiB; skipping the reduce-scatter had kept the unsharded gradients:
    214 -> 240 MiB), and each run is within 15 % of ``predict_memory`` with its
    ``grad_accum``."""
    from ddlbench.analyse.lm_memory import predict_memory
    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES, transformer_params

    params = transformer_params(TRANSFORMER_SHAPES["gpt-tiny"])["total"]
    peaks = {}
    for accum in (1, 2):
        steps = {"warmup": 1, "measure": 3}
        cfg = lm_config(run_config, "fsdp", lm={"grad_accum": accum}, steps=steps,
                        run_id=f"accum{accum}")  # fmt: skip
        result = launch_ranks("pytorch", cfg, world_size=2)
        result.check_ok()
        peaks[accum] = max(result.summary(rank)["peak_rss_model_bytes"] for rank in range(2))
        predicted = predict_memory(
            "gpt-tiny", 64, 4, "fp32", "fsdp", "none", 2, 2, grad_accum=accum
        )
        assert peaks[accum] == pytest.approx(predicted["total"], rel=0.15), (accum, peaks)
    assert peaks[2] - peaks[1] == pytest.approx(4 * params / 2, rel=0.25), peaks


SHARDED_BUILD = r"""
import json, sys, tempfile, torch, torch.distributed as dist, torch.multiprocessing as mp
from ddlbench.workloads.pytorch.models_lm_torch import DecoderLM, build_lm, materialise
from ddlbench.workloads.pytorch.parallel_torch import fsdp_sharder
from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES, TransformerShape

SHAPES = {  # many blocks against small embeddings: the build's peak is the blocks'
    "t-gpt2": TransformerShape("gpt2", 8, 128, 4, 4, 512, 1000, 64, "test"),
    "t-llama": TransformerShape("llama", 8, 128, 4, 2, 352, 1000, 0, "test"),
}
TRANSFORMER_SHAPES.update(SHAPES)


def held(model):
    # bytes of the weights this rank holds: its shards, and every whole weight created so far
    seen, total = set(), 0
    for p in model.parameters():
        t = p.to_local() if hasattr(p, "to_local") else p
        if not t.is_meta and t.untyped_storage().data_ptr() not in seen:
            seen.add(t.untyped_storage().data_ptr())
            total += t.untyped_storage().nbytes()
    return total


def rank_main(rank, init, out):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    result = {}
    for name, shape in SHAPES.items():
        dense = build_lm(name, 32, seed=3, device=torch.device("cpu"))
        shard_block, shard_root = fsdp_sharder("fsdp", torch.device("cpu"), 1, 2, False, 8)
        with torch.device("meta"):
            model = DecoderLM(shape, 32)  # what build_lm does with a seed, here by hand
        peaks = []

        def record(i, block):
            peaks.append(held(model))  # the moment before the block is sharded
            shard_block(i, block)

        materialise(model, torch.device("cpu"), 3, record)
        sharded = shard_root(model)
        same = all(
            torch.equal(p.full_tensor(), dict(dense.named_parameters())[n])
            for n, p in sharded.named_parameters()
        )
        result[name] = {"same": same, "peak": max(peaks), "held": held(sharded),
                        "dense": held(dense)}
    if rank == 0:
        out.put(result)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = "file://" + tempfile.mktemp()
    procs = [ctx.Process(target=rank_main, args=(r, init, q)) for r in range(2)]
    [p.start() for p in procs]
    res = q.get(timeout=120)
    [p.join() for p in procs]
    print(json.dumps(res))
"""


def test_fsdp_builds_each_block_sharded_with_the_dense_weights(framework_python, tmp_path):
    """Under an FSDP mode the build creates one block at a time and shards it at once
    (``build_lm``'s ``shard_block``; docs/memory.md#the-build): on 2 CPU ranks, 8 blocks, the
    most a rank holds while building is the embeddings, one whole block and the shards of the
    blocks before it (not the whole float32 model), and every weight equals the dense build's
    of the same seed."""
    from ddlbench.workloads.vocabulary import TransformerShape, transformer_params

    script = tmp_path / "sharded_build.py"
    script.write_text(SHARDED_BUILD)
    got = _run(
        framework_python, f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    for name, style in (("t-gpt2", "gpt2"), ("t-llama", "llama")):
        r = got[name]
        assert r["same"], name
        shape = (TransformerShape("gpt2", 8, 128, 4, 4, 512, 1000, 64, "test") if style == "gpt2"
                 else TransformerShape("llama", 8, 128, 4, 2, 352, 1000, 0, "test"))  # fmt: skip
        counts = transformer_params(shape)
        block = (
            (counts["blocks"] - 2 * 128) // 8 if style == "gpt2" else (counts["blocks"] - 128) // 8
        )
        assert r["dense"] == 4 * counts["total"]
        first = 128 * (1000 + shape.positions)  # the token (and position) tables
        # before the last block is sharded: the tables, one block, 7 halves of a block (the
        # final norm and llama's untied output projection come after the blocks)
        want = 4 * (first + block + 7 * block / 2)
        assert r["peak"] == pytest.approx(want, rel=0.02), (name, r, want)
        assert r["peak"] < 0.8 * r["dense"]
