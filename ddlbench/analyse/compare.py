"""``ddlbench compare``: throughput of the configurations two campaigns have in common.

A configuration (``group``: the run id without its ``-r<repeat>`` suffix) regressed when its
throughput over complete repeats dropped significantly (one-sided Welch test on the logs at
``alpha``) AND by at least the threshold; ``unchanged`` needs the change to lie within
+/- threshold with confidence (two one-sided tests); anything else is ``inconclusive``, with
the repeats a power calculation asks for (:mod:`ddlbench.analyse.verdicts`,
``docs/metrics.md``). ``change`` is the change of the geometric means, the figure the tests
are about, with its 95 % interval (``change_ci95_low``/``high``) and the interval the tests read
(``change_test_ci_low``/``high``: two-sided at ``1 - 2 alpha``, 90 % at alpha 0.05, with the
tests' Welch standard error and degrees of freedom): ``improved`` or ``regressed`` exactly when it
excludes 0 and the change passes the threshold, ``unchanged`` exactly when it lies within
+/- the threshold. The CLI shows that one, so that no verdict contradicts the interval beside it.

The figure compared is the rate of the configuration's scaling series (``rate``:
:func:`~ddlbench.analyse.series.series_rate`, through ``config_stats``' ``rate_*``): the
throughput, except for backup workers (b > 0), whose dropped samples train nothing: the applied
samples per second there, when both campaigns have them. A side with a complete run that the
pre-flight found started on a busy node makes a decisive verdict ``inconclusive``
(:func:`~ddlbench.analyse.verdicts.busy_verdict`, ``busy``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import pandas as pd

from .analysis import Settings, config_stats
from .series import RATE_APPLIED, RATE_THROUGHPUT
from .stats import intervals_overlap
from .verdicts import (
    IMPROVED,
    REGRESSED,
    UNCHANGED,
    VerdictSettings,
    busy_note,
    busy_verdict,
    change_intervals,
    change_verdicts,
)


def parse_threshold(text: str) -> float:
    """'5%' or '5' -> 0.05 (always percent); raises ValueError for anything else."""
    s = str(text).strip()
    if s.endswith("%"):
        s = s[:-1].strip()
    v = float(s)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"threshold must be a non-negative percentage, got {text!r}")
    return v / 100.0


def parse_change_threshold(text: str) -> float:
    """``compare --threshold``: '5%' (or '5') -> 0.05, the fraction its verdicts use.

    Raises ValueError saying what is wrong: a bare number below 1 (``0.05``: 0.05 % or 5 %?),
    0 (no change can be shown to lie within +/- 0 %, and a drop of 0 % is no drop) or 100 %
    and more (throughput cannot drop by that much: nothing could regress).
    """
    s = str(text).strip()
    try:
        v = float(s[:-1] if s.endswith("%") else s) / 100.0
    except ValueError:
        raise ValueError(f"expected a percentage such as 5%, got {text!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"expected a percentage such as 5%, got {text!r}")
    if not s.endswith("%") and 0 < v * 100 < 1:
        raise ValueError(
            f"{text!r} is {100 * v:g} % (a bare number is a percentage): write "
            f"{100 * v:g}% for that, or {100 * v * 100:g}% for {100 * v:g} as a fraction"
        )
    if v <= 0:
        raise ValueError(f"must be above 0 %, got {text!r} (5% is the default)")
    if v >= 1:
        raise ValueError(
            f"must be below 100 %, got {text!r}: throughput cannot drop by 100 % or more, "
            "so no configuration could regress"
        )
    return v


#: the columns of :func:`compare`'s table, in order
COLUMNS = [
    "group",
    "world_size",
    "rate",
    "verdict",
    "change",
    "change_ci95_low",
    "change_ci95_high",
    "change_test_ci_low",
    "change_test_ci_high",
    "test_ci_level",
    "p_value",
    "reason",
    "repeats_needed",
    "repeats_capped",
    "busy",
    "base_busy",
    "new_busy",
    "base_gmean",
    "new_gmean",
    "base_ci95_low",
    "base_ci95_high",
    "new_ci95_low",
    "new_ci95_high",
    "ci_overlap",
    "base_repeats",
    "new_repeats",
    "base_cv",
    "new_cv",
]


def _throughput_by_group(runs: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Throughput statistics of a campaign's configurations (allreduce ones left out),
    indexed by group."""
    configs = config_stats(runs, settings)
    configs = configs[configs["mode"] != "allreduce"] if len(configs) else configs
    return configs.set_index("group") if len(configs) else pd.DataFrame()


