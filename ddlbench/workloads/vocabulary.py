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

from typing import Dict, Optional, Tuple

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
