"""Load and validate experiment specs and cluster profiles from YAML files.

Every problem is reported at once, each with its ``file:line:col``; the CLI prints them and exits
with code 2.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

from pydantic import ValidationError

from ddlbench.errors import InputError, Problem
from ddlbench.shipped import profile_names, shipped_example, shipped_profiles
from ddlbench.spec.cluster import ClusterProfile, environment_key_problems
from ddlbench.spec.experiment import ExperimentSpec, build_framework_entry, file_problems
from ddlbench.spec.problems import problems_from
from ddlbench.spec.yamlsource import YamlSource, load_yaml, parse_yaml


@dataclass(frozen=True)
class Loaded:
    """A validated model together with where it came from."""

    value: Any
    source: YamlSource

    @property
    def path(self) -> str:
        return self.source.file


def _mapping(source: YamlSource, what: str) -> dict:
    if not isinstance(source.data, dict):
        got = "an empty file" if source.data is None else type(source.data).__name__
        article = "an" if what[:1] in "aeiou" else "a"
        message = f"{article} {what} must be a YAML mapping, got {got}"
        raise InputError(Problem(message, source.file, 1, 1))
    return source.data


def validate_spec(source: YamlSource) -> ExperimentSpec:
    data = dict(_mapping(source, "experiment spec"))
    problems: List[Problem] = []
    frameworks, at = data.get("frameworks"), ("frameworks",)
    own = data.get("workload")
    if isinstance(own, dict) and own.get("framework") is not None:  # docs/your-own-workload.md
        if "frameworks" in data:
            problems.append(
                source.problem(
                    ("frameworks",),
                    "a spec with a 'workload' names its framework in workload.framework; "
                    "remove 'frameworks'",
                )
            )
        frameworks, at = [own["framework"]], ("workload", "framework")
    if isinstance(frameworks, list):
        built = []
        for i, item in enumerate(frameworks):
            loc = at + ((i,) if at == ("frameworks",) else ())
            try:
                built.append(build_framework_entry(item))
            except ValidationError as exc:
                name = item.get("name") if isinstance(item, dict) else None
                from ddlbench.frameworks import launchers

                model = launchers()[name].options if name in launchers() else None
                problems += problems_from(exc, source, model, prefix=loc)
            except ValueError as exc:
                where = loc + ("name",) if isinstance(item, dict) and "name" in item else loc
                problems.append(source.problem(where, str(exc)))
        data["frameworks"] = built if not problems else (built or None)
        if problems and not built:
            data.pop("frameworks")
    try:
        # strict throughout, the models of other modules included (a bool is no number)
        spec = ExperimentSpec.model_validate(data, strict=True)
    except ValidationError as exc:
        more = problems_from(exc, source, ExperimentSpec)
        if problems:  # frameworks already reported: drop knock-on errors about them
            more = [p for p in more if not (p.where or "").startswith("frameworks")]
        problems += more
        spec = None
    problems += _workdir_problems(data, spec, source)
    if spec is not None:
        problems += [source.problem(loc, message) for loc, message in file_problems(spec)]
    if spec is not None and spec.container:
        problems += _expansion_problems(source, ("container",), spec.container)
    if problems:
        problems.sort(key=lambda p: (p.line or 0, p.col or 0))
        raise InputError(problems)
    return _absolute_workdir(_absolute_data_path(spec, source), source)


def _workdir_path(workdir: str, source: YamlSource) -> Path:
    """``workload.workdir`` as a path: a relative one is relative to the spec file."""
    path = Path(os.path.expanduser(workdir))
    if not path.is_absolute() and not source.file.startswith("<"):
        path = Path(source.file).resolve().parent / path
    return path


def _workdir_problems(
    data: dict, spec: Optional[ExperimentSpec], source: YamlSource
) -> List[Problem]:
    """``workload.workdir`` must be a folder holding the files its command names. The folder is
    checked from the file's own value, so that a missing one is reported beside the spec's
    other problems, not after they are fixed; the command's files once the spec is valid."""
    own = data.get("workload")
    workdir = own.get("workdir") if isinstance(own, dict) else None
    if not isinstance(workdir, str) or source.file.startswith("<"):
        return []
    path = _workdir_path(workdir, source)
    if not path.is_dir():
        return [source.problem(("workload", "workdir"), f"no such folder: {path}")]
    if spec is None or spec.workload is None:
        return []
    from ddlbench.spec.own_workload import missing_files

    missing = missing_files(spec.workload, str(path))
    return [source.problem(("workload", "command", i), m) for i, m in missing]


