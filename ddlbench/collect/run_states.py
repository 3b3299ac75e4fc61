"""The campaign store's view of the runs, as the runs table needs it.

States are the campaign's vocabulary (:mod:`ddlbench.campaign.states`); raw Slurm names that
reach the collector (``COMPLETING``, ``BOOT_FAIL``, ``CANCELLED by 0``...) are mapped into it to
decide a run's status, while ``slurm_state`` keeps the word as given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

import pandas as pd

from ddlbench.campaign import states as S
from ddlbench.values import missing

from .errors import CollectError

RunStates = Union[None, pd.DataFrame, Callable[[Path], Optional[pd.DataFrame]]]
STATE_COLUMNS = ["job_id", "state", "exit_code", "start", "end", "nodelist", "reason"]
UNKNOWN = "unknown"
#: Slurm's words (long and short) for a job whose ranks are (still) running
_RUNNING_WORDS = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"}
_RUNNING_WORDS |= {"R", "CG", "SO", "SI", "RS"}


def normalise_states(states: RunStates, campaign_dir: Path) -> Optional[pd.DataFrame]:
    """One row per run_id: the latest attempt's state, and the number of attempts."""
    if callable(states):
        states = states(campaign_dir)
    if states is None or len(states) == 0:
        return None
    df = pd.DataFrame(states).copy()
    if "run_id" not in df.columns:
        raise CollectError("run states: a 'run_id' column is required")
    for c in STATE_COLUMNS:
        if c not in df.columns:
            df[c] = None
    order = [c for c in ("attempt", "start") if c in df.columns]
    if order:
        df = df.sort_values(["run_id"] + order, kind="stable", na_position="first")
    attempts = df.groupby("run_id", sort=False).size()
    if "attempts" in df.columns:
        given = df.groupby("run_id", sort=False)["attempts"].max()
        attempts = given.fillna(attempts)
    last = df.groupby("run_id", sort=False).tail(1).set_index("run_id")
    last = last[STATE_COLUMNS].copy()
    last["attempts"] = attempts
    return last


def state_word(s: Any) -> str:
    """The state as one upper-case word (``CANCELLED by 0`` -> ``CANCELLED``), or ``unknown``."""
    if missing(s) or str(s).strip() == "":
        return UNKNOWN
    return str(s).split()[0].upper().rstrip("+")


def vocabulary_state(word: str) -> Optional[str]:
    """The campaign-vocabulary state of a state word; None when unknown."""
    if word in S.ALL:
        return word
    if word == UNKNOWN:
        return None
    mapped = S.from_slurm(word, finished=False)
    # from_slurm calls unknown words RUNNING (nothing concluded); the collector says unknown
    return mapped if mapped != S.RUNNING or word in _RUNNING_WORDS else None


def is_unsuccessful(state: Optional[str]) -> bool:
    """A final state that is not success (the job failed, timed out, was cancelled...)."""
    return state in S.UNSUCCESSFUL


def is_hung(state: Optional[str]) -> bool:
    """Hung: the watchdog found the ranks stuck and stopped the job (``HUNG``, exit code 86);
    the run did not crash, its ranks stopped making progress."""
    return state == S.HUNG


def is_cancelled(state: Optional[str]) -> bool:
    """Cancelled (``ddlbench cancel``, ``scancel``): the run did not fail, it was stopped."""
    return state == S.CANCELLED


def is_live(state: Optional[str]) -> bool:
    return state in S.LIVE


def is_running(state: Optional[str]) -> bool:
    return state == S.RUNNING
