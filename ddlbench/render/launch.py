"""srun options of a job script's steps, and what a container is given (docs/launching.md).

Three kinds of step:

- the workers (one task per device): the cores of ``cpus_per_task`` (times the hardware
  threads Slurm counts), an explicit ``--distribution`` and ``--cpu-bind``, the profile's
  ``srun_options``, ``--mpi`` for MPI launches;
- small helpers (the port probe, the pre-flight, Horovod's rendezvous server): one CPU, little
  memory, ``--mpi=none``, no binding, and ``--gres=none`` where they run beside the workers,
  so that no helper holds a GPU, a core or memory the workers' step waits for;
- MXNet's scheduler and parameter servers: helpers that hold their node's CPUs and bind
  themselves to the cores the workers leave (``ddlbench/workloads/common/ps_cpus.py``).

Every step runs in the same container (one named Pyxis container per job, imported once).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from ddlbench.render.shell import ShellSafe, to_shell, words
from ddlbench.spec.cluster import ClusterProfile, EnvSetup, expand_path

#: the oldest Slurm the job scripts are written for: ``--overlap`` shares every resource of the
#: allocation (CPUs, memory, GRES) and srun no longer inherits sbatch's ``--cpus-per-task``
MIN_SLURM = "22.05"


def slurm_too_old(version_text: str) -> str | None:
    """``srun --version``/``sbatch --version`` output -> why it is too old, or None.

    Output that names no version (``slurm-wlm 22.05.8``, ``slurm 23.11.4``) is not judged.
    """
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", version_text)
    if not m:
        return None
    have = tuple(int(x) for x in m.groups() if x is not None)
    need = tuple(int(x) for x in MIN_SLURM.split("."))
    if have[: len(need)] < need:
        return f"Slurm {m.group(0)} is older than {MIN_SLURM}, which the job scripts need"
    return None


#: memory of a helper step (Python and a socket or NVML; never the model)
AUX_MEM = "1G"

#: names every job script exports (base.sh.j2); containers must be given each of them
BASE_EXPORTS = (
    "DDLBENCH_CAMPAIGN",
    "DDLBENCH_RUN_ID",
    "DDLBENCH_RUN_DIR",
    "DDLBENCH_ATTEMPT",
    "DDLBENCH_LOG_DIR",
    "DDLBENCH_HOSTS",
    "DDLBENCH_ADDRS",
    "DDLBENCH_FIRST_HOST",
    "DDLBENCH_FIRST_ADDR",
    "DDLBENCH_PORTS",
    "DDLBENCH_PORT",
    "DDLBENCH_DEVICE",
    "DDLBENCH_CPU_BIND",
    "DDLBENCH_CORES_PER_TASK",
    "DDLBENCH_TELEMETRY_DIR",
    "DDLBENCH_NCCL_INFO_RANK",
    "DDLBENCH_NCCL_NICS",
    "DDLBENCH_NCCL_NET",
    "DDLBENCH_STAGED_DATA",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "PYTHONNOUSERSITE",
    "CUDA_DEVICE_ORDER",
    "CUDA_VISIBLE_DEVICES",
)
#: what each framework's template exports (or sets on srun's command line) besides
FRAMEWORK_EXPORTS: Dict[str, Tuple[str, ...]] = {
    "pytorch": ("MASTER_ADDR", "MASTER_PORT"),
    "tensorflow": ("TF_CPP_MIN_LOG_LEVEL",),
    "keras": ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND"),
    "horovod": (
        "HOROVOD_CONTROLLER",
        "HOROVOD_CPU_OPERATIONS",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR",
        "HOROVOD_GLOO_RENDEZVOUS_PORT",
    ),
    "mxnet": (
        "DMLC_PS_ROOT_URI",
        "DMLC_PS_ROOT_PORT",
        "DMLC_NUM_WORKER",
        "DMLC_NUM_SERVER",
        "DMLC_ROLE",
        "DDLBENCH_MXNET_WORKERS_PER_NODE",
        "DDLBENCH_MXNET_WORKER_TASKS",
        "DDLBENCH_MXNET_WORKER_CPUS",
    ),
}
#: names set from the profile's ``network.interface``
INTERFACE_EXPORTS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "DMLC_INTERFACE")


def interface_env(profile: ClusterProfile) -> Dict[str, str]:
    """The variables that put every framework's socket traffic on ``network.interface``."""
    name = profile.network.interface
    env = {k: name for k in INTERFACE_EXPORTS} if name else {}
    if profile.network.ib_hca:  # "=": these adapters exactly, not every name they prefix
        env["NCCL_IB_HCA"] = "=" + ",".join(profile.network.ib_hca)
    return env


def exported_names(framework: str, env: Dict[str, str]) -> List[str]:
    """Every variable the job script hands its steps, sorted (Pyxis's ``--container-env``)."""
    names = set(BASE_EXPORTS) | set(FRAMEWORK_EXPORTS.get(framework, ())) | set(env)
    return sorted(names)


