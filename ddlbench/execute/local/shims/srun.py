"""``srun`` for the local executor: starts a job step's tasks as processes on this machine.

Emulates ``nodes`` nodes on one machine: task ``i`` gets the SLURM_PROCID, SLURM_LOCALID,
SLURM_NODEID, SLURMD_NODENAME... that Slurm's block distribution would give it. Options that
cannot be honoured here fail with a clear message instead of being ignored.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from ddlbench.execute.hostlist import compress, expand
from ddlbench.execute.settings import ExecuteSettings  # standard library only, as this shim

PROG = "srun (ddlbench local executor)"
# options with a value; accepted as --opt=value, --opt value, -Xvalue or -X value
VALUED = {
    "--nodes": "nodes",
    "-N": "nodes",
    "--ntasks": "ntasks",
    "-n": "ntasks",
    "--ntasks-per-node": "ntasks_per_node",
    "--nodelist": "nodelist",
    "-w": "nodelist",
    "--mpi": "mpi",
    "--cpu-bind": "cpu_bind",
    "--cpu_bind": "cpu_bind",
    "--gpus-per-task": "gpus_per_task",
    "--gpu-bind": "gpu_bind",
    "--cpus-per-task": "cpus_per_task",
    "-c": "cpus_per_task",
    "--job-name": "job_name",
    "-J": "job_name",
    "--export": "export",
    "--chdir": "chdir",
    "-D": "chdir",
    "--kill-on-bad-exit": "kill_on_bad_exit",  # optional value: only --kill-on-bad-exit=N
    "--mem": "mem",
    "--gres": "gres",
    "--distribution": "distribution",  # block node distribution only (checked in layout)
    "-m": "distribution",
    "--time": "time",
    "-t": "time",
}
FLAGS = {
    "--overlap": "overlap",
    "--multi-prog": "multi_prog",
    "--label": "label",
    "-l": "label",
    "--unbuffered": "unbuffered",
    "-u": "unbuffered",
    "--exact": "exact",
    "--exclusive": "exclusive",
    "--quiet": "quiet",
    "-Q": "quiet",
    "-K": "kill_on_bad_exit",
    "--verbose": "verbose",
    "-v": "verbose",
}
OPTIONAL_VALUE = {"--kill-on-bad-exit"}


class SrunError(Exception):
    pass


def parse(argv: List[str]) -> Tuple[Dict[str, str], List[str]]:
    opts: Dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        i += 1
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name in FLAGS and not eq:
                opts[FLAGS[name]] = "1"
                continue
            if name in VALUED:
                if eq:
                    opts[VALUED[name]] = value
                elif name in OPTIONAL_VALUE:
                    opts[VALUED[name]] = "1"
                elif i < len(argv):
                    opts[VALUED[name]] = argv[i]
                    i += 1
                else:
                    raise SrunError(f"option {name} needs a value")
                continue
            raise SrunError(f"unsupported option {name}")
        short, rest = arg[:2], arg[2:]
        if short in FLAGS and not rest:
            opts[FLAGS[short]] = "1"
            continue
        if short in VALUED:
            if rest:
                opts[VALUED[short]] = rest.lstrip("=")
            elif i < len(argv):
                opts[VALUED[short]] = argv[i]
                i += 1
            else:
                raise SrunError(f"option {short} needs a value")
            continue
        raise SrunError(f"unsupported option {arg}")
    return opts, argv[i:]


def _int(opts: Dict[str, str], key: str, what: str) -> Optional[int]:
    if key not in opts:
        return None
    try:
        value = int(opts[key].split("-")[0])
    except ValueError:
        raise SrunError(f"{what} {opts[key]!r} is not a number") from None
    if value < 1:
        raise SrunError(f"{what} must be at least 1")
    return value


def layout(opts: Dict[str, str], env: Dict[str, str]) -> Tuple[List[str], List[int]]:
    """Step nodes and tasks per step node (block distribution)."""
    if opts.get("distribution", "block").split(":")[0] not in ("block", "*", ""):
        raise SrunError(f"--distribution={opts['distribution']}: only block is emulated")
    job_nodes = expand(env.get("SLURM_JOB_NODELIST", ""))
    if not job_nodes:
        raise SrunError("SLURM_JOB_NODELIST is not set: srun runs inside a job only")
    if "nodelist" in opts:
        nodes = expand(opts["nodelist"])
        bad = [n for n in nodes if n not in job_nodes]
        if bad:
            raise SrunError(
                f"--nodelist names {','.join(bad)}, not in this job's nodes "
                f"{env.get('SLURM_JOB_NODELIST')}"
            )
    else:
        nodes = list(job_nodes)
    want_nodes = _int(opts, "nodes", "--nodes")
    ntasks = _int(opts, "ntasks", "--ntasks")
    per_node = _int(opts, "ntasks_per_node", "--ntasks-per-node")
    if want_nodes is not None:
        if want_nodes > len(job_nodes) or ("nodelist" in opts and want_nodes < len(nodes)):
            raise SrunError(
                f"--nodes={want_nodes} does not fit this job's {len(job_nodes)} node(s)"
                + (f" and --nodelist={opts['nodelist']}" if "nodelist" in opts else "")
            )
        if "nodelist" not in opts:
            nodes = job_nodes[:want_nodes]
        else:
            extra = [n for n in job_nodes if n not in nodes]
            nodes = nodes + extra[: want_nodes - len(nodes)]
    if ntasks is None:
        if per_node is None:
            per_node = int(env.get("SLURM_NTASKS_PER_NODE", "1") or 1)
            if want_nodes is None and "nodelist" not in opts:
                ntasks = int(env.get("SLURM_NTASKS", "0") or 0) or per_node * len(nodes)
            else:
                ntasks = per_node * len(nodes)
        else:
            ntasks = per_node * len(nodes)
    if want_nodes is None and "nodelist" not in opts and ntasks < len(nodes):
        nodes = nodes[:ntasks]
    if ntasks < len(nodes):
        raise SrunError(f"--ntasks={ntasks} is fewer than the step's {len(nodes)} nodes")
    if per_node is not None and ntasks > per_node * len(nodes):
        raise SrunError(
            f"--ntasks={ntasks} is more than --ntasks-per-node={per_node} x {len(nodes)} nodes"
        )
    counts = []
    if per_node is not None and "ntasks" in opts:
        left = ntasks
        for _ in nodes:
            c = min(per_node, left)
            counts.append(c)
            left -= c
    else:
        base, extra = divmod(ntasks, len(nodes))
        counts = [base + (1 if i < extra else 0) for i in range(len(nodes))]
    return nodes, counts


def _next_step_id(env: Dict[str, str]) -> int:
    jdir = env.get("DDLBENCH_LOCAL_JOB_DIR")
    if not jdir:
        return 0
    path = os.path.join(jdir, "steps")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        text = os.read(fd, 64).decode().strip()
        value = int(text) + 1 if text else 0
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(value).encode())
        return value
    finally:
        os.close(fd)


def multi_prog(path: str, ntasks: int) -> Dict[int, List[str]]:
    """``--multi-prog`` configuration: ``RANKS PROGRAM ARGS`` lines (%t task, %o offset)."""
    progs: Dict[int, List[str]] = {}
    with open(path) as fh:
        for raw in fh:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            ranks, _, rest = line.partition(" ")
            words = shlex.split(rest)
            if not words:
                raise SrunError(f"{path}: no program for ranks {ranks}")
            if ranks == "*":
                ids = list(range(ntasks))
            else:
                ids = []
                for part in ranks.split(","):
                    lo, _, hi = part.partition("-")
                    ids.extend(range(int(lo), int(hi or lo) + 1))
            for offset, t in enumerate(ids):
                if t not in progs:
                    progs[t] = [w.replace("%t", str(t)).replace("%o", str(offset)) for w in words]
    missing = [t for t in range(ntasks) if t not in progs]
    if missing:
        raise SrunError(f"{path}: no program for task(s) {missing}")
    return progs


def _pump(stream, prefix: bytes, out) -> None:
    for line in iter(stream.readline, b""):
        out.write(prefix + line)
        out.flush()


def _check_mpi(opts: Dict[str, str], ntasks: int) -> None:
    mpi = opts.get("mpi", "none")
    if mpi not in ("none", "") and ntasks > 1:
        raise SrunError(
            f"--mpi={mpi} cannot be emulated: MPI wire-up needs Slurm's PMI. Use a launcher "
            "that needs no MPI (Horovod's Gloo controller, PyTorch's gloo backend) or a Slurm "
            "cluster (`--cluster localslurm`)"
        )


def _step_environment(
    opts: Dict[str, str], env: Dict[str, str], nodes: List[str], counts: List[int], step: int
) -> Dict[str, str]:
    """The SLURM_* variables that every task of the step shares."""
    ntasks = sum(counts)
    step_nodelist = compress(nodes)
    tasks_per_node = ",".join(f"{c}(x{n})" if n > 1 else str(c) for c, n in _runs(counts))
    common = {
        "SLURM_STEP_ID": str(step),
        "SLURM_STEPID": str(step),
        "SLURM_STEP_NODELIST": step_nodelist,
        "SLURM_STEP_NUM_NODES": str(len(nodes)),
        "SLURM_STEP_NUM_TASKS": str(ntasks),
        "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
        "SLURM_NODELIST": step_nodelist,
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_TASKS_PER_NODE": tasks_per_node,
        "SLURM_DISTRIBUTION": "block",
        "SLURM_LAUNCH_NODE_IPADDR": env.get("DDLBENCH_LOCAL_NODE_ADDR", "127.0.0.1"),
        "SLURM_SRUN_COMM_HOST": env.get("DDLBENCH_LOCAL_NODE_ADDR", "127.0.0.1"),
    }
    if "ntasks_per_node" in opts:
        common["SLURM_NTASKS_PER_NODE"] = opts["ntasks_per_node"]
    if "cpus_per_task" in opts:
        common["SLURM_CPUS_PER_TASK"] = opts["cpus_per_task"]
    if "job_name" in opts:
        common["SLURM_JOB_NAME"] = opts["job_name"]
    return common


class _Tasks:
    """The step's task processes and, under ``--label``, the threads that prefix their output."""

    def __init__(self, cwd: Optional[str], label: bool) -> None:
        self.cwd = cwd
        self.label = label
        self.procs: List[subprocess.Popen] = []
        self.pumps: List[threading.Thread] = []

    def start(self, task: int, cmd: List[str], env: Dict[str, str]) -> None:
        pipe = subprocess.PIPE if self.label else None
        try:
            p = subprocess.Popen(cmd, env=env, cwd=self.cwd, stdout=pipe, stderr=pipe)
        except OSError as exc:
            _stop(self.procs)
            raise SrunError(f"task {task}: cannot run {cmd[0]!r}: {exc}") from None
        self.procs.append(p)
        if self.label:
            prefix = f"{task}: ".encode()
            for stream, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
                t = threading.Thread(target=_pump, args=(stream, prefix, out), daemon=True)
                t.start()
                self.pumps.append(t)


