"""``scontrol`` for the local executor: host lists, and nodes that live at 127.0.0.1."""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from typing import List

from ddlbench.execute.hostlist import compress, expand

PROG = "scontrol (ddlbench local executor)"


def _node_fields(name: str) -> List[str]:
    addr = os.environ.get("DDLBENCH_LOCAL_NODE_ADDR", "127.0.0.1")
    cpus = os.environ.get("SLURM_CPUS_ON_NODE") or str(os.cpu_count() or 1)
    gpus = os.environ.get("SLURM_GPUS_ON_NODE")
    return [
        f"NodeName={name}",
        f"Arch={platform.machine()}",
        "CoresPerSocket=1",
        f"CPUAlloc={cpus}",
        f"CPUTot={cpus}",
        f"Gres={'gpu:' + gpus if gpus else '(null)'}",
        f"NodeAddr={addr}",
        f"NodeHostName={socket.gethostname()}",
        f"OS={platform.system()}",
        "State=ALLOCATED",
        "Partitions=local",
    ]


def _job_nodes() -> List[str]:
    return expand(os.environ.get("SLURM_JOB_NODELIST", ""))


def main(argv: List[str]) -> int:
    oneliner = False
    args = []
    for a in argv:
        if a in ("-o", "--oneliner"):
            oneliner = True
        elif a in ("-d", "--details", "-a", "--all", "-Q", "--quiet"):
            continue
        else:
            args.append(a)
    if len(args) >= 2 and args[0] == "show":
        what, rest = args[1].lower(), args[2:]
        if what == "hostnames":
            names = expand(rest[0]) if rest else _job_nodes()
            print("\n".join(names))
            return 0
        if what in ("hostlist", "hostlistsorted"):
            if not rest:
                return _fail("show hostlist needs a list of names")
            names = [n for part in rest[0].split(",") for n in expand(part)]
            if what == "hostlistsorted":
                names = sorted(names)
            print(compress(names))
            return 0
        if what in ("node", "nodes"):
            names = expand(rest[0]) if rest else _job_nodes()
            if not rest and not names:
                return _fail("no nodes: not inside a local job")
            for name in names:
                if not re.match(r"^[A-Za-z][A-Za-z0-9_-]*$", name):
                    return _fail(f"Node {name} not found")
                fields = _node_fields(name)
                print(
                    " ".join(fields)
                    if oneliner
                    else fields[0] + "\n   " + "\n   ".join(fields[1:]) + "\n"
                )
            return 0
        if what == "job":
            env = os.environ
            fields = [
                f"JobId={env.get('SLURM_JOB_ID', '')}",
                f"JobName={env.get('SLURM_JOB_NAME', '')}",
                "JobState=RUNNING",
                f"NodeList={env.get('SLURM_JOB_NODELIST', '')}",
                f"NumNodes={env.get('SLURM_JOB_NUM_NODES', '')}",
                f"NumTasks={env.get('SLURM_NTASKS', '')}",
                f"WorkDir={env.get('SLURM_SUBMIT_DIR', '')}",
            ]
            print(" ".join(fields) if oneliner else "\n   ".join(fields))
            return 0
    return _fail(
        "only 'scontrol show hostnames|hostlist|hostlistsorted|node|job' are emulated; "
        f"got: scontrol {' '.join(argv)}"
    )


def _fail(msg: str) -> int:
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    return 1