def _container(
    profile: ClusterProfile, setup: EnvSetup, binds: Sequence[str], names: List[str]
) -> Tuple[List[str], List[str], bool]:
    """``(srun options, command prefix, whether a container runs)``."""
    container = setup.container
    if container is None:
        return [], [], False
    image = expand_path(container.image)
    mounts = [expand_path(b) for b in container.bind] + list(binds)
    if container.runtime == "pyxis":
        opts = [
            f"--container-image={image}",
            "--container-mounts=" + ",".join(f"{m}:{m}" if ":" not in m else m for m in mounts),
            # the image's ENV must not replace what the job script exported
            "--container-env=" + ",".join(names),
            *container.options,
        ]
        return opts, [], True
    if container.runtime == "charliecloud":
        # ch-run IMAGE -- CMD: the job's environment passes through; a bind's destination must
        # exist in the (read-only) image
        prefix = ["ch-run"]
        for m in mounts:
            prefix += ["-b", m]
        return [], prefix + list(container.options) + [image, "--"], True
    prefix = [container.runtime, "exec"]
    if profile.device == "gpu":
        prefix.append("--nv")
    for m in mounts:
        prefix += ["--bind", m]
    # the host's Python settings are not the image's: only ddlbench's code, no ~/.local
    pkg_root = binds[-1] if binds else ""
    prefix += ["--env", f"PYTHONPATH={pkg_root},PYTHONNOUSERSITE=1"]
    prefix += list(container.options) + [image]
    return [], prefix, True


def _uses_mpi(run) -> bool:
    return (run.framework == "horovod" and run.framework_options.get("controller") == "mpi") or (
        run.framework == "pytorch" and run.backend == "mpi"
    )


def launch_fragments(
    run,
    profile: ClusterProfile,
    setup: EnvSetup,
    binds: List[str],
    env: Optional[Dict[str, str]] = None,
) -> Dict[str, object]:
    """srun options of each kind of step, and the command prefix that starts a process."""
    s = profile.slurm
    names = exported_names(run.framework, env or {})
    container_opts, prefix, in_container = _container(profile, setup, binds, names)
    name_opt = ""
    if setup.container is not None and setup.container.runtime == "pyxis":
        # one container per job, imported by the first step and reused by every later one
        name_opt = ' --container-name="ddlbench-${SLURM_JOB_ID}"'
    bind = "none" if profile.cpu_bind_policy != "slurm" else "cores"
    cpus = s.cpus_requested
    if run.framework == "mxnet" and run.framework_options.get("workers") == "per-node":
        cpus *= run.tasks_per_node  # one worker holds the cores of the node's devices
    workers = [f"--cpus-per-task={cpus}", f"--distribution={s.distribution}"]
    workers.append(f"--cpu-bind={bind}")
    # the local executor starts tasks itself: there is no PMI for MPI to use
    if _uses_mpi(run) and s.mpi != "none" and profile.scheduler == "slurm":
        workers.append(f"--mpi={s.mpi}")
    workers += list(s.srun_options) + container_opts
    helper = ["--cpus-per-task=1", f"--mem={AUX_MEM}", "--mpi=none", "--cpu-bind=none"]
    beside = ["--gres=none"] if profile.scheduler == "slurm" else []
    servers = [f"--cpus-per-task={s.cpus_requested}", *beside, "--mpi=none", "--cpu-bind=none"]
    tail = list(s.srun_options) + container_opts
    # MXNet's scheduler and servers hold their node's CPUs (--overlap: they take none from the
    # workers) and bind themselves to the cores the workers leave; two servers per node keep C
    whole = ' --cpus-per-task="${SLURM_CPUS_ON_NODE}"'
    per_node = (run.framework_options.get("servers") or run.nodes) <= run.nodes
    python = expand_path(setup.python) if "/" in setup.python else setup.python
    # removing the job's named container on every node (the EXIT trap): outside the container
    # (enroot is the host's), a helper step beside whatever is left
    remove = words(helper + beside + list(s.srun_options)) if name_opt else ""
    return {
        "srun_opts": ShellSafe(words(workers) + name_opt),
        # the pre-flight: before the workers, never beside them, and it reads the GPUs
        "preflight_opts": ShellSafe(words(helper + tail) + name_opt),
        # helpers: the port probe, and those that run while the workers do
        "aux_opts": ShellSafe(words(helper + beside + tail) + name_opt),
        "server_opts": ShellSafe(
            (words(servers[1:] + tail) + whole if per_node else words(servers + tail)) + name_opt
        ),
        "scheduler_opts": ShellSafe(words(helper[1:] + beside + tail) + whole + name_opt),
        "pyxis_remove": ShellSafe(remove),
        "worker_cpus": cpus,
        "in_container": in_container,
        "min_slurm": MIN_SLURM,
        # the interpreter, behind the container runtime when there is one
        "python": ShellSafe(" ".join(w for w in (words(prefix), to_shell(python)) if w)),
    }
