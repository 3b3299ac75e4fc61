"""Free TCP ports for a job, chosen by the kernel at job start (standard library only).

The job script runs this module as a one-task step on the first node, before the ranks
start, and exports what it prints::

    DDLBENCH_PORTS=$(srun --overlap --nodes=1 --ntasks=1 --nodelist="$DDLBENCH_FIRST_HOST" \\
        python -m ddlbench.workloads.ports --count N)

``--count N`` binds N sockets to port 0 on every address (``0.0.0.0``) at the same time, so
the kernel hands out N distinct ports that no socket on the node holds at that moment (not a
listening rendezvous of another job, not an outgoing connection), and prints them as a
comma-separated list. Ports no longer come from the job number, so two jobs sharing a node
(two local campaigns, or non-exclusive Slurm jobs) cannot be given the same port.

``--verify P1,P2,...`` (run once per node of a multi-node job) checks that the ports are free
on that node too: it exits 3 naming the first one in use, and the job script picks again.

What is left: the sockets are closed before the frameworks bind the ports, a few seconds
later. In that window another program that binds a *fixed* port number could take one; the
kernel never hands a port in use to ``bind(0)`` or to an outgoing connection, and it chooses
ports at random over the ephemeral range, so another job doing the same gets different
ones. A framework that then finds its port taken fails with EADDRINUSE, and the run fails
(it is never measured on a shared port).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from typing import List, Sequence

EXIT_BUSY = 3


def pick_ports(count: int, host: str = "") -> List[int]:
    """``count`` distinct ports that are free on ``host`` (all addresses by default)."""
    if count < 1:
        raise ValueError("count must be at least 1")
    socks: List[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def busy_port(ports: Sequence[int], host: str = "") -> int:
    """The first of ``ports`` that cannot be bound here (0 when all are free).

    SO_REUSEADDR lets the check pass over ports in TIME_WAIT (the frameworks set it too) and
    lets the emulated nodes of the local executor, which share one machine, check the same
    ports at once; a port that another socket listens on or holds without it is busy.
    """
    for port in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
        except OSError:
            return int(port)
        finally:
            with contextlib.suppress(OSError):
                s.close()
    return 0


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddlbench.workloads.ports")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--count", type=int, help="print this many free ports, comma-separated")
    group.add_argument("--verify", help="comma-separated ports that must be free here")
    parser.add_argument("--host", default="", help="address to bind (default: all)")
    args = parser.parse_args(list(argv))
    if args.count is not None:
        print(",".join(str(p) for p in pick_ports(args.count, args.host)))
        return 0
    ports = [int(p) for p in args.verify.split(",") if p.strip()]
    busy = busy_port(ports, args.host)
    if busy:
        print(f"ddlbench: port {busy} is in use on {socket.gethostname()}", file=sys.stderr)
        return EXIT_BUSY
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