def _start_tasks(
    opts: Dict[str, str],
    env: Dict[str, str],
    common: Dict[str, str],
    commands: List[List[str]],
    nodes: List[str],
    counts: List[int],
) -> _Tasks:
    """Start every task of the step with the ids Slurm's block distribution gives it."""
    tasks = _Tasks(opts.get("chdir"), "label" in opts)
    task = 0
    for node_id, (node, count) in enumerate(zip(nodes, counts)):
        gtids = ",".join(str(t) for t in range(task, task + count))
        for local_id in range(count):
            tenv = dict(env)
            tenv.update(common)
            tenv.update(
                {
                    "SLURM_PROCID": str(task),
                    "SLURM_LOCALID": str(local_id),
                    "SLURM_NODEID": str(node_id),
                    "SLURMD_NODENAME": node,
                    "SLURM_TOPOLOGY_ADDR": node,
                    "SLURM_GTIDS": gtids,
                }
            )
            tasks.start(task, commands[task], tenv)
            task += 1
    return tasks


def _forward_signals(procs: List[subprocess.Popen]) -> Dict[str, Optional[int]]:
    """Pass the signals srun gets on to the running tasks; the dict records the last one."""
    signalled: Dict[str, Optional[int]] = {"sig": None}

    def forward(signum, _frame):
        signalled["sig"] = signum
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, forward)
    return signalled


