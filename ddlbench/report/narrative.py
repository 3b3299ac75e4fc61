"""The report's sentences: the summary's findings, the verdicts in words, the provenance.

Each sentence says what the data support and nothing more (docs/metrics.md, Verdicts).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import pandas as pd

from .. import __version__
from ..analyse.analysis import Analysis, Settings
from ..analyse.series import RATE_APPLIED
from ..campaign.restarts import attempts_sentence, restarts_sentence
from ..collect.collector import CampaignData
from .format import (
    fbytes,
    fdevices,
    fint,
    fnum_in,
    fpct,
    fpct_in,
    fpct_range_in,
    frange_in,
    fsig,
    fspeedup,
    ftext,
    missing,
    short_list,
)
from .lm import comparison_sentences, seq_len_of
from .training import diverged_sentences


def _run_count_sentence(runs: pd.DataFrame) -> str:
    n = len(runs)
    counts = runs["status"].value_counts().to_dict() if n else {}
    parts = [f"{counts.get(s, 0)} {s.replace('_', ' ')}" for s in sorted(counts) if s != "ok"]
    return (
        f"{n} runs planned or found: {counts.get('ok', 0)} complete"
        + (f", {', '.join(parts)}" if parts else "")
        + "."
    )


#: a throughput whose 95 % interval spans more than this factor is not stated in the summary
NOISY_FACTOR = 2.0


def _scaling_sentences(a: Analysis) -> List[str]:
    """One sentence per scaling series (throughput ones where there are any): its largest
    scale with the geometric mean's 95 % interval, knee and whether more devices help."""
    s = a.series
    if not len(s):
        return []
    out = []
    shown = s[s["mode"] == "throughput"] if (s["mode"] == "throughput").any() else s
    for _, r in shown.sort_values("label").iterrows():
        if missing(r.get("max_devices")):
            continue
        pt = a.points[
            (a.points["series"] == r["series"]) & (a.points["devices"] == r["max_devices"])
        ]
        p = pt.iloc[0] if len(pt) else pd.Series(dtype=object)
        seq = seq_len_of(a.runs, p["group"]) if len(pt) else None
        one_scale = int(r["max_devices"]) == int(r["base_devices"])  # one verdict, said once
        tail = "" if one_scale else f"; {help_sentence(r)}"
        out.append(
            f"{r['label']} (geometric means over repeats): "
            f"{_largest_scale_words(r, p, seq)}; {knee_sentence(r, a.settings)}{tail}."
        )
    return out


def _largest_scale_words(r: Any, p: Any, seq: Any) -> str:
    """A series' throughput at its largest scale with its 95 % interval, speedup and
    efficiency; "too noisy to state" when the interval spans more than :data:`NOISY_FACTOR`
    (one statistic: the geometric mean, its interval and ratios of geometric means). Each
    figure to the digits its interval supports (docs/reports.md#digits)."""
    applied = r.get("rate") == RATE_APPLIED
    tp, lo, hi = (p.get(k, math.nan) for k in ("throughput_gmean", "ci95_low", "ci95_high"))
    where = f"on {fdevices(r['max_devices'])}"
    n = p.get("repeats")
    if not missing(lo) and not missing(hi) and float(lo) > 0 and hi / lo > NOISY_FACTOR:
        return (
            f"throughput {where} too noisy to state: its 95 % interval, "
            f"{_range_words(lo, hi, seq, applied)} over {fint(n)} repeats, spans more than a "
            f"factor of {NOISY_FACTOR:g}, and so do the speedup and efficiency"
        )
    if missing(lo) or missing(hi):
        ci = f"{fint(n)} repeat, no interval" if not missing(n) and int(n) < 2 else "no interval"
    else:
        ci = f"95 % interval {_range_words(lo, hi, seq, applied)}"
    tp_words = throughput_words(tp, seq, applied, (lo, hi))
    if r["max_devices"] == r["base_devices"]:  # its own base: no speedup to state
        return f"{tp_words} {where} ({ci})"
    eff_v = r["efficiency_at_max"]
    elo, ehi = p.get("efficiency_ci95_low"), p.get("efficiency_ci95_high")
    eff = fpct_in(eff_v, elo, ehi)
    if not missing(elo) and not missing(ehi):
        eff += f", its 95 % interval {fpct_range_in(elo, ehi, sep='-')}"
    return (
        f"{tp_words} {where} ({ci}; "
        f"{fspeedup(r.get('speedup_at_max'), eff_v, elo, ehi)}x the "
        f"{fdevices(r['base_devices'])} base, efficiency {eff})"
    )


