"""``ddlbench report``: collected data -> ``report.html`` (self-contained), ``report.md``.

The HTML embeds its figures as base64 PNG and its style sheet inline: it fetches nothing
(no CDN, no web fonts, no scripts). SVG versions of the figures sit next to it in
``plots/`` for print, and a copy of the data files in ``data/``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import pandas as pd

from .. import __version__
from ..analyse.analysis import Analysis, Settings, analyse
from ..campaign.paths import REPORT_FORMATS, CampaignPaths
from ..campaign.restarts import attempts_sentence, restarts_sentence
from ..collect.collector import CampaignData, RunStates, ensure_collected, finish_write
from ..diskfull import atomic_path
from .efficiency import efficiency_tables

TEMPLATES = Path(__file__).parent / "templates"
FORMATS = REPORT_FORMATS
#: the report folder's copy of the collected data files
REPORT_DATA_DIR = "data"
DATA_FILES = (
    "runs.csv",
    "runs.parquet",
    "ranks.parquet",
    "steps.parquet",
    "evals.parquet",
    "allreduce.parquet",
    "files.parquet",
    "collect.json",
)


@dataclass
class ReportResult:
    out_dir: Path
    files: Dict[str, Path] = field(default_factory=dict)  # "html", "md" -> path
    figures: Dict[str, Dict[str, Path]] = field(default_factory=dict)
    analysis: Optional[Analysis] = None


# ------------------------------------------------------------------ formatting


def _missing(v) -> bool:
    if v is None or v is pd.NA:
        return True
    try:
        return bool(isinstance(v, float) and math.isnan(v))
    except TypeError:
        return False


def fnum(v, digits: int = 1) -> str:
    """A number with thousands separators; '-' when missing."""
    if _missing(v):
        return "-"
    return f"{float(v):,.{digits}f}"


def fsig(v, sig: int = 3) -> str:
    if _missing(v):
        return "-"
    v = float(v)
    if v == 0:
        return "0"
    digits = max(0, sig - 1 - int(math.floor(math.log10(abs(v)))))
    return f"{v:,.{digits}f}"


def fpct(v, digits: int = 1) -> str:
    return "-" if _missing(v) else f"{100 * float(v):.{digits}f} %"


def fint(v) -> str:
    return "-" if _missing(v) else f"{int(v)}"


def fms(v) -> str:
    return "-" if _missing(v) else f"{1e3 * float(v):.2f}"


def ftext(v) -> str:
    return "" if _missing(v) else str(v)


def fdevices(n) -> str:
    """``1 device``, ``8 devices``."""
    return f"{fint(n)} device" + ("" if not _missing(n) and int(n) == 1 else "s")


def fbytes(v) -> str:
    if _missing(v):
        return "-"
    v = float(v)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= div:
            return f"{v / div:g} {unit}"
    return f"{v:g} B"


def _range(lo, hi) -> str:
    return f"{fnum(lo)} - {fnum(hi)}"


@dataclass
class Table:
    title: str
    columns: List[str]
    rows: List[List[str]]
    numeric: List[bool]
    note: str = ""
    flags: List[bool] = field(default_factory=list)  # highlighted rows


def _table(title, spec, df, note="", flag=None) -> Table:
    """spec: list of (header, formatter(row) -> str, numeric)."""
    rows, flags = [], []
    for _, r in df.iterrows():
        rows.append([f(r) for _, f, _ in spec])
        flags.append(bool(flag(r)) if flag else False)
    return Table(title, [h for h, _, _ in spec], rows, [n for _, _, n in spec], note, flags)


# ------------------------------------------------------------------ sections


def _run_count_sentence(runs: pd.DataFrame) -> str:
    n = len(runs)
    counts = runs["status"].value_counts().to_dict() if n else {}
    parts = [f"{counts.get(s, 0)} {s.replace('_', ' ')}" for s in sorted(counts) if s != "ok"]
    return (
        f"{n} runs planned or found: {counts.get('ok', 0)} complete"
        + (f", {', '.join(parts)}" if parts else "")
        + "."
    )


def _scaling_sentences(a: Analysis) -> List[str]:
    """One sentence per scaling series (throughput ones where there are any): its largest
    scale, knee and whether more devices help."""
    s = a.series
    if not len(s):
        return []
    out = []
    shown = s[s["mode"] == "throughput"] if (s["mode"] == "throughput").any() else s
    for _, r in shown.sort_values("label").iterrows():
        if _missing(r.get("max_devices")):
            continue
        pt = a.points[
            (a.points["series"] == r["series"]) & (a.points["devices"] == r["max_devices"])
        ]
        tp = pt["throughput_median"].iloc[0] if len(pt) else math.nan
        out.append(
            f"{r['label']}: {fnum(tp)} samples/s on {fdevices(r['max_devices'])} "
            f"({fsig(r.get('speedup_at_max'))}x the {fdevices(r['base_devices'])} base, "
            f"efficiency {fpct(r['efficiency_at_max'])}); {knee_sentence(r, a.settings)}; "
            f"{help_sentence(r)}."
        )
    return out


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
    st = a.stragglers[a.stragglers["straggler"]] if len(a.stragglers) else a.stragglers
    if not len(st):
        return []
    w = st.iloc[0]
    who = (
        f"rank {fint(w['slowest_rank'])} on {w['slowest_host']}"
        if not _missing(w["slowest_rank"])
        else "no single slowest rank"
    )
    metric = "compute time" if w.get("straggler_metric") == "compute" else "step time"
    return [
        f"{len(st)} run(s) with a straggler (index above "
        f"{a.settings.straggler_threshold:g}); worst: {w['run_id']}, {who} "
        f"({fsig(w['straggler_index'])}x the median rank's {metric})."
    ]


def _convergence_sentences(a: Analysis) -> List[str]:
    c = a.convergence
    if not len(c):
        return []
    out = []
    best = c.loc[c["final_accuracy"].idxmax()] if c["final_accuracy"].notna().any() else None
    if best is not None:
        out.append(
            f"Convergence: best final accuracy {fpct(best['final_accuracy'])} "
            f"({best['group']}, global batch {fint(best['global_batch_size'])})."
        )
    return out + _large_batch_sentences(a)


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


def _summary(a: Analysis, data: CampaignData) -> List[str]:
    out = [_run_count_sentence(a.runs)]
    restarted = restarts_sentence(data.campaign_dir)  # requeues and retries, never hidden
    if restarted:
        out.append(restarted)
    resubmitted = attempts_sentence(data.campaign_dir)  # how each earlier attempt ended
    if resubmitted:
        out.append(resubmitted)
    out += _scaling_sentences(a)
    out += _noise_sentences(a)
    out += _straggler_sentences(a)
    out += _mismatch_lines(a.runs)
    out += _convergence_sentences(a)
    out += _allreduce_sentences(a)
    for w in data.info.get("warnings", []):
        if "run(s)" not in w:  # run counts are in the first line already
            out.append(f"Data: {w}.")
    return out


def knee_sentence(r, settings: Settings) -> str:
    """What the knee range lets us say, and nothing more (``docs/metrics.md``, Knee)."""
    thr = fpct(settings.efficiency_threshold, 0)
    lo, hi = r.get("knee_low"), r.get("knee_high")
    conf = fpct(settings.confidence, 0)
    if _missing(lo):
        return "no efficiency without a complete run"
    if int(r["max_devices"]) == int(r["base_devices"]):
        return "one device count, no scaling verdict"
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


def help_sentence(r) -> str:
    v = r.get("more_devices_help")
    why = ftext(r.get("more_devices_reason"))
    if _missing(v) or not v:
        return f"more devices help? no verdict ({why or 'no data'})"
    return f"more devices help? {v} ({why})"


def _help_cell(r) -> str:
    v = r.get("more_devices_help")
    if _missing(v) or not v:
        return "- (one N)" if ftext(r.get("more_devices_reason")).startswith("one") else "-"
    return f"{v}: {ftext(r.get('more_devices_reason'))}"


def _knee_cell(r) -> str:
    lo, hi = r.get("knee_low"), r.get("knee_high")
    if _missing(lo):
        return "-"
    return fint(lo) if int(lo) == int(hi) else f"{int(lo)} - {int(hi)}"


def _step_cell(r) -> str:
    v = r.get("step_verdict")
    if _missing(v) or not v:
        return ""
    gain = "-" if _missing(r["gain"]) else f"{100 * float(r['gain']):+.1f} %"
    return f"{v} ({fint(r['step_from'])} -> {fint(r['devices'])}: {gain})"


def _eff_ci(r) -> str:
    lo = r.get("efficiency_ci95_low")
    if not _missing(r.get("base_devices")) and r["devices"] == r["base_devices"]:
        return "(base)"
    return "-" if _missing(lo) else f"{fpct(lo)} - {fpct(r['efficiency_ci95_high'])}"


def _large_batch_sentences(a: Analysis) -> List[str]:
    from ..analyse.large_batch import margin_table, sentences

    st = a.settings
    return sentences(
        margin_table(a.convergence, st.accuracy_margin, st.alpha), st.accuracy_margin, 1 - st.alpha
    )


def _acc_ci(r) -> str:
    lo = r.get("final_accuracy_ci95_low")
    return "-" if _missing(lo) else f"{fpct(lo, 2)} - {fpct(r['final_accuracy_ci95_high'], 2)}"


def _mismatch_lines(runs) -> List[str]:
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
    leaving out empty ones and the per-framework environments."""
    parts = []

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for k in value:
                if k not in ("environments", "env", "description"):
                    walk(f"{prefix}{k}.", value[k])
        elif value not in (None, "", [], {}):
            text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            parts.append(f"{prefix[:-1]} {text}")

    walk("", cluster)
    return "; ".join(parts)