def _wait_tasks(
    procs: List[subprocess.Popen], nodes: List[str], counts: List[int], kill_on_bad_exit: bool
) -> Tuple[Dict[int, int], Set[int]]:
    """Exit codes of all tasks, reporting failures as srun does, and the tasks srun killed."""
    killed_by_us: Set[int] = set()
    codes: Dict[int, int] = {}
    while len(codes) < len(procs):
        for i, p in enumerate(procs):
            if i in codes:
                continue
            rc = p.poll()
            if rc is None:
                continue
            codes[i] = rc
            if rc != 0 and i not in killed_by_us:
                node = nodes[_node_of(i, counts)]
                what = f"Exited with exit code {rc}" if rc > 0 else f"Killed by signal {-rc}"
                print(f"srun: error: {node}: task {i}: {what}", file=sys.stderr, flush=True)
                if kill_on_bad_exit and len(codes) < len(procs):
                    print(
                        "srun: error: Terminating StepId=local (--kill-on-bad-exit)",
                        file=sys.stderr,
                        flush=True,
                    )
                    others = [j for j in range(len(procs)) if j not in codes]
                    killed_by_us.update(others)
                    _stop([procs[j] for j in others])
        time.sleep(0.02)
    return codes, killed_by_us


def _step_exit_code(
    codes: Dict[int, int], killed_by_us: Set[int], signal_number: Optional[int]
) -> int:
    """The worst exit of the tasks srun did not kill itself (128+N for signal N)."""
    own = [rc for i, rc in codes.items() if i not in killed_by_us]
    worst = 0
    for rc in own:
        value = rc if rc >= 0 else 128 - rc
        worst = max(worst, value)
    if worst == 0 and signal_number is not None:
        worst = 128 + int(signal_number)
    return worst


