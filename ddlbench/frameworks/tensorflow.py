"""TensorFlow MultiWorkerMirroredStrategy with a custom training loop."""

from __future__ import annotations

from typing import Literal

from ddlbench.frameworks.base import FrameworkOptions, Launcher
from ddlbench.frameworks.transports import NCCL_ON_CPU_FIX, tf_collectives
from ddlbench.workloads.vocabulary import DEFAULT_TF_COMMUNICATION, TF_COMMUNICATIONS


class TensorFlowOptions(FrameworkOptions):
    #: collective implementation of MultiWorkerMirroredStrategy
    communication: Literal[TF_COMMUNICATIONS] = DEFAULT_TF_COMMUNICATION  # type: ignore[valid-type]


LAUNCHER = Launcher(
    name="tensorflow",
    options=TensorFlowOptions,
    workload=lambda mode, opts: "tensorflow",
    summary="TensorFlow MultiWorkerMirroredStrategy: srun, TF_CONFIG per task",
    backend=lambda opts, device: opts.communication,
    imports=lambda opts: ("tensorflow",),
    transport=lambda transport, opts, device: tf_collectives(transport, opts.communication, device),
    device_problem=lambda opts, device: (
        ("communication", "communication nccl needs GPUs", NCCL_ON_CPU_FIX)
        if device == "cpu" and opts.communication == "nccl"
        else None
    ),
)
