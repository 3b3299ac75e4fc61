"""Run Horovod's Gloo controller without horovodrun (as under ``srun``).

``horovodrun --gloo`` does three things that a Slurm job step must do itself:

1. start an HTTP rendezvous server (``horovod.runner.http.http_server.RendezvousServer``)
   and ``init()`` it with the host allocation plan (``hosts.get_host_assignments``);
2. give every process the rendezvous address and the Gloo controller::

       HOROVOD_GLOO_RENDEZVOUS_ADDR  host running the rendezvous server
       HOROVOD_GLOO_RENDEZVOUS_PORT  its port
       HOROVOD_CONTROLLER=gloo       (the default when built without MPI)
       HOROVOD_CPU_OPERATIONS=gloo
       HOROVOD_GLOO_IFACE            network interface Gloo binds to (unset: the
                                     address this host's name resolves to)

3. give every process its place in the job::

       HOROVOD_RANK, HOROVOD_SIZE               <- SLURM_PROCID, SLURM_NTASKS
       HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE   <- SLURM_LOCALID, tasks on this node
       HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE   <- SLURM_NODEID, SLURM_NNODES
       HOROVOD_HOSTNAME                         <- SLURMD_NODENAME (same on a node,
                                                   distinct across nodes)

   (cross rank/size as node index/count hold when every node runs the same
   number of tasks, which is what horovodrun's own plan assumes).

Usage (from the "horovod" environment)::

    python horovod_gloo_smoke.py [--np 2] [--nodes 1] [--framework torch|tensorflow|both]
        launcher: starts the rendezvous server and --np workers with plain
        subprocess, each given the SLURM_* variables srun would set for a step
        of --np tasks on --nodes nodes (simulated on this host: node names
        node0, node1, ...), checks their allreduce results, exits 0 on success.
    python horovod_gloo_smoke.py --server --hosts node1:4,node2:4 [--port-file F]
        only the rendezvous server, e.g. in an sbatch script before ``srun``;
        prints "ADDR PORT" (and writes it to F), serves until killed.
    python horovod_gloo_smoke.py --worker --framework torch
        one worker; HOROVOD_* are derived from SLURM_* where not already set.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

_SLURM_TO_HOROVOD = {
    "HOROVOD_RANK": "SLURM_PROCID",
    "HOROVOD_SIZE": "SLURM_NTASKS",
    "HOROVOD_LOCAL_RANK": "SLURM_LOCALID",
    "HOROVOD_CROSS_RANK": "SLURM_NODEID",
    "HOROVOD_CROSS_SIZE": "SLURM_NNODES",
    "HOROVOD_HOSTNAME": "SLURMD_NODENAME",
}


def _tasks_on_node(env: dict) -> str | None:
    """Number of tasks on this node from SLURM_STEP_TASKS_PER_NODE/SLURM_TASKS_PER_NODE.

    Those look like "4(x2),3": per-node counts, in SLURM_NODEID order.
    """
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    node = env.get("SLURM_NODEID")
    if not spec or node is None:
        return None
    counts = []
    for part in spec.split(","):
        if "(x" in part:
            n, rep = part.rstrip(")").split("(x")
            counts += [n] * int(rep)
        else:
            counts.append(part)
    return counts[int(node)]


def horovod_env_from_slurm(env: dict) -> dict:
    """HOROVOD_* variables for one srun task, leaving any already set untouched."""
    out = {}
    for hvd_var, slurm_var in _SLURM_TO_HOROVOD.items():
        if hvd_var not in env and slurm_var in env:
            out[hvd_var] = env[slurm_var]
    if "HOROVOD_LOCAL_SIZE" not in env:
        local_size = _tasks_on_node(env)
        if local_size is not None:
            out["HOROVOD_LOCAL_SIZE"] = local_size
    if "HOROVOD_HOSTNAME" not in env and "HOROVOD_HOSTNAME" not in out:
        out["HOROVOD_HOSTNAME"] = socket.gethostname()
    out.setdefault("HOROVOD_CONTROLLER", env.get("HOROVOD_CONTROLLER", "gloo"))
    out.setdefault("HOROVOD_CPU_OPERATIONS", env.get("HOROVOD_CPU_OPERATIONS", "gloo"))
    return out


def start_rendezvous(hosts: str, num_proc: int):
    """Start horovodrun's rendezvous server for "host:slots,..."; returns (server, port)."""
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
    from horovod.runner.http.http_server import RendezvousServer

    server = RendezvousServer(verbose=0)
    port = server.start()  # binds all interfaces on a free port, serves in a thread
    server.init(get_host_assignments(parse_hosts(hosts), num_proc))
    return server, port


