"""Free TCP ports for a job, chosen at job start below the ephemeral range (standard library only).

The job script runs this module as a one-task step on the first node, before the ranks
start, and exports what it prints::

    DDLBENCH_PORTS=$(srun --overlap --nodes=1 --ntasks=1 --nodelist="$DDLBENCH_FIRST_HOST" \\
        python -m ddlbench.workloads.node.ports --count N)

``--count N`` draws N distinct ports at random from **below the kernel's ephemeral range**
(``/proc/sys/net/ipv4/ip_local_port_range``; ports ``10000`` up to its start, ``1024`` up
when that leaves too few) and keeps those it can bind on every address (``0.0.0.0``) of this
node, holding them all at once so that they are distinct, then prints them comma-separated.
Why below the ephemeral range (docs/launching.md#nodes-addresses-and-ports):

* the kernel takes the source port of every outgoing connection from the ephemeral range, so a
  node with thousands of connections (a parallel file system client, NCCL's sockets, the
  ranks' own rendezvous) holds many of those ports, and a port drawn there may be taken by
  such a connection between the check and the framework's ``bind``. Below the range, only a
  program that binds a fixed port can hold one, and those are few and stable;
* a rank that connects to ``MASTER_PORT`` on its own node again and again can, when that port
  lies in the ephemeral range, be given it as its *source* port and connect to itself (TCP's
  simultaneous open), holding the port the rendezvous is about to listen on. A port outside
  the range is never a source port.

``--verify P1,P2,... [--per-node G]`` runs once per node of a multi-node job and checks only
the ports that node binds: with ``--per-node G`` node ``k`` (``SLURM_NODEID``) checks
``P[k*G:(k+1)*G]``, the ports of its workers (TensorFlow's worker ``i`` listens on ``P[i]``,
block placement); without it every port. It exits 3 naming the first one in use, and the job
script draws again.

What is left: the sockets are closed before the frameworks bind the ports, a few seconds
later. In that window another program that binds a *fixed* port number could take one, or
another job drawing at the same moment on the same node could draw the same one (about
``N / 22,000`` per port); the framework then fails with EADDRINUSE and the run fails (it is
never measured on a shared port).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import sys
from typing import List, Optional, Sequence, Tuple

EXIT_BUSY = 3
#: the lowest port drawn; below it live most fixed-port services (databases, web servers)
PORT_FLOOR = 10000
#: where Linux's ephemeral range starts unless configured (32768-60999)
DEFAULT_EPHEMERAL = (32768, 60999)
RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def ephemeral_range(path: str = RANGE_FILE) -> Tuple[int, int]:
    """The kernel's ephemeral port range ``(low, high)``; Linux's default when unreadable."""
    try:
        with open(path) as f:
            low, high = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return (low, high) if 0 < low <= high else DEFAULT_EPHEMERAL


def candidate_range(count: int, ephemeral: Tuple[int, int]) -> range:
    """The ports to draw from: below the ephemeral range, from :data:`PORT_FLOOR` when that
    leaves at least 8 per port wanted, else from 1024; above the range when the range starts
    so low that nothing is left below it."""
    low, high = ephemeral
    for floor in (PORT_FLOOR, 1024):
        if low - floor >= 8 * count:
            return range(floor, low)
    return range(high + 1, 65536)


def _bindable(port: int, host: str) -> Optional[socket.socket]:
    """A socket bound to ``port`` (SO_REUSEADDR, as the frameworks), or None when it is busy."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, int(port)))
    except OSError:
        s.close()
        return None
    return s


def pick_ports(
    count: int, host: str = "", ephemeral: Optional[Tuple[int, int]] = None
) -> List[int]:
    """``count`` distinct ports below the ephemeral range that are free on ``host``."""
    if count < 1:
        raise ValueError("count must be at least 1")
    pool = list(candidate_range(count, ephemeral or ephemeral_range()))
    random.SystemRandom().shuffle(pool)
    held: List[socket.socket] = []
    try:
        for port in pool:
            s = _bindable(port, host)
            if s is not None:
                held.append(s)
                if len(held) == count:
                    return [h.getsockname()[1] for h in held]
        raise OSError(f"only {len(held)} of {count} ports are free in {min(pool)}-{max(pool)}")
    finally:
        for s in held:
            s.close()


def busy_port(ports: Sequence[int], host: str = "") -> int:
    """The first of ``ports`` that cannot be bound here (0 when all are free).

    SO_REUSEADDR lets the check pass over ports in TIME_WAIT (the frameworks set it too) and
    lets the emulated nodes of the local executor, which share one machine, check the same
    ports at once; a port that another socket listens on or holds without it is busy.
    """
    for port in ports:
        s = _bindable(port, host)
        if s is None:
            return int(port)
        with contextlib.suppress(OSError):
            s.close()
    return 0


def node_ports(ports: Sequence[int], per_node: Optional[int], node: int) -> List[int]:
    """The ports node ``node`` binds: its workers' ``per_node`` ports, or all of them."""
    if not per_node:
        return list(ports)
    return list(ports[node * per_node : (node + 1) * per_node])


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddlbench.workloads.node.ports")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--count", type=int, help="print this many free ports, comma-separated")
    group.add_argument("--verify", help="comma-separated ports that must be free here")
    parser.add_argument(
        "--per-node", type=int, help="with --verify: node k checks ports [k*G, (k+1)*G)"
    )
    parser.add_argument("--host", default="", help="address to bind (default: all)")
    args = parser.parse_args(list(argv))
    if args.count is not None:
        print(",".join(str(p) for p in pick_ports(args.count, args.host)))
        return 0
    ports = [int(p) for p in args.verify.split(",") if p.strip()]
    node = int(os.environ.get("SLURM_NODEID", "0") or 0)
    busy = busy_port(node_ports(ports, args.per_node, node), args.host)
    if busy:
        print(f"ddlbench: port {busy} is in use on {socket.gethostname()}", file=sys.stderr)
        return EXIT_BUSY
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
