"""MXNet Gluon with a parameter-server kvstore: scheduler, servers and workers."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from ddlbench.frameworks.base import FrameworkOptions, Launcher


class MXNetOptions(FrameworkOptions):
    #: synchronous kvstore; dist_device_sync aggregates on the GPU
    kvstore: Literal["dist_sync", "dist_device_sync"] = "dist_sync"
    #: number of parameter servers; default one per node
    servers: Optional[int] = Field(default=None, ge=1)


def _template_vars(opts: MXNetOptions, run) -> dict:
    servers = opts.servers or run.nodes
    return {"servers": servers, "server_nodes": min(servers, run.nodes)}


LAUNCHER = Launcher(
    name="mxnet",
    options=MXNetOptions,
    workload=lambda mode, opts: "mxnet",
    summary="MXNet Gluon, kvstore dist_sync: scheduler, servers and workers as three srun steps",
    template_vars=_template_vars,
    backend=lambda opts, device: opts.kvstore,
    imports=lambda opts: ("mxnet",),
)
