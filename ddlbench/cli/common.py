"""Options and helpers shared by the commands."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import click

results_option = click.option(
    "--results",
    "results",
    type=click.Path(file_okay=False, path_type=Path),
    default=lambda: os.environ.get("DDLBENCH_RESULTS", "results"),
    show_default="./results, or $DDLBENCH_RESULTS",
    help="Folder that holds the campaigns.",
)

cluster_option = click.option(
    "--cluster",
    "cluster",
    metavar="PROFILE",
    default=None,
    help="Cluster profile: a name in configs/clusters/ (iris, local, localslurm) or a path. "
    "Overrides the spec's 'cluster'.",
)


def stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def stdout_console():
    """Console for tables: as wide as needed when stdout is a pipe, so ids are never cut."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=250)
    return console


def campaign_dir(results: Path, campaign: Optional[str]) -> Path:
    """The folder of ``campaign`` (a name under ``results``, or a path); with none named, the
    latest campaign. One rule for every command: :mod:`ddlbench.campaign.resolve`."""
    from ddlbench.campaign.resolve import resolve_campaign

    return resolve_campaign(campaign, results)


def is_tty() -> bool:
    return sys.stderr.isatty()