def _range_words(lo: Any, hi: Any, seq: Any, applied: bool) -> str:
    """An interval of samples/s in the series' unit (a language model's tokens/s), both ends
    to the digits it supports."""
    word = "applied " if applied else ""
    if missing(seq):
        return f"{frange_in(lo, hi, sep='-')} {word}samples/s"
    return f"{frange_in(float(lo) * float(seq), float(hi) * float(seq), sep='-')} {word}tokens/s"


def throughput_words(
    samples_per_s: Any, seq_len: Any, applied: bool = False, interval: Any = (None, None)
) -> str:
    """A series' throughput: a language model's in tokens/s, its sequences/s in brackets (the
    unit of its comparisons and the throughput figure, docs/reports.md); else samples/s. Of a
    series of the applied rate (backup workers, docs/metrics.md#scaling): applied ones. With
    its 95 % ``interval`` (samples/s), to the digits that supports."""
    word = "applied " if applied else ""
    lo, hi = interval
    if missing(seq_len) or missing(samples_per_s):
        return f"{fnum_in(samples_per_s, lo, hi)} {word}samples/s"
    seq = float(seq_len)
    tokens = float(samples_per_s) * seq
    tlo, thi = (None, None) if missing(lo) or missing(hi) else (lo * seq, hi * seq)
    return (
        f"{fnum_in(tokens, tlo, thi)} {word}tokens/s ({fnum_in(samples_per_s, lo, hi)} "
        f"{word}sequences/s of {fint(seq_len)} tokens)"
    )


def _noise_sentences(a: Analysis) -> List[str]:
    noisy = a.configs[a.configs["noisy"]] if len(a.configs) else a.configs
    if not len(noisy):
        return []
    return [
        f"{len(noisy)} configuration(s) noisy (coefficient of variation above "
        f"{fpct(a.settings.noise_threshold, 0)}): "
        + ", ".join(noisy["group"].head(6))
        + ("..." if len(noisy) > 6 else "")
        + "."
    ]


def _straggler_sentences(a: Analysis) -> List[str]:
    """The stragglers the evidence supports (docs/bad-nodes.md#stragglers): runs whose index
    exceeds the threshold by more than their own step-to-step noise; those above the
    threshold but within their noise are counted apart, as no evidence."""
    st = a.stragglers[a.stragglers["straggler"]] if len(a.stragglers) else a.stragglers
    if not len(st):
        return []
    thr = f"{a.settings.straggler_threshold:g}"
    beyond = st["beyond_noise"].astype(bool) if "beyond_noise" in st else st["straggler"]
    sure, noisy = st[beyond], st[~beyond]
    within = (
        f"{len(noisy)} run(s) with an index above {thr} but within their own step-to-step "
        "noise (threshold + jitter / median step time), so their slowest rank may have drawn "
        "slower steps rather than be slower"
    )
    if not len(sure):
        w = noisy.iloc[0]
        return [
            f"No straggler beyond the runs' own noise: {within} (highest: {w['run_id']}, "
            f"{_straggler_words(w)}; step noise {fpct(w['straggler_noise'])}, so evidence "
            f"would need an index above "
            f"{a.settings.straggler_threshold + float(w['straggler_noise']):.3f})."
        ]
    w = sure.iloc[0]
    return [
        f"{len(sure)} run(s) with a straggler (index above {thr} by more than the run's own "
        f"step-to-step noise); worst: {w['run_id']}, {_straggler_words(w)}"
        + (f"; {within}." if len(noisy) else ".")
    ]


