"""Hung runs: which ranks never arrived, read from the ``hang`` records of the rank logs.

A rank whose watchdog fires (``ddlbench.workloads.common.watchdog``) writes a ``hang`` record
(its host, last completed step, the phase it was in) and a stack dump beside its rank log,
then exits with :data:`~ddlbench.campaign.states.HUNG_EXIT_CODE`. A run whose job failed with
that exit code, or whose newest attempt holds ``hang`` records, ended ``HUNG``.

Which ranks never arrived: every rank waits, but those that reached the collective waited in
a later phase (or after a later step) than the one that did not. The ranks whose
``(last step, phase)`` is behind the furthest one are named; when all ranks stopped at the
same point, all are named (no rank completed the collective: see their stacks). A rank that
wrote a ``meta`` record but no ``hang`` record (killed before it dumped) is listed apart.
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


def _records(
    path: Path, data: Optional[bytes] = None
) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """The ``meta`` and ``hang`` records of one rank log (None when absent); ``data``: the
    file's bytes when already read."""
    meta = hang = None
    try:
        text = (path.read_bytes() if data is None else data).decode(errors="replace")
    except OSError:
        return None, None
    for line in text.splitlines():
        if '"meta"' not in line and '"hang"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("type") == "meta" and meta is None:
            meta = rec
        elif rec.get("type") == "hang":
            hang = rec
    return meta, hang


def hang_records(run_dir: Path) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``(hang records, ranks without one)`` of the newest attempt's rank logs; both empty
    when no rank logged a hang (the silent ranks are looked up only then)."""
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
        _, hang = _records(path, data)
        if hang is None:
            quiet.append(path)
            continue
        if hang.get("stacks"):
            hang = dict(hang, stacks=str(log_dir / str(hang["stacks"])))
        hangs.append(hang)
    if not hangs:  # the ranks without a hang record matter only beside one that has it
        return [], []
    silent = []
    for path in quiet:
        meta, _ = _records(path)
        if meta is not None:
            silent.append({"rank": meta.get("rank"), "host": meta.get("host")})
    return hangs, silent


def _key(rec: Dict[str, Any]) -> Tuple[int, int]:
    step = rec.get("last_step")
    return (-1 if step is None else int(step), PHASE_ORDER.get(str(rec.get("phase")), 0))


def not_arrived(hangs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The ranks behind the furthest one (all of them when none is behind)."""
    if not hangs:
        return []
    furthest = max(_key(h) for h in hangs)
    behind = [h for h in hangs if _key(h) < furthest]
    return sorted(behind or hangs, key=lambda h: int(h.get("rank") or 0))


def hang_summary(run_dir: Path) -> Optional[Dict[str, Any]]:
    """What the rank logs say about a hang, or None when no rank logged one."""
    hangs, silent = hang_records(run_dir)
    if not hangs:
        return None
    missing = not_arrived(hangs)
    fields = ("rank", "host", "phase", "last_step", "waited_s", "limit_s", "stacks")
    return {
        "not_arrived": [{k: h.get(k) for k in fields} for h in missing],
        "hosts": sorted({str(h.get("host")) for h in missing}),
        "ranks": [{k: h.get(k) for k in fields} for h in sorted(hangs, key=_rank)],
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
        parts.append(f"rank {h.get('rank')} on {h.get('host')} (in {h.get('phase')}, {after})")
    every = len(summary["not_arrived"]) == len(summary["ranks"]) and len(summary["ranks"]) > 1
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
