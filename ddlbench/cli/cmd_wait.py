"""ddlbench wait [CAMPAIGN]."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import click

from ddlbench.cli.common import campaign_dir, no_out_option, results_option


@click.command(
    epilog="""\b
Examples:
  ddlbench wait                            # the most recent campaign under ./results
  ddlbench wait quickstart                 # until every run ended
  ddlbench wait resnet50-scaling --timeout 3600
  ddlbench wait quickstart --results /scratch/me/results
  ddlbench submit configs/quickstart.yaml && ddlbench wait && ddlbench report

Exit codes: 0 every run COMPLETED; 1 some run ended otherwise (or was never submitted);
124 --timeout passed first; 75 the scheduler did not answer for --patience seconds;
2 bad input. See `ddlbench docs failures`.
"""
)
@click.argument("campaign", required=False)
@results_option
@no_out_option
@click.option(
    "--timeout",
    type=float,
    default=None,
    metavar="S",
    help="Give up after S seconds (exit code 124); the runs go on.",
)
@click.option(
    "--patience",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="Keep polling a scheduler that does not answer for this long, then exit 75.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the final summary.")
def command(
    campaign: Optional[str],
    results: Path,
    timeout: Optional[float],
    patience: float,
    quiet: bool,
) -> None:
    """Block until every run of CAMPAIGN has ended, printing state changes as they happen
    (default: the most recent campaign).

    Polls the scheduler with backoff (every 2 s after a change, slowing to every 30 s on
    Slurm; 0.5-5 s on the local executor, which also restarts its runner if it died).
    """
    from ddlbench.execute import wait_campaign

    root = campaign_dir(results, campaign)
    printer = _Printer(quiet)
    code = wait_campaign(root, timeout=timeout, patience=patience, echo=_err, on_change=printer)
    printer.close()
    if printer.last is not None:
        from ddlbench.campaign.resolve import campaign_words
        from ddlbench.cli.cmd_status import counts_line

        click.echo(counts_line(printer.last))
        bad = [r for r in printer.last["runs"] if r["final"] and r["state"] != "COMPLETED"]
        for r in bad[:20]:
            why = r["reason"] or (f"exit code {r['exit_code']}" if r["exit_code"] else "")
            click.echo(f"  {r['run_id']}: {r['state']}" + (f" ({why})" if why else ""))
        if len(bad) > 20:
            click.echo(f"  ... and {len(bad) - 20} more: `ddlbench status {campaign_words(root)}`")
    raise SystemExit(code)


def _err(msg: str) -> None:
    click.echo(msg, err=True)


class _Printer:
    """State changes as lines on stderr, and a progress bar when stderr is a terminal."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.last: Optional[Dict] = None
        self.bar = None
        self.task = None
        self.first = True

    def __call__(self, status: Dict, changes: List[Tuple[str, str, str]]) -> None:
        self.last = status
        if self.quiet:
            return
        done = sum(1 for r in status["runs"] if r["final"])
        if self.bar is None and not self.first:
            pass
        if self.first:
            self.first = False
            from rich.console import Console

            console = Console(stderr=True)
            if console.is_terminal and status["total"] > 1:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

                self.bar = Progress(
                    TextColumn(f"waiting for {status['campaign']}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TextColumn("{task.description}"),
                    console=console,
                    transient=True,
                )
                self.bar.start()
                self.task = self.bar.add_task("", total=status["total"])
            click.echo(f"{status['campaign']}: {done}/{status['total']} runs ended", err=True)
            return
        stamp = time.strftime("%H:%M:%S")
        by_id = {r["run_id"]: r for r in status["runs"]}
        for run_id, old, new in changes:
            r = by_id[run_id]
            job = f" (job {r['job_id']})" if r.get("job_id") else ""
            extra = ""
            if new not in ("COMPLETED", "PENDING", "RUNNING") and r.get("reason"):
                extra = f": {r['reason']}"
            line = f"[{stamp}] {run_id}: {old} -> {new}{job}{extra}"
            if self.bar is not None:
                self.bar.console.print(line, highlight=False, markup=False)
            else:
                click.echo(line, err=True)
        if self.bar is not None:
            counts = status["counts"]
            self.bar.update(
                self.task,
                completed=done,
                description=" ".join(f"{k}={v}" for k, v in sorted(counts.items())),
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
