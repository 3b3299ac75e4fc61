"""What a framework contributes to ddlbench: its launcher description.

Adding a framework means adding one module in this package that defines a ``LAUNCHER``
(a :class:`Launcher`), one template ``slurm_templates/<name>.sh.j2`` and one workload under
``ddlbench/workloads/``. Nothing else has to change: the registry finds launchers by scanning
this package, the spec validates each framework entry against the launcher's option model, and
the renderer picks the template by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Literal, Optional, Tuple, Type

from pydantic import BaseModel, ConfigDict, Field

from ddlbench.frameworks.transports import TransportSetting, refused
from ddlbench.workloads.vocabulary import KNOBS, LAYOUTS, PRECISIONS, TRAINING_MODES


class FrameworkOptions(BaseModel):
    """Base of every framework's options; unknown keys are errors.

    Options left unset are not passed to the workload, which then uses its own default
    (documented in docs/workloads.md). Values are not coerced (strict): a YAML bool or
    string is not a number, a string is not a bool.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    #: intra-op threads per rank on CPU (default: SLURM_CPUS_PER_TASK, else all cores / ranks)
    threads: Optional[int] = Field(default=None, ge=1)
    #: data-loading worker processes per rank for file data sets
    data_workers: Optional[int] = Field(default=None, ge=0)
    #: seconds to wait for all ranks to join the process group or rendezvous
    timeout_s: Optional[int] = Field(default=None, ge=1)
    #: performance knobs for this framework only, overriding the spec's (a variant's win)
    precision: Optional[Literal[PRECISIONS]] = None  # type: ignore[valid-type]
    layout: Optional[Literal[LAYOUTS]] = None  # type: ignore[valid-type]
    compile: Optional[bool] = None
    #: synchronous SGD with this many backup workers (pytorch only; docs/backup-workers.md)
    backup_workers: Optional[int] = Field(default=None, ge=0)

    def knob_overrides(self) -> Dict[str, Any]:
        """The knobs this entry sets (``precision``, ``layout``, ``compile``)."""
        return {k: getattr(self, k) for k in KNOBS if getattr(self, k) is not None}

    def id_suffix(self) -> str:
        """Extra words for run ids when two entries use the same framework (default none)."""
        return ""


@dataclass(frozen=True)
class Launcher:
    """How one framework is configured, planned and launched."""

    name: str
    #: pydantic model of the framework's options in the spec's ``frameworks`` entries
    options: Type[FrameworkOptions]
    #: workload module under ``ddlbench.workloads`` for (mode, options)
    workload: Callable[[str, Any], str]
    #: modes the framework's workloads implement
    modes: Tuple[str, ...] = TRAINING_MODES
    #: one-line description for ``--help`` and docs
    summary: str = ""
    #: template name; default ``<name>.sh.j2``
    template: str = ""
    #: extra values for the template, computed from (options, run)
    template_vars: Callable[[Any, Any], Dict[str, Any]] = field(default=lambda opts, run: {})
    #: communication backend name for display and run.json
    backend: Callable[[Any, str], str] = field(default=lambda opts, device: "")
    #: whether srun must start the ranks as MPI processes (``srun --mpi=<profile's mpi>``)
    uses_mpi: Callable[[Any], bool] = field(default=lambda opts: False)
    #: Python modules the workload imports; ``ddlbench doctor`` checks that they import
    imports: Callable[[Any], Tuple[str, ...]] = field(default=lambda opts: ())
    #: option sets that ``ddlbench doctor`` probes when no spec names the entries
    probe_options: Tuple[Dict[str, Any], ...] = ({},)
    #: why the framework cannot run the knobs ``{precision, layout, compile}`` on ``device``
    #: (``cpu``/``gpu``) with ``options``: a message for the spec's error, or None
    knob_problem: Callable[[Dict[str, Any], str, Any], Optional[str]] = field(
        default=lambda knobs, device, opts: None
    )

    #: an option the profile's device (``cpu``/``gpu``) cannot run, checked when the spec is
    #: planned: (its key in the entry, what it needs, what to use instead), or None
    device_problem: Callable[[Any, str], Optional[Tuple[str, str, str]]] = field(
        default=lambda opts, device: None
    )

    #: what ``network.transport`` (``rdma``/``tcp``) sets for (transport, options, device), or
    #: why it cannot be done (:mod:`ddlbench.frameworks.transports`)
    transport: Callable[[str, Any, str], TransportSetting] = field(
        default=lambda transport, opts, device: refused(
            "ddlbench does not know how this framework chooses its transport"
        )
    )

    @property
    def template_name(self) -> str:
        return self.template or f"{self.name}.sh.j2"
