"""Print this node's IPv4 address on a network interface: ``<node> <address>``.

``python -m ddlbench.workloads.node.iface_addr IFACE`` runs once per node (an srun step of the job
script) when the cluster profile names ``network.interface``; the job script then hands every
framework's rendezvous (``MASTER_ADDR``, ``TF_CONFIG``, ``DMLC_PS_ROOT_URI``, Horovod's
rendezvous server) the addresses on that interface instead of Slurm's ``NodeAddr``, which is
often on the management network (docs/launching.md#nodes-addresses-and-ports).

Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import sys
from typing import List, Optional

SIOCGIFADDR = 0x8915


def ipv4_of(interface: str) -> Optional[str]:
    """The interface's IPv4 address, or None when it has none (or does not exist)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(
                s.fileno(), SIOCGIFADDR, struct.pack("256s", interface[:15].encode())
            )
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m ddlbench.workloads.node.iface_addr IFACE\n")
        return 2
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    addr = ipv4_of(args[0])
    if addr is None:
        sys.stderr.write(f"ddlbench: node {node} has no IPv4 address on {args[0]}\n")
        return 2
    print(f"{node} {addr}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
