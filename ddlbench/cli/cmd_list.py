"""ddlbench list: the campaigns under the results folder."""

from __future__ import annotations

from pathlib import Path
from typing import List

import click

from ddlbench.cli.common import no_out_option, results_option

COLUMNS = ("CAMPAIGN", "CREATED", "CLUSTER", "SCHEDULER", "RUNS", "STATES", "COLLECTED", "REPORT")


def _created(text: object) -> str:
    """``2026-11-23T00:41:45+00:00`` as ``2026-11-23 00:41`` (as written when not ISO)."""
    s = str(text or "")
    return s[:16].replace("T", " ") if len(s) >= 16 and s[10:11] == "T" else s


def _states(entry) -> str:
    if entry.runs is None:
        return "unknown"
    if not entry.counts and entry.problems:
        return "unknown"
    return ", ".join(f"{n} {s}" for s, n in entry.counts.items()) or "no runs"


def _marks(entry) -> str:
    marks = [m for m, on in (("latest", entry.latest), ("dry run", entry.dry_run)) if on]
    return f" ({', '.join(marks)})" if marks else ""


def flag_lost_store(entry) -> None:
    """A campaign whose store (``state.sqlite``) is missing or empty while run folders hold
    output: its states are unknown (not NOT_SUBMITTED), and the line below it says so and
    names ``ddlbench recover`` (what ``status`` and ``report`` refuse such a campaign with)."""
    from ddlbench.campaign.paths import CampaignPaths
    from ddlbench.campaign.resolve import campaign_words

    paths = CampaignPaths.of(entry.path)
    try:
        if paths.store.stat().st_size > 0:
            return
        state = "is empty"
    except FileNotFoundError:
        state = "is missing"
    except OSError:
        return
    used = sum(1 for r in paths.run_folders() if r.has_output())
    if not used:
        return  # nothing ran: a store is made on the first submit
    entry.counts, entry.ended = {}, None
    entry.problems.append(
        f"{paths.store.name} {state}, but {used} run folder(s) hold output: run states "
        f"unknown; rebuild it with `ddlbench recover {campaign_words(paths.root)}`"
    )


def _row(entry) -> List[str]:
    return [
        entry.name + _marks(entry),
        _created(entry.created),
        entry.cluster or "",
        entry.scheduler or "",
        "" if entry.runs is None else str(entry.runs),
        _states(entry),
        "yes" if entry.collected else "stale" if entry.stale else "no",
        ", ".join(Path(p).name for p in entry.reports) or "-",
    ]


def render_table(entries) -> str:
    """The listing as aligned text, problems on their own lines below their campaign."""
    rows = [_row(e) for e in entries]
    widths = [max([len(c)] + [len(r[k]) for r in rows]) for k, c in enumerate(COLUMNS)]

    def fmt(cells) -> str:
        return "  ".join(c.ljust(widths[k]) for k, c in enumerate(cells)).rstrip()

    lines = [fmt(COLUMNS)]
    for entry, row in zip(entries, rows):
        lines.append(fmt(row))
        lines.extend(f"  {entry.name}: {p}" for p in entry.problems)
    return "\n".join(lines)


@click.command(
    name="list",
    epilog="""\b
Examples:
  ddlbench list                                # the campaigns under ./results
  ddlbench list --results /scratch/me/results
  ddlbench list --json | jq -r '.campaigns[] | select(.ended == false) | .name'

States are those the campaign's store last recorded: `ddlbench status CAMPAIGN` asks the
scheduler and updates them. The campaign marked (latest) is the one every command uses when
no campaign is named; a dry run (`submit --dry-run`, nothing submitted since) is marked so and
is the latest only when there is no other campaign.
""",
)
@results_option
@no_out_option
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def command(results: Path, as_json: bool) -> None:
    """List the campaigns under the results folder, oldest first.

    For each: when it was created, its cluster profile and scheduler, its number of runs and
    how many are in each state, whether its collected data is up to date (stale: `report`
    collects again) and which report files it has. Reads only the campaigns' own files; it
    never polls the scheduler.
    """
    from ddlbench.campaign.listing import list_entries
    from ddlbench.campaign.resolve import existing_results_root
    from ddlbench.collect.freshness import is_stale

    root = existing_results_root(results)
    entries = list_entries(results, is_stale)
    for entry in entries:
        flag_lost_store(entry)
    if as_json:
        import json

        doc = {"results": str(root), "campaigns": [e.as_dict() for e in entries]}
        click.echo(json.dumps(doc, indent=1, sort_keys=True))
        return
    if not entries:
        click.echo(f"no campaigns in {root}; run 'ddlbench submit SPEC' first", err=True)
        return
    click.echo(render_table(entries))
    click.echo(
        f"{len(entries)} campaign{'s' if len(entries) != 1 else ''} in {root}; states as last "
        "recorded ('ddlbench status CAMPAIGN' polls the scheduler)"
    )
