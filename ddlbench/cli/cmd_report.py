"""ddlbench report [CAMPAIGN] [--format html,md] [--report-dir DIR]."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import click

from ddlbench.campaign.paths import REPORT_FORMATS
from ddlbench.cli.common import (
    campaign_dir,
    check_output_folder,
    deprecated_option,
    exit_quickly,
    results_option,
)

if TYPE_CHECKING:
    pass

_FORMAT_LIST = ", ".join(REPORT_FORMATS)


def _fraction(text: str, name: str) -> float:
    from ddlbench.analyse.compare import parse_threshold
    from ddlbench.errors import InputError

    try:
        return parse_threshold(text)
    except ValueError:
        raise InputError(
            f"--{name}: expected a percentage such as 5% or 80, got {text!r}"
        ) from None


def _warn(res) -> None:
    """One line on stderr when runs' training diverged (the report's summary lists them), and
    one when a campaign with an allreduce sweep got no scaling model (its section says why)."""
    from ddlbench.report.training import diverged_warning

    line = diverged_warning(res.analysis.runs) if res.analysis is not None else None
    if line:
        click.echo(f"warning: {line}", err=True)
    if res.model_gap:
        click.echo(f"warning: no scaling model: {res.model_gap}", err=True)


@click.command(
    "report",
    epilog="""\b
Examples:
  ddlbench report                          # the most recent campaign under ./results
  ddlbench report resnet50-scaling --format html
  ddlbench report resnet50-scaling --report-dir /tmp/paper-figures
  ddlbench report quickstart --results /scratch/me/results
  ddlbench report resnet50-scaling --calibration allreduce-sweep   # + scaling model
  DDLBENCH_RESULTS=/scratch/me/results ddlbench report quickstart

Collects first when results/CAMPAIGN/data/ is missing or older than the logs. The HTML is
self-contained (figures embedded, no external fetches); the SVG figures and a copy of the
data files sit next to it. Exit 3 when no run is complete yet (a dry run, queued jobs, all
failed): the message says what is missing and what to run; a report is written only when
some runs ended without data, and shows what they left.
Definitions: `ddlbench docs metrics`; layout: `ddlbench docs reports`.
""",
)
@click.argument("campaign", required=False)
@results_option
@click.option(
    "--format",
    "formats",
    default=",".join(REPORT_FORMATS),
    show_default=True,
    help=f"Comma-separated report formats: {_FORMAT_LIST}.",
)
@click.option(
    "--report-dir",
    "report_dir",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder to write the report into (default: RESULTS/CAMPAIGN/report).",
)
@deprecated_option("--out", "old_out", "--report-dir DIR", "the folder the report is written to")
@click.option(
    "--efficiency-threshold",
    default="80%",
    show_default=True,
    help="Knee: the largest scale whose scaling efficiency is at least this.",
)
@click.option(
    "--noise-threshold",
    default="5%",
    show_default=True,
    help="A configuration is noisy when its coefficient of variation is above this.",
)
@click.option(
    "--min-gain",
    default="5%",
    show_default=True,
    help="More devices help only when the throughput gain is significant and at least this.",
)
@click.option(
    "--calibration",
    default=None,
    metavar="CAMPAIGN",
    help="A campaign with an allreduce sweep on the same cluster: feeds the predictive "
    "scaling model (`ddlbench docs scaling-model`).",
)
@click.option("--recollect", is_flag=True, help="Collect again even when data/ is up to date.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def command(
    campaign: Optional[str],
    results: Path,
    formats: str,
    report_dir: Optional[Path],
    old_out: Optional[Path],
    efficiency_threshold: str,
    noise_threshold: str,
    min_gain: str,
    calibration: Optional[str],
    recollect: bool,
    quiet: bool,
) -> None:
    """Write the report of CAMPAIGN (default: the latest campaign) and say where it is."""
    from ddlbench.errors import InputError
    from ddlbench.report.worker import early_worker

    if old_out is not None:
        if report_dir is not None and Path(report_dir) != Path(old_out):
            raise InputError("--out and --report-dir name different folders; use --report-dir")
        report_dir = old_out
    fmts = [f.strip().lower() for f in formats.split(",") if f.strip()]
    bad = [f for f in fmts if f not in REPORT_FORMATS]
    if bad or not fmts:
        raise InputError(
            f"--format: unknown format(s) {', '.join(bad) or '(none)'}; use {_FORMAT_LIST}"
        )
    eff = _fraction(efficiency_threshold, "efficiency-threshold")
    noise = _fraction(noise_threshold, "noise-threshold")
    gain = _fraction(min_gain, "min-gain")
    check_output_folder(report_dir, "--report-dir")
    root = campaign_dir(results, campaign)
    cal_root = campaign_dir(results, calibration) if calibration else None
    with early_worker() as worker:  # imports matplotlib on the other core while this one works
        from ddlbench.analyse.analysis import Settings
        from ddlbench.collect.progress import progress
        from ddlbench.collect.states import store_states
        from ddlbench.report.render import build_report

        settings = Settings(efficiency_threshold=eff, noise_threshold=noise, min_gain=gain)
        with progress("ddlbench report", quiet=quiet) as say:
            res = build_report(
                root,
                out_dir=report_dir,
                formats=fmts,
                settings=settings,
                run_states=store_states,
                progress=say,
                force_collect=recollect,
                calibration=cal_root,
                figure_worker=worker,
            )
    exit_quickly()  # every file is written, the figure worker has ended
    for fmt in fmts:
        click.echo(f"report: {res.files[fmt]}")
    _warn(res)
    if res.missing:
        from ddlbench.report.missing import NothingToReport

        raise NothingToReport(res.missing)  # the report of failures is written; exit 3
