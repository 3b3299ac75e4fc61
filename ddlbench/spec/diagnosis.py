"""Spec keys for finding a bad node (docs/bad-nodes.md): the hang watchdog and debug output.

``watchdog``: ``true`` (the default limits), ``false`` (disarmed) or
``{floor_s, factor, first_s, grace_s}``; ``comm_debug``: the communication libraries' debug
output. Both reach ``run.json`` only when the spec sets them, so the run configs of specs
without them are unchanged.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from pydantic import BaseModel, ConfigDict, Field


class WatchdogSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the shortest limit once steps complete, seconds
    floor_s: Optional[float] = Field(default=None, gt=0)
    #: the limit is at least this many times the median recent step time
    factor: Optional[float] = Field(default=None, gt=1)
    #: the limit before the first step completes (start-up, rendezvous, compilation)
    first_s: Optional[float] = Field(default=None, gt=0)
    #: how long a rank whose watchdog fired waits for the others to dump, before it exits
    grace_s: Optional[float] = Field(default=None, ge=0)


def run_config_fields(spec: Any) -> Dict[str, Any]:
    """The ``run.json`` keys of the spec's ``watchdog`` and ``comm_debug``, when set."""
    out: Dict[str, Any] = {}
    wd = getattr(spec, "watchdog", None)
    if wd is False:
        out["watchdog"] = False
    elif isinstance(wd, WatchdogSpec):
        out["watchdog"] = wd.model_dump(exclude_none=True)
    if getattr(spec, "comm_debug", False):
        out["comm_debug"] = True
    return out
