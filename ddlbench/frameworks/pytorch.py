"""PyTorch DistributedDataParallel, one task per GPU under srun."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from ddlbench.frameworks import transports
from ddlbench.frameworks.base import FrameworkOptions, Launcher
from ddlbench.workloads.vocabulary import MODES, TORCH_BACKENDS, torch_backend

CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class PyTorchOptions(FrameworkOptions):
    #: process-group backend; default nccl on GPU, gloo on CPU
    backend: Optional[Literal[TORCH_BACKENDS]] = None  # type: ignore[valid-type]
    #: DDP gradient bucket size in MiB (DDP's default: 25)
    bucket_cap_mb: Optional[int] = Field(default=None, ge=1)
    #: time the exposed communication with a DDP comm hook (default: true)
    comm_timing: Optional[bool] = None
    #: wrap the model in DDP even with one rank, to measure DDP's own overhead
    ddp_single_rank: Optional[bool] = None
    #: torch.compile mode when the spec's ``compile`` is on (default: ``default``)
    compile_mode: Optional[CompileMode] = None


def _backend(opts: PyTorchOptions, device: str) -> str:
    return torch_backend(opts.backend, device)


def _transport(transport: str, opts: PyTorchOptions, device: str) -> transports.TransportSetting:
    """NCCL's IB or socket transport; MPI's TCP layers; Gloo is TCP only."""
    backend = _backend(opts, device)
    if backend == "nccl":
        return transports.nccl(transport)
    if backend == "mpi":
        return transports.TransportSetting(env=transports.mpi_env(transport))
    return transports.tcp_only(
        transport, f"{transports.GLOO_RDMA}; use backend nccl on a GPU profile"
    )


LAUNCHER = Launcher(
    name="pytorch",
    options=PyTorchOptions,
    workload=lambda mode, opts: "allreduce_torch" if mode == "allreduce" else "pytorch",
    modes=MODES,
    summary="PyTorch DDP: srun, one task per GPU, MASTER_ADDR/PORT from the job",
    backend=_backend,
    uses_mpi=lambda opts: opts.backend == "mpi",
    imports=lambda opts: ("torch",),
    transport=_transport,
    device_problem=lambda opts, device: (
        ("backend", "backend nccl needs GPUs", "use backend: gloo (the default on the CPU)")
        if device == "cpu" and opts.backend == "nccl"
        else None
    ),
)