def _straggler_words(w: Any) -> str:
    """The slowest rank of a run and its index, in words true for any number of ranks:
    the median over two ranks is their mean."""
    who = (
        f"rank {fint(w['slowest_rank'])} on {w['slowest_host']}"
        if not missing(w["slowest_rank"])
        else "no single slowest rank"
    )
    metric = "compute time" if w.get("straggler_metric") == "compute" else "step time"
    n = w.get("world_size")
    if not missing(n) and int(n) == 2:
        of = f"the mean of both ranks' median {metric}s"
    elif not missing(n):
        of = f"the median over its {fint(n)} ranks of their median {metric}s"
    else:
        of = f"the median over ranks of their median {metric}s"
    return f"{who}, index {fsig(w['straggler_index'], 4)}: its median {metric} over {of}"


def _convergence_sentences(a: Analysis) -> List[str]:
    c = a.convergence
    if not len(c):
        return []
    out = []
    key = "final_accuracy_mean" if "final_accuracy_mean" in c else "final_accuracy"
    best = c.loc[c[key].idxmax()] if c[key].notna().any() else None
    words = _target_words(c)
    if best is not None:  # the table's "final accuracy", not its "best accuracy" (best epoch)
        words.append(
            f"highest final accuracy {fpct(best[key], 2)} (mean over the complete repeats of "
            f"the last evaluation, the table's final accuracy; {best['group']}, global batch "
            f"{fint(best['global_batch_size'])})"
        )
    if words:
        out.append("Convergence: " + "; ".join(words) + ".")
    return out + _large_batch_sentences(a)


def _target_words(c: pd.DataFrame) -> List[str]:
    """How many complete runs reached each target accuracy (``reached`` of ``repeats``)."""
    if "reached" not in c or "target_accuracy" not in c:
        return []
    out = []
    for t, g in c[c["target_accuracy"].notna()].groupby("target_accuracy", sort=True):
        reached, runs = int(g["reached"].sum()), int(g["repeats"].sum())
        if not runs:  # nothing ran to completion: nothing to say reached or not
            out.append(f"target {fpct(t, 1)}: no complete run")
            continue
        out.append(f"target {fpct(t, 1)} reached by {reached} of {runs} complete run(s)")
    return out


def _allreduce_sentences(a: Analysis) -> List[str]:
    ar = a.allreduce
    out = []
    if len(ar) and ar["busbw_gbps"].notna().any():
        top = ar.loc[ar["busbw_gbps"].idxmax()]
        out.append(
            f"Allreduce: highest bus bandwidth {fsig(top['busbw_gbps'])} GB/s "
            f"({top['group']}, {fbytes(top['bytes'])} messages)."
        )
    if len(ar) and (ar["world_size"] <= 1).any():
        single = sorted(set(ar.loc[ar["world_size"] <= 1, "group"]))
        out.append(f"Allreduce on 1 rank ({', '.join(single)}): no communication with 1 rank.")
    return out


def summary(a: Analysis, data: CampaignData) -> List[str]:
    """The summary's findings, one sentence each: runs, diverged training, restarts, scaling,
    noise, stragglers, mismatches, convergence, allreduce and the collector's warnings."""
    out = [_run_count_sentence(a.runs)]
    out += diverged_sentences(a.runs)  # a failed training is said before any figure
    restarted = restarts_sentence(data.campaign_dir)  # requeues and retries, never hidden
    if restarted:
        out.append(restarted)
    resubmitted = attempts_sentence(data.campaign_dir)  # how each earlier attempt ended
    if resubmitted:
        out.append(resubmitted)
    out += preflight_sentences(a.runs)  # a busy machine is said beside the figures
    out += window_sentences(a.runs)  # how much measurement is behind every figure
    out += _scaling_sentences(a)
    out += _noise_sentences(a)
    out += _straggler_sentences(a)
    out += _mismatch_lines(a.runs)
    out += _convergence_sentences(a)
    out += _allreduce_sentences(a)
    out += comparison_sentences(a.lm_comparisons)
    for w in data.info.get("warnings", []):
        if "run(s)" not in w:  # run counts are in the first line already
            out.append(f"Data: {w}.")
    return out


