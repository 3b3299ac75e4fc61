"""What ``network.transport`` (``rdma`` or ``tcp``) sets for each framework's traffic between
nodes, or why a framework cannot run over it (docs/launching.md#transports).

Each launcher's ``transport`` callable answers with a :class:`TransportSetting`; the pieces
shared by several frameworks (NCCL's, MPI's) are here, each written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

#: the network NCCL reports ("Using network IB" / "Socket") for each transport
NCCL_NETS = {"rdma": "IB", "tcp": "Socket"}


@dataclass(frozen=True)
class TransportSetting:
    """The variables a run sets for its transport, the NCCL network it must then use
    (checked against NCCL's log, None where NCCL carries no inter-node traffic), or the
    reason it cannot run."""

    env: Dict[str, str] = field(default_factory=dict)
    nccl_net: Optional[str] = None
    problem: Optional[str] = None


def refused(reason: str) -> TransportSetting:
    return TransportSetting(problem=reason)


def nccl(transport: str) -> TransportSetting:
    """NCCL's InfiniBand/RoCE verbs transport, or its socket transport.

    ``NCCL_NET`` names the internal network exactly (``IB`` covers RoCE too: both are verbs),
    so a network plugin (``libnccl-net.so``) is not taken instead; ``NCCL_IB_DISABLE`` says
    the same to NCCL releases before ``NCCL_NET`` (2.10).
    """
    disable = "0" if transport == "rdma" else "1"
    env = {"NCCL_NET": NCCL_NETS[transport], "NCCL_IB_DISABLE": disable}
    return TransportSetting(env=env, nccl_net=NCCL_NETS[transport])


def mpi_env(transport: str) -> Dict[str, str]:
    """MPI's point-to-point layer over TCP: Open MPI's ob1 with its TCP byte transfer layer,
    UCX's TCP transport, libfabric's tcp provider (Intel MPI, MPICH). Over RDMA nothing is
    set: every MPI takes its verbs or UCX transport where one is active."""
    if transport == "rdma":
        return {}
    return {
        "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_btl": "self,vader,tcp",
        "UCX_TLS": "tcp,sm,self",
        "FI_PROVIDER": "tcp",
    }


def with_env(setting: TransportSetting, extra: Dict[str, str]) -> TransportSetting:
    return TransportSetting({**setting.env, **extra}, setting.nccl_net, setting.problem)


GLOO_RDMA = (
    "Gloo has only a TCP transport in the released PyTorch and Horovod builds (its ibverbs "
    "transport is not compiled in)"
)


#: what TensorFlow and Keras use on the CPU instead of ``communication: nccl``
NCCL_ON_CPU_FIX = "use communication: ring or auto (the default)"


def tf_collectives(transport: str, communication: str, device: str) -> TransportSetting:
    """MultiWorkerMirroredStrategy: NCCL on GPUs when asked for (``communication: nccl``, and
    ``auto`` may pick it); its ring collectives go over gRPC, which is TCP."""
    if device == "gpu" and (
        communication == "nccl" or transport == "tcp" and communication == "auto"
    ):
        return nccl(transport)
    if device == "gpu" and communication == "auto":
        why = "communication auto leaves the choice between NCCL and gRPC (TCP) to TensorFlow"
    else:
        why = f"TensorFlow's {communication} collectives on a {device} profile go over gRPC (TCP)"
    return tcp_only(
        transport,
        f"{why}, and TensorFlow 2 has no gRPC+verbs; use communication: nccl on a GPU profile",
    )


def tcp_only(transport: str, reason: str) -> TransportSetting:
    """A path that is TCP whatever is asked: nothing to set for ``tcp``, refused for ``rdma``."""
    return TransportSetting() if transport == "tcp" else refused(reason)
