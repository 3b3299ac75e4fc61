"""Options and helpers shared by the commands."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import click

from ddlbench.errors import InputError, Problem
from ddlbench.names import check_safe_name

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
    """The folder of ``campaign``; with none named, the most recently created campaign."""
    if campaign:
        try:
            check_safe_name(campaign, "campaign name")
        except ValueError as exc:
            raise InputError(Problem(str(exc))) from None
        path = results / campaign
        if not (path / "campaign.json").is_file():
            known = list_campaigns(results)
            from ddlbench.errors import did_you_mean

            raise InputError(
                Problem(
                    f"no campaign '{campaign}' in {results}{did_you_mean(campaign, known)}"
                    + (f"; known: {', '.join(known)}" if known else "")
                )
            )
        return path
    known = list_campaigns(results)
    if not known:
        raise InputError(Problem(f"no campaigns in {results}; run 'ddlbench submit SPEC' first"))
    return max(
        (results / name for name in known), key=lambda p: (p / "campaign.json").stat().st_mtime
    )


def list_campaigns(results: Path) -> list:
    if not results.is_dir():
        return []
    return sorted(p.name for p in results.iterdir() if (p / "campaign.json").is_file())


def is_tty() -> bool:
    return sys.stderr.isatty()