def _tables(a: Analysis) -> Dict[str, List[Table]]:
    """Every table of the report, by section."""
    t: Dict[str, List[Table]] = {}
    for section in (
        _scaling_section,
        _stats_section,
        _straggler_section,
        _convergence_section,
        _allreduce_section,
    ):
        section(a, t)
    fmt = {"fnum": fnum, "fsig": fsig, "fpct": fpct, "ftext": ftext, "missing": _missing}
    efficiency = efficiency_tables(a.runs, _table, fmt)
    if efficiency:
        t["efficiency"] = efficiency
    _problems_section(a, t)
    return t


def _series_table(a: Analysis) -> Table:
    """One row per scaling series: base, max, knee and peak."""
    return _table(
        "Scaling series",
        [
            ("series", lambda r: r["label"], False),
            ("mode", lambda r: ftext(r["mode"]), False),
            ("scaling", lambda r: ftext(r["scaling"]), False),
            ("base N", lambda r: fint(r["base_devices"]), True),
            ("base samples/s", lambda r: fnum(r["base_throughput"]), True),
            ("max N", lambda r: fint(r["max_devices"]), True),
            ("efficiency at max", lambda r: fpct(r["efficiency_at_max"]), True),
            ("knee N", _knee_cell, True),
            ("peak N", lambda r: fint(r["peak_devices"]), True),
            ("more devices help? (last step)", _help_cell, False),
        ],
        a.series.sort_values("label"),
        note=(
            "Base: the smallest device count of each series. Knee: the largest N up to "
            "which efficiency is at or above "
            f"{fpct(a.settings.efficiency_threshold, 0)} with "
            f"{fpct(a.settings.confidence, 0)} confidence; a range when the data "
            "cannot tell. Peak: the device count with the highest median throughput. "
            "More devices help: the gain from the previous N is significant (one-sided "
            f"Welch test, alpha {a.settings.alpha:g}) and at least "
            f"{fpct(a.settings.min_gain, 0)} (docs/metrics.md)."
        ),
    )


