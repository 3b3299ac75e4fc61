"""ddlbench plan SPEC."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import click

from ddlbench.cli.common import cluster_option, node_hours_text, stdout_console

if TYPE_CHECKING:
    from ddlbench.plan import Plan


@click.command(
    epilog="""\b
Examples:
  ddlbench plan configs/resnet50.yaml
  ddlbench plan configs/quickstart.yaml --cluster localslurm
  ddlbench plan configs/large-batch.yaml --json | jq '.runs[].run_id'
  ddlbench plan configs/llama3-8b.yaml --cluster h100x8   # memory per rank (8-GPU profile)
"""
)
@click.argument("spec_path", metavar="SPEC")
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def command(spec_path: str, cluster: str | None, as_json: bool) -> None:
    """Show the runs a spec expands to, without rendering or submitting anything.

    One row per run: id, framework, nodes, GPUs (or CPU ranks), per-device and global batch
    (with backup workers also b and the applied batch, (ranks - b) x batch/dev, the samples
    whose gradient a step applies), peak learning rate after scaling, and the node-hours the
    run requests (nodes x time limit);
    for transformer models the predicted peak memory per rank, with a warning for each run
    that will not fit the profile's device_memory_gib. Warnings about too little measurement
    (fewer than 3 repeats, a measured window that may be shorter than 5 s) go to stderr as
    FILE:LINE: warning: lines.
    """
    from ddlbench.plan import plan_runs
    from ddlbench.plan.advice import measurement_warnings
    from ddlbench.plan.data_check import data_warnings
    from ddlbench.spec.load import choose_profile, load_spec

    spec = load_spec(spec_path)
    profile, why = choose_profile(spec, cluster)
    from ddlbench.plan.memory import memory_warnings

    plan = plan_runs(spec.value, profile.value, spec.source)
    for line in measurement_warnings(spec.value, spec.source) + data_warnings(plan, spec.source):
        click.echo(line, err=True)  # stderr: --json stays clean
    if as_json:
        click.echo(json.dumps(_plan_json(plan, spec_path, why), indent=1))
    else:
        _print_plan(plan, spec.value.name, why)
    for line in memory_warnings(plan):
        click.echo(f"warning: {line}", err=True)


def _plan_json(plan: Plan, spec_path: str, why: str) -> Dict[str, Any]:
    """The plan as ``--json`` prints it."""
    from ddlbench.plan.memory import memory_gib

    p = plan.profile
    memory = memory_gib(plan)
    return {
        "spec": spec_path,
        "cluster": p.name,
        "cluster_source": why,
        "scheduler": p.scheduler,
        "device": p.device,
        "node_hours": round(plan.node_hours, 3),
        "runs": [
            {
                "run_id": r.run_id,
                "framework": r.framework,
                "label": r.label,
                "workload": r.workload,
                "backend": r.backend,
                "nodes": r.nodes,
                "tasks_per_node": r.tasks_per_node,
                "gpus": r.gpus,
                "world_size": r.world_size,
                "batch_size": r.batch_size,
                "global_batch_size": r.global_batch_size,
                "backup_workers": backup_workers(r),
                "applied_global_batch_size": applied_global_batch(r),
                "lr": r.lr,
                "variant": r.variant,
                "transport": r.transport,
                "repeat": r.repeat,
                "time_limit": r.time_limit,
                "node_hours": round(r.node_hours, 4),
                "inject": r.inject,
                **({"lm": r.lm, "memory_gib": round(memory[r.run_id] or 0, 3)} if r.lm else {}),
            }
            for r in plan.runs
        ],
    }


def backup_workers(r: Any) -> Optional[int]:
    """The run's ``backup_workers`` (None: plain synchronous training)."""
    b = (r.framework_options or {}).get("backup_workers")
    return None if b is None else int(b)


def applied_global_batch(r: Any) -> int:
    """The samples whose gradient one step applies: ``(ranks - b) x`` the per-rank share of the
    global batch with ``b`` backup workers (docs/backup-workers.md), the global batch without."""
    b = backup_workers(r) or 0
    return r.global_batch_size // r.world_size * (r.world_size - b)


def _print_plan(plan: Plan, spec_name: str, why: str) -> None:
    """The plan as a table of runs between a heading and the total."""
    from rich.table import Table

    from ddlbench.plan.memory import memory_gib
    from ddlbench.report.format import fsig  # standard library only: no pandas here

    p = plan.profile
    memory = memory_gib(plan)
    lm = any(v is not None for v in memory.values())
    backups = any(backup_workers(r) is not None for r in plan.runs)
    console = stdout_console()
    console.print(
        f"[bold]{spec_name}[/]: {len(plan.runs)} runs on cluster profile "
        f"[bold]{p.name}[/] ({p.scheduler}, {p.device}) [dim]- chosen by {why}[/]"
    )
    unit = "GPUs" if p.device == "gpu" else "ranks"
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (
        (
            ("run id", "left"),
            ("framework", "left"),
            ("nodes", "right"),
            (unit, "right"),
            ("batch/dev", "right"),
            ("global batch", "right"),
        )
        + ((("b", "right"), ("applied batch", "right")) if backups else ())
        + (
            ("lr", "right"),
            ("node-h", "right"),
        )
        + ((("GiB/rank", "right"),) if lm else ())
    ):
        table.add_column(name, justify=justify)
    for r in plan.runs:
        gib = memory[r.run_id]
        table.add_row(
            r.run_id,
            f"{r.label} ({r.backend})" if r.backend else r.label,
            str(r.nodes),
            str(r.world_size),
            str(r.batch_size),
            str(r.global_batch_size),
            *(_backup_cells(r) if backups else ()),
            f"{r.lr:.4g}",
            f"{r.node_hours:.2f}",
            *((fsig(gib, 3),) if lm else ()),  # 0.412 and 0.387, not 0.4 twice
        )
    console.print(table)
    if backups:
        console.print(
            "b: backup workers (-: plain synchronous training); applied batch: the samples "
            "whose gradient a step applies, (ranks - b) x batch/dev (ddlbench docs backup-workers)"
        )
    console.print(
        f"total: {len(plan.runs)} runs, {node_hours_text(plan.node_hours)} node-hours requested "
        f"(time limit {plan.runs[0].time_limit} per run)"
    )


def _backup_cells(r: Any) -> Tuple[str, str]:
    b = backup_workers(r)
    return ("-" if b is None else str(b), str(applied_global_batch(r)))
