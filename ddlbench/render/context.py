"""Per-run template context: #SBATCH options, environment set-up and launch fragments."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from ddlbench.campaign.paths import SLURM_ERROR_PATTERN, SLURM_OUTPUT_PATTERN
from ddlbench.frameworks import get_launcher
from ddlbench.plan import Run
from ddlbench.render.shell import ShellSafe, to_shell, words
from ddlbench.spec.cluster import ClusterProfile, EnvSetup, expand_path
from ddlbench.spec.experiment import ExperimentSpec


def sbatch_options(
    run: Run,
    spec: ExperimentSpec,
    profile: ClusterProfile,
    run_dir: Path | str,
    job_name: str,
    cache: Dict[Any, Any] | None = None,
) -> List[ShellSafe]:
    """The ``#SBATCH`` options, each one validated word.

    Everything but the job name and output files depends only on the run's shape, so
    ``cache`` (one dict per campaign) keeps it per shape.
    """
    key = ("sbatch", run.nodes, run.tasks_per_node, run.time_limit)
    if cache is None or key not in cache:
        shape = _shape_options(run, spec, profile)
        if cache is None:
            return _named(job_name, run_dir, shape)
        cache[key] = shape
    return _named(job_name, run_dir, cache[key])


def _named(job_name: str, run_dir: Path | str, shape: List[ShellSafe]) -> List[ShellSafe]:
    for word in (job_name, str(run_dir)):
        if any(c in word for c in " \t\n'\"`$\\;"):
            raise ValueError(f"unsafe #SBATCH value {word!r}")  # guarded upstream
    return [
        ShellSafe(f"--job-name={job_name}"),
        *shape[:4],
        ShellSafe(f"--output={run_dir}/{SLURM_OUTPUT_PATTERN}"),
        ShellSafe(f"--error={run_dir}/{SLURM_ERROR_PATTERN}"),
        # a requeued job keeps its job id: append, so the first attempt's output is kept
        ShellSafe("--open-mode=append"),
        *shape[4:],
    ]


def _shape_options(run: Run, spec: ExperimentSpec, profile: ClusterProfile) -> List[ShellSafe]:
    s = profile.slurm
    o = spec.slurm
    opts = [
        f"--nodes={run.nodes}",
        f"--ntasks-per-node={run.tasks_per_node}",
        f"--cpus-per-task={s.cpus_per_task}",
        f"--time={run.time_limit}",
    ]
    for name, value in (
        ("partition", o.partition or s.partition),
        ("account", o.account or s.account),
        ("qos", o.qos or s.qos),
        ("constraint", o.constraint or s.constraint),
        ("mem", s.mem),
    ):
        if value:
            opts.append(f"--{name}={value}")
    if profile.device == "gpu" and s.gpu_request != "none":
        gpu = f"{s.gpu_type}:" if s.gpu_type else ""
        if s.gpu_request == "gres":
            opts.append(f"--gres=gpu:{gpu}{run.tasks_per_node}")
        else:
            opts.append(f"--gpus-per-node={gpu}{run.tasks_per_node}")
    exclusive = o.exclusive if o.exclusive is not None else s.exclusive
    if exclusive:
        opts.append("--exclusive")
    opts += list(s.extra_sbatch) + list(o.extra_sbatch)
    for opt in opts:
        if any(c in opt for c in " \t\n'\"`$\\;"):
            raise ValueError(f"unsafe #SBATCH option {opt!r}")  # guarded by validation upstream
    return [ShellSafe(opt) for opt in opts]


def setup_lines(setup: EnvSetup) -> List[ShellSafe]:
    """Shell lines that make the framework's software available."""
    lines: List[str] = []
    if setup.module_purge:
        lines.append("module purge")
    for module in setup.modules:
        lines.append(f"module load {to_shell(module)}")
    lines += list(setup.commands)  # verbatim: the profile's author is the site administrator
    if setup.venv:
        activate = to_shell(str(Path(expand_path(setup.venv)) / "bin" / "activate"))
        lines.append("# shellcheck source=/dev/null")
        lines.append(f"source {activate}")
    if setup.conda:
        lines.append(f"conda activate {to_shell(expand_path(setup.conda))}")
    return [ShellSafe(line) for line in lines]


