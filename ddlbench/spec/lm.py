"""The spec's keys for transformer language models and their rules (docs/spec.md#transformers).

``seq_len`` (one value or a list: a sweep axis, like ``batch_size``, whose values are then the
micro-batch per device), ``parallel``, ``activation_checkpointing`` and ``grad_accum`` (at the
top of the spec and in variants). :func:`lm_problems` says, with the key's position, what a
spec asks that cannot run: a transformer key with a CNN, a CNN key or data kind with a
transformer, a framework that has no transformer path.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ddlbench.spec.problems import check_sweep_values
from ddlbench.workloads.vocabulary import (
    ACTIVATION_CHECKPOINTING,
    LM_DATA_KINDS,
    LM_PARALLEL_MODES,
    TRANSFORMER_MODELS,
    TRANSFORMER_SHAPES,
    default_seq_len,
)

Parallel = Literal[LM_PARALLEL_MODES]  # type: ignore[valid-type]
Checkpointing = Literal[ACTIVATION_CHECKPOINTING]  # type: ignore[valid-type]
#: the keys a variant may set, as run.json's ``lm`` carries them
LM_KNOBS = ("parallel", "activation_checkpointing", "grad_accum")
LM_DEFAULTS: Dict[str, Any] = {
    "parallel": "ddp",
    "activation_checkpointing": "none",
    "grad_accum": 1,
}
#: frameworks that train the transformers (Horovod: wrapping PyTorch; Horovod, TensorFlow and
#: Keras data-parallel only), and why the others do not
LM_FRAMEWORKS = ("pytorch", "horovod", "tensorflow", "keras")
#: the frameworks that train data-parallel only (parallel ddp)
DATA_PARALLEL_ONLY = ("horovod", "tensorflow", "keras")
#: the TensorFlow-based frameworks: no activation checkpointing, no fp16 loss scaling
TF_FRAMEWORKS = ("tensorflow", "keras")
REFUSALS = {
    "mxnet": "MXNet (retired to the Apache attic in 2023) has no sharded data parallelism and "
    "ddlbench builds no transformer in it",
    "horovod": "Horovod trains the transformers wrapping pytorch only (wraps: pytorch); its "
    "TensorFlow transformer is not built yet",
}


class LMKeys(BaseModel):
    """The transformer knobs a spec and a variant may set (None: not set here)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: data parallelism: ddp, fsdp, fsdp-grad-op, hsdp, zero1 (docs/workloads.md#parallel)
    parallel: Optional[Parallel] = None
    #: none, selective (the attention core) or full (every block)
    activation_checkpointing: Optional[Checkpointing] = None
    #: micro-batches per optimizer step
    grad_accum: Optional[int] = Field(default=None, ge=1)


class LMSpecKeys(LMKeys):
    """The spec's own: the sequence lengths swept."""

    seq_len: Union[int, List[int], None] = None

    @field_validator("seq_len")
    @classmethod
    def _seq(cls, value: Union[int, List[int], None]) -> Union[int, List[int], None]:
        if value is not None:
            check_sweep_values(value, 2, "sequence lengths")
        return value


def is_transformer(model: str) -> bool:
    return model in TRANSFORMER_SHAPES


def seq_lens(spec: Any) -> List[Optional[int]]:
    """The sequence-length axis: the spec's lengths, the default one, or ``[None]`` (a CNN)."""
    if not is_transformer(spec.model):
        return [None]
    if spec.seq_len is None:
        return [default_seq_len(TRANSFORMER_SHAPES[spec.model])]
    return list(spec.seq_len) if isinstance(spec.seq_len, list) else [spec.seq_len]


def run_lm(spec: Any, variant: Any, seq_len: Optional[int]) -> Optional[Dict[str, Any]]:
    """run.json's ``lm``: the variant's knobs where it sets them, else the spec's, else the
    defaults (None for a CNN)."""
    if seq_len is None:
        return None
    out: Dict[str, Any] = {"seq_len": int(seq_len)}
    for key in LM_KNOBS:
        value = getattr(variant, key, None) if variant is not None else None
        if value is None:
            value = getattr(spec, key)
        out[key] = LM_DEFAULTS[key] if value is None else value
    return out


Loc = Tuple[Any, ...]


def _set_keys(spec: Any) -> List[Loc]:
    """Where the spec and its variants set a transformer key."""
    locs: List[Loc] = [(k,) for k in ("seq_len",) + LM_KNOBS if getattr(spec, k) is not None]
    for i, variant in enumerate(spec.variants):
        locs += [("variants", i, k) for k in LM_KNOBS if getattr(variant, k) is not None]
    return locs


def lm_problems(spec: Any) -> List[Tuple[Loc, str]]:
    """``(position, message)`` of everything a spec asks that a model cannot do."""
    models = ", ".join(TRANSFORMER_MODELS)
    if not is_transformer(spec.model):
        out = [
            (loc, f"'{loc[-1]}' applies to transformer models ({models})")
            for loc in _set_keys(spec)
        ]
        if spec.data.kind == "text":
            out.append((("data",), f"data kind 'text' is for transformer models ({models})"))
        if spec.optimizer.name == "adamw":
            out.append((("optimizer", "name"), f"adamw is for transformer models ({models})"))
        return out
    return _transformer_problems(spec)


def _knob_locs(spec: Any, key: str, allowed: Tuple[Any, ...]) -> List[Loc]:
    """Where the spec or a variant sets ``key`` to a value outside ``allowed``."""
    locs: List[Loc] = [(key,)] if getattr(spec, key) not in (None,) + allowed else []
    for i, variant in enumerate(spec.variants):
        if getattr(variant, key, None) not in (None,) + allowed:
            locs.append(("variants", i, key))
    return locs


def _data_parallel_problems(spec: Any, name: str) -> List[Tuple[Loc, str]]:
    """Horovod, TensorFlow and Keras average gradients (data parallelism): parallel ddp only;
    TensorFlow and Keras also without activation checkpointing and fp16 loss scaling."""
    label = {"horovod": "Horovod", "tensorflow": "TensorFlow", "keras": "Keras"}[name]
    why = f"{label} is data-parallel only: parallel ddp (use pytorch for fsdp, hsdp, zero1)"
    out = [(loc, why) for loc in _knob_locs(spec, "parallel", ("ddp",))]
    if name not in TF_FRAMEWORKS:
        return out
    why = f"activation checkpointing is not built for {label} (none; use pytorch)"
    out += [(loc, why) for loc in _knob_locs(spec, "activation_checkpointing", ("none",))]
    allowed = ("fp32", "tf32", "bf16")
    why = f"{label} trains the transformers in fp32, tf32 or bf16 (amp's loss scaling: not built)"
    out += [(loc, why) for loc in _knob_locs(spec, "precision", allowed)]
    return out


def _transformer_problems(spec: Any) -> List[Tuple[Loc, str]]:
    out: List[Tuple[Loc, str]] = []
    model = spec.model
    shape = TRANSFORMER_SHAPES[model]
    for i, entry in enumerate(spec.frameworks):
        wraps = getattr(entry.options, "wraps", "pytorch")
        if entry.name not in LM_FRAMEWORKS or wraps != "pytorch":
            why = REFUSALS.get(entry.name, "it has no transformer path")
            out.append(
                (("frameworks", i), f"{entry.name} cannot train {model}: {why}; use pytorch")
            )
        elif entry.name in DATA_PARALLEL_ONLY:
            out += _data_parallel_problems(spec, entry.name)
    if spec.data.kind not in LM_DATA_KINDS:
        kinds = " or ".join(LM_DATA_KINDS)
        out.append((("data",), f"{model} trains on data kind {kinds}, not '{spec.data.kind}'"))
    if spec.mode != "throughput":
        out.append((("mode",), f"{model} runs in mode 'throughput' only (convergence: not yet)"))
    if "layout" in spec.model_fields_set and spec.layout != "default":
        out.append((("layout",), f"'layout' is a CNN key (activation layout); {model} has none"))
    for i, variant in enumerate(spec.variants):
        if variant.layout not in (None, "default"):
            out.append((("variants", i, "layout"), f"'layout' is a CNN key; {model} has none"))
    if spec.optimizer.name == "sgd" and "name" in spec.optimizer.model_fields_set:
        out.append((("optimizer", "name"), f"{model} trains with adamw (did you mean adamw?)"))
    if shape.positions:
        for i, seq in enumerate(seq_lens(spec)):
            if seq is not None and seq > shape.positions:
                loc: Loc = ("seq_len", i) if isinstance(spec.seq_len, list) else ("seq_len",)
                out.append((loc, f"seq_len {seq} exceeds {model}'s {shape.positions} positions"))
    return out
