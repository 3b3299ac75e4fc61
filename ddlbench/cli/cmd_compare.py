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

Exit codes: 0 no configuration regressed, 1 at least one regressed (a drop significant at
alpha 0.05 whose measured change is at least the threshold), 2 bad input (unknown campaign,
no configuration in common, bad threshold).
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
    help="A percentage above 0 and below 100 (5% or 5: five percent; 0.5%). A configuration "
    "regressed when its drop is significant (against no change) and its measured change is "
    "at least this. --json gives it as threshold_percent (5) and as the fraction threshold "
    "(0.05), the unit of its change.",
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
    Welch test over repeats against no change, alpha 0.05) and the measured change is at
    least the threshold; unchanged: the change lies within the threshold with confidence;
    otherwise inconclusive, with the number of repeats that would decide; inconclusive too
    where a run started on a busy node. Backup-worker configurations (b > 0) are compared on
    their applied samples per second (`ddlbench docs metrics`).
    """
    from ddlbench.analyse.compare import parse_change_threshold
    from ddlbench.errors import InputError

    try:
        thr = parse_change_threshold(threshold)
    except ValueError as exc:
        raise InputError(f"--threshold: {exc}") from None
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
            f"campaigns {base} and {new} have no configuration with complete runs in common"
        )
    regressed = int((df["verdict"] == "regressed").sum())
    if as_json:
        out = {
            "base": base,
            "new": new,
            "base_campaign": b.name,
            "new_campaign": n.name,
            "threshold": thr,
            "threshold_percent": _percent(thr),
            "regressed": regressed,
            "compared": int(len(both)),
            "configurations": [_json_row(row) for row in df.to_dict(orient="records")],
        }
        click.echo(json.dumps(out, indent=1, sort_keys=True))
    else:
        _print(df, _named(base, b.name), _named(new, n.name), thr, regressed, len(both))
    ctx.exit(1 if regressed else 0)


def _percent(fraction: float) -> float:
    """A fraction as the percentage the text prints (0.05 -> 5.0, 0.001 -> 0.1)."""
    return float(f"{100 * fraction:.10g}")


def _json_row(row: dict) -> dict:
    """One configuration for ``--json``: plain numbers, ``repeats_needed`` a whole number."""
    out = {k: _num(v) for k, v in row.items()}
    if out.get("repeats_needed") is not None:
        out["repeats_needed"] = int(out["repeats_needed"])
    return out


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


def _named(typed: str, name: str) -> str:
    """A campaign as the user typed it, with its manifest name where that differs (two
    folders of one spec share a name)."""
    return typed if typed == name else f"{typed} (campaign {name})"


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


def _verdict_cell(r, style: str) -> str:
    """The verdict, and why where it is inconclusive (a busy node's run says so first)."""
    text = f"[{style}]{r['verdict']}[/]" if style else r["verdict"]
    if r["verdict"] == "inconclusive" and r["reason"]:
        text += f" ({r['reason']})"
    return text


def _footer(df, thr: float, level: str, regressed: int, compared: int) -> str:
    busy = int(df["busy"].notna().sum()) if "busy" in df else 0
    applied = bool((df["rate"] == "applied").any()) if "rate" in df else False
    text = (
        f"{compared} configuration(s) compared, {regressed} regressed (a drop significant at "
        f"alpha 0.05 against no change, with a measured change of -{_percent(thr):g} % or more). "
        "BASE, NEW: geometric means over complete repeats (samples/s"
        + ("; applied samples/s where the configuration says so" if applied else "")
        + "), to the digits their 95 % intervals support"
        + f"; CHANGE: their ratio - 1, with its {level[:-3]} interval, the one the one-sided "
        "tests read (P): improved or regressed when it excludes 0 and the change passes the "
        "threshold, unchanged when it lies within the threshold (--json has the 95 % one too)."
    )
    if applied:
        text += (
            " Applied samples/s: backup workers (b > 0) are compared on the samples whose "
            "gradient was applied, as their scaling series are (throughput counts dropped ones)."
        )
    if busy:
        text += (
            f" Busy node: {busy} comparison(s) rest on runs the pre-flight found started on a "
            "busy node: inconclusive whatever the test says (the test's verdict is in the reason)."
        )
    return text


def _print(df, base: str, new: str, thr: float, regressed: int, compared: int) -> None:
    from rich.table import Table

    from ddlbench.cli.common import stdout_console
    from ddlbench.report.format import fnum_in

    style = {"regressed": "red", "improved": "green", "unchanged": ""}
    t = Table(
        title=f"throughput: base {base}, new {new} (threshold {_percent(thr):g} %)",
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
        t.add_row(
            r["group"] + (" (applied samples/s)" if r.get("rate") == "applied" else ""),
            "" if _num(r["world_size"]) is None else str(int(r["world_size"])),
            fnum_in(r["base_gmean"], r["base_ci95_low"], r["base_ci95_high"]),
            fnum_in(r["new_gmean"], r["new_ci95_low"], r["new_ci95_high"]),
            "-" if math.isnan(ch) else f"{100 * ch:+.1f} %",
            "-" if math.isnan(lo) else f"{100 * lo:+.1f} .. {100 * hi:+.1f} %",
            _p(r["p_value"]),
            _verdict_cell(r, style.get(r["verdict"], "dim")),
        )
    console = stdout_console()
    console.print(t)
    console.print(_footer(df, thr, level, regressed, compared), highlight=False)
