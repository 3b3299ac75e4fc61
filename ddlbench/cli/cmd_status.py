"""ddlbench status [CAMPAIGN]."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Optional

import click

from ddlbench.cli.common import campaign_dir, no_out_option, results_option

STYLE = {
    "COMPLETED": "green",
    "RUNNING": "cyan",
    "PENDING": "yellow",
    "SUBMITTING": "yellow",
    "REQUEUED": "yellow",
    "SUSPENDED": "yellow",
    "PREEMPTED": "yellow",
    "NOT_SUBMITTED": "dim",
}


def _elapsed(row: Dict, now: float) -> str:
    start = row.get("start_time")
    if not start:
        return ""
    secs = int(max(0.0, (row.get("end_time") or now) - start))
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


def _exit(row: Dict) -> str:
    if row.get("exit_code") is None:
        return ""
    sig = row.get("signal") or 0
    return f"{row['exit_code']}" + (f" (sig {sig})" if sig else "")


def counts_line(status: Dict) -> str:
    from ddlbench.campaign.states import ALL, NOT_SUBMITTED

    counts = status["counts"]
    parts = [f"{counts[s]} {s}" for s in ALL if counts.get(s)]
    if status["final"]:
        done = "all ended"
    elif counts.get(NOT_SUBMITTED) == status["total"]:
        done = "none submitted"  # a dry run, or a submit that never reached the scheduler
    else:
        done = "in progress"
    runs = "run" if status["total"] == 1 else "runs"
    return f"{status['total']} {runs} ({done}): " + ", ".join(parts)


_ANSI = {"green": "32", "cyan": "36", "yellow": "33", "red": "31", "dim": "2"}
COLUMNS = ("RUN", "STATE", "JOB", "TRY", "EXIT", "NODES", "ELAPSED", "REASON")


def render_table(status: Dict, color: bool = False) -> str:
    """The status table as aligned text (fast for thousands of runs), state column coloured."""
    now = status.get("time") or time.time()
    rows = [
        (
            r["run_id"],
            r["state"],
            r["job_id"] or "",
            str(r["attempts"] or ""),
            _exit(r),
            r["nodelist"] or str(r["nodes"]),
            _elapsed(r, now),
            (r["reason"] or "").replace("\n", " "),
        )
        for r in status["runs"]
    ]
    widths = [max([len(c)] + [len(row[k]) for row in rows]) for k, c in enumerate(COLUMNS)]

    def fmt_row(row):
        return (
            "  ".join(  # noqa: E731
                cell.ljust(widths[k]) for k, cell in enumerate(row[:-1])
            )
            + "  "
            + row[-1]
        )

    lines = [f"campaign {status['campaign']} ({status['scheduler']})"]
    header = fmt_row(COLUMNS).rstrip()
    lines.append(f"\x1b[1m{header}\x1b[0m" if color else header)
    for r, row in zip(status["runs"], rows):
        text = fmt_row(row).rstrip()
        style = STYLE.get(r["state"], "red" if r["final"] else "")
        if color and style:
            start = sum(widths[:1]) + 2
            state = row[1]
            text = text[:start] + f"\x1b[{_ANSI[style]}m{state}\x1b[0m" + text[start + len(state) :]
        lines.append(text)
    lines.append(counts_line(status))
    return "\n".join(lines)


def _use_color() -> bool:
    import os
    import sys

    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


@click.command(
    epilog="""\b
Examples:
  ddlbench status                      # the most recent campaign under ./results
  ddlbench status resnet50-scaling     # a campaign by name
  ddlbench status resnet50-scaling --watch
  ddlbench status --json | jq '.counts'
  ddlbench status --results /scratch/me/results quickstart

