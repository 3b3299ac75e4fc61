"""Cluster profiles: where and how runs execute (see docs/cluster-profiles.md)."""

from __future__ import annotations

import os
import re
from typing import Annotated, Dict, Iterable, List, Literal, Optional, Tuple

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ddlbench.names import ENV_NAME, check_safe_name
from ddlbench.spec.preflight_policy import preflight_policy
from ddlbench.spec.problems import keyed_errors

# Slurm names (partitions, accounts, QOS, GPU types, constraints) reach #SBATCH lines; keep
# them to characters Slurm itself allows so no quoting question arises.
_SLURM_WORD = re.compile(r"^[A-Za-z0-9_.:+\-\[\]|&,*()=]+$")
_SBATCH_LINE = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*(=[^\s'\"`$\\;]+)?$")
_MODULE = re.compile(r"^[A-Za-z0-9_.+/:@-]+$")
_MEM = re.compile(r"^\d+[KMGT]?$")


def check_slurm_word(value: Optional[str]) -> Optional[str]:
    if value is not None and not _SLURM_WORD.match(value):
        raise ValueError(f"{value!r} contains characters that Slurm does not accept here")
    return value


def check_sbatch_line(value: str, what: str = "extra sbatch option") -> str:
    """An extra ``#SBATCH`` option such as ``--signal=USR1@60`` (or, with ``what="srun
    option"``, an extra ``srun`` option): one option, no shell syntax."""
    text = value.strip()
    if text.startswith("#SBATCH") and what != SRUN_OPTION:
        text = text[len("#SBATCH") :].strip()
    if not _SBATCH_LINE.match(text):
        example = "--network=sn_all" if what == SRUN_OPTION else "--signal=USR1@60"
        raise ValueError(
            f"{what} {value!r} must be a single option like {example} "
            "(no spaces, quotes or shell characters)"
        )
    return text


#: what :func:`check_sbatch_line` calls an entry of ``slurm.srun_options``
SRUN_OPTION = "srun option"


def check_srun_option(value: str) -> str:
    return check_sbatch_line(value, SRUN_OPTION)


def check_sbatch_option(value: str) -> str:
    """One argument only: older pydantic passes a validator with a second parameter its
    ``ValidationInfo`` there."""
    return check_sbatch_line(value)


def check_env_name(key: str) -> str:
    if not ENV_NAME.match(key):
        raise ValueError(f"environment variable name {key!r} is not a valid shell name")
    return key


def _check_module(name: str) -> str:
    if not _MODULE.match(name):
        raise ValueError(f"module name {name!r} contains unexpected characters")
    return name


def _check_adapter(name: str) -> str:
    if not re.match(r"^[A-Za-z0-9_.-]+(:[0-9]+)?$", name):
        raise ValueError(f"{name!r} is not an adapter name like mlx5_0 or mlx5_0:1")
    return name


# One list entry or mapping key each: pydantic checks every one and reports each bad one at
# its own line (a validator of the whole list would stop at the first).
#: an ``extra_sbatch`` entry
SbatchOption = Annotated[str, AfterValidator(check_sbatch_option)]
#: an ``srun_options`` entry
SrunOption = Annotated[str, AfterValidator(check_srun_option)]
#: a key of an ``env`` mapping
EnvName = Annotated[str, AfterValidator(check_env_name)]
ModuleName = Annotated[str, AfterValidator(_check_module)]
AdapterName = Annotated[str, AfterValidator(_check_adapter)]


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


class UnsetVariable(ValueError):
    """A path names an environment variable that is unset or empty and has no default."""

    def __init__(self, name: str, value: str) -> None:
        super().__init__(f"environment variable {name} is not set (used in {value!r})")
        self.name = name


def expand_path(value: str, environ: Optional[Dict[str, str]] = None) -> str:
    """Expand ``~``, ``$VAR``, ``${VAR}`` and ``${VAR:-default}`` at render time.

    Profiles are rendered on the login node, whose home and environment the compute nodes
    share on an HPC site; expanding here keeps the rendered scripts free of unquoted words.
    """
    env = os.environ if environ is None else environ

    def repl(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        default = m.group(2)
        got = env.get(name)
        if got:
            return got
        if default is not None:
            return default
        raise UnsetVariable(name, value)

    return os.path.expanduser(_VAR.sub(repl, value))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Container(Strict):
    runtime: Literal["apptainer", "singularity", "pyxis", "charliecloud"]
    image: str
    #: bind mounts, ``src[:dst[:opts]]``; the run directory and ddlbench's code are added
    bind: List[str] = Field(default_factory=list)
    #: extra options for ``apptainer exec`` (not ``--cleanenv``: the workloads need the job's
    #: SLURM_*, DDLBENCH_* and PYTHONPATH variables), or extra ``srun`` options for pyxis
    #: (such as ``--container-remap-root``)
    options: List[str] = Field(default_factory=list)


class EnvSetup(Strict):
    """How one framework's software is made available on the compute nodes."""

    module_purge: bool = False
    modules: List[ModuleName] = Field(default_factory=list)
    venv: Optional[str] = None
    conda: Optional[str] = None
    container: Optional[Container] = None
    #: interpreter to run the workloads with (inside the venv/conda/container)
    python: str = "python"
    #: extra shell lines, written verbatim after the modules and before the venv/conda
    #: activation (e.g. sourcing conda.sh): for site administrators, not for per-run values
    commands: List[str] = Field(default_factory=list)
    env: Dict[EnvName, str] = Field(default_factory=dict)
    #: the site's shell init for ``module`` (e.g. /usr/share/lmod/lmod/init/bash), sourced when
    #: the job's non-login bash has no ``module`` function; default: the usual locations
    module_init: Optional[str] = None

    @field_validator("python", "venv", "conda", "module_init")
    @classmethod
    def _not_empty(cls, value: Optional[str], info: ValidationInfo) -> Optional[str]:
        if value is not None and not value.strip():
            what = {
                "python": "the interpreter, e.g. python3 or /opt/py/bin/python (default: python)",
                "venv": "the virtual environment's folder",
                "conda": "the conda environment's name or folder",
                "module_init": "the module system's bash init file",
            }[info.field_name]
            raise ValueError(f"is empty: give {what}, or leave the key out")
        return value

    @model_validator(mode="after")
    def _one_activation(self) -> EnvSetup:
        if self.venv and self.conda:
            raise ValueError("give either 'venv' or 'conda', not both")
        return self


class SlurmSettings(Strict):
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    time_limit: str = "01:00:00"
    cpus_per_task: int = Field(default=1, ge=1)
    #: memory per node (``--mem``), e.g. ``64G``; ``0`` asks for all of it
    mem: Optional[str] = None
    gpu_type: Optional[str] = None
    #: how GPUs are requested: ``--gres=gpu[:type]:N``, ``--gpus-per-node=[type:]N``, or not
    gpu_request: Literal["gres", "gpus-per-node", "none"] = "gres"
    #: ``srun --mpi=`` for MPI launches (Horovod's MPI controller, PyTorch's mpi backend)
    mpi: Literal["pmix", "pmix_v3", "pmix_v4", "pmi2", "none"] = "pmix"
    exclusive: bool = False
    constraint: Optional[str] = None
    extra_sbatch: List[SbatchOption] = Field(default_factory=list)
    #: whether sacct works here; ``auto`` tries it and falls back to scontrol + jobcomp
    sacct: Literal["auto", "yes", "no"] = "auto"
    #: the jobcomp/filetxt file, when sacct is off (default: JobCompLoc from scontrol show config)
    jobcomp_loc: Optional[str] = None
    #: CPU binding of the ranks (docs/launching.md#cpu-binding): ``gpu-socket`` puts each rank's
    #: cores on its GPU's socket (from the GPU's local_cpulist); ``slurm`` leaves it to Slurm
    #: (``--cpu-bind=cores``); ``none`` binds nothing. Default: gpu-socket on GPU profiles,
    #: slurm on CPU profiles
    cpu_bind: Optional[Literal["gpu-socket", "slurm", "none"]] = None
    #: the workers' ``srun --distribution``: nodes in block order (rank 0 on the first node,
    #: which MASTER_ADDR and TF_CONFIG assume), cores taken from alternate sockets
    distribution: Literal["block:cyclic", "block:block", "block:fcyclic"] = "block:cyclic"
    #: hardware threads per core that Slurm counts as CPUs (2 on nodes with hyperthreading
    #: enabled and configured as CPUs): ``cpus_per_task`` counts cores, the request is
    #: multiplied by this
    threads_per_core: int = Field(default=1, ge=1, le=8)
    #: extra options for every srun of the job, e.g. ``--network=...`` (one option each)
    srun_options: List[SrunOption] = Field(default_factory=list)
    #: resubmissions of a run whose job ended NODE_FAIL, BOOT_FAIL or PREEMPTED (never FAILED,
    #: TIMEOUT, OUT_OF_MEMORY or a user's CANCELLED); docs/failures.md
    infra_retries: int = Field(default=2, ge=0, le=20)

    @field_validator("partition", "account", "qos", "gpu_type", "constraint")
    @classmethod
    def _word(cls, value: Optional[str]) -> Optional[str]:
        return check_slurm_word(value)

    @field_validator("mem")
    @classmethod
    def _mem(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not _MEM.match(str(value)):
            raise ValueError(f"mem {value!r} is not a Slurm memory size such as 64G or 0")
        return value

    @field_validator("time_limit")
    @classmethod
    def _time(cls, value: str) -> str:
        from ddlbench.spec.slurmtime import parse_minutes

        parse_minutes(value)
        return value

    @property
    def cpus_requested(self) -> int:
        """``--cpus-per-task``: cores per rank times the hardware threads Slurm counts."""
        return self.cpus_per_task * self.threads_per_core


class NetworkPresets(Strict):
    """The link presets of ``ddlbench predict`` that describe this cluster: inside a node, and
    between nodes over RDMA and over TCP sockets (``hdr`` and ``100gbe``); the report's
    transport comparison sets the model's ratio beside the measured one from them."""

    intra: str
    rdma: str
    tcp: str

    @field_validator("intra", "rdma", "tcp")
    @classmethod
    def _known(cls, name: str, info: ValidationInfo) -> str:
        from ddlbench.analyse.hierarchy import preset

        level = "intra" if info.field_name == "intra" else "inter"
        link = preset(name, level)
        if level == "inter" and link.transport != info.field_name:
            raise ValueError(
                f"preset {name!r} is a {link.transport} preset; network.presets."
                f"{info.field_name} needs a {info.field_name} one"
            )
        return name


class Network(Strict):
    """The fabric the ranks talk over (docs/cluster-profiles.md#network)."""

    #: the interface every framework's rendezvous and socket traffic uses (``ib0``): sets
    #: NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and DMLC_INTERFACE, and the rendezvous addresses
    interface: Optional[str] = None
    #: the NCCL network a multi-node run must use (``IB``, ``Socket``, or a plugin's name);
    #: a run on another one is flagged in the run table and the report
    nccl: Optional[str] = None
    #: the InfiniBand adapters (and ports) NCCL may use, exactly: ``[mlx5_0:1, mlx5_1:1]``
    #: becomes ``NCCL_IB_HCA==mlx5_0:1,mlx5_1:1`` (``=``: exact names, where ``mlx5`` would
    #: also match storage and RoCE ports)
    ib_hca: List[AdapterName] = Field(default_factory=list)
    #: the predict presets of this cluster's links (``{intra: nvlink-a100, rdma: hdr, tcp:
    #: 100gbe}``): the model's side of the transport comparison
    presets: Optional[NetworkPresets] = None

    @field_validator("interface", "nccl")
    @classmethod
    def _word(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not re.match(r"^[A-Za-z0-9_.:-]+$", value):
            raise ValueError(f"{value!r} is not an interface or network name")
        return value


class LocalSettings(Strict):
    #: runs executing at once on this machine (1 keeps benchmarks from disturbing each other)
    max_parallel: int = Field(default=1, ge=1)


class ClusterProfile(Strict):
    name: str
    description: str = ""
    scheduler: Literal["slurm", "local"]
    #: what a rank drives: one GPU, or CPU cores
    device: Literal["gpu", "cpu"] = "gpu"
    #: GPUs per node; on CPU profiles, the default number of ranks per node
    gpus_per_node: int = Field(default=1, ge=1)
    #: largest node count a run may ask for (plan refuses bigger points)
    max_nodes: Optional[int] = Field(default=None, ge=1)
    #: memory of one device (GPU; on CPU profiles: per rank) in GiB; plan and submit warn
    #: when a transformer run's predicted peak exceeds it (docs/memory.md)
    device_memory_gib: Optional[float] = Field(default=None, gt=0)
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)
    network: Network = Field(default_factory=Network)
    #: per-framework software set-up, keyed by framework name; ``default`` applies otherwise
    environments: Dict[str, EnvSetup] = Field(default_factory=dict)
    #: variables for every run on this cluster (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ...)
    env: Dict[EnvName, str] = Field(default_factory=dict)
    #: a directory of site templates searched before ddlbench's slurm_templates/
    templates: Optional[str] = None
    #: interference pre-flight before the measured steps (docs/telemetry.md): warn, fail or
    #: off; default ``DEFAULT_PREFLIGHT`` of :mod:`ddlbench.spec.preflight_policy` on every
    #: profile, CPU ones included
    preflight: Optional[Literal["warn", "fail", "off"]] = None
    #: per-node GPU telemetry sampler (NVML, about 10 Hz) beside the ranks; GPU profiles only
    telemetry: bool = True
    #: node-local folder (``/tmp``, ``/local/scratch``) that an ``imagefolder`` data set is
    #: copied to, once per node, before the ranks start; unset: read from data.path
    stage_dir: Optional[str] = None

    @property
    def preflight_policy(self) -> str:
        return preflight_policy(self.preflight)

    @property
    def cpu_bind_policy(self) -> str:
        if self.slurm.cpu_bind is not None:
            return self.slurm.cpu_bind
        return "gpu-socket" if self.device == "gpu" else "slurm"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_safe_name(value, "profile name")

    @field_validator("environments")
    @classmethod
    def _env_keys(cls, value: Dict[str, EnvSetup]) -> Dict[str, EnvSetup]:
        found = environment_key_problems(value)
        if found:
            raise keyed_errors([((key,), message) for key, message in found])
        return value

    def setup_for(self, framework: str, label: Optional[str] = None) -> EnvSetup:
        """The set-up for a framework entry: by its label, else its name, else ``default``."""
        envs = self.environments
        return (
            (envs.get(label) if label else None)
            or envs.get(framework)
            or envs.get("default")
            or EnvSetup()
        )


def environment_key_problems(keys: Iterable[object]) -> List[Tuple[object, str]]:
    """``(key, what is wrong)`` for every key of ``environments`` that names no framework: a
    key is 'default', a framework, or a framework label such as horovod-tf or pytorch-gloo."""
    from ddlbench.errors import did_you_mean
    from ddlbench.frameworks import launchers

    allowed = ["default", *launchers()]
    found: List[Tuple[object, str]] = []
    for key in keys:
        text = str(key)
        if text not in allowed and not any(text.startswith(f"{n}-") for n in launchers()):
            found.append(
                (
                    key,
                    f"{key!r} is not 'default', a framework name or a framework label such "
                    f"as horovod-tf ({', '.join(allowed)}){did_you_mean(text, allowed)}",
                )
            )
    return found
