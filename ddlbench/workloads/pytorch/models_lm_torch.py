"""Decoder-only transformer language models in plain PyTorch, built from a
:class:`~ddlbench.workloads.vocabulary.TransformerShape` (docs/workloads.md#transformers).

Two styles, as the shape says:

* ``gpt2``: learned position table, pre-norm LayerNorm (weight and bias), biases on every
  linear layer, GELU MLP (tanh approximation, as GPT-2), the output projection tied to the
  token table.
* ``llama``: rotary position embedding (RoPE, base 500,000 as Llama 3), RMSNorm (weight only),
  no biases, SwiGLU MLP, grouped-query attention (``kv_heads`` key/value heads shared by
  ``heads / kv_heads`` query heads each), untied output projection.

Attention is causal ``scaled_dot_product_attention``. ``param_count`` of a built model equals
``vocabulary.transformer_params(shape)["total"]`` (tied weights counted once).

Activation checkpointing (``recompute``): ``full`` keeps only each block's input and
recomputes the block in backward; ``selective`` recomputes the attention core only (the
scores, softmax and their product with the values: Korthikanti et al. 2022, section 5). With
the fused attention kernels, which keep no scores, that frees little: on CUDA nothing was
measured (the output projection keeps the core's output alive), docs/memory.md.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..vocabulary import ACTIVATION_CHECKPOINTING as RECOMPUTE_MODES
from ..vocabulary import TRANSFORMER_SHAPES, TransformerShape

#: RoPE base frequency (Llama 3: 500,000)
ROPE_THETA = 500000.0
#: standard deviation of the weight initialisation (GPT-2)
INIT_STD = 0.02


class RMSNorm(nn.Module):
    """Root-mean-square normalisation with a learned gain (Zhang and Sennrich 2019)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rope_tables(seq_len: int, head_dim: int, theta: float = ROPE_THETA) -> torch.Tensor:
    """``(2, seq_len, head_dim / 2)``: cos and sin of every position's rotation angles."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv)
    return torch.stack((angles.cos(), angles.sin())).float()


def apply_rope(x: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``(batch, heads, seq, head_dim)`` pairwise (even, odd) by the tables."""
    seq = x.shape[-2]
    cos, sin = tables[0, :seq].to(x.dtype), tables[1, :seq].to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    """Causal self-attention with ``kv_heads`` key/value heads (grouped-query when fewer
    than ``heads``)."""

    def __init__(self, shape: TransformerShape, rope: Optional[torch.Tensor]) -> None:
        super().__init__()
        d, self.heads, self.kv_heads = shape.d_model, shape.heads, shape.kv_heads
        self.head_dim = d // shape.heads
        bias = shape.style == "gpt2"
        kv = self.kv_heads * self.head_dim
        self.qkv = nn.Linear(d, d + 2 * kv, bias=bias)
        self.out = nn.Linear(d, d, bias=bias)
        self.rope: Optional[torch.Tensor]
        self.register_buffer("rope", rope, persistent=False)
        self.selective = False

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        kv = self.kv_heads * self.head_dim
        q, k, v = self.qkv(x).split((d, kv, kv), dim=-1)
        q = q.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.rope is not None:
            q, k = apply_rope(q, self.rope), apply_rope(k, self.rope)
        if self.selective and torch.is_grad_enabled():
            y = checkpoint(self.core, q, k, v, use_reentrant=False)
        else:
            y = self.core(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    """GPT-2's GELU MLP, or Llama's SwiGLU (``down(silu(gate(x)) * up(x))``)."""

    def __init__(self, shape: TransformerShape) -> None:
        super().__init__()
        d, f = shape.d_model, shape.ffn
        self.swiglu = shape.style == "llama"
        bias = not self.swiglu
        self.up = nn.Linear(d, f, bias=bias)
        self.down = nn.Linear(f, d, bias=bias)
        self.gate = nn.Linear(d, f, bias=False) if self.swiglu else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is not None:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.down(F.gelu(self.up(x), approximate="tanh"))


def _norm(shape: TransformerShape) -> nn.Module:
    return nn.LayerNorm(shape.d_model) if shape.style == "gpt2" else RMSNorm(shape.d_model)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, shape: TransformerShape, rope: Optional[torch.Tensor]) -> None:
        super().__init__()
        self.norm1 = _norm(shape)
        self.attn = Attention(shape, rope)
        self.norm2 = _norm(shape)
        self.mlp = MLP(shape)
        self.full = False

    def body(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.full and torch.is_grad_enabled():
            return checkpoint(self.body, x, use_reentrant=False)
        return self.body(x)


class DecoderLM(nn.Module):
    """Token ids ``(batch, seq)`` -> logits ``(batch, seq, vocab)``."""

    def __init__(self, shape: TransformerShape, seq_len: int) -> None:
        super().__init__()
        if shape.style not in ("gpt2", "llama"):
            raise ValueError(f"unknown transformer style {shape.style!r}")
        if shape.style == "gpt2" and seq_len > shape.positions:
            raise ValueError(
                f"seq_len {seq_len} exceeds the model's {shape.positions} learned positions"
            )
        self.shape, self.seq_len = shape, seq_len
        d = shape.d_model
        self.tokens = nn.Embedding(shape.vocab, d)
        self.positions = nn.Embedding(shape.positions, d) if shape.style == "gpt2" else None
        rope = rope_tables(seq_len, d // shape.heads) if shape.style == "llama" else None
        self.blocks = nn.ModuleList(Block(shape, rope) for _ in range(shape.layers))
        self.norm = _norm(shape)
        self.head = nn.Linear(d, shape.vocab, bias=False)
        if shape.style == "gpt2":
            self.head.weight = self.tokens.weight  # tied
        self._init_weights()

    def _init_weights(self) -> None:
        for name, p in self.named_parameters():
            init_parameter(name, p, self.shape.layers)

    def set_recompute(self, mode: str) -> None:
        """Activation checkpointing: ``none``, ``selective`` (attention core) or ``full``."""
        if mode not in RECOMPUTE_MODES:
            raise ValueError(f"activation_checkpointing {mode!r} is not one of {RECOMPUTE_MODES}")
        for block in self.blocks:
            block.full = mode == "full"
            block.attn.selective = mode == "selective"

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids)
        if self.positions is not None:
            x = x + self.positions(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def lm_shape(name: str) -> TransformerShape:
    if name not in TRANSFORMER_SHAPES:
        known = ", ".join(TRANSFORMER_SHAPES)
        raise ValueError(f"unknown transformer model {name!r}; known: {known}")
    return TRANSFORMER_SHAPES[name]


def init_parameter(name: str, p: torch.Tensor, layers: int) -> None:
    """Normal(0, 0.02) weights, zero biases, unit norm gains; the residual projections
    (attention output, MLP down) scaled by 1/sqrt(2 x layers) as GPT-2."""
    if p.dim() < 2:
        nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
    elif name.endswith(("attn.out.weight", "mlp.down.weight")):
        nn.init.normal_(p, 0.0, INIT_STD / math.sqrt(2 * layers))
    else:
        nn.init.normal_(p, 0.0, INIT_STD)


#: ``shard_block(index, block)``: shards a block once its weights exist (FSDP2's
#: ``fully_shard``), so that its whole float32 weights are freed before the next is created
ShardBlock = Callable[[int, nn.Module], None]


def build_lm(
    name: str,
    seq_len: int,
    seed: Optional[int] = None,
    device: Optional[torch.device] = None,
    shard_block: Optional[ShardBlock] = None,
) -> DecoderLM:
    """The named model. With ``seed`` it is built on the meta device and its weights created
    and initialised on ``device`` (default the CPU) where it will train, one top-level module
    or block at a time, from the seed alone: the same on every rank and under every mode (built
    on the CPU and moved, mpt-1b took 19-26 s of start-up on a GPU rank's one CPU core).
    ``shard_block`` shards each block as soon as it is initialised: a rank then holds the
    embeddings, one whole block and the shards so far, never the whole float32 model
    (docs/memory.md#the-build). Without ``seed``: built under torch's current default device."""
    shape = lm_shape(name)
    if seed is None:
        with torch.device(device) if device is not None else contextlib.nullcontext():
            return DecoderLM(shape, seq_len)
    with torch.device("meta"):
        model = DecoderLM(shape, seq_len)
    materialise(model, device or torch.device("cpu"), seed, shard_block)
    return model


def _init_named(model: DecoderLM, order: List[str], prefix: str) -> None:
    for name in order:
        if name.startswith(prefix):
            init_parameter(name, model.get_parameter(name), model.shape.layers)


def materialise(
    model: DecoderLM, device: torch.device, seed: int, shard_block: Optional[ShardBlock] = None
) -> None:
    """Create the weights of a model built on the meta device on ``device`` and initialise them
    in ``named_parameters`` order from ``seed`` (so the values do not depend on
    ``shard_block``), each block shard_block'ed as soon as it is initialised."""
    order = [name for name, _ in model.named_parameters()]
    shape = model.shape
    rope = None
    if shape.style == "llama":
        rope = rope_tables(model.seq_len, shape.d_model // shape.heads).to(device)
    torch.manual_seed(seed)
    for child_name, child in model.named_children():
        if child_name == "blocks":
            for i, block in enumerate(child):  # type: ignore[arg-type]
                block.to_empty(device=device)
                block.attn.rope = rope
                _init_named(model, order, f"blocks.{i}.")
                if shard_block is not None:
                    shard_block(i, block)
        elif child_name == "head" and shape.style == "gpt2":
            model.head.weight = model.tokens.weight  # tied: created with the token table
        else:
            child.to_empty(device=device)
            _init_named(model, order, f"{child_name}.")


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy, computed in float32."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def split_batch(batch: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(batch, seq + 1)`` token windows -> inputs and next-token targets."""
    return batch[:, :-1], batch[:, 1:]
