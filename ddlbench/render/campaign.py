"""Write a campaign folder: manifest, spec and profile copies, per-run scripts and configs.

``results/<campaign>/`` gets ``campaign.json`` (the manifest), ``spec.yaml`` and ``cluster.yaml``
(the inputs as given), ``pkg/`` (a frozen copy of ddlbench's workload code, which the jobs put on
PYTHONPATH, so that a campaign always runs, and records, the code it was rendered with) and one
job script ``jobs/<run-id>.sh`` per run. A job script is self-contained: it carries the run's
config (docs/run-config.md) and writes ``run.json`` and ``logs/`` into the run's folder
``runs/<run-id>/`` when the job starts.

Run folders are created when a run is submitted (Slurm opens ``--output`` there), not here:
a dry run of a large sweep then costs one file per run, not a folder and a file (on a parallel
file system every creation is a metadata round trip).

Rendering contacts no scheduler and starts no process: templates are compiled once per
campaign and every file is written atomically (a running local job keeps reading its old
script).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import jinja2

import ddlbench
from ddlbench.campaign.paths import JOBS_DIR, LOGS_DIR, RUNS_DIR, CampaignPaths, RunPaths
from ddlbench.diskfull import as_disk_full, is_disk_full
from ddlbench.errors import InputError, Problem
from ddlbench.names import check_safe_name
from ddlbench.plan import Plan, Run
from ddlbench.render.context import run_context
from ddlbench.render.own_workload import copy_workdir, program_config
from ddlbench.render.shell import ShellSafe, to_shell
from ddlbench.render.template_check import check_templates
from ddlbench.spec.diagnosis import run_config_fields
from ddlbench.spec.experiment import mllog_run_config
from ddlbench.workloads.vocabulary import model_shape

MANIFEST_FORMAT = "ddlbench-campaign/1"
RUN_FORMAT = "ddlbench-run/1"


@dataclass(frozen=True)
class CampaignRender:
    campaign: str
    root: Path
    manifest: Dict[str, Any]

    @property
    def manifest_path(self) -> Path:
        return CampaignPaths(self.root).manifest


def template_search_path(
    extra_dir: Optional[str] = None, relative_to: Optional[str] = None
) -> List[Path]:
    """Template folders, first match wins: the profile's ``templates`` (a path relative to the
    profile file ``relative_to``), then ``$DDLBENCH_TEMPLATES`` or the shipped templates."""
    from ddlbench.shipped import template_dir
    from ddlbench.spec.cluster import expand_path

    dirs = [template_dir()]
    if extra_dir:
        folder = Path(expand_path(extra_dir))
        if not folder.is_absolute() and relative_to:
            folder = Path(relative_to).resolve().parent / folder
        dirs.insert(0, folder)
    return dirs


def template_environment(
    extra_dir: Optional[str] = None, relative_to: Optional[str] = None
) -> jinja2.Environment:
    """Templates from the profile's ``templates`` folder first, then ddlbench's own."""
    dirs = [str(d) for d in template_search_path(extra_dir, relative_to)]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(dirs),
        finalize=to_shell,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        auto_reload=False,  # a campaign renders from one snapshot: no stat() per render
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["raw"] = ShellSafe
    env.filters["q"] = lambda v: ShellSafe(to_shell(v))
    return env


def _atomic_write(path: Path | str, text: str, mode: int = 0o644) -> None:
    """Write a file so that no reader ever sees half of it.

    A new file is created exclusively and written in place (nobody can be reading it yet);
    an existing one is replaced through a temporary file and a rename, so a job that is
    running it keeps reading the old inode.
    """
    path = str(path)
    data = text.encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        pass
    else:
        try:
            _write_all(fd, data)
        except BaseException:
            os.unlink(path)
            raise
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        _write_all(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd`` and close it (no file object: this runs once per run)."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def run_config(
    run: Run,
    plan: Plan,
    campaign: str,
    run_dir: Path | str,
    spec_parts: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The ``run.json`` a workload reads (docs/run-config.md)."""
    spec = plan.spec
    parts = spec_parts if spec_parts is not None else _spec_parts(plan)
    image_size, num_classes = model_shape(spec.model)
    opt = dict(run.optimizer)
    base_lr = opt.pop("lr")
    return {
        "format": RUN_FORMAT,
        "run_id": run.run_id,
        "campaign": campaign,
        "framework": run.framework,
        "workload": run.workload,
        "framework_options": run.framework_options,
        "backend": run.backend,
        "mode": run.mode,
        "model": run.model,
        "data": parts["data"],
        "image_size": image_size,
        "num_classes": num_classes,
        "device": run.device,
        "precision": run.precision,
        "layout": run.layout,
        "compile": run.compile,
        "nodes": run.nodes,
        "tasks_per_node": run.tasks_per_node,
        "world_size": run.world_size,
        "batch_size": run.batch_size,
        "global_batch_size": run.global_batch_size,
        "steps": parts["steps"],
        "epochs": spec.epochs,
        "target_accuracy": spec.target_accuracy,
        "optimizer": {"name": opt.pop("name"), "lr": run.lr, "base_lr": base_lr, **opt},
        "lr_schedule": {
            "scaling": run.lr_scaling["rule"],
            "base_batch_size": run.lr_scaling["base_batch_size"],
            "warmup_epochs": run.lr_scaling["warmup_epochs"],
            "decay_epochs": list(run.lr_scaling["decay_epochs"]),
            "decay_factor": run.lr_scaling["decay_factor"],
        },
        # repeats of a convergence run differ in their seed, so they sample the seed's variance
        "seed": spec.seed + run.repeat,
        "repeat": run.repeat,
        "variant": run.variant,
        **({"inject": run.inject} if run.inject else {}),  # stragglers on purpose
        **({"lm": run.lm} if run.lm else {}),  # a transformer's sequence length, parallelism
        "allreduce": parts["allreduce"],
        "log_dir": f"{run_dir}/{LOGS_DIR}",
        # the job's time limit: the watchdog's start-up limit is a share of it
        "time_limit_s": int(round(run.time_limit_min * 60)),
        "mllog": mllog_run_config(spec.mllog, plan.profile.name),
        **run_config_fields(spec),
    }


