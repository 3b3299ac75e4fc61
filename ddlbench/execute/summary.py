"""The printed summary of a submit, resume or retry: built here only, from the run outcomes.

One line of counts whose numbers add up to the runs the command was about, then one line per
refused run, why submission stopped early (if it did) and notes::

    campaign resnet50 on Slurm: 20 runs: 4 submitted, 1 found already submitted by an
    interrupted submit, 15 already submitted earlier (skipped)
"""

from __future__ import annotations

from typing import List

from ddlbench.execute.base import ADOPTED, FAILED, SKIPPED, SUBMITTED, SubmitSummary

#: how each outcome reads in the counts line ({verb}: submitted or resubmitted)
PHRASES = {
    SUBMITTED: "{n} {verb}",
    ADOPTED: "{n} found already submitted by an interrupted submit",
    SKIPPED: "{n} already submitted earlier (skipped)",
    FAILED: "{n} rejected",
    "not_submitted": "{n} not submitted",
}


def where(executor: str) -> str:
    return "this machine (local executor)" if executor == "local" else "Slurm"


def counts_line(summary: SubmitSummary, verb: str = "submitted") -> str:
    counts = summary.counts()
    parts = [
        PHRASES[k].format(n=n, verb=verb)
        for k, n in counts.items()
        if n or k == SUBMITTED  # "0 submitted" says plainly that nothing went out
    ]
    arrays = f" as {len(summary.array_jobs)} job arrays + singles" if summary.array_jobs else ""
    total = (
        f"{summary.total} run{'' if summary.total == 1 else 's'}: "
        if summary.total is not None
        else ""
    )
    return f"campaign {summary.campaign} on {where(summary.executor)}{arrays}: {total}" + (
        ", ".join(parts)
    )


def summary_lines(summary: SubmitSummary, verb: str = "submitted") -> List[str]:
    """Every line to print after a submit (``verb`` "submitted") or a retry ("resubmitted")."""
    out = [counts_line(summary, verb)]
    out += [f"  rejected {run_id}: {msg}" for run_id, msg in summary.rejected]
    if summary.stopped:
        out.append(f"  stopped early: {summary.stopped}")
    out += [f"  {note}" for note in summary.notes]
    return out
