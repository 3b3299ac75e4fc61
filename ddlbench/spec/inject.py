"""The spec's ``inject`` key (stragglers on purpose) and the checks of ``backup_workers``
that need a run's world size (docs/stragglers.md, docs/backup-workers.md)."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddlbench.spec.problems import keyed_errors

#: the kinds whose slowdown is rounded to a whole number, and why
WHOLE_KINDS = {
    "compute": "runs each layer slowdown times",
    "cpu-share": "gives the rank 1/slowdown of its cores (a cgroup quota, or slowdown - 1 "
    "competing processes on each core)",
}


class StragglerSpec(BaseModel):
    """``inject.straggler``: a fixed slowdown of chosen ranks, or a random one, made by
    ``kind``: ``sleep`` (an injected sleep), ``compute`` (layers run ``round(factor)`` times),
    ``data`` (a slow input pipeline before the step), ``cpu-share`` (a cgroup CPU quota or
    competing processes, ``cpu_share_by``).

    Fixed: ``{ranks: [1], slowdown: 1.5}``. Random: ``{probability: 0.1}`` plus optionally
    ``distribution`` (``pareto``), ``shape``, ``min_slowdown``, ``max_slowdown``, ``seed``
    and ``ranks`` (the ranks that may be slowed; default all)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    kind: Literal["sleep", "compute", "data", "cpu-share"] = "sleep"
    ranks: Optional[List[int]] = None
    slowdown: Optional[float] = None
    probability: Optional[float] = Field(default=None, gt=0, le=1)
    distribution: Literal["pareto"] = "pareto"
    shape: float = Field(default=2.0, gt=0)
    min_slowdown: float = 1.5
    max_slowdown: float = 10.0
    seed: int = Field(default=0, ge=0)
    #: random mode: a draw holds for this many consecutive steps (a slow node stays slow)
    persist_steps: Optional[int] = Field(default=None, ge=1)
    #: cpu-share: a cgroup CPU quota, competing processes, or the quota where allowed (auto)
    cpu_share_by: Optional[Literal["auto", "cgroup", "competitors"]] = None

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, value: Optional[List[int]]) -> Optional[List[int]]:
        if value is None:
            return value
        if not value:
            raise ValueError("ranks must list at least one rank")
        found: List[Tuple[Tuple[Any, ...], str]] = []
        first: Dict[int, int] = {}
        for i, rank in enumerate(value):
            if rank < 0:
                found.append(((i,), f"ranks must be 0 or more, not {rank}"))
            elif rank in first:
                found.append(((i,), f"rank {rank} is listed twice (also ranks[{first[rank]}])"))
            first.setdefault(rank, i)
        if found:
            raise keyed_errors(found, value)
        return value

    @field_validator("slowdown", "min_slowdown", "max_slowdown")
    @classmethod
    def _factor(cls, value: Optional[float]) -> Optional[float]:
        if value is not None and value < 1:
            raise ValueError(
                f"a slowdown is a factor on the rank's compute time, at least 1 "
                f"(1.5 = 50 % slower), not {value:g}"
            )
        return value

    @model_validator(mode="after")
    def _mode(self) -> StragglerSpec:
        """Every rule between the straggler's keys that fails, each at the key it is about."""
        found: List[Tuple[Tuple[Any, ...], str]] = []
        if self.probability is None:
            if self.slowdown is None or self.ranks is None:
                found.append(
                    ((), "give 'ranks' and 'slowdown' (fixed mode) or 'probability' (random mode)")
                )
        elif self.slowdown is not None:
            message = (
                "'slowdown' is the fixed mode's factor; random mode draws it between "
                "'min_slowdown' and 'max_slowdown'"
            )
            found.append((("slowdown",), message))
        if self.min_slowdown > self.max_slowdown:
            found.append((("min_slowdown",), "min_slowdown is larger than max_slowdown"))
        if self.persist_steps is not None and self.probability is None:
            message = (
                "persist_steps is random mode's (give 'probability'); fixed mode slows its "
                "ranks in every step"
            )
            found.append((("persist_steps",), message))
        if self.cpu_share_by is not None and self.kind != "cpu-share":
            message = (
                f"cpu_share_by says how kind cpu-share limits the rank's CPU; this straggler "
                f"is kind {self.kind} (did you mean kind: cpu-share?)"
            )
            found.append((("cpu_share_by",), message))
        whole = self.slowdown is None or (self.slowdown == round(self.slowdown) >= 2)
        if self.kind in WHOLE_KINDS and not whole:
            message = (
                f"kind {self.kind} {WHOLE_KINDS[self.kind]}, so its slowdown is a whole "
                f"number, at least 2, not {self.slowdown:g} (did you mean "
                f"{max(2, round(self.slowdown or 2))}?)"
            )
            found.append((("slowdown",), message))
        if found:
            raise keyed_errors(found)
        return self


