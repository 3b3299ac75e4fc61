"""Peak memory per rank of a transformer language-model run, predicted before submitting
(docs/memory.md). Pure: standard library and the shapes of ``workloads/vocabulary.py``.

Derived from first principles, never fitted to a measurement:

* **Model states** as ddlbench's PyTorch workload holds them (``workloads/pytorch``): float32
  weights, float32 gradients and AdamW's two float32 moments, 4 + 4 + 8 bytes per parameter in
  every precision (DDP and ZeRO-1 compute under bf16 autocast; FSDP2's ``MixedPrecisionPolicy``
  keeps float32 sharded parameters, the master weights). ``zero2`` (``ddlbench predict`` only,
  not a workload mode) follows the ZeRO paper (Rajbhandari et al. 2020, section 3.1) and
  DeepSpeed's stage 2: with mixed precision 2 + 2 + 12 (bf16 weights and gradients, float32
  master weights and moments). Sharded over the group of each mode: ``ddp`` nothing, ``zero1``
  the optimizer state, ``zero2`` gradients and optimizer state, ``fsdp``/``fsdp-grad-op`` all
  three over every rank, ``hsdp`` all three over the ranks of a node.
  ZeRO-1 (``ZeroRedundancyOptimizer``) assigns whole tensors to ranks: the busiest rank
  holds at least the largest tensor's state (the vocab x d_model table).
* **Autocast's weight copies** (DDP, ZeRO-1 in bf16): a bf16 copy of every linear weight and
  the output head, cached for the forward pass and saved for backward, 2 bytes each.
* **Allocator and framework buffers**: DDP (and ZeRO-1, which runs DDP) copies the gradients
  into its own buckets (``gradient_as_bucket_view=False``, the default): one more gradient's
  worth. ZeRO-2: DeepSpeed's default reduce and all-gather buckets, 5e8 elements each. FSDP2
  keeps unsharded (gathered) parameters of the units in use: the root unit
  (embeddings, final norm, output head; not resharded after forward) and two blocks (the one
  computing, the one prefetched), and the root's unsharded gradient until the end of backward;
  under ``fsdp-grad-op`` every unit stays gathered from forward to backward.
* **Activations** saved for backward per token and layer, counted tensor by tensor for these
  models (Korthikanti et al. 2022, section 4.1, adapted: no dropout, an MLP of width ``ffn``,
  grouped-query key/value width, and attention kernels that keep no ``seq x seq`` scores, so
  the paper's ``5 a s / h`` term is absent): gpt2 style ``7 h + 2 kv + 2 ffn`` elements (norm
  inputs and outputs, the q/k/v projection, the attention output and its reshaped copy, the
  GELU's input and output), llama style ``10 h + 3 kv + 4 ffn`` (RMSNorm keeps its input and
  the normalised tensor, RoPE's rotated q and k, SwiGLU's gate, SiLU, up and product). Full
  checkpointing keeps each block's input (``h``) plus one block's activations while it is
  recomputed; selective recomputes the attention core and drops its output (``h``; so on
  the CPU: on CUDA the output projection's saved input is a view of it, and selective was
  measured to free nothing, docs/memory.md#checked-against-measurement). 2 bytes
  per element with mixed precision, 4 in fp32, plus what mixed precision keeps in float32
  (:func:`float32_extra_bytes`): RMSNorm's float32 copy of its input under bf16 weights (FSDP,
  ZeRO-2), and under autocast (DDP, ZeRO-1) the float32 residual stream that every norm and,
  with ``full`` checkpointing, every block saves.
* **Logits**: ``seq x micro-batch x vocab`` float32 values, three at once at the start of
  backward (the log-probabilities softmax saved, their gradient, the logits' gradient): 12
  bytes per element in every precision (the bf16 logits and their bf16 gradient are never
  alive beside all three).
* **Gradient accumulation** (``grad_accum`` > 1): the gradients of the earlier micro-batches
  stay through the later ones' backward (:func:`accumulated_bytes`): whole under DDP and
  ZeRO-1, sharded under FSDP2 (reduce-scattered every micro-batch) and ZeRO-2.

The peak is the largest of the start of backward (states but gradients, which are freed each
step and not yet produced unless accumulated, buffers, autocast's copies, activations, logits),
the optimizer step (states, gradients, DDP's and DeepSpeed's buckets, and AdamW's one
temporary per optimizer-state tensor, 4 bytes per parameter held; FSDP2 has resharded every
unit after backward, so its gathered buffers are gone) and the build (:func:`build_bytes`):
the whole float32 model under DDP and ZeRO-1; under the FSDP modes the tables, one block and
the shards of the others, since the workload shards each block as it creates it. Not for
``zero2``, DeepSpeed's, whose ``zero.Init`` can build sharded.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple, Union

from ddlbench.workloads.vocabulary import (
    LM_PARALLEL_MODES,
    TRANSFORMER_SHAPES,
    TransformerShape,
    transformer_params,
)

GIB = 1024**3
MIXED = ("bf16", "amp")
#: bytes per logit (token x vocabulary entry) at the loss's peak, the start of its backward:
#: the float32 log-probabilities softmax saved, their gradient and the logits' float32
#: gradient. In mixed precision the bf16 logits are freed after the float32 copy and their
#: bf16 gradient is made after the log-probabilities' is freed: 12 bytes too (measured on the
#: CPU with the resident set: 12.0 in float32 and in bf16; docs/memory.md)
LOGIT_BYTES = 12


def _shape(shape: Union[str, TransformerShape]) -> TransformerShape:
    return TRANSFORMER_SHAPES[shape] if isinstance(shape, str) else shape


def activation_elements(shape: TransformerShape, checkpointing: str) -> int:
    """Activation elements saved per token for the whole model (see the module docstring)."""
    h, f = shape.d_model, shape.ffn
    kv = shape.kv_heads * (h // shape.heads)
    if shape.style == "gpt2":
        layer, outside = 7 * h + 2 * kv + 2 * f, 2 * h  # + final norm's input and output
    else:
        layer, outside = 10 * h + 3 * kv + 4 * f, 3 * h
    if checkpointing == "full":
        return shape.layers * h + layer + outside
    if checkpointing == "selective":
        return shape.layers * (layer - h) + outside
    return shape.layers * layer + outside


#: the modes that compute under autocast with float32 weights (their residual stream is float32)
AUTOCAST_MODES = ("ddp", "zero1")


def float32_extra_bytes(
    shape: TransformerShape, checkpointing: str, precision: str, parallel: str
) -> int:
    """Bytes per token that mixed precision keeps in float32 beyond the 2 bytes per element
    :func:`activation_elements` counts. Under bf16 weights (FSDP's ``param_dtype``, ZeRO-2) the
    RMSNorm upcasts its input (``x.float()``, saved for backward): 2 more bytes per ``h`` and
    norm (llama style; LayerNorm keeps bf16). Under autocast (DDP, ZeRO-1) the residual stream
    is float32: every norm saves its float32 input (2 more bytes per ``h``), RMSNorm also its
    float32 normalised tensor (2 more), and ``full`` checkpointing keeps float32 block inputs.
    Counted with saved-tensor hooks on the models of ``models_lm_torch`` (docs/memory.md)."""
    if precision not in MIXED:
        return 0
    h, llama = shape.d_model, shape.style == "llama"
    norms = 3 if checkpointing == "full" else 2 * shape.layers + 1  # the blocks' and the final
    if parallel not in AUTOCAST_MODES:
        return 2 * h * norms if llama else 0
    extra = (4 if llama else 2) * h * norms
    if checkpointing == "full":
        extra += 2 * h * shape.layers  # each block's float32 input
    return extra


#: the modes predicted: the workload's, and ZeRO-2 (``ddlbench predict --parallel zero2``:
#: gradients and optimizer state sharded, parameters replicated; not a workload mode)
PREDICTED_MODES = tuple(LM_PARALLEL_MODES) + ("zero2",)

#: DeepSpeed ZeRO stage 2's default ``reduce_bucket_size`` and ``allgather_bucket_size``
#: (elements; DeepSpeed's configuration docs): one bucket of each, in the compute precision
DEEPSPEED_BUCKET_ELEMENTS = 500_000_000


def _groups(parallel: str, world_size: int, gpus_per_node: int) -> Dict[str, int]:
    """How many ranks share each state: parameters, gradients, optimizer."""
    if parallel not in PREDICTED_MODES:
        raise ValueError(f"parallel {parallel!r} is not one of {', '.join(PREDICTED_MODES)}")
    n = max(1, world_size)
    if parallel == "ddp":
        return {"p": 1, "g": 1, "o": 1}
    if parallel == "zero1":
        return {"p": 1, "g": 1, "o": n}
    if parallel == "zero2":
        return {"p": 1, "g": n, "o": n}
    if parallel == "hsdp":
        n = max(1, min(n, gpus_per_node))
    return {"p": n, "g": n, "o": n}


def state_bytes(parallel: str, precision: str) -> Tuple[int, int, int]:
    """Bytes per parameter of parameters, gradients and optimizer state. The workload keeps
    float32 weights and gradients in every precision (DDP and ZeRO-1 compute under bf16
    autocast; FSDP2's ``MixedPrecisionPolicy`` keeps float32 sharded parameters and reduces
    in float32), so Adam's state is its two float32 moments: 4 + 4 + 8. ZeRO-2 is not a
    workload mode: there the ZeRO paper's mixed-precision accounting, 2 + 2 + 12 (float32
    master weights and moments), as DeepSpeed's stage 2 does it."""
    if parallel == "zero2" and precision in MIXED:
        return 2, 2, 12
    return 4, 4, 8