def _spec_parts(plan: Plan) -> Dict[str, Any]:
    """The parts of run.json that are the same for every run of a plan."""
    spec = plan.spec
    return {
        "data": spec.data.model_dump(),
        "steps": spec.steps.model_dump(exclude_none=True),
        "allreduce": spec.allreduce.model_dump(exclude_none=True),
    }


def manifest_entry(run: Run, run_dir_rel: str, script_rel: str) -> Dict[str, Any]:
    entry = dict(vars(run))  # shallow: the entry is serialised, never mutated
    entry["gpus_per_node"] = run.tasks_per_node if run.device == "gpu" else 0
    entry["node_hours"] = run.node_hours
    entry["run_dir"] = run_dir_rel
    entry["script"] = script_rel
    return entry


def spec_digest(spec_text: str, profile_text: str) -> str:
    h = hashlib.sha256()
    h.update(spec_text.encode())
    h.update(b"\0")
    h.update(profile_text.encode())
    return h.hexdigest()


def _copy_workloads(pkg_root: Path) -> None:
    """Freeze ddlbench's compute-node code (package root + workloads) into the campaign."""
    src = Path(ddlbench.__file__).resolve().parent
    dst = pkg_root / "ddlbench"
    tmp = pkg_root / ".ddlbench.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tmp.mkdir(parents=True)
        shutil.copy2(src / "__init__.py", tmp / "__init__.py")
        if (src / "workloads").is_dir():
            shutil.copytree(
                src / "workloads",
                tmp / "workloads",
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)  # never leave half a copy behind
        if is_disk_full(exc):
            raise as_disk_full(exc, pkg_root) from None
        raise
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)


def _campaign_root(campaign: str, results_root: Path) -> Path:
    """The campaign's folder, refused where a job script could not name it safely."""
    try:
        check_safe_name(campaign, "campaign name")
    except ValueError as exc:
        raise InputError(Problem(str(exc))) from None
    root = (results_root / campaign).resolve()
    if any(c in str(root) for c in " \t\n'\"`$\\;"):
        raise InputError(
            Problem(
                f"results folder {root} contains a space or shell character; #SBATCH "
                "--output cannot hold it: choose another folder with --results"
            )
        )
    return root


