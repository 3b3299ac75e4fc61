"""Report figures (matplotlib, Agg backend), written as PNG and SVG.

Made for print: labelled axes with units, legends, log2 axes for device counts and
message sizes, colour plus marker/line style so that a grey-scale print stays readable.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from ..diskfull import atomic_path
from .captions import BUSBW
from .format import fbytes, missing

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
STYLES = ["-", "--", "-.", ":"]
PALETTE = colormaps["tab10"].colors
# fixed margins (fractions of the figure): cheaper than a tight bounding box per save
MARGINS = dict(left=0.1, right=0.975, bottom=0.115, top=0.915)

RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "svg.fonttype": "none",  # text stays text in the SVG
    "svg.hashsalt": "ddlbench",  # stable ids: identical input gives identical SVG
}


def styled(fn):
    """Run a figure function under the report's matplotlib style."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(RC):
            return fn(*args, **kwargs)

    return wrapper


def new_figure(width: float = 7.2, height: float = 4.6, ncols: int = 1, **margins):
    """A figure on an Agg canvas (no pyplot: no global state, faster import)."""
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width, height))
        FigureCanvasAgg(fig)
        axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    fig.subplots_adjust(**dict(MARGINS, **margins))
    return fig, axes


def _fmt_count(v, _pos=None) -> str:
    if v <= 0:
        return ""
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _log2_devices(ax, devices: List[int]) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(int(d) for d in devices if d and d > 0))
    if ticks:
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)
    ax.xaxis.set_minor_formatter(NullFormatter())


def _framework_colors(frameworks) -> Dict[str, tuple]:
    return {fw: PALETTE[i % len(PALETTE)] for i, fw in enumerate(sorted(set(frameworks)))}


def _series_styles(series: pd.DataFrame) -> Dict[str, dict]:
    colors = _framework_colors(series["framework"])
    count: Dict[str, int] = {}
    out = {}
    for i, (_, s) in enumerate(series.sort_values(["framework", "label"]).iterrows()):
        k = count.get(s["framework"], 0)
        count[s["framework"]] = k + 1
        out[s["series"]] = {
            "color": colors[s["framework"]],
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": STYLES[k % len(STYLES)],
        }
    return out


#: every figure is written in these formats (PNG for screens, SVG for print)
FORMATS = ("png", "svg")