def knee_sentence(r: Any, settings: Settings) -> str:
    """What the knee range lets us say, and nothing more (``docs/metrics.md``, Knee)."""
    thr = fpct(settings.efficiency_threshold, 0)
    lo, hi = r.get("knee_low"), r.get("knee_high")
    conf = fpct(settings.confidence, 0)
    if missing(r.get("max_devices")):
        return "no efficiency without a complete run"
    if int(r["max_devices"]) == int(r["base_devices"]):
        return "one device count, no scaling verdict"
    if missing(lo):
        why = ftext(r.get("knee_reason")) or "no efficiency interval"
        return f"no knee ({why})"
    lo, hi = int(lo), int(hi)
    if lo == hi == int(r["max_devices"]):
        return f"efficiency is at or above {thr} at every scale up to {lo} ({conf} confidence)"
    if lo == hi and lo == int(r["base_devices"]):
        return f"efficiency is below {thr} right after the base ({conf} confidence)"
    if lo == hi:
        return (
            f"knee at {lo} devices: efficiency is at or above {thr} up to {lo} and below it "
            f"at the next scale ({conf} confidence)"
        )
    if lo == int(r["base_devices"]):
        return (
            f"the data cannot tell whether efficiency stays at or above {thr} anywhere "
            f"beyond the base: the knee is between {lo} and {hi} devices"
        )
    return (
        f"efficiency is at or above {thr} up to {lo} devices ({conf} confidence); "
        f"the knee is between {lo} and {hi} devices"
    )


def help_sentence(r: Any) -> str:
    """The "more devices help?" verdict of a series and why."""
    v = r.get("more_devices_help")
    why = ftext(r.get("more_devices_reason"))
    if missing(v) or not v:
        return f"more devices help? no verdict ({why or 'no data'})"
    return f"more devices help? {v} ({why})"


def _large_batch_sentences(a: Analysis) -> List[str]:
    from ..analyse.large_batch import margin_table, sentences

    st = a.settings
    return sentences(
        margin_table(a.convergence, st.accuracy_margin, st.alpha), st.accuracy_margin, 1 - st.alpha
    )


def _mismatch_lines(runs: pd.DataFrame) -> List[str]:
    """One sentence per kind of planned-vs-actual mismatch (results are labelled by what ran)."""
    if not len(runs) or "mismatches" not in runs or runs["mismatches"].isna().all():
        return []
    bad = runs[runs["mismatches"].notna()]
    out = []
    for text, g in bad.groupby("mismatches", sort=True):
        ids = ", ".join(g["run_id"].head(4)) + ("..." if len(g) > 4 else "")
        out.append(
            f"{len(g)} run(s) did not run as planned ({text}): {ids}; they are reported "
            "with what ran."
        )
    return out


def profile_text(cluster: dict) -> str:
    """The cluster profile in words: its settings as ``key value`` pairs (nested ones dotted),
    leaving out empty ones, the per-framework environments and, for a profile without Slurm,
    the Slurm settings that did not apply (its time limit does: the local executor's)."""
    parts = []
    local = cluster.get("scheduler") == "local"

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for k in value:
                if local and prefix == "slurm." and k != "time_limit":
                    continue
                if k not in ("environments", "env", "description"):
                    walk(f"{prefix}{k}.", value[k])
        elif value not in (None, "", [], {}):
            text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            parts.append(f"{prefix[:-1]} {text}")

    walk("", cluster)
    return "; ".join(parts)


def provenance(a: Analysis) -> List[Tuple[str, str]]:
    """(item, value) pairs: where, with what and by which versions the data were made."""
    p = a.provenance
    cl = p.get("cluster") or {}
    rows = [
        ("campaign", p.get("campaign")),
        ("created", p.get("created")),
        ("cluster", profile_text(cl) if isinstance(cl, dict) else cl),
        ("frameworks (version)", "; ".join(p.get("frameworks", []))),
        ("workloads", ", ".join(p.get("workloads", []))),
        ("communication backends", ", ".join(p.get("backends", []))),
        ("devices", ", ".join(p.get("device_names", []))),
        ("largest complete run", fdevices(p.get("largest_run_devices"))),
        ("devices per node", ", ".join(p.get("devices_per_node", [])) or "-"),
        ("nodes", _nodes_cell(p)),
        (_job_ids_label(p.get("scheduler")), short_list(p.get("job_ids", []))),
        ("python", ", ".join(p.get("python_versions", []))),
        *((f"nodes: {k.replace('_', ' ')}", v) for k, v in (p.get("nodes") or {}).items()),
        (
            "ddlbench",
            f"campaign {p.get('ddlbench_version_campaign')}, workloads "
            f"{', '.join(p.get('ddlbench_versions_logs', []))}, collector "
            f"{p.get('ddlbench_version_collector')}, report {__version__}",
        ),
    ]
    return [(k, "-" if v in (None, "") else str(v)) for k, v in rows]


