"""Scaling series: configurations that differ only in scale, with speedup, efficiency,
base, knee, peak and the verdicts (``docs/metrics.md``, Scaling and Verdicts). Every figure
is a ratio of geometric means (the rule of :mod:`ddlbench.analyse.stats`).

A series fixes every field of :data:`SERIES_FIELDS` and the batch that scaling keeps
constant: the per-device batch for weak scaling, the global batch for strong scaling. The
framework entry's label and its options (``framework_options``: backup workers, threads...)
are among those fields: two entries of one framework (sync and backup1) are two series. The
spec variant joins a series' id where the series holds more than one variant (compute and
cpushare stragglers: nothing else tells them apart); a variant that sets one of the fields
(warmup, transport) already makes its own series, and pairings that differ only in that field
(:mod:`ddlbench.analyse.transports`) still find each other.

The rate a series is of, one rule for its points, ratios, verdicts, label, tables and figures
(:func:`series_rate`): the global throughput, except with backup workers (``b > 0``), whose
dropped gradients train nothing: their series is of the applied samples per second, and its
label says so (:data:`APPLIED_WORDS`).
"""

from __future__ import annotations

import json
import math
from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd

from ..values import missing
from .verdicts import VerdictSettings, annotate_series, busy_counts

#: what a language-model configuration fixes besides the rest (analyse/lm_verdicts.py)
LM_SERIES_FIELDS = ("parallel", "activation_checkpointing", "seq_len", "grad_accum", "compile")
#: how a series label names an LM field that varies among the series
_LM_WORDS = {
    "parallel": "{}",
    "activation_checkpointing": "ckpt {}",
    "seq_len": "seq {}",
    "grad_accum": "accum {}",
    "compile": "{}",  # the value names itself: eager, torch.compile(mode=default), ...
}

SERIES_FIELDS = [
    "framework",
    "workload",
    "model",
    "mode",
    "precision",
    "data_kind",
    "scaling",
    "device",
    "backend",
    "lr_scaling",
    "warmup_epochs",
    "transport",
    "label",
    "framework_options",
    # a language model's mode and shape: DDP and FSDP, or seq 2048 and 8192, never share a series
    *LM_SERIES_FIELDS,
]


#: the rate a scaling series is of (``rate`` of its configurations, points and row): every
#: sample the ranks processed (``throughput``), or only those whose gradient was applied
#: (``applied_samples_per_s``: backup workers, b > 0)
RATE_THROUGHPUT, RATE_APPLIED = "throughput", "applied"
#: the words a series of the applied rate carries in its label (tables, legends, summary)
APPLIED_WORDS = "applied samples/s"
#: the statistics over repeats that a series reads of its rate (``rate_<name>``, config_stats)
RATE_STATS = ("gmean", "ci95_low", "ci95_high", "log_mean", "log_sd", "repeats", "noisy")


def _key(v) -> str:
    return "" if missing(v) else str(v)


def backup_workers_of(options: object) -> Optional[int]:
    """The backup workers b of a configuration's ``framework_options`` (JSON), else None."""
    if missing(options) or not options:
        return None
    try:
        b = json.loads(str(options)).get("backup_workers")
    except (ValueError, AttributeError):
        return None
    return int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) else None


def series_rate(runs: pd.DataFrame, options: object) -> Tuple[str, np.ndarray]:
    """The rate of a configuration's scaling series and its values over ``runs`` (the complete
    repeats), the one rule of docs/metrics.md#scaling: with backup workers (b > 0 in
    ``options``) the applied samples per second (``applied_samples_per_s``: a dropped rank's
    samples train nothing, and ``throughput`` counts them); else, and for a runs table
    collected without that column, the global throughput (``rate`` then says so)."""
    b = backup_workers_of(options)
    if b is not None and b > 0 and "applied_samples_per_s" in runs:
        return RATE_APPLIED, runs["applied_samples_per_s"].to_numpy(dtype=float)
    return RATE_THROUGHPUT, runs["throughput"].to_numpy(dtype=float)


def _with_rate(c: pd.DataFrame) -> pd.DataFrame:
    """Configurations with their series rate's figures (``rate``, ``rate_<stat>``); a table
    made without them (by hand) is of the throughput."""
    if "rate_gmean" in c:
        return c
    c = c.assign(rate=RATE_THROUGHPUT, rate_repeats=c["repeats"], rate_noisy=c["noisy"])
    for k in RATE_STATS[:5]:
        c[f"rate_{k}"] = c.get(f"throughput_{k}", math.nan)
    return c


