"""ddlbench compare BASE NEW [--threshold 5%] [--json]."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from ddlbench.cli.common import campaign_dir, no_out_option, results_option
from ddlbench.values import missing


def _num(v):
    if missing(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
    return v


@click.command(
    "compare",
    epilog="""\b
Examples:
  ddlbench compare resnet50-jan resnet50-feb
  ddlbench compare resnet50-jan resnet50-feb --threshold 3% --json
  ddlbench compare resnet50-jan resnet50-feb --results /scratch/me/results

Exit codes: 0 no configuration regressed, 1 at least one regressed beyond the threshold,
2 bad input (unknown campaign, no configuration in common, bad threshold).
""",
)
@click.argument("base")
@click.argument("new")
@results_option
@no_out_option
@click.option(
    "--threshold",
    default="5%",
    show_default=True,
    help="A configuration regressed when its throughput dropped significantly and by at "
    "least this.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
@click.pass_context
def command(
    ctx: click.Context, base: str, new: str, results: Path, threshold: str, as_json: bool, quiet
) -> None:
    """Compare the throughput of every configuration that BASE and NEW share.

    A configuration is a run id without its -r<repeat> suffix. Each campaign is collected
    first when its data is missing or stale. Regressed: the drop is significant (one-sided
    Welch test over repeats, alpha 0.05) and at least the threshold; unchanged: the change
    lies within the threshold with confidence; otherwise inconclusive, with the number of
    repeats that would decide (`ddlbench docs metrics`).
    """
    from ddlbench.analyse.compare import parse_threshold
    from ddlbench.errors import InputError

    try:
        thr = parse_threshold(threshold)
    except ValueError:
        raise InputError(
            f"--threshold: expected a percentage such as 5%, got {threshold!r}"
        ) from None
    base_dir, new_dir = _campaigns(results, base, new)

    from ddlbench.analyse.compare import compare
    from ddlbench.collect.collector import ensure_collected
    from ddlbench.collect.progress import progress
    from ddlbench.collect.states import store_states

    with progress("ddlbench compare", quiet=quiet or as_json) as say:
        b = ensure_collected(base_dir, run_states=store_states, progress=say)
        n = ensure_collected(new_dir, run_states=store_states, progress=say)
    for side, name in ((b, base), (n, new)):
        _must_have_complete_runs(side, name)
    df = compare(b, n, thr)
    both = df[df["verdict"].isin(["regressed", "improved", "unchanged", "inconclusive"])]
    if not len(both):
        raise InputError(
            f"campaigns {b.name} and {n.name} have no configuration with complete runs in common"
        )
    regressed = int((df["verdict"] == "regressed").sum())
    if as_json:
        out = {
            "base": b.name,
            "new": n.name,
            "threshold": thr,
            "regressed": regressed,
            "compared": int(len(both)),
            "configurations": [
                {k: _num(v) for k, v in row.items()} for row in df.to_dict(orient="records")
            ],
        }
        click.echo(json.dumps(out, indent=1, sort_keys=True))
    else:
        _print(df, b.name, n.name, thr, regressed, len(both))
    ctx.exit(1 if regressed else 0)


def _campaigns(results: Path, base: str, new: str):
    """The two campaigns' folders; a warning when they are the same campaign."""
    base_dir, new_dir = campaign_dir(results, base), campaign_dir(results, new)
    if Path(base_dir).resolve() == Path(new_dir).resolve():
        click.echo(
            f"warning: {base!r} and {new!r} are the same campaign: every change is 0 and says "
            "nothing (compare two campaigns of the same spec, e.g. before and after a change)",
            err=True,
        )
    return base_dir, new_dir


def _must_have_complete_runs(data, name: str) -> None:
    """Bad input when a campaign has no complete run to compare (a dry run, runs not ended,
    or every run failed), said as such rather than as no configuration in common."""
    from ddlbench.campaign.resolve import is_dry_run
    from ddlbench.errors import InputError

    runs = data.runs
    if len(runs) and bool(runs["complete"].fillna(False).astype(bool).any()):
        return
    if is_dry_run(data.campaign_dir):
        why = "a dry run: rendered by `submit --dry-run`, nothing submitted"
    else:
        why = "its runs have not ended, or none completed: `ddlbench status` says which"
    raise InputError(f"campaign {name!r} has no complete run to compare ({why})")


def _p(v) -> str:
    if _num(v) is None:
        return "-"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def _print(df, base: str, new: str, thr: float, regressed: int, compared: int) -> None:
    from rich.table import Table

    from ddlbench.cli.common import stdout_console

    style = {"regressed": "red", "improved": "green", "unchanged": ""}
    t = Table(
        title=f"throughput: {new} vs {base} (threshold {100 * thr:g} %)",
        title_justify="left",
        box=None,
        header_style="bold",
        pad_edge=False,
    )
    level = f"{100 * float(df['test_ci_level'].iloc[0]):g} % CI" if len(df) else "CI"
    right = ("N", "BASE", "NEW", "CHANGE", level, "P")
    for col in ("CONFIGURATION", "N", "BASE", "NEW", "CHANGE", level, "P", "VERDICT"):
        t.add_column(col, justify="right" if col in right else "left")
    for _, r in df.iterrows():
        ch = r["change"]
        lo, hi = r["change_test_ci_low"], r["change_test_ci_high"]
        st = style.get(r["verdict"], "dim")
        t.add_row(
            r["group"],
            "" if _num(r["world_size"]) is None else str(int(r["world_size"])),
            "-" if math.isnan(r["base_gmean"]) else f"{r['base_gmean']:,.1f}",
            "-" if math.isnan(r["new_gmean"]) else f"{r['new_gmean']:,.1f}",
            "-" if math.isnan(ch) else f"{100 * ch:+.1f} %",
            "-" if math.isnan(lo) else f"{100 * lo:+.1f} .. {100 * hi:+.1f} %",
            _p(r["p_value"]),
            (f"[{st}]{r['verdict']}[/]" if st else r["verdict"])
            + (f" ({r['reason']})" if r["verdict"] == "inconclusive" and r["reason"] else ""),
        )
    console = stdout_console()
    console.print(t)
    console.print(
        f"{compared} configuration(s) compared, {regressed} regressed significantly by "
        f"{100 * thr:g} % or more. BASE, NEW: geometric means over complete repeats (samples/s); "
        f"CHANGE: their ratio - 1, with its {level[:-3]} interval, the one the one-sided tests "
        "read (P): improved or regressed when it excludes 0 and the change passes the "
        "threshold, unchanged when it lies within the threshold (--json has the 95 % one too)",
        highlight=False,
    )
