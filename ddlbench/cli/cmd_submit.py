"""ddlbench submit SPEC."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ddlbench.plan import Plan

from ddlbench.cli.common import (
    campaign_dir,
    check_output_folder,
    cluster_option,
    deprecated_option,
    given,
    quiet_option,
    results_option,
    results_source,
    runs_text,
    stderr_console,
)


@click.command(
    epilog="""\b
Examples:
  ddlbench submit configs/resnet50.yaml --dry-run        # render only, contact no scheduler
  ddlbench submit configs/quickstart.yaml                # local executor (cluster: local)
  ddlbench submit configs/quickstart.yaml --cluster localslurm --campaign qs-slurm
  ddlbench submit configs/resnet50.yaml --exclusive      # whole nodes, one run at a time
  ddlbench submit --resume resnet50-scaling              # submit what never was
  ddlbench submit configs/quickstart.yaml --results /scratch/me/results
  ddlbench wait quickstart --results /scratch/me/results # the same --results everywhere
"""
)
@click.argument("spec_path", metavar="SPEC", required=False)
@cluster_option
@click.option("--campaign", default=None, help="Campaign name (default: the spec's name).")
@results_option
@deprecated_option(
    "--out",
    "old_out",
    "--results DIR",
    "--results names the folder that holds the campaigns on every command",
)
@click.option("--dry-run", is_flag=True, help="Render every run and the manifest; submit nothing.")
@click.option(
    "--serial",
    is_flag=True,
    help="Chain runs with afterany dependencies so that only one runs at a time.",
)
@click.option(
    "--exclusive",
    is_flag=True,
    help="Ask for whole nodes (#SBATCH --exclusive) and chain runs like --serial.",
)
@click.option("--array", is_flag=True, help="Group runs of the same shape into job arrays.")
@quiet_option
@click.option(
    "--resume",
    "resume",
    metavar="CAMPAIGN",
    default=None,
    help="Submit the runs of an existing campaign that were never submitted.",
)
@click.pass_context
def command(
    ctx: click.Context,
    spec_path: str | None,
    cluster: str | None,
    campaign: str | None,
    results: Path,
    old_out: Path | None,
    dry_run: bool,
    serial: bool,
    exclusive: bool,
    array: bool,
    resume: str | None,
    quiet: bool,
) -> None:
    """Render one sbatch script per run of SPEC and submit them.

    Each run gets a job script results/CAMPAIGN/jobs/RUN-ID.sh; its folder runs/RUN-ID/
    (Slurm output, run.json, logs/) is created when it is submitted. Submitting
    the same campaign again never submits a run twice: runs already submitted are skipped.
    With a 'local' cluster profile the runs execute on this machine, one at a time by default.
    """
    from ddlbench.errors import InputError, Problem

    if old_out is not None:
        if given(ctx, "results") and Path(old_out) != Path(results):
            raise InputError(Problem("--out and --results name different folders; use --results"))
        results = old_out
    if resume:
        if spec_path or dry_run:
            raise InputError(Problem("--resume takes a campaign name and no SPEC or --dry-run"))
        _submit(campaign_dir(results, resume), serial or exclusive, array, True, quiet)
        return
    if not spec_path:
        raise InputError(Problem("missing SPEC (or use --resume CAMPAIGN)"))

    from ddlbench.plan import plan_runs
    from ddlbench.render import render_campaign
    from ddlbench.spec.load import choose_profile, load_spec

    _check_name(campaign)  # before anything is printed: a bad name is never echoed raw
    check_output_folder(results, f"results folder ({results_source(ctx)})")
    spec = load_spec(spec_path)
    profile, why = choose_profile(spec, cluster)
    spec_value = _with_exclusive(spec.value) if exclusive else spec.value
    plan = plan_runs(spec_value, profile.value, spec.source)
    name = campaign or spec_value.name
    console = stderr_console(quiet)  # -q: no progress; errors are raised, not printed here
    label = name if name == spec_value.name else f"campaign {name} (spec {spec_value.name})"
    console.print(
        f"{label}: {runs_text(len(plan.runs))} on cluster profile '{profile.value.name}' ({why})"
    )
    _warn_plan(plan, spec.source)  # before anything is submitted; -q keeps warnings
    profile_text = profile.source.text + ("\n# --exclusive\n" if exclusive else "")
    rendered = _render(render_campaign, plan, name, results, spec, profile, profile_text, console)
    console.print(f"rendered {runs_text(len(plan.runs))} into {rendered.root}")
    if dry_run:
        _dry_run_done(rendered.root)
        return
    _submit(rendered.root, serial or exclusive, array, False, quiet)


def _check_name(campaign: str | None) -> None:
    """Refuse a ``--campaign`` that cannot be a folder name (the message escapes it)."""
    if campaign is None:
        return
    from ddlbench.errors import InputError, Problem
    from ddlbench.names import check_safe_name

    try:
        check_safe_name(campaign, "--campaign: campaign name")
    except ValueError as exc:
        raise InputError(Problem(str(exc))) from None


def _with_exclusive(spec_value):
    """The spec with ``slurm.exclusive`` set (``--exclusive``)."""
    return spec_value.model_copy(
        update={"slurm": spec_value.slurm.model_copy(update={"exclusive": True})}
    )


def _dry_run_done(root: Path) -> None:
    """Mark the campaign a dry run (never the latest while a submitted one exists)."""
    from ddlbench.campaign.resolve import mark_dry_run

    mark_dry_run(root)
    click.echo(str(root))


def _render(render_campaign, plan, name, results, spec, profile, profile_text, console):
    total = len(plan.runs)
    if total < 200 or not console.is_terminal or console.quiet:
        return render_campaign(
            plan, name, results, spec.source.text, spec.path, profile_text, profile.path
        )
    from rich.progress import Progress

    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("rendering", total=total)

        def progress(done: int, _total: int) -> None:
            if done % 100 == 0 or done == _total:
                bar.update(task, completed=done)

        return render_campaign(
            plan,
            name,
            results,
            spec.source.text,
            spec.path,
            profile_text,
            profile.path,
            progress=progress,
        )


def _warn_plan(plan: Plan, source) -> None:
    """The runs that would fail at their start for their data set, and the transformer runs
    predicted not to fit the profile's device memory: one ``warning:`` line each on stderr,
    as ``plan`` prints them, with or without ``-q``."""
    from ddlbench.plan.data_check import data_warnings
    from ddlbench.plan.memory import memory_warnings

    for line in data_warnings(plan, source):
        click.echo(line, err=True)
    for line in memory_warnings(plan):
        click.echo(f"warning: {line}", err=True)


def _submit(root: Path, serial: bool, array: bool, resume: bool, quiet: bool) -> None:
    from ddlbench.execute import submit_campaign

    summary = submit_campaign(root, serial=serial, array=array, resume=resume, progress=not quiet)
    if getattr(summary, "failed", 0):
        raise SystemExit(1)
