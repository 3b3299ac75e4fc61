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
from typing import Callable, Dict, List, Optional, Sequence, Union

import pandas as pd

from .. import __version__
from ..analyse.analysis import Analysis, Settings, analyse
from ..collect.collector import CampaignData, RunStates, ensure_collected, finish_write
from .efficiency import efficiency_tables

TEMPLATES = Path(__file__).parent / "templates"
FORMATS = ("html", "md")
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


def _summary(a: Analysis, data: CampaignData) -> List[str]:
    runs = a.runs
    out = []
    n = len(runs)
    counts = runs["status"].value_counts().to_dict() if n else {}
    parts = [f"{counts.get(s, 0)} {s.replace('_', ' ')}" for s in sorted(counts) if s != "ok"]
    out.append(
        f"{n} runs planned or found: {counts.get('ok', 0)} complete"
        + (f", {', '.join(parts)}" if parts else "")
        + "."
    )
    s = a.series
    if len(s):
        shown = s[s["mode"] == "throughput"] if (s["mode"] == "throughput").any() else s
        for _, r in shown.sort_values("label").iterrows():
            if _missing(r.get("max_devices")):
                continue
            pt = a.points[
                (a.points["series"] == r["series"]) & (a.points["devices"] == r["max_devices"])
            ]
            tp = pt["throughput_median"].iloc[0] if len(pt) else math.nan
            knee = r["knee_devices"]
            knee_txt = (
                f"efficiency stays at or above {fpct(a.settings.efficiency_threshold, 0)} up to "
                f"{fint(knee)} devices"
                if not _missing(knee)
                else f"efficiency falls below {fpct(a.settings.efficiency_threshold, 0)} "
                "right after the base"
            )
            sat = (
                f"throughput peaks at {fint(r['peak_devices'])} devices and does not rise with more"
                if r["saturates"]
                else "throughput still rises at the largest scale"
            )
            out.append(
                f"{r['label']}: {fnum(tp)} samples/s on {fint(r['max_devices'])} devices "
                f"({fsig(r.get('speedup_at_max'))}x the {fint(r['base_devices'])}-device base, "
                f"efficiency {fpct(r['efficiency_at_max'])}); {knee_txt}; {sat}."
            )
    if len(a.configs):
        noisy = a.configs[a.configs["noisy"]]
        if len(noisy):
            out.append(
                f"{len(noisy)} configuration(s) noisy (coefficient of variation above "
                f"{fpct(a.settings.noise_threshold, 0)}): "
                + ", ".join(noisy["group"].head(6))
                + ("..." if len(noisy) > 6 else "")
                + "."
            )
    if len(a.stragglers):
        st = a.stragglers[a.stragglers["straggler"]]
        if len(st):
            w = st.iloc[0]
            out.append(
                f"{len(st)} run(s) with a straggler (index above "
                f"{a.settings.straggler_threshold:g}); worst: {w['run_id']}, rank "
                f"{fint(w['slowest_rank'])} on {w['slowest_host']} "
                f"({fsig(w['straggler_index'])}x the median rank)."
            )
    if len(a.convergence):
        c = a.convergence
        best = c.loc[c["final_accuracy"].idxmax()] if c["final_accuracy"].notna().any() else None
        if best is not None:
            out.append(
                f"Convergence: best final accuracy {fpct(best['final_accuracy'])} "
                f"({best['group']}, global batch {fint(best['global_batch_size'])})."
            )
    if len(a.allreduce):
        top = a.allreduce.loc[a.allreduce["busbw_gbps"].idxmax()]
        out.append(
            f"Allreduce: highest bus bandwidth {fsig(top['busbw_gbps'])} GB/s "
            f"({top['group']}, {fbytes(top['bytes'])} messages)."
        )
    for w in data.info.get("warnings", []):
        if "run(s)" not in w:  # run counts are in the first line already
            out.append(f"Data: {w}.")
    return out


