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

from ..campaign import states as S
from ..campaign.resolve import campaign_words, is_dry_run
from ..errors import DDLBenchError
from ..values import missing

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


def _one_line(v) -> str:
    return "" if missing(v) else " ".join(str(v).split())


def ended_label(r) -> str:
    """A run's status in the report: for a run that ended without data, the state the store
    recorded where it says more than the status (``timeout``, ``submit failed``, ``node
    fail``...), as ``status`` shows it; else the runs table's status."""
    status = str(r["status"])
    word = _one_line(r.get("slurm_state")).upper()
    if status in ENDED_WITHOUT_DATA and word in S.UNSUCCESSFUL and word != S.HUNG:
        return word.lower().replace("_", " ")
    return status


def ended_cause(r) -> str:
    """How a run ended: the store's cause first, in the words ``status`` and ``wait`` print
    (``task 1 on n2: Killed (SIGKILL)``, ``TimeLimit``), then a rank's own error as detail
    (often a side effect: the rank srun stopped, a peer's lost connection); the rank's error
    alone when the store says nothing, or for a run that has not ended (its cause is why it
    waits)."""
    err = _one_line(r.get("error_message"))
    if str(r["status"]) not in ENDED_WITHOUT_DATA:
        return err
    cause = _one_line(r.get("slurm_reason"))
    if cause and err and err not in cause and cause not in err:
        return f"{cause}; a rank said: {err}"
    return cause or err


def _counts(runs: pd.DataFrame) -> str:
    labels = [ended_label(r) for _, r in runs.iterrows()] if len(runs) else []
    counts = pd.Series(labels, dtype=object).value_counts().to_dict()
    parts = [f"{n} {s.replace('_', ' ')}" for s, n in sorted(counts.items())]
    return f"{len(runs)} run(s) planned" + (f": {', '.join(parts)}" if parts else "")


def _failed_lines(runs: pd.DataFrame) -> List[str]:
    """One line per run that ended without data: ``RUN: STATE (cause)``, as ``status``
    prints it; the runs table's status when the store has no state for it."""
    bad = runs[runs["status"].isin(ENDED_WITHOUT_DATA)].sort_values("run_id")
    out = []
    for _, r in bad.head(NAMED).iterrows():
        word = _one_line(r.get("slurm_state")).upper()
        state = word if word in S.UNSUCCESSFUL else str(r["status"])
        why = (ended_cause(r) or _one_line(r.get("problems")))[:200]
        if why.lower().startswith(state.lower()):  # "cancelled by the user while pending"
            out.append(f"  {r['run_id']}: {why}")
            continue
        out.append(f"  {r['run_id']}: {state}" + (f" ({why})" if why else ""))
    if len(bad) > NAMED:
        out.append(f"  ... and {len(bad) - NAMED} more (`ddlbench status` lists them)")
    return out


def _refused_by_scheduler(runs: pd.DataFrame) -> int:
    """How many runs the scheduler refused at submission (SUBMIT_FAILED): they never ran."""
    if not len(runs) or "slurm_state" not in runs.columns:
        return 0
    words = runs["slurm_state"].map(lambda v: _one_line(v).upper())
    return int(((words == S.SUBMIT_FAILED) & runs["status"].isin(ENDED_WITHOUT_DATA)).sum())


def _resubmit_line(campaign_dir: Path, refused: int) -> str:
    """The command that submits a campaign refused for its profile again, under a new name
    (the old name is the old scripts': ``submit`` refuses other inputs under it)."""
    import shlex

    from ..campaign.manifest import read_manifest
    from ..campaign.paths import CampaignPaths

    try:
        raw = read_manifest(CampaignPaths.of(campaign_dir).manifest)
    except Exception:  # noqa: BLE001 - the hint then names the placeholders
        raw = {}
    spec = shlex.quote(str(raw.get("spec_path") or "SPEC"))
    profile = shlex.quote(str(raw.get("profile_path") or "PROFILE"))
    name = shlex.quote(campaign_dir.name)
    rest = campaign_words(campaign_dir)[len(name) :]
    new = shlex.quote(f"{campaign_dir.name}-2")
    return (
        f"  ddlbench submit {spec} --cluster {profile} --campaign {new}{rest}   # the "
        f"scheduler refused {refused} run(s) (SUBMIT_FAILED): fix what its message names in "
        "the profile (partition, account...) first; retry sends the same scripts again"
    )


def _commands(campaign_dir: Path, runs: pd.DataFrame, dry: bool) -> List[str]:
    q = campaign_words(campaign_dir)
    status = set(runs["status"]) if len(runs) else set()
    out = []
    if dry or "not_run" in status:
        out.append(f"  ddlbench submit --resume {q}   # submit the runs never submitted")
    if status & set(_WAITING):
        out.append(f"  ddlbench wait {q}   # until the queued and running runs end")
    refused = _refused_by_scheduler(runs)
    ended = [s for s in ENDED_WITHOUT_DATA if s in status]
    if refused:
        out.append(_resubmit_line(Path(campaign_dir), refused))
    if ended and int(runs["status"].isin(ENDED_WITHOUT_DATA).sum()) > refused:
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