def save(fig, directory: Path, name: str, formats: Sequence[str] = FORMATS) -> Dict[str, Path]:
    """Write ``name.png`` and ``name.svg`` (or only ``formats``); returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    with matplotlib.rc_context(RC):
        for ext in formats:
            path = directory / f"{name}.{ext}"
            kw = {"pil_kwargs": {"compress_level": 3}} if ext == "png" else {}
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=ext, metadata=_metadata(ext), **kw)
            out[ext] = path
    return out


def _metadata(ext: str) -> dict:
    # no creation dates: the same data gives byte-identical files
    if ext == "svg":
        return {"Date": None}
    return {"Software": "ddlbench"}


def _plot_series(points: pd.DataFrame, series: pd.DataFrame):
    """The series to draw: throughput mode when present, else every mode."""
    if not len(points):
        return points, series
    modes = set(series["mode"])
    if "throughput" in modes:
        series = series[series["mode"] == "throughput"]
        points = points[points["series"].isin(set(series["series"]))]
    return points, series


@styled
def throughput_figure(points: pd.DataFrame, series: pd.DataFrame):
    """Global throughput vs devices: geometric means over repeats with their 95 % intervals
    (the one rule of ``analyse/stats.py``), ideal (linear) scaling dotted."""
    points, series = _plot_series(points, series)
    fig, (ax,) = new_figure(7.2, 4.6)
    styles = _series_styles(series)
    ideal_drawn = False
    for _, s in series.sort_values(["framework", "label"]).iterrows():
        p = points[(points["series"] == s["series"]) & points["throughput_gmean"].notna()]
        if not len(p):
            continue
        st = styles[s["series"]]
        lo = (p["throughput_gmean"] - p["ci95_low"]).fillna(0)
        hi = (p["ci95_high"] - p["throughput_gmean"]).fillna(0)
        ax.errorbar(
            p["devices"],
            p["throughput_gmean"],
            yerr=[lo, hi],
            color=st["color"],
            marker=st["marker"],
            linestyle=st["linestyle"],
            capsize=3,
            markersize=5,
            label=s["label"],
        )
        ideal = p["ideal_throughput"]
        if ideal.notna().sum() >= 2:
            ideal_drawn = True
            ax.plot(
                p["devices"],
                ideal,
                color=st["color"],
                linestyle=(0, (1, 2)),
                linewidth=1.0,
                alpha=0.8,
            )
    if len(points):
        _log2_devices(ax, points["devices"].tolist())
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(_fmt_count))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("devices (workers)")
    ax.set_ylabel("global throughput (samples/s)")
    ax.set_title(
        "Throughput vs devices (geometric mean of repeats, its 95 % CI; dotted: ideal scaling)",
        fontsize=10,
    )
    handles, labels = ax.get_legend_handles_labels()
    if handles and ideal_drawn:  # a legend entry only for what is drawn
        handles.append(Line2D([], [], color="grey", linestyle=(0, (1, 2))))
        labels.append("ideal (linear from base)")
    if handles:
        ax.legend(handles, labels, loc="upper left", frameon=True)
    return fig


@styled
def _plot_efficiency_series(
    ax, s: pd.Series, p: pd.DataFrame, st: dict, threshold: float
) -> Optional[str]:
    """One series' efficiency line, its 95 % intervals and its knee; which knee mark it drew
    (``star``, ``range`` or None)."""
    ax.plot(
        p["devices"],
        100 * p["efficiency"],
        color=st["color"],
        marker=st["marker"],
        linestyle=st["linestyle"],
        markersize=5,
        label=f"{s['label']} (base N={int(s['base_devices'])})",
    )
    if "efficiency_ci95_low" in p:
        ci = p[p["efficiency_ci95_low"].notna() & (p["devices"] != s["base_devices"])]
        ax.vlines(
            ci["devices"],
            100 * ci["efficiency_ci95_low"],
            100 * ci["efficiency_ci95_high"],
            color=st["color"],
            linewidth=1.2,
            alpha=0.7,
        )
    return _mark_knee(ax, s, p, threshold, st["color"])


def _efficiency_legend(ax, marks: set) -> None:
    """The series' legend, with the knee marker and the knee range bar where one is drawn."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if "star" in marks:
        handles.append(
            Line2D([], [], marker="*", color="grey", markeredgecolor="black", linestyle="none")
        )
        labels.append("knee")
    if "range" in marks:
        handles.append(Line2D([], [], color="grey", linewidth=5, alpha=0.45))
        labels.append("knee range (the data cannot tell)")
    ax.legend(handles, labels, loc="lower left", frameon=True)


def efficiency_figure(points: pd.DataFrame, series: pd.DataFrame, threshold: float):
    """Scaling efficiency vs devices, threshold line, knee of every series marked."""
    points, series = _plot_series(points, series)
    fig, (ax,) = new_figure(7.2, 4.6)
    styles = _series_styles(series)
    marks = set()
    for _, s in series.sort_values(["framework", "label"]).iterrows():
        p = points[(points["series"] == s["series"]) & points["efficiency"].notna()]
        if len(p):
            marks.add(_plot_efficiency_series(ax, s, p, styles[s["series"]], threshold))
    ax.axhline(100 * threshold, color="black", linestyle="--", linewidth=1)
    ax.text(
        0.99,
        100 * threshold,
        f" threshold {100 * threshold:g} %",
        transform=ax.get_yaxis_transform(),
        ha="right",
        va="bottom",
        fontsize=8.5,
    )
    if len(points):
        _log2_devices(ax, points["devices"].tolist())
    top = [points[c].max() for c in ("efficiency", "efficiency_ci95_high") if c in points]
    top = [float(v) for v in top if not missing(v)]
    ax.set_ylim(0, max([110.0] + [100 * v + 5 for v in top]))
    ax.set_xlabel("devices (workers)")
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_title(
        "Scaling efficiency vs devices (95 % CI; star: knee; bar on the threshold: knee range)",
        fontsize=10,
    )
    _efficiency_legend(ax, marks)
    return fig


