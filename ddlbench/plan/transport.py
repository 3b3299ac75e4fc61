"""A run's ``network.transport`` and the environment it sets (docs/spec.md#network): the
variant's transport, else the spec's; what each framework's launcher sets for it; refused
where the framework cannot run over it or the spec's ``env`` contradicts it."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from ddlbench.errors import Problem
from ddlbench.frameworks import get_launcher
from ddlbench.spec.cluster import ClusterProfile
from ddlbench.spec.experiment import ExperimentSpec, Variant
from ddlbench.spec.yamlsource import YamlSource, problem_at


def run_transport(
    spec: ExperimentSpec,
    device: str,
    fi: int,
    variant: Optional[Variant],
    source: Optional[YamlSource] = None,
) -> Tuple[Optional[str], Union[Dict[str, str], Problem]]:
    """A run's ``network.transport`` (the variant's, else the spec's) and its environment: the
    spec's ``env``, what the transport sets for the framework, the variant's ``env``; or the
    problem when the framework cannot run over it or an ``env`` says otherwise."""
    chosen = variant.network if variant is not None and variant.network else None
    transport = (chosen or spec.network).transport
    loc: Tuple[Any, ...] = ("network", "transport")
    if chosen is not None and chosen.transport is not None:
        loc = ("variants", spec.variants.index(variant), *loc)  # type: ignore[arg-type]
    env = dict(spec.env)
    if transport is not None:
        entry = spec.frameworks[fi]
        setting = get_launcher(entry.name).transport(transport, entry.options, device)
        if setting.problem:
            return transport, problem_at(
                source, loc, f"{entry.id_label}: {transport}: {setting.problem}"
            )
        given = {**spec.env, **(variant.env if variant is not None else {})}
        clash = sorted(k for k, v in setting.env.items() if k in given and given[k] != v)
        if clash:
            said = ", ".join(f"{k}={given[k]}" for k in clash)
            return transport, problem_at(
                source,
                loc,
                f"env sets {said}, which contradicts transport {transport} "
                f"({', '.join(f'{k}={setting.env[k]}' for k in clash)}); remove it from env",
            )
        env.update(setting.env)
    if variant is not None:
        env.update(variant.env)
    if spec.comm_debug:  # read when torch is imported, before the workload can set it
        env.setdefault("TORCH_CPP_LOG_LEVEL", "INFO")
    return transport, env


def backend_problems(
    spec: ExperimentSpec, profile: ClusterProfile, source: Optional[YamlSource] = None
) -> List[Problem]:
    """An entry option the profile's device cannot run (each launcher says which:
    ``backend: nccl`` of PyTorch, ``communication: nccl`` of TensorFlow and Keras on a CPU
    profile), at its key: NCCL talks between CUDA devices only, so every rank would fail at
    its first collective."""
    problems: List[Problem] = []
    for fi, entry in enumerate(spec.frameworks):
        found = get_launcher(entry.name).device_problem(entry.options, profile.device)
        if found is None:
            continue
        key, needs, fix = found
        device = profile.device
        problems.append(
            problem_at(
                source,
                ("frameworks", fi, key),
                f"{entry.id_label}: {needs}, but profile '{profile.name}' is a "
                f"{device.upper()} profile (device: {device}); {fix}, or another profile "
                "(--cluster)",
            )
        )
    return problems