def _scale_table(a: Analysis) -> Table:
    """One row per scale of each series: throughput, speedup and efficiency."""
    pts = a.points.sort_values(["label", "devices"])
    return _table(
        "Throughput by scale",
        [
            ("series", lambda r: r["label"], False),
            ("N", lambda r: fint(r["devices"]), True),
            (
                "nodes x tasks",
                lambda r: f"{fint(r['nodes'])}x{fint(r['tasks_per_node'])}",
                True,
            ),
            ("repeats", lambda r: fint(r["repeats"]), True),
            ("median samples/s", lambda r: fnum(r["throughput_median"]), True),
            (
                "95 % CI (mean)",
                lambda r: (
                    "-"
                    if _missing(r["ci95_low"])
                    else f"{fnum(r['ci95_low'])} - {fnum(r['ci95_high'])}"
                ),
                True,
            ),
            ("per device", lambda r: fnum(r["per_device"]), True),
            ("speedup", lambda r: fsig(r["speedup"]), True),
            ("efficiency", lambda r: fpct(r["efficiency"]), True),
            ("efficiency 95 % CI", _eff_ci, True),
            ("more than previous N?", _step_cell, False),
        ],
        pts,
        flag=lambda r: bool(r["noisy"]),
    )


def _scaling_section(a: Analysis, t: Dict[str, List[Table]]) -> None:
    if not len(a.points):
        return
    t["scaling"] = [_series_table(a), _scale_table(a)]