def _absolute_workdir(spec: ExperimentSpec, source: YamlSource) -> ExperimentSpec:
    """A relative ``workload.workdir`` is relative to the spec file (checked to be a folder by
    :func:`_workdir_problems`)."""
    own = spec.workload
    if own is None or own.workdir is None:
        return spec
    path = _workdir_path(own.workdir, source)
    update = {"workdir": str(path.resolve()) if path.is_absolute() else own.workdir}
    return spec.model_copy(update={"workload": own.model_copy(update=update)})


def _expansion_problems(source: YamlSource, loc: Tuple[Any, ...], value: str) -> List[Problem]:
    """A path expanded at render time (``~``, ``$VAR``) must expand now (docs/spec.md)."""
    from ddlbench.spec.cluster import UnsetVariable, expand_path

    try:
        expand_path(value)
    except UnsetVariable as exc:
        hint = f"export {exc.name} before running ddlbench, or give a default: ${{{exc.name}:-...}}"
        return [source.problem(loc, f"{exc} ({hint})")]
    return []


def _absolute_data_path(spec: ExperimentSpec, source: YamlSource) -> ExperimentSpec:
    """A relative ``data.path`` is relative to the spec file, not to where jobs run."""
    path = spec.data.path
    if path is None or Path(os.path.expanduser(path)).is_absolute() or source.file.startswith("<"):
        return spec
    absolute = str((Path(source.file).resolve().parent / path).resolve())
    return spec.model_copy(update={"data": spec.data.model_copy(update={"path": absolute})})


def validate_profile(source: YamlSource) -> ClusterProfile:
    """The profile, or every problem in it at once: the model's, and those checked on the
    file's own values (framework keys, paths that must expand, the templates folder) even where
    the model stopped early on another error."""
    data = _mapping(source, "cluster profile")
    problems: List[Problem] = []
    profile: Optional[ClusterProfile] = None
    try:
        profile = ClusterProfile.model_validate(data, strict=True)  # as a spec: no coercion
    except ValidationError as exc:
        problems += problems_from(exc, source, ClusterProfile)
        envs = data.get("environments")
        # the model checks the keys only once every entry is valid
        for key, message in environment_key_problems(envs if isinstance(envs, dict) else {}):
            problems.append(source.problem(("environments", key), message))
    problems += _check_expansions(data, source)
    if problems:
        unique = list({str(p): p for p in problems}.values())
        unique.sort(key=lambda p: (p.line or 0, p.col or 0))
        raise InputError(unique)
    assert profile is not None
    return profile


def _path_values(data: dict) -> Iterator[Tuple[Tuple[Any, ...], Any]]:
    """The profile's values that are paths expanded at render time, by their location."""
    envs = data.get("environments")
    for name, setup in (envs if isinstance(envs, dict) else {}).items():
        if not isinstance(setup, dict):
            continue
        base: Tuple[Any, ...] = ("environments", name)
        for key in ("venv", "conda", "module_init"):
            yield base + (key,), setup.get(key)
        python = setup.get("python")
        yield base + ("python",), python if isinstance(python, str) and "/" in python else None
        container = setup.get("container")
        if isinstance(container, dict):
            yield base + ("container", "image"), container.get("image")
            binds = container.get("bind")
            for i, bind in enumerate(binds if isinstance(binds, list) else []):
                yield base + ("container", "bind", i), bind
    yield ("stage_dir",), data.get("stage_dir")


