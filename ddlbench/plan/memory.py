"""Predicted peak memory per rank of each planned transformer run, and the runs that will not
fit the profile's ``device_memory_gib`` (docs/memory.md). Shown by ``plan``; ``submit`` warns
before anything is submitted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ddlbench.analyse.lm_memory import GIB, predict_memory
from ddlbench.values import fsig

if TYPE_CHECKING:
    from ddlbench.plan.planner import Plan, Run


def _memory_args(run: Run) -> Tuple[Any, ...]:
    """A transformer run's arguments of ``predict_memory`` and ``memory_fixes``."""
    return (
        run.model,
        int(run.lm["seq_len"]),
        run.batch_size,
        run.precision,
        str(run.lm["parallel"]),
        str(run.lm["activation_checkpointing"]),
        run.world_size,
        run.tasks_per_node,
    )


def run_memory(run: Run) -> Optional[Dict[str, float]]:
    """``predict_memory`` of a transformer run (None for a CNN run)."""
    if not run.lm:
        return None
    return predict_memory(*_memory_args(run), **_memory_options(run))


def _memory_options(run: Run) -> Dict[str, Any]:
    """The keyword arguments of ``predict_memory`` and ``memory_fixes``: a one-rank group and
    the micro-batches per step (their accumulated gradients)."""
    return {"one_rank_wrapped": _wrapped(run), "grad_accum": int(run.lm.get("grad_accum") or 1)}


def _wrapped(run: Run) -> bool:
    from ddlbench.analyse.lm_memory import wraps_one_rank

    return wraps_one_rank(run.framework_options)


def memory_gib(plan: Plan) -> Dict[str, Optional[float]]:
    """Predicted peak GiB per rank, by run id (None for CNN runs)."""
    out: Dict[str, Optional[float]] = {}
    for run in plan.runs:
        predicted = run_memory(run)
        out[run.run_id] = None if predicted is None else predicted["total"] / GIB
    return out


#: what the prediction leaves out on a GPU (the CUDA context, about 0.5 GB; NCCL's buffers,
#: hundreds of MB per process; the caching allocator's slack): a run predicted within this
#: margin of ``device_memory_gib`` is warned about as likely not to fit (docs/memory.md). A
#: judgement from those figures, not a measurement: the larger of 2 GiB and 5 % of the device
HEADROOM_GIB = 2.0
HEADROOM_SHARE = 0.05


def headroom_gib(limit: float) -> float:
    """The margin below ``device_memory_gib`` that a prediction should stay under."""
    return max(HEADROOM_GIB, HEADROOM_SHARE * limit)


def _advice(run: Run, limit: float) -> str:
    """The single changes predicted to bring ``run`` under ``limit`` GiB (else those that
    lower it most); never the mode or checkpointing the run already uses."""
    from ddlbench.analyse.lm_memory import memory_fixes

    fixes = memory_fixes(*_memory_args(run), **_memory_options(run))
    fit = [f"{text} ({fsig(b / GIB, 3)} GiB)" for text, b in fixes if b / GIB <= limit]
    near = [f"{text} ({fsig(b / GIB, 3)} GiB)" for text, b in fixes[:3]]
    if fit:
        return f"predicted to fit with: {', '.join(fit)}"
    if near:
        return f"no single change fits; combine: {', '.join(near)}"
    return "no change to this run lowers it"


def memory_warnings(plan: Plan) -> List[str]:
    """One line per configuration whose predicted peak exceeds the device memory, or comes
    within :func:`headroom_gib` of it, with the changes predicted to make it fit."""
    limit = plan.profile.device_memory_gib
    if limit is None:
        return []
    room = headroom_gib(limit)
    lines = []
    seen = set()
    for run in plan.runs:
        predicted = run_memory(run)
        if predicted is None or run.group in seen:
            continue
        seen.add(run.group)
        gib = predicted["total"] / GIB
        if gib <= limit - room:
            continue
        advice = _advice(run, limit - room)
        where = f"the {limit:g} GiB of profile '{plan.profile.name}' (device_memory_gib)"
        if gib > limit:
            lines.append(
                f"{run.group}: predicted peak {fsig(gib, 3)} GiB per rank exceeds {where}; it will "
                f"run out of memory: {advice}"
            )
        else:
            lines.append(
                f"{run.group}: predicted peak {fsig(gib, 3)} GiB per rank is within {room:.3g} GiB "
                f"of {where}, which the CUDA context, NCCL's buffers and the allocator's slack "
                f"(not predicted) may take; it will likely run out of memory: "
                f"{advice}"
            )
    return lines
