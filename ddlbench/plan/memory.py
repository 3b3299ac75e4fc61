"""Predicted peak memory per rank of each planned transformer run, and the runs that will not
fit the profile's ``device_memory_gib`` (docs/memory.md). Shown by ``plan``; ``submit`` warns
before anything is submitted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional

from ddlbench.analyse.lm_memory import GIB, predict_memory

if TYPE_CHECKING:
    from ddlbench.plan.planner import Plan, Run


def run_memory(run: Run) -> Optional[Dict[str, float]]:
    """``predict_memory`` of a transformer run (None for a CNN run)."""
    if not run.lm:
        return None
    return predict_memory(
        run.model,
        int(run.lm["seq_len"]),
        run.batch_size,
        run.precision,
        str(run.lm["parallel"]),
        str(run.lm["activation_checkpointing"]),
        run.world_size,
        run.tasks_per_node,
    )


def memory_gib(plan: Plan) -> Dict[str, Optional[float]]:
    """Predicted peak GiB per rank, by run id (None for CNN runs)."""
    out: Dict[str, Optional[float]] = {}
    for run in plan.runs:
        predicted = run_memory(run)
        out[run.run_id] = None if predicted is None else predicted["total"] / GIB
    return out


def memory_warnings(plan: Plan) -> List[str]:
    """One line per configuration whose predicted peak exceeds the device memory, with the
    single changes predicted to make it fit (else those that lower it most); never the mode
    or checkpointing the run already uses."""
    from ddlbench.analyse.lm_memory import memory_fixes

    limit = plan.profile.device_memory_gib
    if limit is None:
        return []
    lines = []
    seen = set()
    for run in plan.runs:
        predicted = run_memory(run)
        if predicted is None or run.group in seen:
            continue
        seen.add(run.group)
        gib = predicted["total"] / GIB
        if gib <= limit:
            continue
        fixes = memory_fixes(
            run.model,
            int(run.lm["seq_len"]),
            run.batch_size,
            run.precision,
            str(run.lm["parallel"]),
            str(run.lm["activation_checkpointing"]),
            run.world_size,
            run.tasks_per_node,
        )
        fit = [f"{text} ({b / GIB:.1f} GiB)" for text, b in fixes if b / GIB <= limit]
        near = [f"{text} ({b / GIB:.1f} GiB)" for text, b in fixes[:3]]
        advice = (
            f"predicted to fit with: {', '.join(fit)}"
            if fit
            else f"no single change fits; combine: {', '.join(near)}"
            if near
            else "no change to this run lowers it"
        )
        lines.append(
            f"{run.group}: predicted peak {gib:.1f} GiB per rank exceeds the "
            f"{limit:g} GiB of profile '{plan.profile.name}' (device_memory_gib); "
            f"it will run out of memory: {advice}"
        )
    return lines
