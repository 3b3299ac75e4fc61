"""Decoder-only transformer language models in Keras 3, built from a
:class:`~ddlbench.workloads.vocabulary.TransformerShape` (docs/workloads.md#transformers): the
``tensorflow`` and ``keras`` workloads' model, the same network as ``models_lm_torch``'s.

* ``gpt2``: learned position table, pre-norm LayerNorm (gamma and beta, epsilon 1e-5), biases
  on every linear layer, GELU MLP (tanh approximation), the output projection tied to the
  token table (a matmul with the table's transpose: one variable).
* ``llama``: rotary position embedding (RoPE, base 500,000, pairs (even, odd) as
  ``models_lm_torch``), RMSNorm (gain only), no biases, SwiGLU MLP, grouped-query attention,
  untied output projection.

Attention is ``keras.ops.dot_product_attention`` with ``is_causal=True`` (grouped-query: the
key/value heads repeated ``heads / kv_heads`` times, as Keras' TensorFlow backend does). The
number of trainable scalars equals ``vocabulary.transformer_params(shape)["total"]``.
Initialisation as ``models_lm_torch``: normal(0, 0.02), residual projections (attention output,
MLP down) normal(0, 0.02 / sqrt(2 x layers)), zero biases, unit gains; seeded from the run
seed (``keras.utils.set_random_seed``). Under the ``mixed_bfloat16`` policy the layers compute
in bfloat16 and keep float32 variables; the norms' statistics are computed in float32.

Imports Keras 3 at import time: import this module after ``KERAS_BACKEND`` is set (``lm_tf``).
No activation checkpointing (``spec/lm.py`` refuses it for these frameworks).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import keras
import numpy as np
from keras import ops

from ..vocabulary import TRANSFORMER_SHAPES, TransformerShape

#: RoPE base frequency (Llama 3: 500,000)
ROPE_THETA = 500000.0
#: standard deviation of the weight initialisation (GPT-2)
INIT_STD = 0.02
#: LayerNorm's and RMSNorm's epsilon (PyTorch's default for LayerNorm; Llama 3's RMSNorm)
NORM_EPS = 1e-5


def _normal(std: float) -> Any:
    return keras.initializers.RandomNormal(mean=0.0, stddev=std)


class RMSNorm(keras.layers.Layer):
    """Root-mean-square normalisation with a learned gain (Zhang and Sennrich 2019)."""

    def __init__(self, dim: int, eps: float = NORM_EPS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.eps = eps
        self.weight = self.add_weight(shape=(dim,), initializer="ones", name="weight")

    def call(self, x: Any) -> Any:
        xf = ops.cast(x, "float32")
        normed = xf * ops.rsqrt(ops.mean(ops.square(xf), axis=-1, keepdims=True) + self.eps)
        return ops.cast(normed, x.dtype) * self.weight


def rope_tables(seq_len: int, head_dim: int, theta: float = ROPE_THETA) -> np.ndarray:
    """``(2, seq_len, head_dim / 2)``: cos and sin of every position's rotation angles."""
    inv = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    angles = np.outer(np.arange(seq_len, dtype=np.float64), inv)
    return np.stack((np.cos(angles), np.sin(angles))).astype(np.float32)


def apply_rope(x: Any, tables: np.ndarray) -> Any:
    """Rotate ``x`` ``(batch, seq, heads, head_dim)`` pairwise (even, odd) by the tables."""
    seq, heads, head_dim = x.shape[1], x.shape[2], x.shape[3]
    cos = ops.cast(tables[0, :seq, None, :], x.dtype)  # (seq, 1, head_dim / 2)
    sin = ops.cast(tables[1, :seq, None, :], x.dtype)
    pairs = ops.reshape(x, (-1, seq, heads, head_dim // 2, 2))
    x1, x2 = pairs[..., 0], pairs[..., 1]
    rotated = ops.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), axis=-1)
    return ops.reshape(rotated, (-1, seq, heads, head_dim))


def _dense(units: int, bias: bool, std: float, name: str) -> Any:
    return keras.layers.Dense(
        units, use_bias=bias, kernel_initializer=_normal(std), bias_initializer="zeros", name=name
    )


def _norm(shape: TransformerShape, name: str) -> Any:
    if shape.style == "gpt2":
        return keras.layers.LayerNormalization(epsilon=NORM_EPS, name=name)
    return RMSNorm(shape.d_model, name=name)


