"""TensorFlow MultiWorkerMirroredStrategy with a custom training loop."""

from __future__ import annotations

from typing import Literal

from ddlbench.frameworks.base import FrameworkOptions, Launcher


class TensorFlowOptions(FrameworkOptions):
    #: collective implementation of MultiWorkerMirroredStrategy
    communication: Literal["ring", "nccl", "auto"] = "auto"


LAUNCHER = Launcher(
    name="tensorflow",
    options=TensorFlowOptions,
    workload=lambda mode, opts: "tensorflow",
    summary="TensorFlow MultiWorkerMirroredStrategy: srun, TF_CONFIG per task",
    backend=lambda opts, device: opts.communication,
    imports=lambda opts: ("tensorflow",),
)
