"""ddlbench collect [CAMPAIGN]."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import click

from ddlbench.cli.common import campaign_dir, exit_quickly, no_out_option, results_option


def summary_lines(data) -> list:
    c = data.info["counts"]
    runs = data.runs
    counts = runs["status"].value_counts().to_dict() if len(runs) else {}
    states = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(counts.items()))
    lines = [
        f"{data.name}: {c['runs']} runs ({states or 'none'}), {c['rank_files']} rank logs, "
        f"{c['steps']:,} steps -> {data.data_dir}"
    ]
    lines += [f"warning: {w}" for w in data.info.get("warnings", [])]
    return lines


@click.command(
    "collect",
    epilog="""\b
Examples:
  ddlbench collect                      # the most recent campaign under ./results
  ddlbench collect resnet50-scaling
  ddlbench collect --results /scratch/me/results quickstart --json

Writes results/CAMPAIGN/data/: steps.parquet (one row per rank per step), ranks.parquet
(one row per rank per run), runs.parquet and runs.csv (one row per run), evals.parquet,
allreduce.parquet, files.parquet and collect.json. Column definitions: `ddlbench docs metrics`.
""",
)
@click.argument("campaign", required=False)
@results_option
@no_out_option
@click.option("--json", "as_json", is_flag=True, help="Print counts and warnings as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def command(campaign: Optional[str], results: Path, as_json: bool, quiet: bool) -> None:
    """Read every rank log of CAMPAIGN into tables (default: the most recent campaign).

    Truncated last lines (killed ranks) are skipped and counted; runs with missing ranks or
    summaries are marked incomplete, never averaged; duplicate copies of a rank's log count
    once; log-format versions other than 1, or a mix of versions, are refused (exit 2).
    """
    from ddlbench.collect.collector import collect_campaign
    from ddlbench.collect.progress import progress
    from ddlbench.collect.states import store_states

    root = campaign_dir(results, campaign)
    with progress("ddlbench collect", quiet=quiet or as_json) as say:
        data = collect_campaign(root, run_states=store_states, progress=say)
    exit_quickly()  # every data file is written
    if as_json:
        out = dict(data.info)
        out["data_dir"] = str(data.data_dir)
        click.echo(json.dumps(out, indent=1, sort_keys=True))
        return
    for line in summary_lines(data):
        click.echo(line)