def _stats_section(a: Analysis, t: Dict[str, List[Table]]) -> None:
    if not len(a.configs):
        return
    c = a.configs[a.configs["mode"] != "allreduce"].sort_values("group")
    t["stats"] = [
        _table(
            "Repeat statistics per configuration",
            [
                ("configuration", lambda r: r["group"], False),
                ("N", lambda r: fint(r["world_size"]), True),
                ("runs ok/all", lambda r: f"{fint(r['repeats'])}/{fint(r['runs'])}", True),
                ("median samples/s", lambda r: fnum(r["throughput_median"]), True),
                ("mean", lambda r: fnum(r["throughput_mean"]), True),
                (
                    "95 % CI of mean",
                    lambda r: (
                        "-"
                        if _missing(r["throughput_ci95_low"])
                        else _range(r["throughput_ci95_low"], r["throughput_ci95_high"])
                    ),
                    True,
                ),
                (
                    "95 % CI of median",
                    lambda r: (
                        "-"
                        if _missing(r["throughput_median_ci95_low"])
                        else _range(
                            r["throughput_median_ci95_low"], r["throughput_median_ci95_high"]
                        )
                    ),
                    True,
                ),
                ("CV", lambda r: fpct(r["throughput_cv"], 2), True),
                ("noisy", lambda r: "NOISY" if r["noisy"] else "", False),
                ("step time ms", lambda r: fms(r["step_time_median_s"]), True),
                ("jitter ms", lambda r: fms(r["step_time_jitter_s"]), True),
            ],
            c,
            note="Step time and jitter: medians over the complete repeats of each run's "
            "figure (itself the median over ranks). The CI of the median needs 6 repeats.",
            flag=lambda r: bool(r["noisy"]),
        )
    ]


def _straggler_section(a: Analysis, t: Dict[str, List[Table]]) -> None:
    if not len(a.stragglers):
        return
    comp = (
        [("step-time index", lambda r: fsig(r["step_straggler_index"], 4), True)]
        if (a.stragglers["straggler_metric"] == "compute").any()
        else []
    )
    t["stragglers"] = [
        _table(
            "Straggler index per run (worst first)",
            [
                ("run", lambda r: r["run_id"], False),
                ("N", lambda r: fint(r["world_size"]), True),
                ("status", lambda r: ftext(r["status"]), False),
                ("straggler index", lambda r: fsig(r["straggler_index"], 4), True),
                ("by", lambda r: ftext(r["straggler_metric"]), False),
                *comp,
                ("median step ms", lambda r: fms(r["step_time_median_s"]), True),
                ("jitter ms", lambda r: fms(r["step_time_jitter_s"]), True),
                (
                    "slowest ranks (rank@host median)",
                    lambda r: ftext(r["slowest_ranks"]),
                    False,
                ),
            ],
            a.stragglers.head(15),
            note="The index is max/median over ranks of the per-rank median compute time "
            "where the workload logs it (by: compute; synchronous training evens out step "
            "times), else of the step time (by: step). Ranks tied at the top are not named.",
            flag=lambda r: bool(r["straggler"]),
        )
    ]


