"""ddlbench retry CAMPAIGN."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import click

from ddlbench.cli.common import campaign_dir, no_out_option, results_option


@click.command(
    epilog="""\b
Examples:
  ddlbench retry resnet50-scaling --failed          # every run that ended without success
  ddlbench retry resnet50-scaling --state TIMEOUT   # only the runs that hit the time limit
  ddlbench retry resnet50-scaling --run pytorch-resnet50-n2x4-b64-r1
  ddlbench retry quickstart --results /scratch/me/results
  ddlbench wait resnet50-scaling
"""
)
@click.argument("campaign")
@results_option
@no_out_option
@click.option(
    "--failed",
    is_flag=True,
    help="Retry every run whose newest attempt ended without success: FAILED, TIMEOUT, "
    "CANCELLED, NODE_FAIL, OUT_OF_MEMORY, SUBMIT_FAILED, LOST (the default selection).",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Retry only runs whose newest attempt ended in STATE (repeatable).",
)
@click.option(
    "--run",
    "run_ids",
    multiple=True,
    metavar="ID",
    help="Retry this run (repeatable), whatever way it ended, even COMPLETED.",
)
@click.option("--serial", is_flag=True, help="Chain the retried runs (afterany), one at a time.")
def command(
    campaign: str,
    results: Path,
    failed: bool,
    states: Tuple[str, ...],
    run_ids: Tuple[str, ...],
    serial: bool,
) -> None:
    """Submit new attempts of CAMPAIGN's runs that ended without success.

    The old attempts are kept (`ddlbench status --json` counts them); reports use each run's
    newest attempt. A run still pending or running is never retried.
    """
    from ddlbench.campaign.states import FINAL, UNSUCCESSFUL
    from ddlbench.errors import InputError
    from ddlbench.execute import retry_campaign

    wanted: Optional[set] = None
    if states:
        wanted = {s.upper() for s in states}
        bad = sorted(wanted - set(FINAL))
        if bad:
            raise InputError(
                f"--state {', '.join(bad)}: not a state a run ends in "
                f"(one of {', '.join(sorted(FINAL))})"
            )
    elif failed or not run_ids:
        wanted = set(UNSUCCESSFUL)
    root = campaign_dir(results, campaign)
    summary = retry_campaign(
        root, run_ids=list(run_ids) or None, states=wanted, serial=serial, echo=click.echo
    )
    if summary.failed:
        raise SystemExit(1)