def _optimizer_share(s: TransformerShape, parallel: str, psi: int, group: int) -> float:
    """Parameters whose optimizer state the busiest rank holds. FSDP splits every tensor
    evenly; ZeroRedundancyOptimizer assigns whole tensors (largest first, to the least loaded
    rank), so one rank holds at least the largest tensor, the vocab x d_model table."""
    share = psi / group
    if parallel == "zero1" and group > 1:
        share = max(share, float(s.vocab * s.d_model))
    return share


def cast_weights(shape: TransformerShape, parallel: str, precision: str) -> int:
    """Bytes of the bf16 copies autocast makes of the float32 weights (DDP and ZeRO-1 in
    mixed precision): every linear layer's weight and bias and the output head, cached until
    the forward pass ends and saved for backward; 0 where the weights are not cast so."""
    if precision not in MIXED or parallel not in ("ddp", "zero1"):
        return 0
    return 2 * (transformer_params(shape)["blocks"] + shape.vocab * shape.d_model)


def _buffers(
    shape: TransformerShape,
    parallel: str,
    world_size: int,
    p_bytes: int,
    c_bytes: int = 2,
    wrapped: bool = True,
) -> int:
    """DDP's gradient buckets, ZeRO-2's reduce and all-gather buckets, or FSDP's gathered
    parameters (``c_bytes`` each, the compute precision) and the root's float32 gradient."""
    counts = transformer_params(shape)
    total = counts["total"]
    if world_size <= 1 and not wrapped:  # one rank, no process group: no mode wraps it
        return 0
    if parallel in ("ddp", "zero1"):
        return 4 * total  # float32 gradients, copied into the buckets
    if parallel == "zero2":
        return 2 * p_bytes * min(total, DEEPSPEED_BUCKET_ELEMENTS)
    per_block = (counts["blocks"] - shape.d_model * (2 if shape.style == "gpt2" else 1)) // max(
        1, shape.layers
    )
    root = total - shape.layers * per_block
    gathered = total if parallel == "fsdp-grad-op" else root + 2 * per_block
    return c_bytes * gathered + 4 * root