def _convergence_section(a: Analysis, t: Dict[str, List[Table]]) -> None:
    if not len(a.convergence):
        return
    t["convergence"] = [
        _table(
            "Large-batch study (median over complete repeats)",
            [
                ("configuration", lambda r: r["group"], False),
                ("global batch", lambda r: fint(r["global_batch_size"]), True),
                ("peak LR", lambda r: fsig(r["lr"]), True),
                ("warmup", lambda r: r["warmup"], False),
                ("repeats", lambda r: fint(r["repeats"]), True),
                ("final accuracy", lambda r: fpct(r["final_accuracy"], 2), True),
                ("95 % CI (mean)", _acc_ci, True),
                ("best accuracy", lambda r: fpct(r["best_accuracy"], 2), True),
                (
                    "time to target s",
                    lambda r: (
                        fsig(r["time_to_accuracy_s"], 4)
                        if not _missing(r["time_to_accuracy_s"])
                        else "not reached"
                    ),
                    True,
                ),
                ("target", lambda r: fpct(r["target_accuracy"], 1), True),
            ],
            a.convergence,
        )
    ]


def _allreduce_section(a: Analysis, t: Dict[str, List[Table]]) -> None:
    if not len(a.allreduce):
        return
    ar = a.allreduce
    t["allreduce"] = []
    for value, what in (("busbw_gbps", "bus"), ("algbw_gbps", "algorithm")):
        piv = ar.pivot_table(index="bytes", columns="group", values=value, dropna=False)
        short = {}
        for g, r in ar.groupby("group").first().iterrows():
            nodes = int(r["nodes"]) if not _missing(r["nodes"]) else 1
            per = int(r["world_size"]) // max(nodes, 1)
            short[g] = f"{r['framework']} {nodes}x{per}"
        if len(set(short.values())) < len(short):
            short = {g: g for g in short}
        single = set(ar.loc[ar["world_size"] <= 1, "group"])
        spec = [("message size", lambda r: fbytes(r.name), True)]
        for g in piv.columns:
            if g in single:
                spec.append((short.get(g, g), lambda r: "no communication with 1 rank", False))
            else:
                spec.append((short.get(g, g), lambda r, g=g: fsig(r[g]), True))
        rows = [[f(r) for _, f, _ in spec] for _, r in piv.iterrows()]
        t["allreduce"].append(
            Table(
                f"Allreduce {what} bandwidth (GB/s, median over repeats)",
                [h for h, _, _ in spec],
                rows,
                [n for _, _, n in spec],
                note="Columns: framework nodes x ranks per node. Time per size: the "
                "slowest rank's median; algbw = bytes/time; busbw = algbw x 2(n-1)/n."
                if what == "algorithm"
                else "",
            )
        )


def _problems_section(a: Analysis, t: Dict[str, List[Table]]) -> None:
    if not len(a.problem_runs):
        return
    t["problems"] = [
        _table(
            "Failed, incomplete and flagged runs",
            [
                ("run", lambda r: r["run_id"], False),
                ("status", lambda r: ftext(r["status"]), False),
                ("Slurm state", lambda r: ftext(r["slurm_state"]), False),
                ("exit", lambda r: fint(r["exit_code"]), True),
                ("attempts", lambda r: fint(r["attempts"]), True),
                ("job", lambda r: ftext(r["job_id"]), False),
                (
                    "ranks summary/N",
                    lambda r: f"{fint(r['ranks_with_summary'])}/{fint(r['world_size'])}",
                    True,
                ),
                ("missing ranks", lambda r: ftext(r["missing_ranks"]), False),
                ("no summary", lambda r: ftext(r["ranks_without_summary"]), False),
                ("error", lambda r: ftext(r["error_message"]), False),
                ("notes", lambda r: ftext(r["problems"]), False),
            ],
            a.problem_runs,
            flag=lambda r: r["status"] != "ok",
        )
    ]