def _scaling_configs(configs: pd.DataFrame) -> pd.DataFrame:
    """The configurations that scale, each with the id of its scaling series.

    A series id joins the :data:`SERIES_FIELDS` and the fixed batch; two layouts of the same
    device count (4x1 vs 1x4) are two series.
    """
    c = configs[(configs["mode"] != "allreduce") & configs["world_size"].notna()].copy()
    if not len(c):
        return c
    c = _with_rate(c)
    c["scaling"] = c["scaling"].map(lambda s: "weak" if missing(s) else s)
    fixed = np.where(
        c["scaling"] == "strong",
        "G" + c["global_batch_size"].astype(str),
        "B" + c["batch_size"].astype(str),
    )
    # .get: a table collected before a field existed (transport) has no column for it
    c["series"] = ["|".join(_key(r.get(f)) for f in SERIES_FIELDS) for _, r in c.iterrows()]
    c["series"] = c["series"] + "|" + fixed
    variant = c["variant"].map(_key) if "variant" in c else pd.Series("", index=c.index)
    mixed = variant.groupby(c["series"]).transform("nunique") > 1
    c.loc[mixed, "series"] = c.loc[mixed, "series"] + "|v" + variant[mixed]
    dup = c.duplicated(["series", "world_size"], keep=False)
    if dup.any():
        split = c.groupby("series")["world_size"].transform(lambda s: s.duplicated().any())
        c.loc[split, "series"] = (
            c.loc[split, "series"] + "|tpn" + c.loc[split]["tasks_per_node"].astype(str)
        )
    return c


def _series_row(sid: str, label: str, first: pd.Series, valid: int, threshold: float) -> dict:
    """A series' row before its base, knee and peak are known."""
    strong = first["scaling"] == "strong"
    return {
        "series": sid,
        "label": label,
        "framework": first["framework"],
        "model": first["model"],
        "mode": first["mode"],
        "scaling": first["scaling"],
        "rate": first["rate"],
        "batch_size": first["batch_size"] if not strong else None,
        "global_batch_size": first["global_batch_size"] if strong else None,
        "points": valid,
        "base_devices": None,
        "base_throughput": math.nan,
        "base_ci95_low": math.nan,  # the base's 95 % interval, and the efficiency's at max:
        "base_ci95_high": math.nan,  # the report prints each figure to its interval's digits
        "max_devices": None,
        "efficiency_at_max": math.nan,
        "efficiency_at_max_ci95_low": math.nan,
        "efficiency_at_max_ci95_high": math.nan,
        "knee_devices": None,
        "knee_reason": "",
        "peak_devices": None,
        "saturates": None,
        "efficiency_threshold": threshold,
        # a language model's sequence length: the series table gives its base tokens/s
        "seq_len": first.get("seq_len"),
    }


def _scaling_point(
    sid: str, label: str, r: pd.Series, base_n: Optional[int], base_t: Optional[float]
) -> dict:
    """One configuration of a series, with speedup and efficiency relative to the base; its
    ``throughput_*`` figures are of the series' rate (``rate``: :func:`series_rate`)."""
    n = int(r["world_size"])
    t = math.nan if missing(r["rate_gmean"]) else float(r["rate_gmean"])
    p = {
        "series": sid,
        "label": label,
        "framework": r["framework"],
        "group": r["group"],
        "devices": n,
        "nodes": r["nodes"],
        "tasks_per_node": r["tasks_per_node"],
        "rate": r["rate"],
        "repeats": r["rate_repeats"],
        "throughput_gmean": t,
        "throughput_log_mean": r.get("rate_log_mean", math.nan),
        "throughput_log_sd": r.get("rate_log_sd", math.nan),
        "ci95_low": r["rate_ci95_low"],
        "ci95_high": r["rate_ci95_high"],
        "per_device": t / n if n else math.nan,
        "base_devices": base_n,
        "speedup": math.nan,
        "efficiency": math.nan,
        "ideal_throughput": math.nan,
        "noisy": r["rate_noisy"],
        # a language model's sequence length: the figures and tables give its tokens/s
        "seq_len": r.get("seq_len"),
    }
    if base_t and not math.isnan(t):
        p["speedup"] = t / base_t
        p["efficiency"] = (t / n) / (base_t / base_n)
    if base_t:
        p["ideal_throughput"] = base_t * n / base_n
    return p


