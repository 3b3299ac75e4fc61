"""ddlbench's vocabulary: the allowed values of the words a run is described with, defined once.

Precisions, layouts, modes, devices, communication backends and model shapes, their defaults,
and the two rules derived from them: which precision runs when the one asked for is not
available (:func:`precision_fallback`) and which process-group backend PyTorch uses when the
spec names none (:func:`torch_backend`).

Where it lives, and why: the workloads need these values on the compute nodes, where the only
ddlbench code is the campaign's frozen ``pkg/`` copy, which holds ``ddlbench/__init__.py`` and
``ddlbench/workloads/`` (``ddlbench.render.campaign``). So the module lives in the workloads
package, like ``ddlbench.workloads.flops``, and the login side (spec models, framework options,
device peaks, collector) imports it from here. The layering stays one-way: this module imports
nothing but the standard library (no framework, no numpy, no other ddlbench module), is Python
3.8 syntax, and importing it does not import ``ddlbench.workloads.common``. The JSON schema of
the rank log cannot import it; ``tests/workloads/test_vocabulary.py`` checks the schema's
enumerations against it.

What each precision means: docs/spec.md#performance-knobs (the one page that describes them).
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

# ------------------------------------------------------------------ precisions

#: numeric precision: fp32 (TF32 off), tf32 (TF32 matmul/conv on), amp (fp16 autocast + loss
#: scaling), bf16 (bf16 autocast, no scaling); docs/spec.md#performance-knobs
PRECISIONS: Tuple[str, ...] = ("fp32", "tf32", "amp", "bf16")
DEFAULT_PRECISION = "fp32"

#: what MXNet 1.9 Gluon can train: no TF32 setting of its own, and its bfloat16 path is
#: oneDNN-CPU inference
MXNET_PRECISIONS: Tuple[str, ...] = ("fp32", "amp")

#: the message of the one CPU fallback every framework shares
AMP_CPU_MESSAGE = "precision amp is not supported on the CPU; running fp32"

# ------------------------------------------------------------------ layouts and knobs

#: memory layout of activations asked for: the framework's own (NCHW, TF: NHWC) or
#: channels-last (NHWC)
LAYOUTS: Tuple[str, ...] = ("default", "channels_last")
DEFAULT_LAYOUT = "default"
#: the physical layout a rank reports in its meta record
RAN_LAYOUTS: Tuple[str, ...] = ("NCHW", "NHWC")

#: the performance knobs a spec, a framework entry and a variant may set, with their defaults
KNOB_DEFAULTS: Dict[str, object] = {
    "precision": DEFAULT_PRECISION,
    "layout": DEFAULT_LAYOUT,
    "compile": False,
}
KNOBS: Tuple[str, ...] = tuple(KNOB_DEFAULTS)

# ------------------------------------------------------------------ modes and devices

#: the modes that train a model (the third, allreduce, sweeps the collective alone)
TRAINING_MODES: Tuple[str, ...] = ("throughput", "convergence")
MODES: Tuple[str, ...] = TRAINING_MODES + ("allreduce",)
#: the workload that runs a spec's own program (docs/your-own-workload.md), for any framework
OWN_WORKLOAD = "own_program"
#: each shipped workload's name (run.json's ``workload``, the tables' ``workload`` column) ->
#: its module under ``ddlbench.workloads`` (docs/architecture.md#the-workloads-folder). The
#: names stay as they were when the modules moved into per-framework folders, so that
#: campaigns and tables keep their values; a name not listed is the module
#: ``ddlbench.workloads.<name>`` itself.
WORKLOAD_MODULES: Dict[str, str] = {
    "pytorch": "pytorch.torch_main",
    "tensorflow": "tf.tf_main",
    "keras": "tf.keras_main",
    "mxnet": "mx.mxnet_main",
    "horovod_torch": "hvd.horovod_torch",
    "horovod_tf": "hvd.horovod_tf",
    "allreduce_torch": "comm.allreduce_torch",
    "allreduce_horovod": "comm.allreduce_horovod",
    OWN_WORKLOAD: "own.own_program",
}
DEFAULT_MODE = "throughput"
DEVICES: Tuple[str, ...] = ("cpu", "gpu")
DEFAULT_DEVICE = "cpu"

# ------------------------------------------------------------------ communication backends

#: PyTorch process-group backends
TORCH_BACKENDS: Tuple[str, ...] = ("nccl", "gloo", "mpi")
#: MultiWorkerMirroredStrategy's collective implementations (TensorFlow, Keras)
TF_COMMUNICATIONS: Tuple[str, ...] = ("ring", "nccl", "auto")
DEFAULT_TF_COMMUNICATION = "auto"
#: Horovod's controllers
HOROVOD_CONTROLLERS: Tuple[str, ...] = ("mpi", "gloo")
DEFAULT_HOROVOD_CONTROLLER = "gloo"
#: MXNet's synchronous kvstores
MXNET_KVSTORES: Tuple[str, ...] = ("dist_sync", "dist_device_sync")
DEFAULT_MXNET_KVSTORE = "dist_sync"
#: the transports a campaign can compare between nodes (``network.transport``,
#: docs/launching.md#transports): RDMA (InfiniBand or RoCE verbs) and TCP sockets
TRANSPORTS: Tuple[str, ...] = ("rdma", "tcp")

# ------------------------------------------------------------------ models

#: model: (image side, classes); lenet trains on 28x28 digits
MODEL_SHAPES: Dict[str, Tuple[int, int]] = {
    "resnet50": (224, 1000),
    "vgg16": (224, 1000),
    "vgg19": (224, 1000),
    "lenet": (28, 10),
}
MODELS: Tuple[str, ...] = tuple(MODEL_SHAPES)
#: the shape of a model this table does not know (an ImageNet-sized input)
OTHER_MODEL_SHAPE: Tuple[int, int] = (224, 1000)


def model_shape(model: str) -> Tuple[int, int]:
    """``(image side, classes)`` of a model."""
    return MODEL_SHAPES.get(model, OTHER_MODEL_SHAPE)


def model_channels(model: str) -> int:
    """Channels of a model's input images: 1 for lenet (grey digits), 3 for the others."""
    return 1 if model == "lenet" else 3