def _model_tables(model) -> List[Table]:
    fits = pd.DataFrame([f.__dict__ for f in model.fits])
    t1 = _table(
        "Allreduce alpha-beta fits (ring: time = alpha + 2(n-1)/n x bytes / busbw)",
        [
            ("ranks", lambda r: fint(r["world_size"]), True),
            ("nodes", lambda r: fint(r["nodes"]), True),
            ("alpha (us)", lambda r: fnum(1e6 * r["alpha_s"], 1), True),
            ("busbw (GB/s)", lambda r: fsig(r["busbw_gbps"]), True),
            ("sizes", lambda r: fint(r["points"]), True),
            ("fit rms error", lambda r: fpct(r["rms_rel_error"]), True),
        ],
        fits,
    )
    t2 = _table(
        "Predicted vs measured",
        [
            ("series", lambda r: r["label"], False),
            ("N", lambda r: fint(r["devices"]), True),
            ("nodes", lambda r: fint(r["nodes"]), True),
            ("predicted step ms", lambda r: fms(r["predicted_step_s"]), True),
            ("allreduce ms", lambda r: fms(r["predicted_allreduce_s"]), True),
            ("predicted samples/s", lambda r: fnum(r["predicted_throughput"]), True),
            ("measured samples/s", lambda r: fnum(r["throughput_median"]), True),
            ("error", lambda r: fpct(r["throughput_error"]), True),
            ("predicted efficiency", lambda r: fpct(r["predicted_efficiency"]), True),
            ("measured efficiency", lambda r: fpct(r["efficiency"]), True),
        ],
        model.predictions.sort_values(["label", "devices"]),
        flag=lambda r: not r["measured"],
    )
    return [t1, t2]


def _model_notes(model) -> List[str]:
    if model is None:
        return []
    out = list(model.assumptions)
    err = model.error_summary()
    if err:
        out.insert(
            0,
            f"Prediction error of the throughput on the {err['points']} measured points: mean "
            f"|error| {fpct(err['mean_abs'])}, largest {fpct(err['max_abs'])}.",
        )
    return out


def _provenance(a: Analysis) -> List[tuple]:
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
        ("nodes", f"{len(p.get('hosts', []))}: {_short_list(p.get('hosts', []))}"),
        ("Slurm job ids", _short_list(p.get("job_ids", []))),
        ("python", ", ".join(p.get("python_versions", []))),
        (
            "ddlbench",
            f"campaign {p.get('ddlbench_version_campaign')}, workloads "
            f"{', '.join(p.get('ddlbench_versions_logs', []))}, collector "
            f"{p.get('ddlbench_version_collector')}, report {__version__}",
        ),
    ]
    return [(k, "-" if v in (None, "") else str(v)) for k, v in rows]


def _short_list(items: Sequence[str], limit: int = 40) -> str:
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", ... ({len(items)} in all)"


# ------------------------------------------------------------------ output


def _link_or_copy(src: Path, dst: Path) -> None:
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        with atomic_path(dst) as tmp:
            shutil.copy2(src, tmp)


def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