def _creation_time(paths: CampaignPaths, campaign: str, digest: str) -> str:
    """When the campaign was first rendered; refuses a folder rendered from other inputs."""
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if not paths.manifest.exists():
        return created
    try:
        old = json.loads(paths.manifest.read_text())
    except (OSError, ValueError):
        old = {}
    if old.get("digest") and old.get("digest") != digest:
        raise InputError(
            Problem(
                f"campaign '{campaign}' in {paths.root} was rendered from a different spec or "
                "profile; pick another name with --campaign, or remove that folder"
            )
        )
    return old.get("created", created)


def _compiled_templates(plan: Plan, profile_path: str) -> Dict[str, jinja2.Template]:
    """Each job template the plan uses, compiled once, before any worker starts."""
    env = template_environment(plan.profile.templates, profile_path)
    templates: Dict[str, jinja2.Template] = {}
    for run in plan.runs:
        name = _template_name(run)
        if name not in templates:
            try:
                templates[name] = env.get_template(name)
            except jinja2.TemplateNotFound:
                raise InputError(
                    Problem(f"no template {name} for framework '{run.framework}'")
                ) from None
    check_templates(env, list(templates))
    return templates


def _start_workers(job: _ScriptJob, runs: List[Run], workers: int) -> List[Any]:
    """Forked workers that render and write runs ``k::workers`` for k >= 1.

    Large sweeps only: creating files is kernel time, so two cores really do overlap it
    (figures: benchmarks/README.md).
    """
    if workers <= 1:
        return []
    import multiprocessing

    fork = multiprocessing.get_context("fork")
    children = []
    for k in range(1, workers):
        child = fork.Process(target=job.write, args=(runs[k::workers],), daemon=True)
        child.start()
        children.append(child)
    return children


def _join_workers(children: List[Any]) -> None:
    for child in children:
        child.join()
        if child.exitcode != 0:
            from ddlbench.errors import DDLBenchError

            raise DDLBenchError(
                f"rendering failed in a worker process (exit code {child.exitcode})"
            )


def _write_manifest(
    paths: CampaignPaths, plan: Plan, head: Dict[str, Any], entries: List[Dict[str, Any]]
) -> Dict[str, Any]:
    """Write ``campaign.json``: ``head``'s keys, the spec, the profile and one line per run."""
    manifest = {
        "format": MANIFEST_FORMAT,
        **head,
        "spec": plan.spec.model_dump(mode="json", exclude={"frameworks"})
        | {"frameworks": [_entry_dict(e) for e in plan.spec.frameworks]},
        "cluster": plan.profile.model_dump(mode="json"),
        "runs": entries,
    }
    runs_json = ",\n".join(json.dumps(e, sort_keys=True) for e in entries)
    text = json.dumps({k: v for k, v in manifest.items() if k != "runs"}, indent=1)
    _atomic_write(paths.manifest, text[:-2] + ',\n "runs": [\n' + runs_json + "\n ]\n}\n")
    return manifest


def render_campaign(
    plan: Plan,
    campaign: str,
    results_root: Path,
    spec_text: str,
    spec_path: str,
    profile_text: str,
    profile_path: str,
    progress: Optional[Callable[[int, int], None]] = None,
) -> CampaignRender:
    """Render every run of ``plan`` into ``results_root/<campaign>/``.

    A campaign folder that already holds a *different* spec or profile is refused: its runs
    would otherwise change under the jobs that were submitted from it.
    """
    root = _campaign_root(campaign, results_root)
    digest = spec_digest(spec_text, profile_text)
    paths = CampaignPaths(root)
    created = _creation_time(paths, campaign, digest)
    templates = _compiled_templates(plan, profile_path)  # refused templates: nothing written
    root.mkdir(parents=True, exist_ok=True)
    paths.runs.mkdir(exist_ok=True)
    paths.jobs.mkdir(exist_ok=True)
    _copy_workloads(paths.pkg)
    copy_workdir(plan.spec, paths.pkg, results_root)
    _atomic_write(paths.spec, spec_text)
    _atomic_write(paths.cluster, profile_text)

    job = _ScriptJob(plan, campaign, root, paths.pkg, results_root.resolve(), templates)
    workers = _workers(len(plan.runs))
    children = _start_workers(job, plan.runs, workers)
    job.write(plan.runs[0::workers], progress, scale=workers)
    entries = [
        manifest_entry(run, paths.rel_run_dir(run.run_id), paths.rel_job_script(run.run_id))
        for run in plan.runs
    ]
    _join_workers(children)
    if progress is not None:
        progress(len(plan.runs), len(plan.runs))

    head = {
        "campaign": campaign,
        "created": created,
        "ddlbench_version": ddlbench.__version__,
        "digest": digest,
        "spec_path": spec_path,
        "profile_path": profile_path,
    }
    manifest = _write_manifest(paths, plan, head, entries)
    return CampaignRender(campaign=campaign, root=root, manifest=manifest)


