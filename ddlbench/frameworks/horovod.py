"""Horovod wrapping PyTorch or TensorFlow, with the MPI or the Gloo controller."""

from __future__ import annotations

from typing import Any, Dict, Literal, Optional

from ddlbench.frameworks import transports
from ddlbench.frameworks.base import FrameworkOptions, Launcher
from ddlbench.frameworks.pytorch import CompileMode
from ddlbench.workloads.vocabulary import DEFAULT_HOROVOD_CONTROLLER, HOROVOD_CONTROLLERS, MODES


class HorovodOptions(FrameworkOptions):
    #: framework Horovod wraps
    wraps: Literal["pytorch", "tensorflow"] = "pytorch"
    #: mpi: srun --mpi=<profile mpi> starts ranks as MPI processes;
    #: gloo: the job script runs Horovod's rendezvous server, srun starts the ranks
    controller: Literal[HOROVOD_CONTROLLERS] = DEFAULT_HOROVOD_CONTROLLER  # type: ignore[valid-type]
    #: compress gradients to fp16 for the allreduce (hvd.Compression.fp16)
    fp16_allreduce: Optional[bool] = None
    #: torch.compile mode when the spec's ``compile`` is on and Horovod wraps PyTorch
    compile_mode: Optional[CompileMode] = None

    def id_suffix(self) -> str:
        return "tf" if self.wraps == "tensorflow" else "torch"


def _workload(mode: str, opts: HorovodOptions) -> str:
    if mode == "allreduce":
        return "allreduce_horovod"
    return "horovod_tf" if opts.wraps == "tensorflow" else "horovod_torch"


def knob_problem(
    knobs: Dict[str, Any], device: str, opts: Optional[HorovodOptions]
) -> Optional[str]:
    if knobs.get("compile") and opts is not None and opts.wraps == "tensorflow":
        return (
            "Horovod's DistributedGradientTape is not compiled with XLA by ddlbench; "
            "set compile: false for horovod wrapping tensorflow"
        )
    return None


def _transport(transport: str, opts: HorovodOptions, device: str) -> transports.TransportSetting:
    """On GPUs the allreduce goes through NCCL (Horovod built with HOROVOD_GPU_OPERATIONS=NCCL),
    the MPI controller's messages through MPI; on CPUs the allreduce is the controller's own:
    MPI's, or Gloo's TCP."""
    mpi = transports.mpi_env(transport) if opts.controller == "mpi" else {}
    if device == "gpu":
        return transports.with_env(transports.nccl(transport), mpi)
    if opts.controller == "mpi":
        return transports.TransportSetting(env=mpi)
    return transports.tcp_only(
        transport, f"{transports.GLOO_RDMA}; use controller mpi, or a GPU profile (NCCL)"
    )


LAUNCHER = Launcher(
    name="horovod",
    options=HorovodOptions,
    workload=_workload,
    modes=MODES,
    summary="Horovod (PyTorch or TensorFlow): srun with MPI, or Gloo with a rendezvous server",
    backend=lambda opts, device: opts.controller,
    uses_mpi=lambda opts: opts.controller == "mpi",
    probe_options=({"wraps": "pytorch"}, {"wraps": "tensorflow"}),
    imports=lambda opts: (
        ("horovod.tensorflow",) if opts.wraps == "tensorflow" else ("horovod.torch",)
    ),
    knob_problem=knob_problem,
    transport=_transport,
)