def run_worker(framework: str) -> int:
    os.environ.update(horovod_env_from_slurm(dict(os.environ)))
    rank = int(os.environ["HOROVOD_RANK"])
    size = int(os.environ["HOROVOD_SIZE"])
    expected = [float(sum(r + 1 for r in range(size)))] * 3
    if framework == "torch":
        import horovod.torch as hvd
        import torch

        hvd.init()
        got = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum).tolist()
    else:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        hvd.init()
        got = hvd.allreduce(tf.ones(3) * (hvd.rank() + 1), op=hvd.Sum).numpy().tolist()
    ok = hvd.rank() == rank and hvd.size() == size and got == expected
    print(
        f"{framework} rank {hvd.rank()}/{hvd.size()} local {hvd.local_rank()}/{hvd.local_size()}"
        f" cross {hvd.cross_rank()}/{hvd.cross_size()}: allreduce={got} "
        f"{'OK' if ok else f'MISMATCH (expected {expected})'}",
        flush=True,
    )
    hvd.shutdown()
    return 0 if ok else 1


def run_launcher(framework: str, np_: int, nodes: int, timeout: float) -> int:
    if nodes < 1 or np_ % nodes:
        raise SystemExit("--np must be a multiple of --nodes")
    per_node = np_ // nodes
    names = ["localhost"] if nodes == 1 else [f"node{i}" for i in range(nodes)]
    server, port = start_rendezvous(",".join(f"{n}:{per_node}" for n in names), np_)
    base = dict(os.environ)
    base.update(
        {
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
            "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
            "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo",
            "HOROVOD_GLOO_IFACE": base.get("HOROVOD_GLOO_IFACE", "lo"),  # stay on loopback
            "TF_CPP_MIN_LOG_LEVEL": base.get("TF_CPP_MIN_LOG_LEVEL", "2"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    for name in list(base):
        if name.startswith(("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_", "HOROVOD_CROSS_")):
            del base[name]
    procs = []
    t0 = time.time()
    for rank in range(np_):
        env = dict(base)
        # What srun sets for task `rank` of a step with np_ tasks, per_node per node
        # (block distribution).
        node = rank // per_node
        env.update(
            {
                "SLURM_PROCID": str(rank),
                "SLURM_NTASKS": str(np_),
                "SLURM_LOCALID": str(rank % per_node),
                "SLURM_NODEID": str(node),
                "SLURM_NNODES": str(nodes),
                "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})" if nodes > 1 else str(np_),
                "SLURMD_NODENAME": names[node],
            }
        )
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--framework", framework]
        procs.append(subprocess.Popen(cmd, env=env))
    rc = 0
    try:
        for p in procs:
            left = max(1.0, timeout - (time.time() - t0))
            rc |= p.wait(timeout=left) != 0
    except subprocess.TimeoutExpired:
        print(f"{framework}: workers did not finish in {timeout:.0f}s", file=sys.stderr)
        rc = 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        server.stop()
    print(
        f"{framework}: {'OK' if rc == 0 else 'FAILED'} ({np_} processes on {nodes} node(s), "
        f"{time.time() - t0:.1f}s)"
    )
    return rc


def run_server(hosts: str, num_proc: int | None, port_file: str | None) -> int:
    if num_proc is None:
        num_proc = sum(int(h.rsplit(":", 1)[1]) if ":" in h else 1 for h in hosts.split(","))
    _server, port = start_rendezvous(hosts, num_proc)
    line = f"{socket.getfqdn()} {port}"
    print(line, flush=True)
    if port_file:
        with open(port_file + ".tmp", "w") as f:
            f.write(line + "\n")
        os.replace(port_file + ".tmp", port_file)
    while True:
        time.sleep(3600)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", choices=["torch", "tensorflow", "both"], default="both")
    ap.add_argument("--np", type=int, default=2, dest="np_")
    ap.add_argument("--nodes", type=int, default=1, help="simulated nodes for the launcher")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--server", action="store_true")
    ap.add_argument("--hosts", default=None, help="for --server: host:slots,host:slots")
    ap.add_argument("--port-file", default=None)
    a = ap.parse_args()
    if a.server:
        return run_server(a.hosts or f"{socket.gethostname()}:{a.np_}", None, a.port_file)
    frameworks = ["torch", "tensorflow"] if a.framework == "both" else [a.framework]
    if a.worker:
        return run_worker(frameworks[0])
    return max(run_launcher(fw, a.np_, a.nodes, a.timeout) for fw in frameworks)


if __name__ == "__main__":
    sys.exit(main())
