"""Which frameworks can run with a cluster profile, and why not.

For each framework entry, ddlbench runs the profile's real set-up for it (module loads, venv or
conda activation, container prefix: as in a job script) in a fresh bash and imports the
framework's modules there, reporting their versions or the error. On a Slurm profile it also
checks that the Slurm client answers and that the profile's partition exists.

The probes run on the machine where ``ddlbench doctor`` runs. On a cluster that is the login
node: module systems and shared file systems usually make that representative, but a
framework that only imports on a GPU node shows up here as a failure with its reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional

from ddlbench.doctor_checks import NOT_CONFIGURED, Check
from ddlbench.frameworks import get_launcher, launchers
from ddlbench.render.context import launch_fragments, setup_lines
from ddlbench.render.launch import slurm_too_old
from ddlbench.render.shell import to_shell
from ddlbench.spec.cluster import ClusterProfile

#: the environments ``ddlbench envs build`` makes (scripts/make-envs.sh)
MAKE_ENVS_NAMES = ("torch", "tensorflow", "horovod", "mxnet")

PROBE = """
import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    top = sys.modules[name.split(".")[0]]
    out[name] = str(getattr(module, "__version__", None) or getattr(top, "__version__", "?"))
if "torch" in sys.modules:
    out["cuda"] = sys.modules["torch"].version.cuda or "none (CPU-only build)"
    try:  # the NCCL PyTorch was built with; CPU builds have none
        v = sys.modules["torch"].cuda.nccl.version()
        out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
print("DDLBENCH_PROBE " + json.dumps(out))
"""


@dataclass(frozen=True)
class Entry:
    """What to probe: a framework with its options, under its label."""

    framework: str
    label: str
    options: dict


def default_entries() -> List[Entry]:
    """Every framework, with each option set its launcher asks to probe."""
    from ddlbench.spec.experiment import FrameworkEntry

    out = []
    for name, launcher in launchers().items():
        for opts in launcher.probe_options:
            entry = FrameworkEntry(name=name, options=launcher.options(**opts))
            out.append(Entry(name, entry.id_label, opts))
    return out


def _probe_run(profile: ClusterProfile, entry: Entry, launcher, options):
    """A one-rank run of the framework; only the fields launch_fragments reads matter."""
    from ddlbench.plan.planner import Run

    return Run(
        run_id="doctor",
        group="doctor",
        framework=entry.framework,
        label=entry.label,
        workload=launcher.workload("throughput", options),
        backend="",
        mode="throughput",
        framework_options=options.model_dump(exclude_none=True),
        model="lenet",
        nodes=1,
        tasks_per_node=1,
        world_size=1,
        device=profile.device,
        batch_size=1,
        global_batch_size=1,
        lr=0.1,
        optimizer={},
        lr_scaling={},
        precision="fp32",
        scaling="weak",
        variant=None,
        repeat=0,
        time_limit="1",
        time_limit_min=1.0,
    )


def _import_failure(label: str, proc: subprocess.CompletedProcess, setup, seconds: float) -> Check:
    """The last line of the probe's stderr, and the environment it ran in."""
    from ddlbench.spec.cluster import expand_path

    errors = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    reason = errors[-1] if errors else f"exit code {proc.returncode}"
    where = setup.venv or setup.conda or (setup.container.image if setup.container else None)
    hint = f" (environment: {expand_path(where)})" if where else ""
    detail = reason + hint + _build_hint(setup)
    return Check(label, False, detail, seconds=seconds, docs="environments")


def _build_hint(setup) -> str:
    """For a missing venv that ``ddlbench envs build`` makes (``<envs>/torch``, ...): how."""
    from ddlbench.spec.cluster import expand_path

    if not setup.venv:
        return ""
    path = Path(expand_path(setup.venv))
    if path.name not in MAKE_ENVS_NAMES or (path / "bin" / "activate").is_file():
        return ""
    return f"; build it: DDLBENCH_ENVS={path.parent} ddlbench envs build {path.name}"


def probe_framework(profile: ClusterProfile, entry: Entry, timeout: float = 300) -> Check:
    launcher = get_launcher(entry.framework)
    options = launcher.options(**entry.options)
    modules = launcher.imports(options)
    setup = profile.setup_for(entry.framework, entry.label)
    run = _probe_run(profile, entry, launcher, options)
    if setup.container is not None and setup.container.runtime == "pyxis":
        # a Pyxis image exists only inside an srun step: the host's Python proves nothing
        return Check(entry.label, True, "not checked: the Pyxis image runs only under srun")
    try:
        lines = setup_lines(setup)
        python = launch_fragments(run, profile, setup, [])["python"]
    except ValueError as exc:  # e.g. an unset variable in a path
        return Check(entry.label, False, str(exc), docs="environments")
    script = "\n".join(
        [
            "set -e",
            "set +u",
            *lines,
            "set -u",
            "export TF_CPP_MIN_LOG_LEVEL=3",
            f"{python} -c {to_shell(PROBE)} {' '.join(to_shell(m) for m in modules)}",
        ]
    )
    start = time.monotonic()
    try:
        proc = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        why = f"import did not finish within {timeout:.0f} s"
        return Check(entry.label, False, why, docs="environments")
    seconds = time.monotonic() - start
    for line in proc.stdout.splitlines():
        if line.startswith("DDLBENCH_PROBE "):
            versions = json.loads(line[len("DDLBENCH_PROBE ") :])
            detail = ", ".join(f"{m} {v}" for m, v in versions.items())
            return Check(entry.label, True, detail, versions, seconds)
    return _import_failure(entry.label, proc, setup, seconds)