PARALLEL_MIN_RUNS = 2000


def _workers(runs: int) -> int:
    if runs < PARALLEL_MIN_RUNS or os.environ.get("DDLBENCH_RENDER_WORKERS") == "1":
        return 1
    return max(1, min(4, os.cpu_count() or 1))


@dataclass
class _ScriptJob:
    """Renders and writes the job scripts of a share of a plan's runs (in a worker or inline)."""

    plan: Plan
    campaign: str
    root: Path
    pkg_root: Path
    results_abs: Path
    templates: Dict[str, jinja2.Template]

    def write(
        self,
        runs: List[Run],
        progress: Optional[Callable[[int, int], None]] = None,
        scale: int = 1,
    ) -> None:
        cache: Dict[Any, Any] = {}
        spec_parts = _spec_parts(self.plan)
        total = len(self.plan.runs)
        jobs = f"{self.root}/{JOBS_DIR}"  # strings, not Paths: this loop runs once per run
        runs_root = f"{self.root}/{RUNS_DIR}"
        for i, run in enumerate(runs):
            run_dir = f"{runs_root}/{run.run_id}"
            ctx = run_context(
                run,
                self.plan.spec,
                self.plan.profile,
                self.campaign,
                run_dir,
                self.pkg_root,
                self.results_abs,
                ddlbench.__version__,
                cache,
            )
            # the script carries its run config and writes run.json when the job starts: one
            # file per run, and the config that runs is the one Slurm copied at submission
            config = run_config(run, self.plan, self.campaign, run_dir, spec_parts)
            if self.plan.spec.workload is not None:
                config["program"] = program_config(self.plan.spec, run, run_dir, self.pkg_root)
            ctx["run_json"] = ShellSafe(_json_text(config))
            text = self.templates[_template_name(run)].render(ctx)
            _atomic_write(f"{jobs}/{run.run_id}.sh", text, 0o755)
            if progress is not None and (i + 1) % 50 == 0:
                progress(min(total, (i + 1) * scale), total)


RUN_JSON_MARKER = "DDLBENCH_RUN_JSON"


def read_run_config(run_dir: Path, script: Path) -> Dict[str, Any]:
    """A run's config: its ``run.json`` once the job has started, else the copy in its script."""
    path = RunPaths(Path(run_dir)).config
    if path.is_file():
        return json.loads(path.read_text())
    text = Path(script).read_text()
    start = text.index(f"<<'{RUN_JSON_MARKER}'\n") + len(RUN_JSON_MARKER) + 5
    end = text.index(f"\n{RUN_JSON_MARKER}\n", start)
    return json.loads(text[start:end])


def _json_text(obj: Dict[str, Any]) -> str:
    """JSON with a line break after every comma: readable in the script, and written by json's
    C encoder (``indent`` would switch to the much slower Python one)."""
    return json.dumps(obj, sort_keys=True, separators=(",\n ", ": "))


def _entry_dict(entry: Any) -> Dict[str, Any]:
    return {"name": entry.name, "label": entry.id_label, **entry.options.model_dump()}


def _template_name(run: Run) -> str:
    from ddlbench.frameworks import get_launcher

    return get_launcher(run.framework).template_name