def _mark_knee(ax, s, p, threshold: float, color) -> Optional[str]:
    """A star at the knee when the data place it; a bar along the threshold from the
    confident lower end to the upper end when they only bound it."""
    lo, hi = s.get("knee_low"), s.get("knee_high")
    if missing(lo):
        lo = hi = s.get("knee_devices")
    if missing(lo):
        return None
    if lo == hi:
        kp = p[p["devices"] == lo]
        if not len(kp):
            return None
        ax.plot(
            kp["devices"],
            100 * kp["efficiency"],
            marker="*",
            markersize=16,
            color=color,
            markeredgecolor="black",
            linestyle="none",
            zorder=5,
        )
        return "star"
    ax.plot(
        [lo, hi],
        [100 * threshold] * 2,
        color=color,
        linewidth=5,
        alpha=0.45,
        solid_capstyle="butt",
        zorder=4,
    )
    return "range"


def _rank_ranges(ax, r: pd.DataFrame, x, colors, ms: float) -> None:
    """Each rank's 5-95 % (thin) and 25-75 % (thick) step-time range."""
    lw_thin = 0.8 if len(r) <= 256 else 0.4
    lw_thick = 3.0 if len(r) <= 64 else (1.6 if len(r) <= 256 else 0.9)
    lo, hi = r["step_time_p5_s"] * ms, r["step_time_p95_s"] * ms
    ax.vlines(x, lo, hi, colors=colors, linewidth=lw_thin, alpha=0.6)
    lo, hi = r["step_time_p25_s"] * ms, r["step_time_p75_s"] * ms
    ax.vlines(x, lo, hi, colors=colors, linewidth=lw_thick)


@styled
def rank_distribution_figure(
    ranks: pd.DataFrame,
    run_id: str,
    top: int = 3,
    metric: Optional[str] = None,
    threshold: Optional[float] = None,
):
    """Per-rank times of one run in the quantity its straggler index uses (``metric``):
    the per-rank median compute time for ``compute``, else the step time's median,
    interquartile range and 5-95 % range; the median over ranks, and ``threshold`` x it."""
    compute = metric == "compute" and "compute_median_s" in ranks
    key = "compute_median_s" if compute else "step_time_median_s"
    r = ranks.sort_values("rank")
    r = r[r[key].notna()]
    fig, (ax,) = new_figure(7.2, 4.4, top=0.87)
    if not len(r):
        return fig
    x, ms = r["rank"].to_numpy(), 1e3
    hosts = r["host"].fillna("?").astype(str).to_numpy()
    uniq = list(dict.fromkeys(hosts))
    shade = {h: ("#1f77b4" if i % 2 == 0 else "#ff7f0e") for i, h in enumerate(uniq)}
    colors = [shade[h] for h in hosts]
    if not compute:
        _rank_ranges(ax, r, x, colors, ms)
    dots = colors if compute else "black"  # without bars the dots carry the host colour
    ax.scatter(x, r[key] * ms, s=14 if len(r) <= 256 else 3, c=dots, zorder=3)
    centre = float(np.median(r[key])) * ms
    ax.axhline(centre, color="grey", linestyle="--", linewidth=1)
    top_y = float((r[key] if compute else r["step_time_p95_s"]).max()) * ms
    if threshold:
        ax.axhline(centre * threshold, color="#d62728", linestyle=":", linewidth=1)
        top_y = max(top_y, centre * threshold)
    slow = r.sort_values([key, "rank"], ascending=[False, True]).head(top)
    for _, s in slow.iterrows():
        ax.annotate(
            f"rank {int(s['rank'])}\n{s['host']}",
            (s["rank"], s[key] * ms),
            xytext=(6, 6),
            textcoords="offset points",
            fontsize=8,
        )
    what = "compute time" if compute else "step time"
    ax.set_xlabel("rank")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"{what} (ms)")
    marks = "dot: median" if compute else "dot: median; bar: 25-75 %; line: 5-95 %"
    ax.set_title(
        f"Per-rank {what} (the straggler index's quantity), {run_id}\n({marks}; colour "
        "alternates per host; dashed: median of ranks; dotted: straggler threshold)",
        fontsize=9.5,
    )
    ax.set_xlim(x.min() - 1, x.max() + 1)
    ax.set_ylim(0, top_y * 1.18)
    return fig