# ------------------------------------------------------------------ transformer shapes


class TransformerShape(NamedTuple):
    """The shape of a decoder-only transformer language model (docs/workloads.md#transformers).

    ``style``: ``gpt2`` (learned positions, LayerNorm and linear biases, GELU MLP of width
    ``ffn``, tied input/output embeddings) or ``llama`` (RoPE, RMSNorm, no biases, SwiGLU MLP
    of hidden width ``ffn``, untied embeddings). ``kv_heads`` below ``heads`` is grouped-query
    attention. ``positions``: the learned position table's length (gpt2 style; 0 for RoPE).
    ``source``: where the figures come from.
    """

    style: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    positions: int
    source: str


_GPT2 = "Radford et al. 2019, GPT-2, table 2; Hugging Face gpt2 config.json (n_ctx 1024)"
_MPT = (
    "mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml and "
    "scripts/train/benchmarking/README.md (vocab 50368, learned positions of 2048, biases); "
    "the benchmark's n_params reproduce exactly"
)
_LLAMA3 = "Llama Team 2024, The Llama 3 Herd of Models, table 3; Meta's params.json"

#: name: shape. ``gpt-tiny`` is ddlbench's own, small enough for two CPU ranks in CI.
TRANSFORMER_SHAPES: Dict[str, TransformerShape] = {
    "gpt-tiny": TransformerShape("gpt2", 2, 128, 4, 4, 512, 50257, 256, "ddlbench (for CI)"),
    "llama-tiny": TransformerShape(
        "llama", 2, 128, 4, 2, 352, 50257, 0, "ddlbench (for CI; GQA 4 heads over 2 kv heads)"
    ),
    "gpt2-124m": TransformerShape("gpt2", 12, 768, 12, 12, 3072, 50257, 1024, _GPT2),
    "gpt2-350m": TransformerShape("gpt2", 24, 1024, 16, 16, 4096, 50257, 1024, _GPT2),
    "gpt2-760m": TransformerShape("gpt2", 36, 1280, 20, 20, 5120, 50257, 1024, _GPT2),
    "gpt2-1.5b": TransformerShape("gpt2", 48, 1600, 25, 25, 6400, 50257, 1024, _GPT2),
    "mpt-125m": TransformerShape("gpt2", 12, 768, 12, 12, 3072, 50368, 2048, _MPT),
    "mpt-350m": TransformerShape("gpt2", 24, 1024, 16, 16, 4096, 50368, 2048, _MPT),
    "mpt-760m": TransformerShape("gpt2", 24, 1536, 12, 12, 6144, 50368, 2048, _MPT),
    "mpt-1b": TransformerShape("gpt2", 24, 2048, 16, 16, 8192, 50368, 2048, _MPT),
    "mpt-3b": TransformerShape("gpt2", 32, 2560, 20, 20, 10240, 50368, 2048, _MPT),
    "mpt-7b": TransformerShape("gpt2", 32, 4096, 32, 32, 16384, 50368, 2048, _MPT),
    "mpt-13b": TransformerShape("gpt2", 40, 5120, 40, 40, 20480, 50368, 2048, _MPT),
    "mpt-30b": TransformerShape("gpt2", 48, 7168, 56, 56, 28672, 50368, 2048, _MPT),
    "mpt-70b": TransformerShape("gpt2", 80, 8192, 64, 64, 32768, 50368, 2048, _MPT),
    "llama3-8b": TransformerShape("llama", 32, 4096, 32, 8, 14336, 128256, 0, _LLAMA3),
    "llama3-70b": TransformerShape("llama", 80, 8192, 64, 8, 28672, 128256, 0, _LLAMA3),
}
TRANSFORMER_MODELS: Tuple[str, ...] = tuple(TRANSFORMER_SHAPES)


