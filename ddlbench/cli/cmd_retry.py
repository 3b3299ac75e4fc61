"""ddlbench retry CAMPAIGN."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import click

from ddlbench.cli.common import campaign_dir, no_out_option, quiet_option, results_option


@click.command(
    epilog="""\b
Examples:
  ddlbench retry resnet50-scaling --failed          # every run that ended without success
  ddlbench retry resnet50-scaling --state TIMEOUT   # only the runs that hit the time limit
  ddlbench retry resnet50-scaling --run pytorch-resnet50-n2x4-b64-r1
  ddlbench retry quickstart --results /scratch/me/results
  ddlbench retry resnet50-scaling --state HUNG --comm-debug
  ddlbench retry resnet50-scaling --failed --exclude-bad-nodes
  ddlbench wait resnet50-scaling
"""
)
@click.argument("campaign")
@results_option
@no_out_option
@click.option(
    "--failed",
    is_flag=True,
    help="Retry every run whose newest attempt ended without success: FAILED, HUNG, TIMEOUT, "
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
@quiet_option
@click.option(
    "--exclude-bad-nodes",
    is_flag=True,
    help="Keep the new attempts off the nodes whose pre-flight health check failed in this "
    "campaign (sbatch --exclude; Slurm only).",
)
@click.option(
    "--comm-debug",
    is_flag=True,
    help="Switch the communication libraries' debug output on for the new attempts "
    "(NCCL_DEBUG=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL...; `ddlbench docs bad-nodes`).",
)
def command(
    campaign: str,
    results: Path,
    failed: bool,
    states: Tuple[str, ...],
    run_ids: Tuple[str, ...],
    serial: bool,
    exclude_bad_nodes: bool = False,
    comm_debug: bool = False,
    quiet: bool = False,
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
    from ddlbench.cli.retry_env import retry_environment

    retry_environment(root, exclude_bad_nodes, comm_debug, click.echo)
    summary = retry_campaign(
        root,
        run_ids=list(run_ids) or None,
        states=wanted,
        serial=serial,
        echo=click.echo,
        progress=not quiet,
    )
    if summary.failed:
        raise SystemExit(1)