@styled
def accuracy_batch_figure(conv: pd.DataFrame):
    """Final top-1 accuracy vs global batch size, with and without gradual warmup."""
    fig, (ax,) = new_figure(7.2, 4.4)
    if not len(conv):
        return fig
    colors = _framework_colors(conv["framework"])
    for _i, ((fw, model, warm), g) in enumerate(
        conv.sort_values("global_batch_size").groupby(["framework", "model", "warmup"])
    ):
        g = g[g["final_accuracy_mean"].notna()]
        if not len(g):
            continue
        warmup = warm != "no warmup"
        # points and bars: the mean of the repeats and its interval (one statistic)
        lo = (g["final_accuracy_mean"] - g["final_accuracy_ci95_low"]).clip(lower=0).fillna(0)
        hi = (g["final_accuracy_ci95_high"] - g["final_accuracy_mean"]).clip(lower=0).fillna(0)
        ax.errorbar(
            g["global_batch_size"] * (1.03 if warmup else 1 / 1.03),  # bars side by side
            100 * g["final_accuracy_mean"],
            yerr=[100 * lo, 100 * hi],
            capsize=3,
            color=colors[fw],
            marker="o" if warmup else "s",
            linestyle="-" if warmup else "--",
            label=f"{fw} {model}, {warm}",
        )
    targets = conv["target_accuracy"].dropna().unique()
    if len(targets) == 1:
        ax.axhline(100 * targets[0], color="black", linestyle=":", linewidth=1)
        ax.text(
            0.01,
            100 * targets[0],
            f" target {100 * targets[0]:g} %",
            transform=ax.get_yaxis_transform(),
            va="bottom",
            fontsize=8.5,
        )
    ax.set_xscale("log", base=2)
    ticks = sorted(set(int(v) for v in conv["global_batch_size"].dropna()))
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("global batch size (samples)")
    ax.set_ylabel("final validation accuracy (%)")
    ax.set_title("Accuracy vs global batch (mean of repeats, its 95 % CI; warmup vs none)")
    ax.legend(loc="lower left")
    return fig


@styled
def curves_figure(curves: pd.DataFrame):
    """Validation accuracy per epoch of every convergence run, by global batch size."""
    arms = sorted(curves["warmup"].unique()) if len(curves) else []
    fig, axes = new_figure(7.2, 4.2, ncols=max(len(arms), 1), top=0.84, wspace=0.08)
    for ax in axes[1:]:
        ax.sharey(axes[0])
        ax.tick_params(labelleft=False)
    axes = [axes]
    if not len(curves):
        return fig
    gbs = sorted(curves["global_batch_size"].dropna().unique())
    cmap = colormaps["viridis"]
    color = {b: cmap(i / max(len(gbs) - 1, 1)) for i, b in enumerate(gbs)}
    for ax, arm in zip(axes[0], arms):
        c = curves[curves["warmup"] == arm]
        for _run_id, g in c.groupby("run_id", sort=True):
            b = g["global_batch_size"].iloc[0]
            ax.plot(
                g["epoch"] + 1,
                100 * g["accuracy"],
                color=color.get(b, "grey"),
                marker=".",
                label=f"GBS {int(b)}",
            )
        ax.set_title(arm)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), loc="lower right", fontsize=8)
    axes[0][0].set_ylabel("validation accuracy (%)")
    fig.suptitle("Training curves", fontsize=11)
    return fig