def _tables(a: Analysis) -> Dict[str, List[Table]]:
    t: Dict[str, List[Table]] = {}
    if len(a.points):
        pts = a.points.sort_values(["label", "devices"])
        t["scaling"] = [
            _table(
                "Scaling series",
                [
                    ("series", lambda r: r["label"], False),
                    ("mode", lambda r: ftext(r["mode"]), False),
                    ("scaling", lambda r: ftext(r["scaling"]), False),
                    ("base N", lambda r: fint(r["base_devices"]), True),
                    ("base samples/s", lambda r: fnum(r["base_throughput"]), True),
                    ("max N", lambda r: fint(r["max_devices"]), True),
                    ("efficiency at max", lambda r: fpct(r["efficiency_at_max"]), True),
                    ("knee N", lambda r: fint(r["knee_devices"]), True),
                    ("peak N", lambda r: fint(r["peak_devices"]), True),
                    (
                        "more devices help?",
                        lambda r: (
                            "-"
                            if _missing(r["saturates"])
                            else ("no, beyond peak" if r["saturates"] else "yes")
                        ),
                        False,
                    ),
                ],
                a.series.sort_values("label"),
                note=(
                    "Base: the smallest device count of each series. Knee: the largest device "
                    f"count with efficiency >= {fpct(a.settings.efficiency_threshold, 0)}. "
                    "Peak: the device count with the highest median throughput."
                ),
            ),
            _table(
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
                ],
                pts,
                flag=lambda r: bool(r["noisy"]),
            ),
        ]
    if len(a.configs):
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
                    ("CV", lambda r: fpct(r["throughput_cv"], 2), True),
                    ("noisy", lambda r: "NOISY" if r["noisy"] else "", False),
                    ("step time ms", lambda r: fms(r["step_time_median_s"]), True),
                    ("jitter ms", lambda r: fms(r["step_time_jitter_s"]), True),
                ],
                c,
                flag=lambda r: bool(r["noisy"]),
            )
        ]
    if len(a.stragglers):
        comp = (
            [("compute index", lambda r: fsig(r["compute_straggler_index"], 4), True)]
            if a.stragglers["compute_straggler_index"].notna().any()
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
                flag=lambda r: bool(r["straggler"]),
            )
        ]
    if len(a.convergence):
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
    if len(a.allreduce):
        ar = a.allreduce
        t["allreduce"] = []
        for value, what in (("busbw_gbps", "bus"), ("algbw_gbps", "algorithm")):
            piv = ar.pivot_table(index="bytes", columns="group", values=value)
            short = {}
            for g, r in ar.groupby("group").first().iterrows():
                nodes = int(r["nodes"]) if not _missing(r["nodes"]) else 1
                per = int(r["world_size"]) // max(nodes, 1)
                short[g] = f"{r['framework']} {nodes}x{per}"
            if len(set(short.values())) < len(short):
                short = {g: g for g in short}
            spec = [("message size", lambda r: fbytes(r.name), True)]
            for g in piv.columns:
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
    fmt = {"fnum": fnum, "fsig": fsig, "fpct": fpct, "ftext": ftext, "missing": _missing}
    efficiency = efficiency_tables(a.runs, _table, fmt)
    if efficiency:
        t["efficiency"] = efficiency
    if len(a.problem_runs):
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
    return t


def _provenance(a: Analysis) -> List[tuple]:
    p = a.provenance
    cl = p.get("cluster") or {}
    rows = [
        ("campaign", p.get("campaign")),
        ("created", p.get("created")),
        ("cluster", ", ".join(f"{k}={v}" for k, v in cl.items()) if isinstance(cl, dict) else cl),
        ("frameworks (version)", "; ".join(p.get("frameworks", []))),
        ("workloads", ", ".join(p.get("workloads", []))),
        ("communication backends", ", ".join(p.get("backends", []))),
        ("devices", ", ".join(p.get("device_names", []))),
        ("largest complete run", f"{p.get('largest_run_devices')} devices"),
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
        shutil.copy2(src, dst)


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
        "eff(N) = (throughput(N)/N) / (throughput(base)/base); the star marks the knee.",
    ),
    "ranks": (
        "Per-rank step times of the largest run",
        "Median (dot), 25-75 % (bar) and 5-95 % (line) of each rank's measured step times; "
        "colour alternates per host; the three slowest ranks are named.",
    ),
    "accuracy": (
        "Accuracy vs global batch size",
        "Final validation accuracy (median of repeats) with and without gradual warmup "
        "(Goyal et al. 2017).",
    ),
    "curves": ("Training curves", "Validation accuracy per epoch of every convergence run."),
    "busbw": (
        "Allreduce bus bandwidth vs message size",
        "busbw = algbw x 2(n-1)/n with algbw = bytes / time (nccl-tests definitions).",
    ),
}