class Block(keras.layers.Layer):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, shape: TransformerShape, rope: Optional[np.ndarray], **kwargs: Any):
        super().__init__(**kwargs)
        d, self.heads, self.kv_heads = shape.d_model, shape.heads, shape.kv_heads
        self.head_dim, self.rope = d // shape.heads, rope
        bias = shape.style == "gpt2"
        residual = INIT_STD / math.sqrt(2 * shape.layers)
        self.norm1, self.norm2 = _norm(shape, "norm1"), _norm(shape, "norm2")
        self.qkv = _dense(d + 2 * self.kv_heads * self.head_dim, bias, INIT_STD, "qkv")
        self.out = _dense(d, bias, residual, "out")
        self.up = _dense(shape.ffn, bias, INIT_STD, "up")
        self.down = _dense(d, bias, residual, "down")
        self.gate = _dense(shape.ffn, False, INIT_STD, "gate") if shape.style == "llama" else None

    def attention(self, x: Any) -> Any:
        seq, d = x.shape[1], x.shape[2]
        kv = self.kv_heads * self.head_dim
        qkv = self.qkv(x)
        q = ops.reshape(qkv[..., :d], (-1, seq, self.heads, self.head_dim))
        k = ops.reshape(qkv[..., d : d + kv], (-1, seq, self.kv_heads, self.head_dim))
        v = ops.reshape(qkv[..., d + kv :], (-1, seq, self.kv_heads, self.head_dim))
        if self.rope is not None:
            q, k = apply_rope(q, self.rope), apply_rope(k, self.rope)
        y = ops.dot_product_attention(q, k, v, is_causal=True)
        return self.out(ops.reshape(y, (-1, seq, d)))

    def mlp(self, x: Any) -> Any:
        if self.gate is not None:
            return self.down(ops.silu(self.gate(x)) * self.up(x))
        return self.down(ops.gelu(self.up(x), approximate=True))

    def call(self, x: Any) -> Any:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DecoderLM(keras.Model):
    """Token ids ``(batch, seq)`` -> logits ``(batch, seq, vocab)`` (the compute dtype)."""

    def __init__(self, shape: TransformerShape, seq_len: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if shape.style not in ("gpt2", "llama"):
            raise ValueError(f"unknown transformer style {shape.style!r}")
        if shape.style == "gpt2" and seq_len > shape.positions:
            raise ValueError(
                f"seq_len {seq_len} exceeds the model's {shape.positions} learned positions"
            )
        self.shape_, self.seq_len = shape, seq_len
        d = shape.d_model
        init = _normal(INIT_STD)
        self.tokens = keras.layers.Embedding(shape.vocab, d, embeddings_initializer=init)
        self.positions = None
        if shape.style == "gpt2":
            self.positions = keras.layers.Embedding(shape.positions, d, embeddings_initializer=init)
        rope = rope_tables(seq_len, d // shape.heads) if shape.style == "llama" else None
        self.blocks = [Block(shape, rope, name=f"block{i}") for i in range(shape.layers)]
        self.norm = _norm(shape, "norm")
        self.head = None if shape.style == "gpt2" else _dense(shape.vocab, False, INIT_STD, "head")

    def call(self, ids: Any) -> Any:
        x = self.tokens(ids)
        if self.positions is not None:
            x = x + self.positions(ops.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        if self.head is None:  # tied to the token table
            return ops.matmul(x, ops.transpose(ops.cast(self.tokens.embeddings, x.dtype)))
        return self.head(x)


def lm_shape(name: str) -> TransformerShape:
    if name not in TRANSFORMER_SHAPES:
        known = ", ".join(TRANSFORMER_SHAPES)
        raise ValueError(f"unknown transformer model {name!r}; known: {known}")
    return TRANSFORMER_SHAPES[name]


def build_lm(name: str, seq_len: int, seed: Optional[int] = None) -> DecoderLM:
    """The named model, built (its variables created) for ``seq_len`` tokens; with ``seed``
    the initialisation is the same on every rank."""
    shape = lm_shape(name)
    if seed is not None:
        keras.utils.set_random_seed(int(seed))
    model = DecoderLM(shape, seq_len, name=name.replace(".", "_"))
    model(np.zeros((1, seq_len), dtype=np.int32))
    return model


def param_count(model: Any) -> int:
    """Trainable scalars (the tied table once: it is one variable)."""
    return int(sum(int(np.prod(v.shape)) for v in model.trainable_variables))