FIGURE_TEXT = {
    "throughput": (
        "Throughput vs devices",
        "Median global throughput over repeats (sum of all ranks' measured samples divided by "
        "the measured wall-clock window), 95 % confidence interval of the mean as error bars; "
        "dotted: ideal linear scaling from each series' base.",
    ),
    "efficiency": (
        "Scaling efficiency vs devices",
        "eff(N) = (throughput(N)/N) / (throughput(base)/base) from the medians; vertical "
        "lines: its 95 % confidence interval (ratio of means, delta method); the star marks "
        "the knee where the data place it, a thick bar on the threshold line the range of N "
        "the knee lies in when they do not (docs/metrics.md, Verdicts).",
    ),
    "ranks": (
        "Per-rank step times of the largest run",
        "Median (dot), 25-75 % (bar) and 5-95 % (line) of each rank's measured step times; "
        "colour alternates per host; the three slowest ranks are named.",
    ),
    "accuracy": (
        "Accuracy vs global batch size",
        "Final validation accuracy (median of repeats; bars: 95 % t confidence interval of the "
        "mean) with and without gradual warmup (Goyal et al. 2017).",
    ),
    "curves": ("Training curves", "Validation accuracy per epoch of every convergence run."),
    "model": (
        "Scaling model: predicted vs measured",
        "Dashed: the alpha-beta model's prediction from the allreduce sweep, the gradient "
        "bytes, the compute time per step at the smallest scale and the measured overlap "
        "(docs/scaling-model.md); markers: measured medians.",
    ),
    "busbw": (
        "Allreduce bus bandwidth vs message size",
        "busbw = algbw x 2(n-1)/n with algbw = bytes / time (nccl-tests definitions).",
    ),
}


def _figure_entries(
    figures: Dict[str, Dict[str, Path]], out_dir: Path, formats: Sequence[str]
) -> Dict[str, Dict[str, str]]:
    """The report's figures by key, in report order, with titles, captions and paths (the
    PNG inlined for HTML)."""
    figs = []
    for key in ("throughput", "efficiency", "model", "ranks", "accuracy", "curves", "busbw"):
        if key not in figures:
            continue
        title, caption = FIGURE_TEXT[key]
        png = figures[key]["png"]
        figs.append(
            {
                "key": key,
                "title": title,
                "caption": caption,
                "png_rel": png.relative_to(out_dir).as_posix(),
                "svg_rel": figures[key]["svg"].relative_to(out_dir).as_posix(),
                "png_b64": base64.b64encode(png.read_bytes()).decode("ascii")
                if "html" in formats
                else "",
            }
        )
    return {f["key"]: f for f in figs}


def _stderr_tails(a: Analysis) -> List[Dict[str, str]]:
    """The stderr tails of the problem runs that have one."""
    tails = []
    if len(a.problem_runs):
        for _, r in a.problem_runs.iterrows():
            if not _missing(r["stderr_tail"]) and r["stderr_tail"]:
                tails.append({"run_id": r["run_id"], "tail": r["stderr_tail"]})
    return tails


def _base_note(a: Analysis) -> str:
    if not len(a.series):
        return ""
    parts = [
        f"{r['label']}: N={fint(r['base_devices'])}"
        for _, r in a.series.sort_values("label").iterrows()
        if not _missing(r["base_devices"])
    ]
    return "Efficiency base per series (smallest scale in the sweep): " + "; ".join(parts)


def report_context(a: Analysis, data: CampaignData, out_dir: Path, model=None) -> Dict[str, Any]:
    """Everything the report templates show but the figures: built while the figure worker
    draws."""
    tables = _tables(a)
    if model is not None:
        tables["model"] = _model_tables(model)
    return {
        "title": f"ddlbench report: {data.name}",
        "campaign": data.name,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "summary": _summary(a, data),
        "tables": tables,
        "settings": a.settings,
        "base_note": _base_note(a),
        "largest_run": a.largest_run,
        "provenance": _provenance(a),
        "model_notes": _model_notes(model),
        "stderr_tails": _stderr_tails(a),
        "data_files": [f for f in DATA_FILES if (out_dir / REPORT_DATA_DIR / f).exists()],
        "md_cell": _md_cell,
        "fpct": fpct,
    }


def write_reports(
    ctx: Dict[str, Any],
    figures: Dict[str, Dict[str, Path]],
    out_dir: Path,
    formats: Sequence[str],
) -> Dict[str, Path]:
    """Render each format's template with ``ctx`` and the figures, each file written whole."""
    env = _env()
    ctx = dict(ctx, figs=_figure_entries(figures, out_dir, formats))
    out: Dict[str, Path] = {}
    for fmt in formats:
        tpl = env.get_template(f"report.{fmt}.j2")
        path = out_dir / f"report.{fmt}"
        with atomic_path(path) as tmp:
            tmp.write_text(tpl.render(**ctx), encoding="utf-8")
        out[fmt] = path
    return out


