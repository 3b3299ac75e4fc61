"""Horovod with Gloo under ``srun`` (no ``horovodrun``): the rendezvous server and the
per-task environment.

``horovodrun --gloo`` starts an HTTP rendezvous server, gives it the host allocation
plan, and starts every process with ``HOROVOD_*`` variables. Under Slurm, the job script does
the first part with this module's server::

    python -m ddlbench.workloads.hvd.horovod_rendezvous \\
        --port "$DDLBENCH_PORT" --hosts "$DDLBENCH_ADDRS" --tasks-per-node N &

and every task calls :func:`setup_horovod_env` before ``import horovod``, which maps the
Slurm variables to Horovod's (variables already set are left alone):

====================================  ==================================================
``HOROVOD_RANK``, ``HOROVOD_SIZE``    ``SLURM_PROCID``, ``SLURM_NTASKS``
``HOROVOD_LOCAL_RANK``/``_SIZE``      ``SLURM_LOCALID``, tasks on this node
``HOROVOD_CROSS_RANK``/``_SIZE``      index of this node among the nodes that run a task
                                      with this local rank, and their number (node id
                                      and node count when all nodes run as many tasks)
``HOROVOD_HOSTNAME``                  ``node<SLURM_NODEID>``: the server's plan names the
                                      nodes the same way (emulated nodes may share an
                                      address, so neither names nor addresses are used)
``HOROVOD_GLOO_RENDEZVOUS_ADDR``      first address of ``DDLBENCH_ADDRS``
``HOROVOD_GLOO_RENDEZVOUS_PORT``      ``DDLBENCH_PORT``
``HOROVOD_GLOO_IFACE``                the interface holding this node's address in
                                      ``DDLBENCH_ADDRS`` (``lo`` for 127.0.0.1), if found
``HOROVOD_CONTROLLER``,               ``gloo``
``HOROVOD_CPU_OPERATIONS``
``HOROVOD_GLOO_TIMEOUT_SECONDS``      ``framework_options.timeout_s`` (default 300; Horovod's
                                      own default, 30 s, is shorter than the start-up skew
                                      of ranks importing a framework on a busy node)
====================================  ==================================================

With ``controller: mpi`` only ``HOROVOD_CONTROLLER=mpi`` is set; Horovod reads the ranks
from MPI (``srun --mpi=...``).

This module imports Horovod only in the server (``main``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional

from ..common.env import RankInfo, node_addresses, parse_tasks_per_node, port_base

SIOCGIFADDR = 0x8915


def host_id(node: int) -> str:
    """The name a node has in the rendezvous plan and in ``HOROVOD_HOSTNAME``."""
    return f"node{node}"


def iface_for_address(addr: str) -> Optional[str]:
    """The network interface that holds IPv4 address ``addr`` on this machine (Linux)."""
    try:
        wanted = socket.inet_aton(socket.gethostbyname(addr))
    except OSError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _index, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                res = fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)
            except OSError:
                continue
            if res[20:24] == wanted:
                return name
    return None


def horovod_env_from_slurm(
    environ: Mapping[str, str], controller: str = "gloo", timeout_s: int = 300
) -> Dict[str, str]:
    """The ``HOROVOD_*`` variables to add for this task (none already set is overridden)."""
    env = environ
    out: Dict[str, str] = {}

    def put(key: str, value: Optional[object]) -> None:
        if value is not None and key not in env:
            out[key] = str(value)

    put("HOROVOD_CONTROLLER", controller)
    if controller != "gloo":
        return out
    put("HOROVOD_CPU_OPERATIONS", "gloo")
    rank = int(env.get("SLURM_PROCID", "0"))
    size = int(env.get("SLURM_NTASKS", "1"))
    node = int(env.get("SLURM_NODEID", "0"))
    nnodes = int(env.get("SLURM_NNODES", "1"))
    local_rank = int(env.get("SLURM_LOCALID", "0"))
    counts = parse_tasks_per_node(
        env.get("SLURM_STEP_TASKS_PER_NODE")
        or env.get("SLURM_NTASKS_PER_NODE")
        or env.get("SLURM_TASKS_PER_NODE")
    )
    if len(counts) != nnodes:
        counts = [size // max(1, nnodes)] * nnodes
    put("HOROVOD_RANK", rank)
    put("HOROVOD_SIZE", size)
    put("HOROVOD_LOCAL_RANK", local_rank)
    put("HOROVOD_LOCAL_SIZE", counts[node] if node < len(counts) else 1)
    put("HOROVOD_CROSS_RANK", sum(1 for c in counts[:node] if c > local_rank))
    put("HOROVOD_CROSS_SIZE", sum(1 for c in counts if c > local_rank))
    put("HOROVOD_HOSTNAME", host_id(node))
    addrs = node_addresses(env)
    put("HOROVOD_GLOO_RENDEZVOUS_ADDR", addrs[0])
    put("HOROVOD_GLOO_RENDEZVOUS_PORT", port_base(env))
    put("HOROVOD_GLOO_TIMEOUT_SECONDS", timeout_s)
    if "HOROVOD_GLOO_IFACE" not in env:
        put("HOROVOD_GLOO_IFACE", iface_for_address(addrs[min(node, len(addrs) - 1)]))
    return out


def setup_horovod_env(cfg: Mapping[str, object]) -> str:
    """Export the Horovod variables for this task (before ``import horovod``); returns the
    controller (``gloo`` or ``mpi``) from ``framework_options.controller``."""
    opts = cfg.get("framework_options") or {}
    assert isinstance(opts, dict)
    controller = str(opts.get("controller") or os.environ.get("HOROVOD_CONTROLLER") or "gloo")
    if controller not in ("gloo", "mpi"):
        raise ValueError(f"unknown Horovod controller {controller!r} (gloo or mpi)")
    timeout = int(opts.get("timeout_s", 300))
    os.environ.update(horovod_env_from_slurm(os.environ, controller, timeout))
    if controller == "gloo" and os.environ.get("HOROVOD_SIZE", "1") != "1":
        wait_for_server(
            os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"],
            int(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"]),
            timeout,
        )
    return controller


def check_horovod_rank(hvd: Any, info: RankInfo) -> None:
    """After ``hvd.init()``: Horovod's rank and size must be Slurm's."""
    if hvd.rank() != info.rank or hvd.size() != info.world_size:
        raise RuntimeError(
            f"Horovod rank {hvd.rank()}/{hvd.size()} differs from Slurm's "
            f"{info.rank}/{info.world_size}"
        )


@contextlib.contextmanager
def horovod_session(hvd: Any, info: RankInfo) -> Iterator[None]:
    """``hvd.init()`` and :func:`check_horovod_rank`; ``hvd.shutdown()`` at the end, after a
    failure too."""
    hvd.init()
    try:
        check_horovod_rank(hvd, info)
        yield
    finally:
        hvd.shutdown()


def horovod_backend(hvd: Any, gpu: bool, controller: str) -> str:
    """The meta record's ``backend``: nccl on GPU when Horovod has it, else the controller."""
    return "nccl" if gpu and hvd.nccl_built() else controller


