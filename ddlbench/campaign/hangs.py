"""Hung runs: which ranks never arrived, read from the ``hang`` records of the rank logs.

A rank whose watchdog fires (``ddlbench.workloads.common.watchdog``) writes a ``hang`` record
(its host, last completed step, the phase it was in) and a stack dump beside its rank log,
then exits with :data:`~ddlbench.campaign.states.HUNG_EXIT_CODE`. A run whose job failed with
that exit code, or whose newest attempt holds ``hang`` records, ended ``HUNG``.

Which ranks never arrived, from three signals, strongest first:

1. **Late**: a watchdog checks its limit once a tick (``tick_s``, at most 1 s), so a running
   rank's ``waited_s`` is its ``limit_s`` plus less than a tick. A record more than a tick and
   :data:`LATE_SLACK_S` past its ``limit_s`` comes from a rank that was not running when its limit
   passed (stopped with SIGSTOP, a frozen node, stuck holding the interpreter); Slurm resumes a
   stopped rank when it kills the job, and it then writes its record, in whatever phase it
   reached meanwhile.
2. **Silent**: the first watchdog to fire asks every rank to dump (a request file in the
   attempt's log folder), so every rank that still runs writes a record; a rank with a ``meta``
   record but neither a ``hang`` record nor a ``summary`` could not answer.
3. **Behind**: when every rank answered in time, the ones that reached the collective wait in a
   later phase (or after a later step) than the one that did not; the ranks whose
   ``(last step, phase)`` is behind the furthest one are named; when all stopped at the same
   point, all are named (no rank completed the collective: see their stacks).

Late and silent ranks are named when there are any (the on-time ranks waited for them: never
suspects then); else the ranks behind. A rank is named with its Slurm node (``SLURMD_NODENAME``
in the ``hang`` record; for a silent rank, its node in the meta record's ``slurm_nodelist``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ddlbench.campaign import states as S
from ddlbench.campaign.paths import RANK_LOG_GLOB, RunPaths

#: how far along a step each phase is (a rank in a later phase has arrived further)
PHASE_ORDER = {
    "start": 0,
    "eval": 1,  # after step k, before step k + 1
    "prepare": 2,
    "data": 2,
    "step": 3,
    "forward": 4,
    "backward": 5,
    "optimizer": 6,
    "sync": 7,
    "collective": 8,
    "barrier": 8,
}


#: seconds past its limit plus its tick (``tick_s``, at most 1 s) that a watchdog's record may
#: come and still be on time: a loaded node delays a thread's wake-up by a fraction of that.
#: A stopped rank resumes only when the job is killed, at least ``grace_s`` (>= 2 ticks + 0.5 s)
#: after the first rank fired.
LATE_SLACK_S = 0.5
_WANTED = ('"meta"', '"hang"', '"summary"', '"step"')


def _records(path: Path, data: Optional[bytes] = None) -> Dict[str, Any]:
    """The ``meta``, ``hang`` and ``summary`` records of one rank log (absent: None), and the
    last step it logged (``last_step``); ``data``: the file's bytes when already read."""
    out: Dict[str, Any] = {"meta": None, "hang": None, "summary": None, "last_step": None}
    try:
        text = (path.read_bytes() if data is None else data).decode(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        if not any(w in line for w in _WANTED):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        kind = rec.get("type")
        if kind == "step":
            out["last_step"] = rec.get("step", out["last_step"])
        elif kind in ("hang", "summary") or (kind == "meta" and out["meta"] is None):
            out[kind] = rec
    return out


def slurm_node(meta: Dict[str, Any]) -> Optional[str]:
    """The rank's Slurm node: its ``node_rank`` in the meta record's ``slurm_nodelist``, else
    the machine's host name (the nodes of a test cluster on one machine share it)."""
    from ddlbench.execute.hostlist import expand

    nodes = expand(str(meta.get("slurm_nodelist") or ""))
    index = meta.get("node_rank")
    if isinstance(index, int) and 0 <= index < len(nodes):
        return nodes[index]
    return meta.get("host")


def hang_records(run_dir: Path) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``(hang records, ranks that wrote neither one nor a summary)`` of the newest attempt;
    both empty when no rank logged a hang (the silent ranks are looked up only then)."""
    log_dir = RunPaths(Path(run_dir)).log_dir()
    hangs: List[Dict[str, Any]] = []
    quiet: List[Path] = []
    for path in sorted(log_dir.glob(RANK_LOG_GLOB)):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b'"hang"' not in data:  # most logs: found at memory speed, no line is parsed
            quiet.append(path)
            continue
        got = _records(path, data)
        if got["hang"] is None:
            quiet.append(path)
            continue
        hang = got["hang"]
        if hang.get("stacks"):
            hang = dict(hang, stacks=str(log_dir / str(hang["stacks"])))
        hangs.append(hang)
    if not hangs:  # the ranks without a hang record matter only beside one that has it
        return [], []
    silent: List[Dict[str, Any]] = []
    for path in quiet:  # read again: a campaign's logs are not all held in memory at once
        got = _records(path)
        meta = got["meta"]
        if meta is not None and got["summary"] is None:
            silent.append(
                {"rank": meta.get("rank"), "host": slurm_node(meta), "last_step": got["last_step"]}
            )
    return hangs, silent


def late_s(rec: Dict[str, Any]) -> float:
    """How far past its limit a watchdog wrote its record (negative: asked before its limit)."""
    try:
        return float(rec.get("waited_s") or 0.0) - float(rec.get("limit_s") or 0.0)
    except (TypeError, ValueError):
        return 0.0


def is_late(rec: Dict[str, Any]) -> bool:
    """Whether the rank was not running when its limit passed (more than a tick and
    :data:`LATE_SLACK_S` late; records without ``tick_s`` ticked once a second at most)."""
    tick = rec.get("tick_s")
    tick = float(tick) if isinstance(tick, (int, float)) else 1.0
    return late_s(rec) > tick + LATE_SLACK_S


def _key(rec: Dict[str, Any]) -> Tuple[int, int]:
    step = rec.get("last_step")
    return (-1 if step is None else int(step), PHASE_ORDER.get(str(rec.get("phase")), 0))


def not_arrived(
    hangs: List[Dict[str, Any]], silent: Optional[List[Dict[str, Any]]] = None
) -> List[Dict[str, Any]]:
    """The ranks that held the others up: the late and the silent ones when there are any,
    else the ranks behind the furthest one (all of them when none is behind)."""
    if not hangs:
        return []
    late = [dict(h, why="late") for h in hangs if is_late(h)]
    quiet = [dict(s, phase=None, why="silent") for s in (silent or [])]
    if late or quiet:
        return sorted(late + quiet, key=_rank)
    furthest = max(_key(h) for h in hangs)
    behind = [h for h in hangs if _key(h) < furthest]
    return sorted(behind or hangs, key=_rank)


_FIELDS = ("rank", "host", "phase", "last_step", "waited_s", "limit_s", "stacks", "requested_by")


def hang_summary(run_dir: Path) -> Optional[Dict[str, Any]]:
    """What the rank logs say about a hang, or None when no rank logged one."""
    hangs, silent = hang_records(run_dir)
    if not hangs:
        return None
    missing = not_arrived(hangs, silent)
    return {
        "not_arrived": [{k: h.get(k) for k in (*_FIELDS, "why")} for h in missing],
        "hosts": sorted({str(h.get("host")) for h in missing}),
        "ranks": [
            dict({k: h.get(k) for k in _FIELDS}, late_s=round(late_s(h), 3))
            for h in sorted(hangs, key=_rank)
        ],
        "no_record": silent,
    }


def _rank(h: Dict[str, Any]) -> int:
    return int(h.get("rank") or 0)


def describe(summary: Dict[str, Any]) -> str:
    """One line: ``hung: rank 1 on n2 never arrived (in prepare after step 3); stacks: ...``."""
    parts = []
    for h in summary["not_arrived"]:
        step = h.get("last_step")
        after = "before its first step" if step is None else f"after step {step}"
        if h.get("why") == "silent":
            what = f"{after}; wrote no hang record: stopped or killed before it could"
        elif h.get("why") == "late":
            late = f"{late_s(h):.1f} s late"
            what = f"in {h.get('phase')}, {after}; not running: its watchdog fired {late}"
        else:
            what = f"in {h.get('phase')}, {after}"
        parts.append(f"rank {h.get('rank')} on {h.get('host')} ({what})")
    named = summary["not_arrived"]
    every = len(named) == len(summary["ranks"]) > 1 and not any(h.get("why") for h in named)
    verb = "all stopped at the same point" if every else "never arrived"
    return f"hung: {', '.join(parts)} {verb}"


def hung_values(run_dir: Path, exit_code: Optional[int]) -> Dict[str, Any]:
    """``{"state": HUNG, "cause": ...}`` for a failed job that hung, else ``{}``."""
    summary = hang_summary(run_dir)
    if summary is None and exit_code != S.HUNG_EXIT_CODE:
        return {}
    values: Dict[str, Any] = {"state": S.HUNG}
    if summary is not None:
        values["cause"] = describe(summary)
    return values