def _check_expansions(data: dict, source: YamlSource) -> List[Problem]:
    """Paths expanded at render time (``~``, ``$VAR``) must expand now, and exist if local.

    Read from the file's values (a string where a string belongs; other types are the
    model's to report), so these come in the same pass as the model's problems."""
    from ddlbench.spec.cluster import expand_path

    problems: List[Problem] = []
    for loc, value in _path_values(data):
        if isinstance(value, str):
            problems += _expansion_problems(source, loc, value)
    templates = data.get("templates")
    if isinstance(templates, str):
        found = _expansion_problems(source, ("templates",), templates)
        problems += found
        folder = Path(expand_path(templates)) if not found else None
        if folder is not None and not folder.is_absolute():
            folder = Path(source.file).resolve().parent / folder
        if folder is not None and not folder.is_dir():
            problems.append(source.problem(("templates",), f"no such folder: {folder}"))
    return problems


def load_spec(path: str | Path) -> Loaded:
    if not Path(path).exists():
        example = shipped_example(str(path))
        if example is not None:
            raise InputError(
                Problem(
                    f"no such file: {path} (ddlbench ships an example spec of that name: "
                    f"'ddlbench init' writes the examples to ./configs/, or cp {example} .)"
                )
            )
    source = load_yaml(path)
    return Loaded(validate_spec(source), source)


def load_spec_text(text: str, file: str = "<spec>") -> Loaded:
    source = parse_yaml(text, file)
    return Loaded(validate_spec(source), source)