def render(
    a: Analysis,
    data: CampaignData,
    out_dir: Path,
    figures: Dict[str, Dict[str, Path]],
    formats: Sequence[str],
) -> Dict[str, Path]:
    env = _env()
    figs = []
    for key in ("throughput", "efficiency", "ranks", "accuracy", "curves", "busbw"):
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
    fig_by_key = {f["key"]: f for f in figs}
    tables = _tables(a)
    problems_tail = []
    if len(a.problem_runs):
        for _, r in a.problem_runs.iterrows():
            if not _missing(r["stderr_tail"]) and r["stderr_tail"]:
                problems_tail.append({"run_id": r["run_id"], "tail": r["stderr_tail"]})
    base_note = ""
    if len(a.series):
        parts = [
            f"{r['label']}: N={fint(r['base_devices'])}"
            for _, r in a.series.sort_values("label").iterrows()
            if not _missing(r["base_devices"])
        ]
        base_note = "Efficiency base per series (smallest scale in the sweep): " + "; ".join(parts)
    ctx = {
        "title": f"ddlbench report: {data.name}",
        "campaign": data.name,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "summary": _summary(a, data),
        "tables": tables,
        "figs": fig_by_key,
        "settings": a.settings,
        "base_note": base_note,
        "largest_run": a.largest_run,
        "provenance": _provenance(a),
        "stderr_tails": problems_tail,
        "data_files": [f for f in DATA_FILES if (out_dir / "data" / f).exists()],
        "md_cell": _md_cell,
        "fpct": fpct,
    }
    out: Dict[str, Path] = {}
    for fmt in formats:
        tpl = env.get_template(f"report.{fmt}.j2")
        path = out_dir / f"report.{fmt}"
        path.write_text(tpl.render(**ctx), encoding="utf-8")
        out[fmt] = path
    return out


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
) -> ReportResult:
    """Collect if needed, analyse, plot and write the report; returns the paths.

    ``out_dir`` defaults to ``<campaign>/report``. ``formats``: any of "html", "md".
    """
    say = progress or (lambda _m: None)
    campaign_dir = Path(campaign_dir)
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown report format(s): {', '.join(bad)} (known: html, md)")
    from .worker import FigureInput, FigureWorker, enabled

    worker = None
    if enabled():
        try:
            worker = FigureWorker()  # imports matplotlib on the other core meanwhile
        except OSError:
            worker = None
    try:
        if data is None:
            data = ensure_collected(
                campaign_dir,
                run_states=run_states,
                progress=say,
                force=force_collect,
                defer_write=True,
            )
        out = Path(out_dir) if out_dir else campaign_dir / "report"
        out.mkdir(parents=True, exist_ok=True)
        say("analysing")
        a = analyse(data, settings)
        say("plotting")
        fig_input = FigureInput.of(a)
        if worker is not None:
            worker.submit(fig_input, out / "plots")
        finish_write(data)  # the data files, while the worker draws
        (out / "data").mkdir(exist_ok=True)
        for name in DATA_FILES:
            src = data.data_dir / name
            if src.exists():
                _link_or_copy(src, out / "data" / name)
        figures = None
        if worker is not None:
            try:
                figures = worker.result()
            except RuntimeError as exc:
                say(f"{exc}; drawing in this process")
        if figures is None:
            from .plots import make_figures

            figures = make_figures(fig_input, out / "plots")
        say("writing report")
        files = render(a, data, out, figures, formats)
    finally:
        if worker is not None:
            worker.close()
        if data is not None:
            finish_write(data)  # also when the report failed: keep what was collected
    return ReportResult(out_dir=out, files=files, figures=figures, analysis=a)