def run(argv: List[str]) -> int:
    env = dict(os.environ)
    opts, command = parse(argv)
    if not command:
        raise SrunError("no command to run")
    nodes, counts = layout(opts, env)
    ntasks = sum(counts)
    _check_mpi(opts, ntasks)
    progs = multi_prog(command[0], ntasks) if "multi_prog" in opts else None
    common = _step_environment(opts, env, nodes, counts, _next_step_id(env))
    commands = [progs[task] if progs is not None else command for task in range(ntasks)]
    tasks = _start_tasks(opts, env, common, commands, nodes, counts)
    signalled = _forward_signals(tasks.procs)
    kill_on_bad_exit = opts.get("kill_on_bad_exit", "0") not in ("0", "")
    codes, killed_by_us = _wait_tasks(tasks.procs, nodes, counts, kill_on_bad_exit)
    for t in tasks.pumps:
        t.join(timeout=2)
    return _step_exit_code(codes, killed_by_us, signalled["sig"])


def _runs(counts: List[int]):
    out: List[List[int]] = []
    for c in counts:
        if out and out[-1][0] == c:
            out[-1][1] += 1
        else:
            out.append([c, 1])
    return [(c, n) for c, n in out]


def _node_of(task: int, counts: List[int]) -> int:
    total = 0
    for i, c in enumerate(counts):
        total += c
        if task < total:
            return i
    return len(counts) - 1


def _stop(procs: List[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
    deadline = time.monotonic() + ExecuteSettings.from_env().local_kill_wait_s
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
        p.wait()


def main(argv: List[str]) -> int:
    try:
        return run(argv)
    except SrunError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        print(
            f"{PROG}: supported options: "
            + " ".join(sorted(set(VALUED) | set(FLAGS), key=lambda s: s.lstrip("-").lower())),
            file=sys.stderr,
        )
        return 1
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