def _start_figure_worker():
    """A worker process that draws the figures on the other core (None: draw here)."""
    from .worker import FigureWorker, enabled

    if not enabled():
        return None
    try:
        return FigureWorker()  # imports matplotlib on the other core meanwhile
    except OSError:
        return None


def _copy_data_files(data: CampaignData, out: Path) -> None:
    """The collected data files, linked (else copied) into the report's data folder."""
    (out / REPORT_DATA_DIR).mkdir(exist_ok=True)
    for name in DATA_FILES:
        src = data.data_dir / name
        if src.exists():
            _link_or_copy(src, out / REPORT_DATA_DIR / name)


def _figures(
    worker, fig_input, out: Path, say: Callable[[str], None]
) -> Dict[str, Dict[str, Path]]:
    """The worker's figures; drawn here when there is no worker or it failed."""
    if worker is not None:
        try:
            return worker.result()
        except RuntimeError as exc:
            say(f"{exc}; drawing in this process")
    from .plots import make_figures

    return make_figures(fig_input, out / "plots")


def build_report(
    campaign_dir: Union[str, Path],
    *,
    out_dir: Union[str, Path, None] = None,
    formats: Sequence[str] = FORMATS,
    settings: Optional[Settings] = None,
    run_states: RunStates = None,
    progress: Optional[Callable[[str], None]] = None,
    data: Optional[CampaignData] = None,
    force_collect: bool = False,
    calibration: Union[str, Path, None] = None,
) -> ReportResult:
    """Collect if needed, analyse, plot and write the report; returns the paths.

    ``out_dir`` defaults to ``<campaign>/report``. ``formats``: any of "html", "md".
    ``calibration``: another campaign whose allreduce sweep feeds the scaling model
    (default: this campaign's own allreduce runs, if any).
    """
    say = progress or (lambda _m: None)
    campaign_dir = Path(campaign_dir)
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown report format(s): {', '.join(bad)} (known: html, md)")
    from .worker import FigureInput

    worker = _start_figure_worker()
    try:
        if data is None:
            data = ensure_collected(
                campaign_dir,
                run_states=run_states,
                progress=say,
                force=force_collect,
                defer_write=True,
            )
        out = Path(out_dir) if out_dir else CampaignPaths.of(campaign_dir).report
        out.mkdir(parents=True, exist_ok=True)
        say("analysing")
        a = analyse(data, settings)
        say("plotting")
        fig_input = FigureInput.of(a)
        if worker is not None:
            worker.submit(fig_input, out / "plots")
        # while the worker draws: the data files, the scaling model and the report's text
        finish_write(data)
        _copy_data_files(data, out)
        model = _scaling_model(a, data, calibration, run_states, say)
        ctx = report_context(a, data, out, model)
        figures = _figures(worker, fig_input, out, say)
        if model is not None:
            figures["model"] = _model_figure(model, out)
        say("writing report")
        files = write_reports(ctx, figures, out, formats)
    finally:
        if worker is not None:
            worker.close()
        if data is not None:
            finish_write(data)  # also when the report failed: keep what was collected
    return ReportResult(out_dir=out, files=files, figures=figures, analysis=a)


def _model_figure(model, out: Path) -> Dict[str, Path]:
    """The scaling model's predicted against measured figure, in ``out/plots``."""
    from .plots import model_figure, save

    return save(model_figure(model.predictions), out / "plots", "scaling_model")


def _scaling_model(a: Analysis, data: CampaignData, calibration, run_states, say):
    from ..analyse.scaling_model import build

    cal = None
    if calibration is not None:
        say("collecting the calibration campaign")
        cal = ensure_collected(Path(calibration), run_states=run_states, progress=say)
    return build(a, data, cal)