def profile_search_path(spec_path: Optional[str] = None) -> List[Path]:
    """Where profile names are looked up, first match wins (docs/cluster-profiles.md).

    ``$DDLBENCH_CLUSTERS`` (``:``-separated), the spec's ``clusters/`` folder,
    ``./configs/clusters``, then the profiles shipped with ddlbench.
    """
    dirs: List[Path] = []
    for d in os.environ.get("DDLBENCH_CLUSTERS", "").split(os.pathsep):
        if d:
            dirs.append(Path(d))
            _warn_missing_folder(Path(d))
    if spec_path:
        dirs.append(Path(spec_path).resolve().parent / "clusters")
    dirs.append(Path.cwd() / "configs" / "clusters")
    shipped = shipped_profiles()
    if shipped is not None:
        dirs.append(shipped)
    out: List[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


#: DDLBENCH_CLUSTERS folders already warned about (once per process)
_WARNED: set = set()


def _warn_missing_folder(folder: Path) -> None:
    """A ``DDLBENCH_CLUSTERS`` entry that is not a folder: said once on stderr, not an error
    (a site's module may name a folder that only some machines mount)."""
    if folder.is_dir() or folder in _WARNED:
        return
    _WARNED.add(folder)
    import sys

    what = "does not exist" if not folder.exists() else "is not a folder"
    sys.stderr.write(
        f"ddlbench: warning: DDLBENCH_CLUSTERS names {folder}, which {what}; no profile is "
        "looked up there (ddlbench docs cluster-profiles#finding-a-profile)\n"
    )


def is_profile_path(name: str) -> bool:
    """Whether a profile value is a path to a file rather than a name to look up."""
    return "/" in name or name.endswith((".yaml", ".yml"))


def missing_profile(name: str, spec_path: Optional[str] = None) -> str:
    """What to say about a profile name or path that names no file."""
    if is_profile_path(name):
        return (
            f"no such cluster profile file: {name} (a path is relative to the current "
            f"directory, {Path.cwd()}; a name without '/' or '.yaml' is looked up)"
        )
    known = sorted({n for d in profile_search_path(spec_path) for n in profile_names(d)})
    from ddlbench.errors import did_you_mean, quoted

    return (
        f"no cluster profile named {quoted(name)}{did_you_mean(name, known)}; "
        f"known: {', '.join(known) or 'none'} (searched "
        f"{', '.join(str(d) for d in profile_search_path(spec_path))})"
    )


def find_profile(name: str, spec_path: Optional[str] = None) -> Path:
    """A profile name (``iris``) or a path (``./site.yaml``) -> the profile file."""
    if is_profile_path(name):
        return Path(name)
    for d in profile_search_path(spec_path):
        for ext in (".yaml", ".yml"):
            candidate = d / f"{name}{ext}"
            if candidate.is_file():
                return candidate
    raise InputError(Problem(missing_profile(name, spec_path)))


def load_profile(name_or_path: str, spec_path: Optional[str] = None) -> Loaded:
    source = load_yaml(find_profile(name_or_path, spec_path))
    return Loaded(validate_profile(source), source)


def option_profile(name: str, spec_path: Optional[str] = None) -> Loaded:
    """The profile ``--cluster NAME`` names; one that names no file is said with the option
    (``--cluster: no such cluster profile file: ...``). Problems inside it keep their line."""
    try:
        path: Optional[Path] = find_profile(name, spec_path)
    except InputError:
        path = None
    if path is None or not path.exists():
        raise InputError(Problem(f"--cluster: {missing_profile(name, spec_path)}"))
    try:
        source = load_yaml(path)
    except InputError as exc:  # a folder, an unreadable file: with the option; bad YAML: its line
        said = [p if p.file else Problem(f"--cluster: {p}") for p in exc.problems]
        raise InputError(said) from None
    return Loaded(validate_profile(source), source)


def default_profile_name() -> Tuple[str, str]:
    """The profile used when none is named, and why (see :func:`choose_profile`)."""
    if shutil.which("sbatch") is None:
        return "local", "the default: no Slurm here"
    return "local", "the default; pass --cluster to check a Slurm profile"


def _spec_profile(spec: Loaded) -> Loaded:
    """The profile the spec's ``cluster`` names; one that names no file is a problem at that
    line of the spec, like every other spec error."""
    name = spec.value.cluster
    try:
        path = find_profile(name, spec.path)
    except InputError:
        path = None
    if path is None or not path.is_file():
        raise InputError(spec.source.problem(("cluster",), missing_profile(name, spec.path)))
    source = load_yaml(path)
    return Loaded(validate_profile(source), source)


def choose_profile(spec: Loaded, cli_choice: Optional[str]) -> Tuple[Loaded, str]:
    """The profile to use and why: the CLI option, the spec's ``cluster``, or the default.

    With nothing named, ``local`` is the default when no Slurm is present; on a machine with
    ``sbatch`` ddlbench refuses to guess a partition and GPU layout.
    """
    if cli_choice:
        return option_profile(cli_choice, spec.path), "--cluster"
    if spec.value.cluster:
        return _spec_profile(spec), f"'cluster' in {spec.path}"
    if shutil.which("sbatch") is None:
        return load_profile("local", spec.path), "default: no Slurm found (sbatch not on PATH)"
    raise InputError(
        Problem(
            "this machine has Slurm but no cluster profile was named: pass --cluster NAME, or "
            "--cluster local to run here without Slurm, or set 'cluster:' in the spec; "
            + _slurm_profiles_for(spec),
            file=spec.path,
        )
    )


def _slurm_profiles_for(spec: Loaded) -> str:
    """Which Slurm profiles found here hold every scale point of ``spec`` (its nodes; its GPUs
    per node on a GPU profile), as the planner checks them, said for the missing-profile
    error: suggesting one the spec cannot run on only moves the error."""
    scale = spec.value.scale
    if scale.points is not None:
        nodes = max(p.nodes for p in scale.points)
        gpn: Optional[int] = max(p.gpus_per_node for p in scale.points)
    else:
        nodes, gpn = max(scale.nodes or [1]), scale.gpus_per_node
    names = sorted({n for d in profile_search_path(spec.path) for n in profile_names(d)})
    fit, other = [], []
    for name in names:
        try:
            profile = load_profile(name, spec.path).value
        except InputError:
            continue
        if profile.scheduler != "slurm":
            continue
        wide = gpn is not None and profile.device == "gpu" and gpn > profile.gpus_per_node
        few = profile.max_nodes is not None and nodes > profile.max_nodes
        (other if wide or few else fit).append(name)
    need = f"its largest scale point ({nodes} node(s)" + (f" x {gpn} per node)" if gpn else ")")
    if fit:
        return f"Slurm profiles here that hold {need}: {', '.join(fit)}"
    return (
        f"no Slurm profile here ({', '.join(other) or 'none found'}) holds {need}: "
        "`ddlbench init` writes one from this cluster's sinfo"
    )