def _job_ids_label(scheduler) -> str:
    return "Slurm job ids" if scheduler in (None, "slurm") else f"{scheduler} job ids"


def base_note(a: Analysis) -> str:
    """Which device count each series' efficiency is relative to."""
    if not len(a.series):
        return ""
    s = a.series.sort_values("label")
    has = s["base_devices"].notna()
    parts = [f"{r['label']}: N={fint(r['base_devices'])}" for _, r in s[has].iterrows()]
    if not parts:
        return ""
    text = "Efficiency base per series (smallest scale with a complete run): " + "; ".join(parts)
    if (~has).any():
        text += "; no complete run at any scale, not shown: " + ", ".join(s.loc[~has, "label"])
    return text


def preflight_sentences(runs: pd.DataFrame) -> List[str]:
    """What the pre-flight saw at the start of the measured runs (docs/telemetry.md): the
    runs that started on a busy or shared node and the first reason, or that all were quiet."""
    if not len(runs) or "preflight_busy" not in runs:
        return []
    seen = (
        runs[runs["preflight_busy"].notna()]
        if "status" not in runs
        else runs[runs["preflight_busy"].notna() & (runs["status"] == "ok")]
    )
    if not len(seen):
        return []
    flagged = seen[seen["interference"].notna() & (seen["interference"] != "")]
    if not len(flagged):
        return [f"Pre-flight: all {len(seen)} measured run(s) started on a quiet node."]
    why = str(flagged["interference"].iloc[0])
    return [
        f"Pre-flight: {len(flagged)} of {len(seen)} measured run(s) {why} (first one shown); "
        "their figures may be low or noisy: repeat them on a quiet machine."
    ]


def window_sentences(runs: pd.DataFrame) -> List[str]:
    """How long the complete runs measured (their measured windows, warmup excluded), so that
    a reader can judge how much measurement each figure rests on."""
    if not len(runs) or "measure_time_s" not in runs:
        return []
    ok = runs if "status" not in runs else runs[runs["status"] == "ok"]
    w = pd.to_numeric(ok["measure_time_s"], errors="coerce").dropna()
    if not len(w):
        return []
    from ddlbench.spec.measure_policy import MIN_MEASURE_SECONDS  # no spec models: no pydantic

    if len(w) == 1:  # one run: its window, no spread to describe
        span = f"{w.iloc[0]:.1f} s (1 run)"
    else:
        span = f"{w.min():.1f} s" if w.min() == w.max() else f"{w.min():.1f}-{w.max():.1f} s"
        span += f" (median {w.median():.1f} s)"
    short = int((w < MIN_MEASURE_SECONDS).sum())
    caveat = (
        f"; {short} below {MIN_MEASURE_SECONDS:g} s, which shows mostly the moment it ran in "
        "(docs/spec.md#how-much-to-measure)"
        if short
        else ""
    )
    return [f"Measured window per complete run: {span}, warmup excluded{caveat}."]


def _nodes_cell(p: Dict[str, Any]) -> str:
    """The nodes the runs ran on: their hosts, and the scheduler's names where those differ
    (two emulated Slurm nodes on one host are two nodes to the suspects' rule)."""
    hosts, named = p.get("hosts", []), p.get("scheduler_nodes", [])
    cell = f"{len(hosts)}: {short_list(hosts)}"
    if named and set(named) != set(hosts):
        cell = f"{len(named)}: {short_list(named)} (the scheduler's names; host(s) {cell})"
    return cell