def probe_scheduler(profile: ClusterProfile) -> Optional[Check]:
    if profile.scheduler != "slurm":
        return None
    if shutil.which("sbatch") is None:
        why = "sbatch is not on PATH (use a 'local' profile here)"
        return Check("slurm", False, why, docs="cluster-profiles")
    part = profile.slurm.partition
    args = ["sinfo", "--noheader", "--format=%P %a %D"]
    if part:
        args.append(f"--partition={part}")
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return Check("slurm", False, "sinfo did not answer within 30 s", docs="failures")
    if proc.returncode != 0:
        why = (proc.stderr.strip() or "sinfo failed").splitlines()[-1]
        return Check("slurm", False, why, docs="failures")
    rows = [ln.split() for ln in proc.stdout.splitlines() if ln.strip()]
    if part and not rows:
        why = f"partition '{part}' does not exist here (sinfo lists them)"
        return Check("slurm", False, why, docs="cluster-profiles")
    detail = "; ".join(f"{r[0]} {r[1]}, {r[2]} nodes" for r in rows[:4])
    version = subprocess.run(["sbatch", "--version"], capture_output=True, text=True, timeout=30)
    too_old = slurm_too_old(version.stdout)
    if too_old:
        why = f"{too_old} (ddlbench docs launching#requirements)"
        return Check("slurm", False, why, docs="launching")
    return Check("slurm", True, detail or "controller answers", {"slurm": version.stdout.strip()})


def configured(profile: ClusterProfile, entry: Entry) -> bool:
    """Whether the profile sets up an environment for the entry (or a ``default`` one)."""
    envs = profile.environments
    return any(k in envs for k in (entry.label, entry.framework, "default"))


def _probe_or_skip(profile: ClusterProfile, entry: Entry, named: bool) -> Check:
    """Probe a framework; one the profile does not set up is "not configured" when no spec
    names it, and a failure says so when one does."""
    if not named and not configured(profile, entry):
        why = f"not configured: profile '{profile.name}' sets up no environment for it"
        return Check(entry.label, True, why, state=NOT_CONFIGURED)
    check = probe_framework(profile, entry)
    if not check.ok and not configured(profile, entry):
        check.detail += f" (profile '{profile.name}' sets up no environment for it)"
    return check


def run_doctor(
    profile: ClusterProfile,
    entries: Optional[List[Entry]] = None,
    results: Optional[Path] = None,
) -> List[Check]:
    from ddlbench import doctor_checks as dc

    named = entries is not None
    todo = entries or default_entries()
    with ThreadPoolExecutor(max_workers=4) as pool:
        checks = list(pool.map(lambda e: _probe_or_skip(profile, e, named), todo))
    scheduler = probe_scheduler(profile)
    extra: List[Check] = []
    if profile.device == "gpu":
        checks = [dc.cpu_only_torch(c, profile.name) for c in checks]
        versions = next((c.versions for c in checks if "torch" in c.versions), {})
        extra += dc.gpu_checks(profile.gpus_per_node)
        extra += [dc.nccl_check(versions), dc.nvml_check()]
    if results is not None:
        extra.append(dc.results_check(results))
    venvs = [e.venv for e in profile.environments.values() if e.venv]
    extra += dc.stale_env_checks(venvs, _make_envs_script())
    return ([scheduler] if scheduler else []) + checks + extra


def _make_envs_script() -> Optional[Path]:
    """scripts/make-envs.sh: shipped in the package, or the checkout's."""
    from ddlbench.shipped import shipped_make_envs

    return shipped_make_envs()


@dataclass(frozen=True)
class FilesInUse:
    """The files a render would read: the profile, the template folders, the examples."""

    profile: str
    #: template folders, first match wins
    templates: List[str]
    #: where the last template folder comes from: $DDLBENCH_TEMPLATES, installed package, ...
    templates_from: str
    #: where profile names are looked up, first match wins
    profile_search_path: List[str]
    examples: Optional[str]


def files_in_use(
    profile: ClusterProfile, profile_path: str, spec_path: Optional[str]
) -> FilesInUse:
    from pathlib import Path

    from ddlbench.render.campaign import template_search_path
    from ddlbench.shipped import shipped_examples, template_source
    from ddlbench.spec.load import profile_search_path

    examples = shipped_examples()
    return FilesInUse(
        profile=str(Path(profile_path).resolve()),
        templates=[str(d) for d in template_search_path(profile.templates, profile_path)],
        templates_from=template_source(),
        profile_search_path=[str(d) for d in profile_search_path(spec_path)],
        examples=str(examples) if examples else None,
    )


def as_json(
    profile: ClusterProfile, checks: List[Check], files: Optional[FilesInUse] = None
) -> str:
    out = {"cluster": profile.name, "checks": [asdict(c) for c in checks]}
    if files is not None:
        out["files"] = asdict(files)
    return json.dumps(out, indent=1)