def _set_change(row: dict, vs: VerdictSettings) -> None:
    """The change, its interval, interval overlap and verdict of a configuration both
    campaigns ran (inconclusive where a side started on a busy node)."""
    b = (row["base_log_mean"], row["base_log_sd"], row["base_repeats"])
    n = (row["new_log_mean"], row["new_log_sd"], row["new_repeats"])
    row.update(change_intervals(n, b, vs))
    row["ci_overlap"] = intervals_overlap(
        (row["base_ci95_low"], row["base_ci95_high"]),
        (row["new_ci95_low"], row["new_ci95_high"]),
    )
    v = change_verdicts(*b, *n, vs)[0]
    row["busy"] = busy_note(
        (
            ("base", row["base_busy"], row["base_repeats"]),
            ("new", row["new_busy"], row["new_repeats"]),
        )
    )
    verdict, reason = busy_verdict(v.verdict, v.reason, row["busy"], _DECISIVE)
    row.update(
        verdict=verdict,
        change=v.change,
        p_value=v.p_value,
        repeats_needed=v.repeats_needed,
        repeats_capped=v.repeats_capped,
        reason=reason,
    )


_DECISIVE = (REGRESSED, IMPROVED, UNCHANGED)
_STATS = ("gmean", "log_mean", "log_sd", "ci95_low", "ci95_high", "cv")


def _rate(rb: Optional[pd.Series], rn: Optional[pd.Series]) -> str:
    """The rate both sides are compared on: the applied samples per second where each side
    present has them (backup workers, b > 0: the scaling series' rate), else the throughput."""
    sides = [r for r in (rb, rn) if r is not None]
    applied = all(r.get("rate") == RATE_APPLIED for r in sides)
    return RATE_APPLIED if sides and applied else RATE_THROUGHPUT


def _comparison_row(group: str, rb: Optional[pd.Series], rn: Optional[pd.Series], vs) -> dict:
    """One configuration's row; ``rb``/``rn``: its statistics in base/new (None: not run)."""
    row = {"group": group, "rate": _rate(rb, rn)}
    prefix = "rate" if row["rate"] == RATE_APPLIED else "throughput"
    for tag, r in (("base", rb), ("new", rn)):
        n = r.get("rate_repeats") if prefix == "rate" and r is not None else None
        row[f"{tag}_repeats"] = int(n if n is not None else r["repeats"]) if r is not None else 0
        row[f"{tag}_busy"] = int(r.get("busy_runs", 0) or 0) if r is not None else 0
        for k in _STATS:
            row[f"{tag}_{k}"] = float(r[f"{prefix}_{k}"]) if r is not None else math.nan
    row["world_size"] = (rb if rb is not None else rn)["world_size"]
    row["change"] = row["change_ci95_low"] = row["change_ci95_high"] = math.nan
    row["change_test_ci_low"] = row["change_test_ci_high"] = math.nan
    row["test_ci_level"] = vs.test_level
    row["ci_overlap"] = row["busy"] = None
    row.update(p_value=math.nan, repeats_needed=math.nan, repeats_capped=False, reason="")
    if rb is None:
        row["verdict"] = "only in new"
    elif rn is None:
        row["verdict"] = "only in base"
    elif math.isnan(row["base_gmean"]) or math.isnan(row["new_gmean"]):
        row["verdict"] = "no data"
    else:
        _set_change(row, vs)
    return row


def compare(
    base, new, threshold: float = 0.05, settings: Optional[Settings] = None
) -> pd.DataFrame:
    """One row per configuration of either campaign, with a ``verdict``:

    ``regressed``, ``improved`` (significant and beyond the threshold either way),
    ``unchanged`` (within the threshold with confidence), ``inconclusive``, ``no data`` (no
    complete repeat in one of the two), ``only in base``, ``only in new``.
    """
    settings = settings or Settings()
    vs = dataclasses.replace(settings.verdicts(), min_gain=threshold)
    b = _throughput_by_group(base.runs, settings)
    n = _throughput_by_group(new.runs, settings)
    rows = [
        _comparison_row(
            g, b.loc[g] if g in b.index else None, n.loc[g] if g in n.index else None, vs
        )
        for g in sorted(set(b.index) | set(n.index))
    ]
    return pd.DataFrame(rows, columns=COLUMNS)