def launch_fragments(
    run: Run, profile: ClusterProfile, setup: EnvSetup, binds: List[str]
) -> Dict[str, Any]:
    """srun options and the command prefix that starts a workload process."""
    srun_opts: List[str] = [f"--cpus-per-task={profile.slurm.cpus_per_task}"]
    prefix: List[str] = []
    container = setup.container
    if container is not None:
        image = expand_path(container.image)
        mounts = [expand_path(b) for b in container.bind] + binds
        if container.runtime == "pyxis":
            srun_opts.append(f"--container-image={image}")
            srun_opts.append(
                "--container-mounts=" + ",".join(f"{m}:{m}" if ":" not in m else m for m in mounts)
            )
        else:
            prefix += [container.runtime, "exec"]
            if profile.device == "gpu":
                prefix.append("--nv")
            for m in mounts:
                prefix += ["--bind", m]
            prefix += list(container.options) + [image]
    uses_mpi = (
        run.framework == "horovod" and run.framework_options.get("controller") == "mpi"
    ) or (run.framework == "pytorch" and run.backend == "mpi")
    # the local executor starts tasks itself: there is no PMI for MPI to use
    if uses_mpi and profile.slurm.mpi != "none" and profile.scheduler == "slurm":
        srun_opts.append(f"--mpi={profile.slurm.mpi}")
    python = expand_path(setup.python) if "/" in setup.python else setup.python
    return {
        "srun_opts": words(srun_opts),
        # the interpreter, behind the container runtime when there is one
        "python": ShellSafe(" ".join(w for w in (words(prefix), to_shell(python)) if w)),
    }


def run_context(
    run: Run,
    spec: ExperimentSpec,
    profile: ClusterProfile,
    campaign: str,
    run_dir: Path | str,
    pkg_root: Path,
    results_root: Path,
    ddlbench_version: str,
    cache: Dict[Any, Any] | None = None,
) -> Dict[str, Any]:
    """Template variables for one run.

    ``cache`` (one dict per campaign) keeps what depends only on the framework entry, not on
    the run, so a 10,000-run sweep computes set-up and launch fragments once per framework.
    """
    cache = {} if cache is None else cache
    key = (run.framework, run.label, run.backend)
    if key not in cache:
        setup = profile.setup_for(run.framework, run.label)
        if spec.container and setup.container is not None:
            image = setup.container.model_copy(update={"image": spec.container})
            setup = setup.model_copy(update={"container": image})
        env: Dict[str, str] = {}
        env.update(profile.env)
        env.update(setup.env)
        fragments = launch_fragments(run, profile, setup, [str(results_root), str(pkg_root)])
        cache[key] = (setup_lines(setup), env, fragments)
    setup, base_env, fragments = cache[key]
    env = dict(base_env)
    env.update(run.env)
    job_name = f"{campaign}.{run.run_id}"
    ctx: Dict[str, Any] = {
        "run": run,
        "campaign": campaign,
        "job_name": job_name,
        "run_dir": str(run_dir),
        "pkg_root": str(pkg_root),
        "sbatch": sbatch_options(run, spec, profile, run_dir, job_name, cache),
        "setup": setup,
        "env": env,
        "profile": profile,
        "device": profile.device,
        "ddlbench_version": ddlbench_version,
        "preflight": profile.preflight_policy,
        "telemetry": profile.telemetry and profile.device == "gpu",
    }
    ctx.update(fragments)
    launcher = get_launcher(run.framework)
    options_key = ("options", run.framework, repr(sorted(run.framework_options.items())))
    if options_key not in cache:
        cache[options_key] = options_of(run)
    ctx.update(launcher.template_vars(cache[options_key], run))
    return ctx


def options_of(run: Run) -> Any:
    """The run's framework options as the launcher's model (unset options at their defaults)."""
    return get_launcher(run.framework).options(**run.framework_options)
