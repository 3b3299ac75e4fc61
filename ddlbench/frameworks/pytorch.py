"""PyTorch DistributedDataParallel, one task per GPU under srun."""

from __future__ import annotations

from typing import Literal, Optional

from ddlbench.frameworks.base import FrameworkOptions, Launcher


class PyTorchOptions(FrameworkOptions):
    #: process-group backend; default nccl on GPU, gloo on CPU
    backend: Optional[Literal["nccl", "gloo", "mpi"]] = None


def _backend(opts: PyTorchOptions, device: str) -> str:
    return opts.backend or ("nccl" if device == "gpu" else "gloo")


LAUNCHER = Launcher(
    name="pytorch",
    options=PyTorchOptions,
    workload=lambda mode, opts: "allreduce_torch" if mode == "allreduce" else "pytorch",
    modes=("throughput", "convergence", "allreduce"),
    summary="PyTorch DDP: srun, one task per GPU, MASTER_ADDR/PORT from the job",
    backend=_backend,
)
