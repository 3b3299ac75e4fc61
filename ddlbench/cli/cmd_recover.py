"""ddlbench recover CAMPAIGN."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ddlbench.cli.common import campaign_dir, results_option


@click.command(
    epilog="""\b
Examples:
  ddlbench recover resnet50-scaling          # rebuild a lost or emptied state.sqlite
  ddlbench recover resnet50-scaling --json   # what was found, as JSON
  ddlbench recover quickstart --force        # rebuild even an intact store (kept aside)
  ddlbench submit --resume quickstart        # then: submits only runs that never ran

Exit codes: 0 rebuilt (or nothing to do), 1 some runs could not be established (they are
marked LOST; `ddlbench retry CAMPAIGN --failed` runs them again), 2 bad input.
"""
)
@click.argument("campaign")
@results_option
@click.option("--force", is_flag=True, help="Rebuild even when the store looks intact.")
@click.option("--json", "as_json", is_flag=True, help="Print what was recovered as JSON.")
def command(campaign: str, results: Path, force: bool, as_json: bool) -> None:
    """Rebuild CAMPAIGN's store (state.sqlite) from its run folders, manifest and scheduler.

    Use it when `status` or `submit --resume` refuse to start a new store because run folders
    already hold output (the store was deleted, emptied or corrupted). Job ids come from the
    run folders (logs/attempt-*/job.txt, slurm-*.out) and, on Slurm, from squeue (jobs still
    queued); how each ended comes from Slurm (sacct, the jobcomp file, scontrol), else from the
    run folder (rank logs, exit_code, the Slurm output). The old store is kept as
    state.sqlite.lost-TIME. What could not be established is listed; those runs are LOST.
    """
    from ddlbench.execute.recover import recover_campaign

    root = campaign_dir(results, campaign)
    out = recover_campaign(root, force=force, echo=lambda m: click.echo(m, err=True))
    if as_json:
        click.echo(json.dumps(out.as_dict(), indent=2, default=str))
    else:
        _print(out)
    click.get_current_context().exit(1 if out.unknown else 0)


def _print(out) -> None:
    from ddlbench.campaign.resolve import campaign_words

    for note in out.notes:
        click.echo(note)
    if out.intact:
        return
    for path in out.moved_aside:
        click.echo(f"kept the old store as {path}")
    counts: dict = {}
    for a in out.attempts:
        counts[a["state"]] = counts.get(a["state"], 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
    click.echo(f"rebuilt {out.store}: {len(out.attempts)} attempt(s) recovered ({summary})")
    for line in out.unknown:
        click.echo(f"could not establish: {line}")
    click.echo(f"next: `ddlbench status {campaign_words(Path(out.store).parent)}`")
