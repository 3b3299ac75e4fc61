"""ddlbench cancel CAMPAIGN."""

from __future__ import annotations

from pathlib import Path
from typing import Tuple

import click

from ddlbench.cli.common import campaign_dir, no_out_option, results_option


@click.command(
    epilog="""\b
Examples:
  ddlbench cancel resnet50-scaling                 # every pending or running run
  ddlbench cancel resnet50-scaling --run pytorch-resnet50-n4x4-b64-r0
  ddlbench cancel quickstart --results /scratch/me/results
  ddlbench retry resnet50-scaling                  # later: run the cancelled ones again
"""
)
@click.argument("campaign")
@results_option
@no_out_option
@click.option(
    "--run",
    "run_ids",
    multiple=True,
    metavar="ID",
    help="Cancel only this run (repeatable). Default: the whole campaign.",
)
def command(campaign: str, results: Path, run_ids: Tuple[str, ...]) -> None:
    """Cancel the pending and running runs of CAMPAIGN.

    On Slurm this is one scancel for all the campaign's jobs; on the local executor a pending
    run is dropped from the queue and a running one is stopped (SIGTERM to its processes, then
    SIGKILL), and cancel returns once it is. Runs end up CANCELLED; their attempts stay in the
    store, and `ddlbench retry CAMPAIGN` submits them again. Cancelling the whole campaign also
    stops a `ddlbench submit` of it that is still going and marks runs never submitted as
    CANCELLED.
    """
    from ddlbench.execute import cancel_campaign

    root = campaign_dir(results, campaign)
    cancel_campaign(root, run_ids=list(run_ids) or None, echo=click.echo)