States: NOT_SUBMITTED, SUBMITTING, PENDING, RUNNING, SUSPENDED, REQUEUED, PREEMPTED (not
ended); COMPLETED, FAILED, HUNG, TIMEOUT, CANCELLED, NODE_FAIL, OUT_OF_MEMORY, SUBMIT_FAILED, LOST
(ended). One poll of Slurm costs one or two scheduler commands for the whole campaign.
"""
)
@click.argument("campaign", required=False)
@results_option
@no_out_option
@click.option("--watch", is_flag=True, help="Keep the table up to date until every run ended.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option(
    "--interval",
    type=float,
    default=None,
    help="Seconds between polls with --watch (default: backs off from 2 s to 30 s on Slurm).",
)
def command(
    campaign: Optional[str], results: Path, watch: bool, as_json: bool, interval: Optional[float]
) -> None:
    """Show the runs of CAMPAIGN and their states (default: the most recent campaign).

    Polls the scheduler once and updates the campaign's store (results/CAMPAIGN/state.sqlite),
    then prints one row per run: its newest attempt's state, job id, attempt number, exit code,
    nodes, elapsed time and reason. With a local campaign whose runner has stopped while runs
    remain, status restarts the runner.
    """
    root = campaign_dir(results, campaign)
    if as_json and not watch:
        import json

        click.echo(json.dumps(_poll(root), indent=1, sort_keys=True))
        return
    if not watch:
        _print(_poll(root))
        return
    _watch(root, interval, as_json)


def _err(msg: str) -> None:
    click.echo(msg, err=True)


def _print(status: Dict) -> None:
    from ddlbench.analyse.suspects import suspects_lines

    click.echo(render_table(status, color=_use_color()))
    for line in suspects_lines(status.get("suspects", []), status.get("seen_on_one_node", [])):
        click.echo(line)
    for note in status["notes"]:
        click.echo(f"note: {note}")


def _poll(root: Path) -> Dict:
    """One poll: the same object ``status --json`` prints (suspects included)."""
    from ddlbench.analyse.suspects import annotate_status
    from ddlbench.execute import campaign_status

    return annotate_status(root, campaign_status(root, echo=_err))


def _changes(status: Dict) -> tuple:
    """What a watch without a terminal reprints the table for (not the elapsed times)."""
    keys = ("state", "job_id", "attempts", "exit_code", "nodelist", "reason")
    return tuple(tuple(r.get(k) for k in keys) for r in status["runs"])


def _watch(root: Path, interval: Optional[float], as_json: bool) -> None:
    """Poll until every run ended: on a terminal one table kept up to date; otherwise one
    JSON object per poll (``--json``, the object of ``status --json``), or the table (and
    its suspects and notes) each time a run's state, job, exit code or reason changed."""
    import json

    from ddlbench.campaign.manifest import load_campaign
    from ddlbench.cli.common import stdout_console

    scheduler = load_campaign(root).scheduler
    pace = (0.5, 5.0) if scheduler == "local" else (2.0, 30.0)
    console = stdout_console()
    if not as_json and console.is_terminal:
        _watch_live(root, interval, pace, console)
        return
    last, shown, wait = None, None, interval or pace[0]
    while True:
        status = _poll(root)
        if as_json:
            click.echo(json.dumps(status, sort_keys=True))
        elif _changes(status) != shown:
            shown = _changes(status)
            _print(status)
        if status["final"]:
            return
        wait = interval or (pace[0] if status["counts"] != last else min(pace[1], wait * 1.5))
        last = status["counts"]
        time.sleep(wait)


def _watch_live(root: Path, interval: Optional[float], pace: tuple, console) -> None:
    from rich.live import Live
    from rich.text import Text

    last, wait = None, interval or pace[0]
    with Live(console=console, auto_refresh=False) as live:
        while True:
            status = _poll(root)
            live.update(Text.from_ansi(render_table(status, color=True)), refresh=True)
            if status["final"]:
                return
            wait = interval or (pace[0] if status["counts"] != last else min(pace[1], wait * 1.5))
            last = status["counts"]
            time.sleep(wait)