class InjectSpec(BaseModel):
    """``inject``: what to do to the runs on purpose."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    straggler: Optional[StragglerSpec] = None

    def run_value(self) -> Optional[Dict[str, Any]]:
        """What run.json carries (None: nothing injected)."""
        if self.straggler is None:
            return None
        value = self.straggler.model_dump(exclude_none=True)
        if value.get("kind") == "sleep":  # the default: run.json as before kinds existed
            del value["kind"]
        return {"straggler": value}


def run_problem(
    inject: Optional[InjectSpec], options: Any, world: int
) -> Optional[Tuple[Tuple[Any, ...], str]]:
    """Why a run of ``world`` ranks cannot inject or keep backups: ``(where below the
    spec, message)``; None when it can. ``where`` is ``("inject", ...)`` or
    ``("options", "backup_workers")`` (the caller places it)."""
    backups = getattr(options, "backup_workers", None)
    if backups is not None and backups >= world:
        return (
            ("options", "backup_workers"),
            f"backup_workers {backups} leaves no gradient to average with {world} rank(s): "
            f"it must be below the number of ranks (at most {world - 1} here)",
        )
    st = inject.straggler if inject is not None else None
    if st is not None and st.ranks is not None and max(st.ranks) >= world:
        return (
            ("inject", "straggler", "ranks"),
            f"rank {max(st.ranks)} is outside the world of {world} rank(s) "
            f"(ranks are 0 to {world - 1})",
        )
    return None


#: why a framework cannot keep backup workers (docs/backup-workers.md); pytorch can
BACKUP_REFUSALS = {
    "horovod": "Horovod's allreduce waits for every rank's tensor and cannot leave a rank "
    "out of a step; use framework pytorch",
    "mxnet": "MXNet's dist_sync kvstore servers wait for every worker's push before they "
    "update; use framework pytorch",
    "tensorflow": "MultiWorkerMirroredStrategy's collective allreduce needs every worker's "
    "gradient; use framework pytorch",
    "keras": "Keras trains through MultiWorkerMirroredStrategy, whose allreduce needs every "
    "worker's gradient; use framework pytorch",
}


def effective_inject(spec: Any, variant: Any) -> Tuple[Optional[InjectSpec], Tuple[Any, ...]]:
    """The run's ``inject`` (a variant's wins) and where it is written in the spec."""
    if variant is not None and getattr(variant, "inject", None) is not None:
        return variant.inject, ("variants", spec.variants.index(variant))
    return getattr(spec, "inject", None), ()


def plan_problem(
    spec: Any, index: int, variant: Any, world: int
) -> Optional[Tuple[Tuple[Any, ...], str]]:
    """Why framework ``index`` of ``spec`` cannot run a ``world``-rank run with its
    ``backup_workers`` and the run's ``inject``: ``(spec location, message)``, or None."""
    entry = spec.frameworks[index]
    backups = getattr(entry.options, "backup_workers", None)
    where = ("frameworks", index, "backup_workers")
    if backups is not None and entry.name in BACKUP_REFUSALS:
        return where, f"{entry.id_label}: backup_workers: {BACKUP_REFUSALS[entry.name]}"
    if backups is not None and spec.mode == "allreduce":
        return where, "backup_workers applies to training (mode throughput or convergence)"
    inject, base = effective_inject(spec, variant)
    if inject is not None and inject.straggler is not None and entry.name != "pytorch":
        return base + ("inject", "straggler"), (
            f"{entry.id_label}: straggler injection is implemented in the pytorch workload "
            "only (this framework would run without it)"
        )
    problem = run_problem(inject, entry.options, world)
    if problem is None:
        return None
    loc, message = problem
    return (where if loc[0] == "options" else base + loc), message


#: the precisions the backup-worker step runs in (it has no autocast yet)
BACKUP_PRECISIONS = ("fp32", "tf32")


def backup_precision_problem(
    spec: Any, index: int, variant: Any, precision: str
) -> Optional[Tuple[Tuple[Any, ...], str]]:
    """Why framework ``index`` cannot keep ``backup_workers`` in the run's ``precision``:
    ``(where the precision is written, message)``, or None. The pytorch workload refuses it
    at run time (``ddlbench/workloads/pytorch/backup_sync.py``)."""
    entry = spec.frameworks[index]
    if getattr(entry.options, "backup_workers", None) is None or precision in BACKUP_PRECISIONS:
        return None
    where: Tuple[Any, ...] = ("precision",)
    if variant is not None and getattr(variant, "precision", None) is not None:
        where = ("variants", spec.variants.index(variant), "precision")
    elif entry.options.precision is not None:
        where = ("frameworks", index, "precision")
    elif "precision" not in spec.model_fields_set:
        where = ("frameworks", index, "backup_workers")
    return where, (
        f"{entry.id_label}: backup_workers runs in precision fp32 or tf32 only (the "
        f"backup-worker step has no autocast yet), not {precision}; set precision: fp32 "
        "or tf32 for this entry, or drop backup_workers (ddlbench docs backup-workers)"
    )


def run_inject(spec: Any, variant: Any) -> Optional[Dict[str, Any]]:
    """run.json's ``inject`` of a run (None: nothing injected)."""
    inject = effective_inject(spec, variant)[0]
    return None if inject is None else inject.run_value()