def horovod_compression(hvd: Any, cfg: Mapping[str, Any]) -> Any:
    """fp16 gradient compression with ``framework_options.fp16_allreduce``, else none."""
    opts: Mapping[str, Any] = cfg.get("framework_options") or {}
    return hvd.Compression.fp16 if opts.get("fp16_allreduce") else hvd.Compression.none


def wait_for_server(addr: str, port: int, timeout_s: float) -> None:
    """Wait until the rendezvous server accepts connections: Horovod itself gives up after
    three tries 0.5 s apart, and the job script starts the server and the ranks at the same time."""
    deadline = time.time() + timeout_s
    while True:
        try:
            with socket.create_connection((addr, port), timeout=2):
                return
        except OSError as exc:
            if time.time() > deadline:
                raise RuntimeError(
                    f"no Horovod rendezvous server at {addr}:{port} after {timeout_s:.0f} s"
                ) from exc
            time.sleep(0.2)


# -- the server ----------------------------------------------------------------------------
def start_server(port: int, nodes: int, tasks_per_node: int, bind: str = ""):
    """Horovod's rendezvous HTTP server on ``port`` with the plan of ``nodes`` x
    ``tasks_per_node`` slots (hosts ``node0``, ``node1``, ...); serves in a thread."""
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    hosts = ",".join(f"{host_id(i)}:{tasks_per_node}" for i in range(nodes))
    plan = get_host_assignments(parse_hosts(hosts), nodes * tasks_per_node)
    RendezvousHTTPServer.allow_reuse_address = True
    httpd = RendezvousHTTPServer((bind, port), RendezvousHandler, 0)
    httpd.init(plan)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    return httpd


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Horovod Gloo rendezvous server for srun jobs")
    parser.add_argument("--port", type=int, default=None, help="default: DDLBENCH_PORT")
    parser.add_argument("--hosts", default=None, help="node addresses, comma-separated")
    parser.add_argument("--nodes", type=int, default=None, help="default: number of --hosts")
    parser.add_argument("--tasks-per-node", type=int, required=True)
    parser.add_argument("--bind", default="", help="address to bind (default: all)")
    parser.add_argument("--timeout", type=float, default=0, help="exit after this many seconds")
    args = parser.parse_args(argv)
    port = args.port if args.port is not None else port_base()
    hosts = [h for h in (args.hosts or os.environ.get("DDLBENCH_ADDRS", "")).split(",") if h]
    nodes = args.nodes or len(hosts) or 1
    httpd = start_server(port, nodes, args.tasks_per_node, args.bind)
    print(
        f"ddlbench: Horovod rendezvous on port {port} for {nodes} node(s) x "
        f"{args.tasks_per_node} task(s)",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # Slurm's --signal=USR1 warning is for the ranks, which stop and record it
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    stop.wait(args.timeout or None)
    httpd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
