"""Training FLOPs per token of the transformer language models, under the conventions in use
(docs/mfu.md#language-models). Standard library only, Python 3.8 syntax.

``N`` below is the parameters that take part in a matrix multiply: every parameter except the
input lookup tables (the token table when untied, the learned position table). The output
projection is counted (tied to the token table in gpt2 style, it is counted once, as the
matmul). Norm weights and biases are in ``N`` too (under 0.1 % of it), as the published
formulas count them.

- ``palm``: ``6 N + 12 L d S`` (PaLM, Chowdhery et al. 2022, appendix B; nanoGPT's
  ``estimate_mfu``; torchtitan's ``get_num_flop_per_token``): the attention scores and their
  product with the values counted in full, although a causal mask makes half of them zero.
- ``megatron``: ``6 N + 6 L d S``: the causal attention halved (Megatron-LM's
  ``num_floating_point_operations`` since 2025; FlashAttention's benchmarks).
- ``hfu``: the hardware FLOPs actually executed, counting the forward recomputation of
  activation checkpointing (LLM Foundry's HFU, its ``4 x`` forward with full recomputation):
  ``palm`` plus ``2 N + 4 L d S`` (full) or ``4 L d S`` (selective: the attention core only).
"""

from __future__ import annotations

from typing import Dict

from .vocabulary import TransformerShape, transformer_params

CONVENTIONS = ("palm", "megatron", "hfu")


def matmul_params(shape: TransformerShape) -> int:
    """``N``: all parameters but the input lookup tables (see the module docstring)."""
    counts = transformer_params(shape)
    lookup = shape.positions * shape.d_model
    if shape.style == "llama":
        lookup += shape.vocab * shape.d_model  # untied token table
    return counts["total"] - lookup


def flops_per_token(
    shape: TransformerShape, seq_len: int, recompute: str = "none"
) -> Dict[str, int]:
    """Training FLOPs per token under each convention (forward + backward)."""
    n = matmul_params(shape)
    attn = 12 * shape.layers * shape.d_model * seq_len  # QK^T and AV, forward x 3, in full
    palm = 6 * n + attn
    extra = 0
    if recompute == "full":
        extra = 2 * n + attn // 3
    elif recompute == "selective":
        extra = attn // 3
    return {"palm": palm, "megatron": 6 * n + attn // 2, "hfu": palm + extra}
