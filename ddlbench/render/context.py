"""Per-run template context: #SBATCH options, environment set-up and launch fragments."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

from ddlbench.campaign.paths import SLURM_ERROR_PATTERN, SLURM_OUTPUT_PATTERN
from ddlbench.frameworks import get_launcher
from ddlbench.plan import Run
from ddlbench.render.launch import interface_env, launch_fragments
from ddlbench.render.shell import ShellSafe, to_shell
from ddlbench.spec.cluster import ClusterProfile, EnvSetup, expand_path
from ddlbench.spec.experiment import ExperimentSpec
from ddlbench.workloads.vocabulary import workload_module


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
        f"--cpus-per-task={s.cpus_requested}",
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
    if setup.module_purge or setup.modules:
        lines += _module_init_lines(setup.module_init)
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


#: where sites keep the shell init of Lmod and Environment Modules
MODULE_INITS = (
    "/etc/profile.d/lmod.sh",
    "/usr/share/lmod/lmod/init/bash",
    "/etc/profile.d/modules.sh",
    "/usr/share/Modules/init/bash",
)


def _module_init_lines(init: str | None) -> List[str]:
    """A batch script's bash is not a login shell: ``module`` may not be defined in it."""
    paths = " ".join(to_shell(p) for p in ([expand_path(init)] if init else MODULE_INITS))
    return [
        "if ! type module >/dev/null 2>&1; then  # not a login shell: load the site's init",
        f"  for ddlbench_init in {paths}; do",
        "    # shellcheck source=/dev/null",
        '    if [[ -r "${ddlbench_init}" ]]; then source "${ddlbench_init}"; break; fi',
        "  done",
        "fi",
        'type module >/dev/null 2>&1 || { echo "ddlbench: no module command on $(hostname)'
        ' (set module_init in the cluster profile)" >&2; false; }',
    ]


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
    key = _parts_key(run)
    if key not in cache:
        cache[key] = _framework_parts(run, spec, profile, pkg_root, results_root)
    setup, base_env, fragments = cache[key]
    env = dict(base_env)
    env.update(run.env)
    job_name = f"{campaign}.{run.run_id}"
    ctx: Dict[str, Any] = {
        "run": run,
        "workload_module": workload_module(run.workload),
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
        "cpu_bind": profile.cpu_bind_policy,
        "stage_dir": _stage_dir(spec, profile),
        "data_path": spec.data.path,
        "cores_per_task": profile.slurm.cpus_per_task,
    }
    ctx.update(fragments)
    launcher = get_launcher(run.framework)
    options_key = ("options", run.framework, repr(sorted(run.framework_options.items())))
    if options_key not in cache:
        cache[options_key] = options_of(run)
    ctx.update(launcher.template_vars(cache[options_key], run))
    ctx["nccl_net"] = expected_nccl_net(run, profile, cache[options_key])
    return ctx


def expected_nccl_net(run: Run, profile: ClusterProfile, options: Any) -> str | None:
    """The NCCL network a multi-node run must use: its transport's (``network.transport``),
    else the profile's ``network.nccl``; a run on another one is flagged."""
    if run.transport is None:
        return profile.network.nccl
    setting = get_launcher(run.framework).transport(run.transport, options, run.device)
    return setting.nccl_net


def _parts_key(run: Run) -> Tuple[Any, ...]:
    """Everything the set-up and launch fragments depend on. The step options of MXNet's
    servers follow the node count (one server per node holds the node's CPUs) and the per-node
    workers' CPUs the tasks per node, so two scale points never share them."""
    options = repr(sorted(run.framework_options.items()))
    env = tuple(sorted(run.env.items()))
    return (run.framework, run.label, run.backend, env, run.nodes, run.tasks_per_node, options)


def _framework_parts(
    run: Run, spec: ExperimentSpec, profile: ClusterProfile, pkg_root: Path, results_root: Path
) -> Tuple[List[ShellSafe], Dict[str, str], Dict[str, Any]]:
    """Set-up lines, environment and launch fragments of a framework entry."""
    setup = profile.setup_for(run.framework, run.label)
    if spec.container and setup.container is not None:
        image = setup.container.model_copy(update={"image": spec.container})
        setup = setup.model_copy(update={"container": image})
    env: Dict[str, str] = interface_env(profile)
    env.update(profile.env)
    env.update(setup.env)
    binds = [str(results_root), str(pkg_root)]
    stage = _stage_dir(spec, profile)
    if stage:
        binds.insert(0, stage)
    fragments = launch_fragments(run, profile, setup, binds, dict(env, **run.env))
    return setup_lines(setup), env, fragments


def _stage_dir(spec: ExperimentSpec, profile: ClusterProfile) -> str | None:
    """Where an image folder is staged on each node, when it is."""
    if profile.stage_dir and spec.data.kind == "imagefolder":
        return expand_path(profile.stage_dir)
    return None


def options_of(run: Run) -> Any:
    """The run's framework options as the launcher's model (unset options at their defaults)."""
    return get_launcher(run.framework).options(**run.framework_options)
