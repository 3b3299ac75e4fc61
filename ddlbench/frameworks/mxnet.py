"""MXNet Gluon with a parameter-server kvstore: scheduler, servers and workers."""

from __future__ import annotations

from typing import Any, Dict, Literal, Optional

from pydantic import Field

from ddlbench.frameworks.base import FrameworkOptions, Launcher
from ddlbench.frameworks.transports import tcp_only
from ddlbench.workloads.vocabulary import DEFAULT_MXNET_KVSTORE, MXNET_KVSTORES, MXNET_PRECISIONS


class MXNetOptions(FrameworkOptions):
    #: synchronous kvstore; dist_device_sync aggregates on the GPU
    kvstore: Literal[MXNET_KVSTORES] = DEFAULT_MXNET_KVSTORE  # type: ignore[valid-type]
    #: number of parameter servers; default one per node
    servers: Optional[int] = Field(default=None, ge=1)
    #: ``per-device`` (unset: one worker per GPU or CPU rank) or ``per-node``: one worker per
    #: node driving the node's devices as a list of contexts (docs/launching.md#mxnet)
    workers: Optional[Literal["per-device", "per-node"]] = None


def _template_vars(opts: MXNetOptions, run) -> dict:
    servers = opts.servers or run.nodes
    per_node = opts.workers == "per-node"
    return {
        "servers": servers,
        "server_nodes": min(servers, run.nodes),
        "per_node": per_node,
        # kvstore workers: one per node, or one per device
        "mxnet_workers": run.nodes if per_node else run.world_size,
        "worker_tasks": 1 if per_node else run.tasks_per_node,
    }


def knob_problem(knobs: Dict[str, Any], device: str, opts: MXNetOptions) -> Optional[str]:
    """What MXNet 1.9 Gluon cannot do (docs/spec.md#performance-knobs)."""
    precision = knobs.get("precision")
    if precision in MXNET_PRECISIONS:
        return None
    if precision == "tf32":
        return (
            "MXNet 1.9 has no TF32 setting of its own (ddlbench keeps its fp32 runs in fp32 with "
            "NVIDIA_TF32_OVERRIDE=0); use precision fp32 or amp for mxnet"
        )
    if precision == "bf16":
        return (
            "MXNet's AMP casts to float16 on the GPU only (its bfloat16 path is oneDNN-CPU "
            "inference); use precision amp (or fp32) for mxnet"
        )
    # layout channels_last on a CPU profile is not refused: MXNet runs NHWC through cuDNN only,
    # so the workload falls back to NCHW there and records the fallback (the shipped GPU specs
    # stay usable on a laptop)
    return None


#: why MXNet cannot be asked for RDMA
MXNET_RDMA = (
    "MXNet's kvstore talks through ps-lite's ZMQ van, which is TCP; ps-lite's RDMA van "
    "needs an MXNet built from source with it (USE_DIST_KVSTORE and ps-lite's USE_RDMA), "
    "which the released MXNet builds ddlbench runs are not"
)


LAUNCHER = Launcher(
    name="mxnet",
    options=MXNetOptions,
    workload=lambda mode, opts: "mxnet",
    summary="MXNet Gluon, kvstore dist_sync: scheduler, servers and workers as three srun steps",
    template_vars=_template_vars,
    backend=lambda opts, device: opts.kvstore,
    imports=lambda opts: ("mxnet",),
    knob_problem=knob_problem,
    transport=lambda transport, opts, device: tcp_only(transport, MXNET_RDMA),
)