def transformer_params(shape: TransformerShape) -> Dict[str, int]:
    """Parameter counts of a shape: ``embedding`` (token table, plus the position table for
    gpt2 style), ``output`` (the untied output projection; 0 when tied), ``blocks`` (every
    layer's attention, MLP and norms, plus the final norm) and ``total``."""
    d, hd = shape.d_model, shape.d_model // shape.heads
    kv = shape.kv_heads * hd
    attn = d * d + 2 * d * kv + d * d  # q, k, v, out
    if shape.style == "gpt2":
        mlp = 2 * d * shape.ffn
        biases = (d + 2 * kv) + d + shape.ffn + d  # qkv, out, up, down
        norms = 4 * d  # two LayerNorms with weight and bias
        final_norm = 2 * d
        embedding = shape.vocab * d + shape.positions * d
        output = 0
    else:
        mlp = 3 * d * shape.ffn  # gate, up, down (SwiGLU)
        biases = 0
        norms = 2 * d  # two RMSNorm weights
        final_norm = d
        embedding = shape.vocab * d
        output = shape.vocab * d
    blocks = shape.layers * (attn + mlp + biases + norms) + final_norm
    return {
        "embedding": embedding,
        "output": output,
        "blocks": blocks,
        "total": embedding + output + blocks,
    }


#: data parallelism of the language models (docs/workloads.md#parallel)
LM_PARALLEL_MODES: Tuple[str, ...] = ("ddp", "fsdp", "fsdp-grad-op", "hsdp", "zero1")
#: activation checkpointing of the language models: none, the attention core, every block
ACTIVATION_CHECKPOINTING: Tuple[str, ...] = ("none", "selective", "full")
#: the data kinds a language model trains on
LM_DATA_KINDS: Tuple[str, ...] = ("synthetic", "text")
#: sequence length when the spec names none (at most a gpt2-style model's position table)
DEFAULT_SEQ_LEN = 1024


def default_seq_len(shape: TransformerShape) -> int:
    """The sequence length of a run that names none."""
    return min(DEFAULT_SEQ_LEN, shape.positions) if shape.positions else DEFAULT_SEQ_LEN


# ------------------------------------------------------------------ the two rules


def torch_backend(asked: Optional[str], device: str) -> str:
    """The process-group backend a PyTorch run uses: the one asked for, else nccl on a GPU
    and gloo on the CPU. The planner applies it (run.json's ``backend``); the workload reads
    the result."""
    return asked or ("nccl" if device == "gpu" else "gloo")


def precision_fallback(
    asked: str,
    gpu: bool,
    tf32_ok: bool = False,
    bf16_ok: bool = False,
    trains: Tuple[str, ...] = PRECISIONS,
    framework: str = "",
) -> Tuple[str, Optional[str]]:
    """The precision that runs when ``asked`` is requested, and why it differs (else None).

    ``gpu``: the rank runs on a GPU; ``tf32_ok``/``bf16_ok``: that GPU has TF32 / bfloat16
    (compute capability 8.0 or newer); ``trains``: the precisions ``framework`` can train at all.

    1. A precision the framework has no training path for runs the nearest one it has: bf16
       runs amp on a GPU, anything else fp32.
    2. On the CPU, amp runs fp32 (fp16 with loss scaling is a GPU recipe) and tf32 runs fp32
       (TF32 is a tensor-core format); bf16 runs as asked.
    3. On a GPU, tf32 without TF32 runs fp32, and bf16 without bfloat16 runs amp.
    """
    if asked not in trains:
        got = "amp" if asked == "bf16" and gpu else "fp32"
        return got, f"{framework} has no {asked} training; running {got}"
    if asked == "amp" and not gpu:
        return "fp32", AMP_CPU_MESSAGE
    if asked == "tf32" and not (gpu and tf32_ok):
        where = "this GPU (compute capability below 8.0)" if gpu else "the CPU"
        return "fp32", f"precision tf32 is not available on {where}; running fp32"
    if asked == "bf16" and gpu and not bf16_ok:
        return "amp", "precision bf16 is not supported by this GPU; running amp (fp16 + scaling)"
    return asked, None


def workload_module(name: str) -> str:
    """The module ``python -m`` runs for the workload ``name`` (``WORKLOAD_MODULES``)."""
    return "ddlbench.workloads." + WORKLOAD_MODULES.get(name, name)