@styled
def busbw_figure(ar: pd.DataFrame):
    """Allreduce bus bandwidth vs message size, one line per configuration."""
    fig, (ax,) = new_figure(7.2, 4.6, bottom=0.19)
    if not len(ar):
        return fig
    colors = _framework_colors(ar["framework"])
    for i, (_group, g) in enumerate(ar.groupby("group", sort=True)):
        g = g.sort_values("bytes")
        fw = g["framework"].iloc[0]
        n = int(g["world_size"].iloc[0])
        nodes = g["nodes"].iloc[0]
        ax.plot(
            g["bytes"].astype(float),
            g["busbw_gbps"],
            color=colors[fw],
            marker=MARKERS[i % len(MARKERS)],
            linestyle=STYLES[i % len(STYLES)],
            markersize=4,
            label=f"{fw}, {n} ranks on {nodes} node(s)",
        )
    ax.set_xscale("log", base=2)
    sizes = sorted(set(int(b) for b in ar["bytes"]))
    step = max(1, math.ceil(len(sizes) / 10))
    ax.set_xticks(sizes[::step])
    ax.set_xticklabels([fbytes(s) for s in sizes[::step]], rotation=30, ha="right")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("message size")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"Allreduce bus bandwidth ({BUSBW})")
    ax.legend(loc="upper left")
    return fig


@styled
def model_figure(pred: pd.DataFrame):
    """Predicted (line) against measured (markers) throughput and efficiency per series."""
    fig, (ax, ax2) = new_figure(9.6, 4.4, ncols=2, wspace=0.28, left=0.09)
    for i, (_sid, g) in enumerate(pred.groupby("series", sort=True)):
        g = g.sort_values("devices")
        color = PALETTE[i % len(PALETTE)]
        label = str(g["label"].iloc[0])
        m = g[g["measured"]]
        if "predicted_efficiency_low" in g:
            ax.fill_between(
                g["devices"],
                g["predicted_throughput_low"],
                g["predicted_throughput_high"],
                color=color,
                alpha=0.15,
            )
            lo, hi = g["predicted_efficiency_low"], g["predicted_efficiency_high"]
            ax2.fill_between(g["devices"], 100 * lo, 100 * hi, color=color, alpha=0.15)
        ax.plot(g["devices"], g["predicted_throughput"], color=color, linestyle="--")
        ax.plot(
            m["devices"],
            m["throughput_gmean"],
            color=color,
            marker="o",
            linestyle="none",
            label=f"{label} measured",
        )
        ax2.plot(g["devices"], 100 * g["predicted_efficiency"], color=color, linestyle="--")
        ax2.plot(m["devices"], 100 * m["efficiency"], color=color, marker="o", linestyle="none")
    for a in (ax, ax2):
        _log2_devices(a, pred["devices"].tolist())
        a.set_xlabel("devices (workers)")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(_fmt_count))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("global throughput (samples/s)")
    ax2.set_ylabel("scaling efficiency (%)")
    ax2.set_ylim(0, 110)
    ax.set_title("Throughput: model (dashed, band: interval) vs measured", fontsize=10)
    ax2.set_title("Efficiency: model (dashed, band: interval) vs measured", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="grey", linestyle="--"))
    labels.append("alpha-beta model")
    ax.legend(handles, labels, loc="upper left", fontsize=8)
    return fig
