"""A campaign with nothing to report: what is missing and what to run (``docs/reports.md``).

A campaign without a complete run has no figure, no scaling series and no base to state.
``ddlbench report`` then says how many runs are in which state, names the runs that ended
without data with their error or cause, gives the commands that would produce data, and
exits with :data:`NO_COMPLETE_RUN`. When some runs ended without data (failed, hung,
cancelled, incomplete) the report is still written, with only what they left (the failed
runs, their stderr, the suspected nodes); when none did (a dry run, jobs still queued or
running) nothing is written: :class:`NothingToReport` is raised before any file is.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import pandas as pd

from ..campaign.resolve import campaign_words, is_dry_run
from ..errors import DDLBenchError

#: the exit code of ``ddlbench report`` when the campaign has no complete run (docs/cli.md)
NO_COMPLETE_RUN = 3
#: failed runs named in the message, at most
NAMED = 5

_WAITING = ("pending", "running")
#: the runs that ended without data: failed, cancelled (``ddlbench cancel``, ``scancel``) or
#: incomplete; ``ddlbench retry --failed`` submits each again
ENDED_WITHOUT_DATA = ("failed", "hung", "cancelled", "incomplete")


class NothingToReport(DDLBenchError):
    """The campaign has no complete run; nothing was written."""

    exit_code = NO_COMPLETE_RUN


def _counts(runs: pd.DataFrame) -> str:
    counts = runs["status"].value_counts().to_dict() if len(runs) else {}
    parts = [f"{n} {s.replace('_', ' ')}" for s, n in sorted(counts.items())]
    return f"{len(runs)} run(s) planned" + (f": {', '.join(parts)}" if parts else "")


def _failed_lines(runs: pd.DataFrame) -> List[str]:
    bad = runs[runs["status"].isin(ENDED_WITHOUT_DATA)].sort_values("run_id")
    out = []
    for _, r in bad.head(NAMED).iterrows():
        why = r.get("error_message") or r.get("problems") or r.get("slurm_state") or ""
        why = " ".join(str(why).split())[:160]
        if why.startswith(str(r["status"])):  # "cancelled by the user while pending (...)"
            out.append(f"  {r['run_id']}: {why}")
            continue
        out.append(f"  {r['run_id']}: {r['status']}" + (f" ({why})" if why else ""))
    if len(bad) > NAMED:
        out.append(f"  ... and {len(bad) - NAMED} more (`ddlbench status` lists them)")
    return out


def _commands(campaign_dir: Path, runs: pd.DataFrame, dry: bool) -> List[str]:
    q = campaign_words(campaign_dir)
    status = set(runs["status"]) if len(runs) else set()
    out = []
    if dry or "not_run" in status:
        out.append(f"  ddlbench submit --resume {q}   # submit the runs never submitted")
    if status & set(_WAITING):
        out.append(f"  ddlbench wait {q}   # until the queued and running runs end")
    ended = [s for s in ENDED_WITHOUT_DATA if s in status]
    if ended:
        which = ", ".join(ended[:-1]) + (" and " if len(ended) > 1 else "") + ended[-1]
        out.append(f"  ddlbench retry {q} --failed   # run the {which} ones again")
    out.append(f"  ddlbench report {q}   # then report")
    return out


def _ended_without_data(runs: pd.DataFrame) -> bool:
    return bool(len(runs)) and bool(runs["status"].isin(ENDED_WITHOUT_DATA).any())


def nothing_to_report(data) -> Optional[str]:
    """Why ``data`` (a collected campaign) has no measurement to report, with what to run;
    None when at least one run is complete."""
    runs = data.runs
    if len(runs) and bool(runs["complete"].fillna(False).astype(bool).any()):
        return None
    dry = is_dry_run(data.campaign_dir)
    head = f"campaign {data.name!r} has no complete run, so there is no report to write"
    if _ended_without_data(runs):
        head = (
            f"campaign {data.name!r} has no complete run: the report shows only what the runs "
            "that ended without data left (errors, stderr, suspected nodes)"
        )
    if dry:
        head += " (a dry run: rendered by `submit --dry-run`, nothing submitted)"
    lines = [head + ".", _counts(runs) + "."]
    failed = _failed_lines(runs) if len(runs) else []
    if failed:
        lines += ["Runs that ended without data:", *failed]
    lines += ["To get data:", *_commands(Path(data.campaign_dir), runs, dry)]
    return "\n".join(lines)


def check_data(data) -> Optional[str]:
    """What is missing (None: a run is complete). Raises :class:`NothingToReport` when no run
    is complete and none ended without data either: there is nothing to write."""
    why = nothing_to_report(data)
    if why and not _ended_without_data(data.runs):
        raise NothingToReport(why)
    return why