def accumulated_bytes(parallel: str, psi: int, gradients: float, grad_accum: int) -> float:
    """Gradients that gradient accumulation keeps through the later micro-batches' forward and
    backward passes (0 with one micro-batch). DDP and ZeRO-1 (``no_sync``) sum into every
    parameter's float32 ``.grad``: 4 bytes per parameter. The FSDP2 modes reduce-scatter
    every micro-batch (the workload's ``gradient_sync``) and ZeRO-2 (DeepSpeed) reduces each
    into its partition: their sharded gradients."""
    if grad_accum <= 1:
        return 0.0
    if parallel in ("ddp", "zero1"):
        return 4.0 * psi
    return gradients


def build_bytes(s: TransformerShape, parallel: str, shard: int) -> float:
    """The most a rank holds while the workload builds the model (float32, 4 bytes per
    parameter): the whole model under DDP and ZeRO-1; under an FSDP mode the build shards each
    block as it creates it (``models_lm_torch.build_lm``), so the most is the token (and
    position) tables, one whole block and the shards of the blocks before it, or at the end
    the tables, the final norm, an untied output projection and every block's shard. None for
    ``zero2`` (DeepSpeed's, not the workload's)."""
    counts = transformer_params(s)
    if parallel == "zero2":
        return 0.0
    if parallel in ("ddp", "zero1"):
        return 4.0 * counts["total"]
    norm = (2 if s.style == "gpt2" else 1) * s.d_model
    block = (counts["blocks"] - norm) / s.layers
    last = counts["embedding"] + block + (s.layers - 1) * block / shard
    end = counts["embedding"] + counts["output"] + norm + s.layers * block / shard
    return 4.0 * max(last, end)