def _set_base_knee_peak(
    srow: dict, points: list, base_n: int, base_t: float, threshold: float
) -> None:
    """Fill a series row from its points that have an efficiency."""
    pts = [p for p in points if not math.isnan(p["efficiency"])]
    srow["base_devices"] = base_n
    srow["base_throughput"] = base_t
    srow["max_devices"] = pts[-1]["devices"]
    srow["efficiency_at_max"] = pts[-1]["efficiency"]
    srow["speedup_at_max"] = pts[-1]["speedup"]
    srow["knee_devices"] = _point_knee(pts, threshold)
    peak = max(pts, key=lambda p: (p["throughput_gmean"], -p["devices"]))
    srow["peak_devices"] = peak["devices"]
    srow["peak_throughput"] = peak["throughput_gmean"]
    srow["saturates"] = bool(peak["devices"] < pts[-1]["devices"])


def series_tables(
    configs: pd.DataFrame, threshold: float, verdicts: VerdictSettings
) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """Configuration statistics -> (points, series) with the knee at ``threshold``.

    Efficiency and speedup are relative to the series' smallest device count (its base).
    """
    empty = (pd.DataFrame(), pd.DataFrame())
    if not len(configs):
        return empty
    c = _scaling_configs(configs)
    if not len(c):
        return empty
    labels = _series_labels(c)
    busy = busy_counts(c)  # a step with a run started on a busy node is inconclusive
    points, series = [], []
    for sid, g in c.groupby("series", sort=True):
        g = g.sort_values("world_size")
        valid = g[g["rate_gmean"].notna() & (g["rate_gmean"] > 0)]
        srow = _series_row(sid, labels[sid], g.iloc[0], len(valid), threshold)
        base_n = base_t = None
        if len(valid):
            base_n = int(valid["world_size"].iloc[0])
            base_t = float(valid["rate_gmean"].iloc[0])
        own = [_scaling_point(sid, labels[sid], r, base_n, base_t) for _, r in g.iterrows()]
        if base_n is not None:
            _set_base_knee_peak(srow, own, base_n, base_t, threshold)
        annotate_series(own, srow, threshold, verdicts, busy)
        _copy_intervals(srow, own)
        _drop_unsupported_knee(srow, own)
        points.extend(own)
        series.append(srow)
    return pd.DataFrame(points), pd.DataFrame(series)


#: why a series has no knee (``knee_reason``)
NO_KNEE_ONE_SCALE = "one device count"
NO_KNEE_NO_INTERVAL = "fewer than 2 complete repeats: no efficiency interval"


def _copy_intervals(srow: dict, points: list) -> None:
    """The series row's base throughput and efficiency at its largest scale with their
    points' 95 % intervals."""
    for p in points:
        if p["devices"] == srow.get("base_devices"):
            srow.update(base_ci95_low=p["ci95_low"], base_ci95_high=p["ci95_high"])
        if p["devices"] == srow.get("max_devices"):
            srow.update(
                efficiency_at_max_ci95_low=p.get("efficiency_ci95_low", math.nan),
                efficiency_at_max_ci95_high=p.get("efficiency_ci95_high", math.nan),
            )


def _drop_unsupported_knee(srow: dict, points: list) -> None:
    """No knee where the data cannot place one with the stated confidence: a series measured
    at one device count (its base is 100 % by definition), or one none of whose points
    beyond the base has an efficiency interval (fewer than 2 complete repeats there or at
    the base: the point estimate ``knee_devices`` stays); ``knee_reason`` says which. Else
    the knee range stands (docs/metrics.md)."""
    if missing(srow.get("base_devices")):
        return
    beyond = [
        p
        for p in points
        if not missing(p.get("efficiency")) and p["devices"] != srow["base_devices"]
    ]
    if not beyond:  # not even a point estimate: the base is 100 % by definition
        srow.update(knee_low=None, knee_high=None, knee_devices=None)
        srow["knee_reason"] = NO_KNEE_ONE_SCALE
    elif all(missing(p.get("efficiency_ci95_low")) for p in beyond):
        # knee_devices stays: the point estimate, which no table or figure shows as a knee
        srow.update(knee_low=None, knee_high=None, knee_reason=NO_KNEE_NO_INTERVAL)


def _point_knee(pts, threshold: float) -> Optional[int]:
    """Largest N up to which every point's efficiency is >= threshold (None when
    not even the first step after the base is); the uncertainty is in knee_low/high."""
    knee = None
    for p in pts:
        if p["efficiency"] < threshold:
            break
        knee = p["devices"]
    return knee


