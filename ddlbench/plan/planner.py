"""Expand frameworks x scale points x batch sizes x variants x repeats into runs.

The plan is a pure function of the spec and the profile: the same inputs give the same runs, in
the same order, with the same ids, so re-rendering a spec never renames a run. Axes named in the
spec's ``zip`` are paired element by element instead of crossed.

Order: repeats outermost, so that repeat 0 of every configuration runs before repeat 1 of any;
slow drifts of a machine then spread over all configurations instead of biasing one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from itertools import product
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ddlbench.errors import InputError, Problem
from ddlbench.frameworks import get_launcher
from ddlbench.names import check_safe_name
from ddlbench.spec.cluster import ClusterProfile
from ddlbench.spec.experiment import (
    KNOBS,
    ExperimentSpec,
    LRScaling,
    Optimizer,
    Variant,
)
from ddlbench.spec.inject import backup_precision_problem, plan_problem, run_inject
from ddlbench.spec.lm import lm_problems, run_lm, seq_lens
from ddlbench.spec.problems import position_key
from ddlbench.spec.slurmtime import parse_minutes
from ddlbench.spec.yamlsource import YamlSource, problem_at
from ddlbench.workloads.vocabulary import OWN_WORKLOAD

from .transport import backend_problems, run_transport


@dataclass(frozen=True)
class Run:
    """One job: a framework at one scale, batch size, variant and repeat."""

    run_id: str
    group: str
    framework: str
    label: str
    workload: str
    backend: str
    framework_options: Dict[str, Any]
    mode: str
    model: str
    nodes: int
    tasks_per_node: int
    world_size: int
    device: str
    batch_size: int
    global_batch_size: int
    lr: float
    optimizer: Dict[str, Any]
    lr_scaling: Dict[str, Any]
    precision: str
    scaling: str
    variant: Optional[str]
    repeat: int
    time_limit: str
    time_limit_min: float
    env: Dict[str, str] = field(default_factory=dict)
    #: activation layout knob (``default`` or ``channels_last``)
    layout: str = "default"
    #: graph compilation knob
    compile: bool = False
    #: run.json's ``inject`` (None: nothing injected)
    inject: Optional[Dict[str, Any]] = None
    #: a transformer's ``lm``: seq_len, parallel, activation_checkpointing, grad_accum (else None)
    lm: Optional[Dict[str, Any]] = None
    #: ``network.transport`` between nodes (``rdma``, ``tcp``; None: the framework's choice)
    transport: Optional[str] = None

    @property
    def gpus(self) -> int:
        return self.world_size if self.device == "gpu" else 0

    @property
    def node_hours(self) -> float:
        """Node-hours requested: nodes x the time limit (what allocations are charged on)."""
        return self.nodes * self.time_limit_min / 60.0

    def as_dict(self) -> Dict[str, Any]:
        """A plain dict of the fields (containers copied one level, which is all they have)."""
        out = {}
        for name in _RUN_FIELDS:
            value = getattr(self, name)
            out[name] = value.copy() if isinstance(value, (dict, list)) else value
        return out


_RUN_FIELDS = tuple(f.name for f in fields(Run))


@dataclass(frozen=True)
class Plan:
    runs: List[Run]
    spec: ExperimentSpec
    profile: ClusterProfile

    @property
    def node_hours(self) -> float:
        return sum(r.node_hours for r in self.runs)

    @property
    def groups(self) -> List[str]:
        return list(dict.fromkeys(r.group for r in self.runs))


def scaled_lr(base_lr: float, global_batch: int, rule: str, base_batch: int) -> float:
    """Peak learning rate under a scaling rule (Goyal et al. 2017 for ``linear``)."""
    k = global_batch / base_batch
    if rule == "linear":
        return base_lr * k
    if rule == "sqrt":
        return base_lr * math.sqrt(k)
    return base_lr


def _scale_points(
    spec: ExperimentSpec, profile: ClusterProfile, source: Optional[YamlSource]
) -> Tuple[List[Tuple[int, int]], List[Problem], set]:
    """The scale points, every problem of them against the profile, and the points that have
    one (their runs are not checked further: what they would refuse follows from it)."""
    scale = spec.scale
    if scale.points is not None:
        points = [(p.nodes, p.gpus_per_node) for p in scale.points]
    else:
        gpn = scale.gpus_per_node or profile.gpus_per_node
        points = [(n, gpn) for n in scale.nodes or []]
    problems: List[Problem] = []
    seen, bad = set(), set()
    too_wide = profile.device == "gpu" and any(g > profile.gpus_per_node for _, g in points)
    if too_wide and scale.points is None:  # one value for every point: one problem, at it
        where = ("scale", "gpus_per_node") if scale.gpus_per_node else ("scale",)
        problems.append(problem_at(source, where, _too_wide(points[0][1], profile, points)))
        bad.update(points)
    for i, (nodes, gpn) in enumerate(points):
        loc = ("scale", "points", i) if scale.points is not None else ("scale", "nodes", i)
        if (nodes, gpn) in seen:
            problems.append(problem_at(source, loc, f"scale point {nodes}x{gpn} is listed twice"))
        seen.add((nodes, gpn))
        if scale.points is not None and too_wide and gpn > profile.gpus_per_node:
            problems.append(problem_at(source, loc, _too_wide(gpn, profile, points)))
            bad.add((nodes, gpn))
        if profile.max_nodes is not None and nodes > profile.max_nodes:
            bad.add((nodes, gpn))
            problems.append(
                problem_at(
                    source,
                    loc,
                    f"{nodes} nodes asked, but profile '{profile.name}' allows at most "
                    f"{profile.max_nodes}",
                )
            )
    return points, problems, bad


def _too_wide(gpn: int, profile: ClusterProfile, points: Sequence[Tuple[int, int]]) -> str:
    """More GPUs per node than the profile has: what to change, in the spec or the profile."""
    have = profile.gpus_per_node
    fitted = ", ".join(f"{n}x{min(g, have)}" for n, g in points[:4])
    return (
        f"{gpn} GPUs per node asked, but profile '{profile.name}' has {have} (write "
        f"gpus_per_node: {have} here, or scale.points such as [{fitted}]; or, if its nodes "
        f"have {gpn} GPUs, set gpus_per_node: {gpn} in profile '{profile.name}')"
    )


_TORCH_MODULE = re.compile(r"PyTorch[-/](\d+)\.(\d+)", re.IGNORECASE)


def _old_torch_problem(sweep: _Sweep, fi: int, variant: Optional[Variant]) -> Optional[Problem]:
    """``compile: true`` where the profile loads a PyTorch < 2.0 for the entry, at the line
    that asks for it (the variant's, the entry's, else the spec's)."""
    spec, profile = sweep.spec, sweep.profile
    entry = spec.frameworks[fi]
    old_torch = _old_torch_module(profile, entry, get_launcher(entry.name))
    if not old_torch:
        return None
    loc: Tuple[Any, ...] = ("compile",)
    if variant is not None and variant.compile is not None:
        loc = ("variants", spec.variants.index(variant), "compile")
    elif entry.options.compile is not None:
        loc = ("frameworks", fi, "compile")
    return problem_at(
        sweep.source,
        loc,
        f"{entry.id_label}: compile: true needs torch >= 2.0 (torch.compile), but profile "
        f"'{profile.name}' loads {old_torch} for it; set compile: false for this entry, "
        "or load a PyTorch >= 2.0 module",
    )


def _old_torch_module(profile: ClusterProfile, entry: Any, launcher: Any) -> Optional[str]:
    """The profile's module for this entry that names a PyTorch < 2.0 (EasyBuild's names,
    e.g. ``tools/Horovod/0.22.0-fosscuda-2020b-PyTorch-1.9.0``), if the entry uses torch.
    A venv's or container's version is not known here: the workload falls back to eager and
    records it (docs/spec.md#performance-knobs)."""
    if not any(m == "torch" or m.endswith(".torch") for m in launcher.imports(entry.options)):
        return None
    for module in profile.setup_for(entry.name, entry.id_label).modules:
        found = _TORCH_MODULE.search(module)
        if found and int(found.group(1)) < 2:
            return f"PyTorch {found.group(1)}.{found.group(2)} (module {module})"
    return None


def _merged(base: Any, override: Any) -> Dict[str, Any]:
    out = base.model_dump()
    if override is not None:
        out.update(override.model_dump(exclude_unset=True))
    return out


def _zip_or_cross(
    axes: Dict[str, Sequence[Any]], zipped: Sequence[str], source: Optional[YamlSource]
) -> List[Dict[str, Any]]:
    names = list(axes)
    if zipped:
        lengths = {name: len(axes[name]) for name in zipped}
        if len(set(lengths.values())) != 1:
            detail = ", ".join(f"{n} has {k}" for n, k in lengths.items())
            raise InputError(
                problem_at(source, ("zip",), f"zipped axes differ in length: {detail}")
            )
        zipped_rows = [dict(zip(zipped, values)) for values in zip(*(axes[n] for n in zipped))]
        crossed = [n for n in names if n not in zipped]
        rows = []
        for zrow, values in product(zipped_rows, product(*(axes[n] for n in crossed))):
            row = dict(zrow)
            row.update(dict(zip(crossed, values)))
            rows.append({n: row[n] for n in names})
        return rows
    return [dict(zip(names, values)) for values in product(*(axes[n] for n in names))]


def run_knobs(spec: ExperimentSpec, index: int, variant: Optional[Variant]) -> Dict[str, Any]:
    """The performance knobs of a run: the variant's where it sets them, else the framework
    entry's, else the spec's."""
    entry = spec.frameworks[index].options.knob_overrides()
    out = {}
    for name in KNOBS:
        value = getattr(variant, name) if variant is not None else None
        if value is None:
            value = entry.get(name, getattr(spec, name))
        out[name] = value
    return out


def _knob_loc(
    spec: ExperimentSpec,
    variant: Optional[Variant],
    index: int,
    knobs: Dict[str, Any],
    device: str,
) -> Tuple[Any, ...]:
    """Where a refused knob is written: the variant's key if it sets it, else the spec's."""
    entry = spec.frameworks[index]
    launcher = get_launcher(entry.name)
    for name in KNOBS:
        # the first knob that alone makes the framework refuse
        alone = {k: (knobs[k] if k == name else None) for k in KNOBS}
        if launcher.knob_problem(alone, device, entry.options):
            if variant is not None and getattr(variant, name) is not None:
                return ("variants", spec.variants.index(variant), name)
            if getattr(entry.options, name) is not None:
                return ("frameworks", index, name)
            if name in spec.model_fields_set:
                return (name,)
    return ("frameworks", index)


@dataclass(frozen=True)
class _Sweep:
    """What every run of one plan shares: the inputs and the settings derived from them once."""

    spec: ExperimentSpec
    profile: ClusterProfile
    source: Optional[YamlSource]
    #: (optimizer, lr_scaling) per variant label; they depend on the variant only
    settings: Dict[Optional[str], Tuple[Dict[str, Any], Dict[str, Any]]]
    #: framework options per framework index, as run.json carries them
    options: Dict[int, Dict[str, Any]]
    time_limit: str
    time_limit_min: float


def _batch_axis(
    spec: ExperimentSpec, source: Optional[YamlSource]
) -> Tuple[List[Optional[int]], List[Problem]]:
    """The per-device batch sizes swept (one placeholder where the mode fixes the batch), and
    the problem of zipping them where there is no such axis."""
    if spec.scaling == "strong" or spec.mode == "allreduce":
        if "batch_size" in spec.zip:
            message = "batch_size is not a sweep axis in this mode"
            return [None], [problem_at(source, ("zip",), message)]
        return [None], []
    return list(spec.batch_sizes), []


def _variant_settings(
    spec: ExperimentSpec, variants: Sequence[Optional[Variant]]
) -> Dict[Optional[str], Tuple[Dict[str, Any], Dict[str, Any]]]:
    """Optimizer and lr settings of each variant, merged onto the spec's and validated once."""
    merged: Dict[Optional[str], Tuple[Dict[str, Any], Dict[str, Any]]] = {}
    for variant in variants:
        optimizer = _merged(spec.optimizer, variant.optimizer if variant else None)
        lr_scaling = _merged(spec.lr_scaling, variant.lr_scaling if variant else None)
        Optimizer(**optimizer)
        LRScaling(**lr_scaling)
        merged[variant.label if variant else None] = (optimizer, lr_scaling)
    return merged


def _run_options(spec: ExperimentSpec) -> Dict[int, Dict[str, Any]]:
    """Framework options per framework index, as run.json carries them.

    Unset options stay out of run.json, so the workload's documented default applies; the knobs
    travel as run.json's own keys, not among the framework options.
    """
    return {
        i: e.options.model_dump(exclude_none=True, exclude=set(KNOBS))
        for i, e in enumerate(spec.frameworks)
    }


def _container_problems(
    spec: ExperimentSpec, profile: ClusterProfile, source: Optional[YamlSource]
) -> List[Problem]:
    """A spec that asks for containers needs one in the profile for every framework."""
    if not spec.container:
        return []
    return [
        problem_at(
            source,
            ("container",),
            f"profile '{profile.name}' runs '{entry.id_label}' without a container; "
            "give it environments.<framework>.container (apptainer, singularity, pyxis or "
            "charliecloud) first",
        )
        for entry in spec.frameworks
        if profile.setup_for(entry.name, entry.id_label).container is None
    ]


def _batches(
    sweep: _Sweep, combo: Dict[str, Any], nodes: int, gpn: int, lm: Optional[Dict[str, Any]]
) -> Union[Tuple[int, int, str], Problem]:
    """:func:`_device_batches` with the gradient accumulation of a transformer run."""
    batches = _device_batches(sweep, combo, nodes, gpn)
    if isinstance(batches, Problem):
        return batches
    accumulated = _accumulated(sweep, lm, batches[0], batches[1])
    if isinstance(accumulated, Problem):
        return accumulated
    return accumulated[0], accumulated[1], batches[2]


def _device_batches(
    sweep: _Sweep, combo: Dict[str, Any], nodes: int, gpn: int
) -> Union[Tuple[int, int, str], Problem]:
    """(per-device batch, global batch, batch word of the group name) of one combination."""
    spec = sweep.spec
    world = nodes * gpn
    if spec.scaling == "strong":
        global_batch = int(spec.global_batch_size or 0)
        if global_batch % world:
            return problem_at(
                sweep.source,
                ("global_batch_size",),
                f"global batch {global_batch} does not divide evenly over "
                f"{world} devices ({nodes}x{gpn})",
            )
        return global_batch // world, global_batch, f"g{global_batch}"
    if spec.mode == "allreduce":
        return 1, world, ""
    per_device = int(combo["batch_size"])
    return per_device, per_device * world, f"b{per_device}"


def run_model(spec: ExperimentSpec) -> str:
    """The run's model word: the spec's model, or its own workload's name."""
    return spec.workload.name if spec.workload is not None else spec.model


def _group_name(
    spec: ExperimentSpec,
    label: str,
    nodes: int,
    gpn: int,
    batch_word: str,
    variant: Optional[Variant],
    seq_len: Optional[int] = None,
) -> str:
    """The configuration's name, shared by its repeats."""
    model_word = "allreduce" if spec.mode == "allreduce" else run_model(spec)
    words = [label, model_word, f"n{nodes}x{gpn}"]
    if batch_word:
        words.append(batch_word)
    if seq_len is not None:
        words.append(f"s{seq_len}")
    if variant is not None:
        words.append(variant.label)
    return "-".join(words)


def _accumulated(
    sweep: _Sweep, lm: Optional[Dict[str, Any]], per_device: int, global_batch: int
) -> Union[Tuple[int, int], Problem]:
    """(micro-batch per device, global batch) with gradient accumulation: weak scaling
    multiplies the global batch, strong scaling splits the per-device batch."""
    accum = int(lm["grad_accum"]) if lm else 1
    if accum == 1:
        return per_device, global_batch
    if sweep.spec.scaling != "strong":
        return per_device, global_batch * accum
    if per_device % accum:
        return problem_at(
            sweep.source,
            ("global_batch_size",),
            f"{per_device} sequences per device do not split into {accum} micro-batches",
        )
    return per_device // accum, global_batch


def _checked_knobs(
    sweep: _Sweep, fi: int, variant: Optional[Variant], world: int
) -> Union[Dict[str, Any], Problem]:
    """The run's knobs, or why framework ``fi`` cannot run them (a knob it lacks, compile with
    an old torch, an injection or backup workers it refuses)."""
    spec, profile = sweep.spec, sweep.profile
    entry = spec.frameworks[fi]
    knobs = run_knobs(spec, fi, variant)
    problem = get_launcher(entry.name).knob_problem(knobs, profile.device, entry.options)
    if problem:
        loc = _knob_loc(spec, variant, fi, knobs, profile.device)
        return problem_at(sweep.source, loc, f"{entry.id_label}: {problem}")
    old_torch = _old_torch_problem(sweep, fi, variant) if knobs["compile"] else None
    if old_torch is not None:
        return old_torch
    refused = plan_problem(spec, fi, variant, world)  # inject, backup_workers
    if refused is None:
        refused = backup_precision_problem(spec, fi, variant, knobs["precision"])
    if refused is not None:
        return problem_at(sweep.source, *refused)
    return knobs


def _combo_run(sweep: _Sweep, repeat: int, fi: int, combo: Dict[str, Any]) -> Union[Run, Problem]:
    """The run of framework ``fi`` at one sweep combination and repeat, or why there is none."""
    spec, profile = sweep.spec, sweep.profile
    entry = spec.frameworks[fi]
    launcher = get_launcher(entry.name)
    nodes, gpn = combo["scale"]
    variant: Optional[Variant] = combo["variants"]
    lm = run_lm(spec, variant, combo["seq_len"])
    batches = _batches(sweep, combo, nodes, gpn, lm)
    if isinstance(batches, Problem):
        return batches
    per_device, global_batch, batch_word = batches
    optimizer, lr_scaling = sweep.settings[variant.label if variant else None]
    if lm is not None:  # the transformers train with AdamW (spec.lm refuses sgd written out)
        optimizer = dict(optimizer, name="adamw")
    knobs = _checked_knobs(sweep, fi, variant, nodes * gpn)
    if isinstance(knobs, Problem):
        return knobs
    lr = scaled_lr(optimizer["lr"], global_batch, lr_scaling["rule"], lr_scaling["base_batch_size"])
    group = _group_name(
        spec, entry.id_label, nodes, gpn, batch_word, variant, lm["seq_len"] if lm else None
    )
    transport, env = run_transport(spec, profile.device, fi, variant, sweep.source)
    if isinstance(env, Problem):
        return env
    return Run(
        run_id=check_safe_name(f"{group}-r{repeat}", "run id"),
        group=group,
        framework=entry.name,
        label=entry.id_label,
        workload=OWN_WORKLOAD if spec.workload else launcher.workload(spec.mode, entry.options),
        backend=launcher.backend(entry.options, profile.device),
        framework_options=sweep.options[fi],
        mode=spec.mode,
        model=run_model(spec),
        nodes=nodes,
        tasks_per_node=gpn,
        world_size=nodes * gpn,
        device=profile.device,
        batch_size=per_device,
        global_batch_size=global_batch,
        lr=lr,
        optimizer=optimizer,
        lr_scaling=lr_scaling,  # shared between runs: never mutate
        precision=knobs["precision"],
        layout=knobs["layout"],
        compile=knobs["compile"],
        scaling=spec.scaling,
        variant=variant.label if variant else None,
        repeat=repeat,
        time_limit=sweep.time_limit,
        time_limit_min=sweep.time_limit_min,
        env=env,
        inject=run_inject(spec, variant),
        lm=lm,
        transport=transport,
    )


def _check_unique_ids(runs: Sequence[Run]) -> None:
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(Problem(f"the sweep gives duplicate run ids: {', '.join(dup[:5])}"))


def plan_runs(
    spec: ExperimentSpec,
    profile: ClusterProfile,
    source: Optional[YamlSource] = None,
) -> Plan:
    """Expand the sweep. Raises :class:`InputError` (with spec positions) if it cannot, with
    every problem at once, in file order."""
    points, problems, bad_points = _scale_points(spec, profile, source)
    variants: List[Optional[Variant]] = list(spec.variants) or [None]
    batches, zip_refused = _batch_axis(spec, source)
    axes: Dict[str, Sequence[Any]] = {
        "scale": points,
        "batch_size": batches,
        "seq_len": seq_lens(spec),
        "variants": variants,
    }
    lm_refused = [problem_at(source, loc, message) for loc, message in lm_problems(spec)]
    problems += zip_refused + lm_refused
    combos: List[Dict[str, Any]] = []
    if not zip_refused and not lm_refused:  # else the sweep itself is not what was meant
        try:
            combos = _zip_or_cross(axes, spec.zip, source)
        except InputError as exc:
            problems += exc.problems
    combos = [combo for combo in combos if combo["scale"] not in bad_points]
    time_limit = spec.slurm.time or profile.slurm.time_limit
    minutes = parse_minutes(time_limit)
    sweep = _Sweep(
        spec=spec,
        profile=profile,
        source=source,
        settings=_variant_settings(spec, variants),
        options=_run_options(spec),
        time_limit=time_limit,
        time_limit_min=minutes,
    )
    runs: List[Run] = []
    problems += _container_problems(spec, profile, source) + backend_problems(spec, profile, source)
    for repeat in range(spec.repeats):
        for fi, entry in enumerate(spec.frameworks):
            if spec.mode not in get_launcher(entry.name).modes:
                message = f"framework '{entry.name}' does not support mode '{spec.mode}'"
                problems.append(problem_at(source, ("frameworks", fi), message))
                continue
            for combo in combos:
                run = _combo_run(sweep, repeat, fi, combo)
                if isinstance(run, Problem):
                    problems.append(run)
                else:
                    runs.append(run)
    if problems:
        # the same problem repeats for every repeat and combination; say it once
        raise InputError(sorted(dict.fromkeys(problems), key=position_key))
    _check_unique_ids(runs)
    return Plan(runs=runs, spec=spec, profile=profile)