def predict_memory(
    shape: Union[str, TransformerShape],
    seq_len: int,
    micro_batch: int,
    precision: str,
    parallel: str,
    activation_checkpointing: str,
    world_size: int,
    gpus_per_node: int,
    one_rank_wrapped: bool = False,
    grad_accum: int = 1,
) -> Dict[str, float]:
    """Predicted bytes per rank: ``parameters``, ``gradients``, ``optimizer``, ``buffers``,
    ``cast_weights``, ``activations``, ``logits``, ``accumulated`` (the gradients that
    ``grad_accum`` micro-batches keep through backward), the three peaks (``backward_peak``,
    ``step_peak``, ``build_peak``) and ``total`` (the largest), and ``total_gib``."""
    s = _shape(shape)
    wrapped = world_size > 1 or one_rank_wrapped  # ddp_single_rank: a group of one
    if not wrapped and parallel in PREDICTED_MODES and parallel != "zero2":
        parallel = "ddp"  # one rank: the workload wraps no mode (docs/workloads.md#parallelism)
    psi = transformer_params(s)["total"]
    mixed = precision in MIXED
    p_bytes, g_bytes, o_bytes = state_bytes(parallel, precision)
    a_bytes = 2 if mixed else 4
    groups = _groups(parallel, world_size, gpus_per_node)
    held = _optimizer_share(s, parallel, psi, groups["o"])
    tokens = int(seq_len) * int(micro_batch)
    ckpt = activation_checkpointing
    per_token = a_bytes * activation_elements(s, ckpt)
    per_token += float32_extra_bytes(s, ckpt, precision, parallel)
    out: Dict[str, float] = {
        "parameters": p_bytes * psi / groups["p"],
        "gradients": g_bytes * psi / groups["g"],
        "optimizer": o_bytes * held,
        "buffers": float(_buffers(s, parallel, world_size, p_bytes, a_bytes, wrapped)),
        "cast_weights": float(cast_weights(s, parallel, precision)),
        "activations": float(tokens * per_token),
        "logits": float(LOGIT_BYTES * tokens * s.vocab),
    }
    out["accumulated"] = accumulated_bytes(parallel, psi, out["gradients"], int(grad_accum))
    states = out["parameters"] + out["optimizer"] + out["buffers"]
    out["backward_peak"] = (
        states + out["accumulated"] + out["cast_weights"] + out["activations"] + out["logits"]
    )
    # FSDP2 reshards every unit after backward and has reduce-scattered the root's gradient:
    # its gathered buffers are gone at the step; DDP's and DeepSpeed's buckets stay allocated
    kept = out["buffers"] if parallel in ("ddp", "zero1", "zero2") else 0.0
    step_states = out["parameters"] + out["optimizer"] + kept
    out["step_peak"] = step_states + out["gradients"] + 4 * held  # AdamW's temporary
    out["build_peak"] = build_bytes(s, parallel, groups["p"])
    out["total"] = max(out["backward_peak"], out["step_peak"], out["build_peak"])
    out["total_gib"] = out["total"] / GIB
    return out