def _number_word(v) -> str:
    """A field's value in a label: ``2048`` for 2048.0 (a float column), else as it is."""
    if missing(v):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def entry_word(r) -> str:
    """A configuration's framework entry in words: ``label (framework)`` when the spec labels
    the entry (``backup1 (pytorch)``), else the framework."""
    fw = str(r["framework"])
    label = _key(r.get("label"))
    return f"{label} ({fw})" if label and label != fw else fw


def _add_variants(labels: Dict[str, str], firsts: pd.DataFrame) -> None:
    """Series whose labels are equal but whose variants differ: each gets its variant."""
    by_label: Dict[str, list] = {}
    for sid, lab in labels.items():
        by_label.setdefault(lab, []).append(sid)
    for sids in by_label.values():
        variants = {_key(firsts.loc[sid].get("variant")) for sid in sids}
        if len(sids) > 1 and len(variants) > 1:
            for sid in sids:
                v = _key(firsts.loc[sid].get("variant"))
                labels[sid] = f"{labels[sid]} {v}" if v else labels[sid]


def _add_varying_fields(parts: Dict[str, list], fm: pd.DataFrame, varies) -> None:
    """The words of the fields that vary among the series of one mode: precision, scaling,
    device, transport, a language model's mode and shape, warmup."""
    for col in ("precision", "scaling", "device", "transport"):
        if varies(col):
            for sid, r in fm.iterrows():
                parts[sid].append(_key(r[col]))
    for col, word in _LM_WORDS.items():
        if varies(col):
            for sid, r in fm.iterrows():
                value = _number_word(r[col])
                parts[sid].append(word.format(value) if value else "")
    if varies("warmup_epochs"):
        for sid, r in fm.iterrows():
            w = r["warmup_epochs"]
            parts[sid].append(f"warmup {w:g} ep" if not missing(w) and w else "no warmup")


def _series_labels(c: pd.DataFrame) -> Dict[str, str]:
    """Short legend labels: the framework entry (its label, when the spec gives one) plus
    whatever else tells series apart; the spec variant when nothing else does.

    Labels are made per mode (series of different modes are never drawn together). A
    field is shown when it varies among the series of that mode (backend and workload:
    when they vary among the series of one framework).
    """
    firsts = c.groupby("series", sort=True).first()
    labels: Dict[str, str] = {}
    for _, fm in firsts.groupby("mode", sort=True, dropna=False):
        parts = {sid: [entry_word(r)] for sid, r in fm.iterrows()}

        def varies(col, fm=fm):
            return col in fm and fm[col].map(_key).nunique() > 1

        def varies_within_framework(col, fm=fm):
            return (fm.groupby("framework")[col].agg(lambda s: s.map(_key).nunique()) > 1).any()

        if varies_within_framework("workload"):
            for sid, r in fm.iterrows():
                parts[sid].append(f"({r['workload']})")
        if varies("model"):
            for sid, r in fm.iterrows():
                parts[sid].append(str(r["model"]))
        fixed = fm.apply(
            lambda r: (
                f"GBS {r['global_batch_size']}"
                if r["scaling"] == "strong"
                else f"BS {r['batch_size']}/dev"
            ),
            axis=1,
        )
        if fixed.nunique() > 1:
            for sid in parts:
                parts[sid].append(fixed[sid])
        if varies_within_framework("backend"):
            for sid, r in fm.iterrows():
                parts[sid].append(_key(r["backend"]))
        _add_varying_fields(parts, fm, varies)
        for sid in parts:
            if "|tpn" in sid:
                parts[sid].append(f"{sid.rsplit('|tpn', 1)[1]}/node")
        labels.update({sid: " ".join(p for p in ps if p) for sid, ps in parts.items()})
    _add_variants(labels, firsts)
    for sid, rate in firsts["rate"].items():  # the figure is not every sample: say so
        labels[sid] = f"{labels[sid]}, {APPLIED_WORDS}" if rate == RATE_APPLIED else labels[sid]
    # still ambiguous: number them
    seen: Dict[str, int] = {}
    for sid in sorted(labels):
        lab = labels[sid]
        seen[lab] = seen.get(lab, 0) + 1
        if seen[lab] > 1:
            labels[sid] = f"{lab} #{seen[lab]}"
    return labels