def _changes(
    parallel: str,
    checkpointing: str,
    seq_len: int,
    micro_batch: int,
    world_size: int,
    grad_accum: int = 1,
) -> List[Tuple[str, Dict[str, Any]]]:
    """The single changes to a run that can lower its memory, worded for the spec."""
    out: List[Tuple[str, Dict[str, Any]]] = []
    if parallel in ("ddp", "zero1", "zero2"):
        out.append(("parallel: fsdp", {"parallel": "fsdp"}))
    elif parallel == "fsdp-grad-op":
        out.append(("parallel: fsdp (reshards after forward)", {"parallel": "fsdp"}))
    elif parallel == "hsdp":
        out.append((f"parallel: fsdp (shards over all {world_size} ranks)", {"parallel": "fsdp"}))
    if checkpointing != "full":
        out.append(("activation_checkpointing: full", {"activation_checkpointing": "full"}))
    if micro_batch > 1:
        half, accum = micro_batch // 2, 2 * max(1, grad_accum)
        out.append(
            (
                f"micro-batch {half} (grad_accum x2)",
                {"micro_batch": half, "grad_accum": accum},
            )
        )
    if seq_len > 1:
        out.append((f"seq_len {seq_len // 2}", {"seq_len": seq_len // 2}))
    out.append((f"{2 * world_size} ranks", {"world_size": 2 * world_size}))
    return out


def memory_fixes(
    shape: Union[str, TransformerShape],
    seq_len: int,
    micro_batch: int,
    precision: str,
    parallel: str,
    activation_checkpointing: str,
    world_size: int,
    gpus_per_node: int,
    one_rank_wrapped: bool = False,
    grad_accum: int = 1,
) -> List[Tuple[str, float]]:
    """``(change, predicted bytes per rank with it)`` for each single change to the run that
    lowers its prediction, lowest first; never the run's own mode or checkpointing."""
    run: Dict[str, Any] = dict(
        shape=shape,
        seq_len=seq_len,
        micro_batch=micro_batch,
        precision=precision,
        parallel=parallel,
        activation_checkpointing=activation_checkpointing,
        world_size=world_size,
        gpus_per_node=gpus_per_node,
        one_rank_wrapped=one_rank_wrapped,
        grad_accum=grad_accum,
    )
    now = predict_memory(**run)["total"]
    out = []
    for text, change in _changes(
        parallel, activation_checkpointing, seq_len, micro_batch, world_size, grad_accum
    ):
        then = predict_memory(**dict(run, **change))["total"]
        if then < 0.99 * now:
            out.append((text, then))
    return sorted(out, key=lambda item: item[1])


def wraps_one_rank(options: Any) -> bool:
    """Whether a run's framework options (a mapping, or the runs table's JSON text) ask for a
    process group at one rank (``ddp_single_rank``), so that its mode wraps the model there."""
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except ValueError:
            return False
    return bool(isinstance(options, dict) and options.get("ddp_single_rank"))
