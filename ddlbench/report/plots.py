"""Report figures (matplotlib, Agg backend), written as PNG and SVG.

Made for print: labelled axes with units, legends, log2 axes for device counts and
message sizes, colour plus marker/line style so that a grey-scale print stays readable.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FuncFormatter,
    Locator,
    LogLocator,
    MaxNLocator,
    NullFormatter,
)
from matplotlib.transforms import offset_copy

from ..diskfull import atomic_path
from ..workloads.vocabulary import TRANSFORMER_MODELS
from .captions import BUSBW
from .format import fbytes, missing
from .limits import efficiency_cut, efficiency_top, plot_series, throughput_limits

#: the series' markers: none a caret (^, v: an interval cut at the axis) or a star (the knee)
MARKERS = ["o", "s", "D", "P", "X", "h", "<", ">", "p", "d"]
STYLES = ["-", "--", "-.", ":"]
#: Okabe and Ito's colour-blind-safe qualitative palette (blue, vermillion, bluish green,
#: reddish purple, orange, sky blue, black, yellow: the weakest on white last)
PALETTE = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#000000",
    "#F0E442",
)
# fixed margins (fractions of the figure): cheaper than a tight bounding box per save
MARGINS = dict(left=0.1, right=0.975, bottom=0.115, top=0.915)
#: the carets of the series' cut intervals at one device count stand side by side, this far
#: apart (log2 units of the device axis), at most CARET_SPREAD between the outermost
CARET_DODGE = 0.03
CARET_SPREAD = 0.3
#: a title longer than this many characters is wrapped (the plot is lowered to make room)
TITLE_WIDTH = 88

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


def wrapped_title(ax, title: str, fontsize: float = 10) -> None:
    """``title`` at ``fontsize``, wrapped at :data:`TITLE_WIDTH` characters, the plot
    lowered by a line's height per line beyond the first."""
    lines = textwrap.wrap(title, width=TITLE_WIDTH) or [""]
    ax.set_title("\n".join(lines), fontsize=fontsize)
    if len(lines) > 1:
        ax.figure.subplots_adjust(top=MARGINS["top"] - 0.04 * (len(lines) - 1))


def _fmt_count(v, _pos=None) -> str:
    if v <= 0:
        return ""
    if v >= 1e6:
        return f"{v / 1e6:.4g}M"
    if v >= 1e3:
        return f"{v / 1e3:.4g}k"
    return f"{v:.4g}"


#: the labelled multiples of a power of ten on a log axis spanning less than about a decade
NARROW_SUBS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)


class CountLocator(Locator):
    """Ticks of a log count axis (samples/s) that always label values one can read: 1-2-5
    per decade (1 per decade beyond four decades); when that labels fewer than ``minimum``
    ticks in view, the multiples ``NARROW_SUBS`` of a power of ten; when even that does not,
    evenly spaced round values. With ``minor``: unlabelled log ticks beside the 1-2-5 ones."""

    def __init__(self, minimum: int = 3, minor: bool = False):
        self.minimum, self.minor = minimum, minor

    def __call__(self):
        return self.tick_values(*self.axis.get_view_interval())

    def tick_values(self, vmin, vmax):
        vmin, vmax = sorted((vmin, vmax))
        vmin = max(vmin, vmax / 1e12, 1e-300)
        wide = (1.0, 2.0, 5.0) if vmax / vmin <= 1e4 else (1.0,)
        for i, subs in enumerate((wide, NARROW_SUBS)):
            ticks = LogLocator(base=10, subs=subs, numticks=12).tick_values(vmin, vmax)
            if ((ticks >= vmin * 0.999) & (ticks <= vmax * 1.001)).sum() >= self.minimum:
                if not self.minor:
                    return ticks
                if i:
                    return np.array([])
                return LogLocator(base=10, subs="auto", numticks=12).tick_values(vmin, vmax)
        if self.minor:
            return np.array([])
        ticks = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(vmin, vmax)
        return ticks[ticks > 0]


def count_axis(ax) -> None:
    """A log y axis of counts (samples/s) with enough labelled ticks to read the values."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(CountLocator())
    ax.yaxis.set_minor_locator(CountLocator(minor=True))
    ax.yaxis.set_major_formatter(FuncFormatter(_fmt_count))
    ax.yaxis.set_minor_formatter(NullFormatter())


def series_legend_handle(colors, **style) -> tuple:
    """One legend swatch for a mark drawn in each series' colour: the mark in every colour
    drawn, side by side (see :func:`legend`)."""
    return tuple(Line2D([], [], color=c, **style) for c in dict.fromkeys(colors))


def legend(ax, handles, labels, **kw):
    """``ax.legend`` that draws a tuple handle as its parts side by side."""
    wide = max((len(h) for h in handles if isinstance(h, tuple)), default=1) > 1
    handler = {tuple: HandlerTuple(ndivide=None, pad=0.0)}
    return ax.legend(handles, labels, handler_map=handler, handlelength=3.0 if wide else 2.0, **kw)


def _log2_devices(ax, devices: List[int]) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(int(d) for d in devices if d and d > 0))
    if ticks:
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)
    ax.xaxis.set_minor_formatter(NullFormatter())


def framework_colors(frameworks) -> Dict[str, tuple]:
    return {fw: PALETTE[i % len(PALETTE)] for i, fw in enumerate(sorted(set(frameworks)))}


def _series_styles(series: pd.DataFrame) -> Dict[str, dict]:
    """A colour of :data:`PALETTE` per series (several series of one framework too: sync
    and backup workers, sharding modes), a marker per series and a line style per series of
    a framework as second cues (the colours repeat beyond eight series); ``caret_shift``: the
    factor that sets its carets (:data:`CUT_UP`) beside the other series' at a device count."""
    count: Dict[str, int] = {}
    out = {}
    step = min(CARET_DODGE, CARET_SPREAD / max(len(series) - 1, 1))
    for i, (_, s) in enumerate(series.sort_values(["framework", "label"]).iterrows()):
        k = count.get(s["framework"], 0)
        count[s["framework"]] = k + 1
        out[s["series"]] = {
            "color": PALETTE[i % len(PALETTE)],
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": STYLES[k % len(STYLES)],
            "caret_shift": 2 ** (step * (i - (len(series) - 1) / 2)),
            # knee range bars of the series stacked about the threshold, not drawn over each other
            "bar_offset_pt": KNEE_BAR["linewidth"] * (i - (len(series) - 1) / 2),
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


IDEAL_STYLE = dict(linestyle=(0, (1, 2)), linewidth=1.0, alpha=0.8)
#: the throughput columns of a point, multiplied by the sequence length for tokens/s
THROUGHPUT_COLUMNS = ("throughput_gmean", "ci95_low", "ci95_high", "ideal_throughput")


def throughput_unit(points: pd.DataFrame, series: pd.DataFrame) -> Tuple[pd.DataFrame, str]:
    """The points in the throughput axis' unit, and the unit (docs/reports.md): a language
    model's tokens/s (sequences/s x ``seq_len``) when every series drawn is one and every point
    has its ``seq_len``; sequences/s when every series is a transformer without; else
    samples/s."""
    models = set(series["model"].dropna().astype(str)) if "model" in series else set()
    if not len(points) or not models or not models <= set(TRANSFORMER_MODELS):
        return points, "samples/s"
    if "seq_len" not in points:
        return points, "sequences/s"
    seq = pd.to_numeric(points["seq_len"], errors="coerce")
    if seq.isna().any():
        return points, "sequences/s"
    out = points.copy()
    for c in THROUGHPUT_COLUMNS:
        out[c] = pd.to_numeric(out[c], errors="coerce") * seq
    return out, "tokens/s"


#: a caret at an axis' edge where a 95 % interval runs beyond it (docs/reports.md)
CUT_UP = dict(marker="^", markersize=7, linestyle="none", clip_on=False, zorder=6)
CUT_DOWN = dict(CUT_UP, marker="v")
CUT_LABEL = "interval beyond the axis (cut)"


def _throughput_errorbar(ax, p: pd.DataFrame, st: dict, label: str, limits) -> Tuple[bool, bool]:
    """One series' points and 95 % intervals, each interval cut at the axis' edge where
    ``limits`` (:func:`.limits.throughput_limits`) stop it, with a caret there; whether it
    drew an interval and whether it cut one."""
    gmean = p["throughput_gmean"]
    low, high = p["ci95_low"], p["ci95_high"]
    cut_lo = cut_hi = pd.Series(False, index=p.index)
    if limits is not None:
        cut_lo, cut_hi = (low < limits[0]).fillna(False), (high > limits[1]).fillna(False)
        low, high = low.clip(lower=limits[0]), high.clip(upper=limits[1])
    lo, hi = (gmean - low).fillna(0), (high - gmean).fillna(0)
    ci = bool((lo + hi).gt(0).any())
    ax.errorbar(
        p["devices"],
        gmean,
        yerr=[lo, hi] if ci else None,
        color=st["color"],
        marker=st["marker"],
        linestyle=st["linestyle"],
        capsize=3,
        markersize=5,
        label=label,
    )
    for cut, y, style in ((cut_hi, high, CUT_UP), (cut_lo, low, CUT_DOWN)):
        if cut.any():
            x = p["devices"][cut] * st["caret_shift"]
            ax.plot(x, y[cut], color=st["color"], **style)
    return ci, bool(cut_lo.any() or cut_hi.any())


@styled
def throughput_figure(points: pd.DataFrame, series: pd.DataFrame):
    """Global throughput vs devices: geometric means over repeats with their 95 % intervals
    (the one rule of ``analyse/stats.py``), ideal (linear) scaling dotted in the series'
    colour, intervals beyond the axis cut with a caret (:func:`.limits.throughput_limits`);
    the title and the legend name only what is drawn."""
    points, series = plot_series(points, series)
    points, unit = throughput_unit(points, series)
    fig, (ax,) = new_figure(7.2, 4.6)
    styles = _series_styles(series)
    limits = throughput_limits(points[points["throughput_gmean"].notna()]) if len(points) else None
    ideal_colors, cut_colors, has_ci = [], [], False
    for _, s in series.sort_values(["framework", "label"]).iterrows():
        p = points[(points["series"] == s["series"]) & points["throughput_gmean"].notna()]
        if not len(p):
            continue
        st = styles[s["series"]]
        ci, cut = _throughput_errorbar(ax, p, st, s["label"], limits)
        has_ci |= ci
        cut_colors += [st["color"]] if cut else []
        if p["ideal_throughput"].notna().sum() >= 2:
            ideal_colors.append(st["color"])
            ax.plot(p["devices"], p["ideal_throughput"], color=st["color"], **IDEAL_STYLE)
    if len(points):
        _log2_devices(ax, points["devices"].tolist())
    count_axis(ax)
    if limits is not None:
        ax.set_ylim(limits[0], limits[1])
    ax.set_xlabel("devices (workers)")
    ax.set_ylabel(f"global throughput ({unit})")
    marks = ", its 95 % CI" if has_ci else ""
    marks += "; dotted: ideal scaling" if ideal_colors else ""
    marks += "; caret: CI cut at the axis" if cut_colors else ""
    wrapped_title(ax, f"Throughput vs devices (geometric mean of repeats{marks})")
    handles, labels = ax.get_legend_handles_labels()
    extra = [(ideal_colors, IDEAL_STYLE, "ideal (linear from base)")]
    extra += [(cut_colors, CUT_UP, CUT_LABEL)]
    for colors, style, label in extra if handles else []:  # only what is drawn, as drawn
        if colors:
            handles.append(series_legend_handle(colors, **_swatch(style)))
            labels.append(label)
    if handles:
        legend(ax, handles, labels, loc="upper left", frameon=True)
    return fig


def _swatch(style: dict) -> dict:
    """A mark's style as a legend swatch (no drawing options)."""
    return {k: v for k, v in style.items() if k not in ("clip_on", "zorder")}


KNEE_STAR = dict(marker="*", markeredgecolor="black", linestyle="none")
KNEE_BAR = dict(linewidth=5, alpha=0.45, solid_capstyle="butt")


def _plot_efficiency_series(
    ax, s: pd.Series, p: pd.DataFrame, st: dict, threshold: float, top: float
) -> list:
    """One series' efficiency line, its 95 % intervals (cut at ``top``, in %, with a caret
    there) and its knee; the marks it drew, as ``(mark, colour)`` pairs (mark: ``ci``,
    ``cut``, ``star`` or ``range``)."""
    ax.plot(
        p["devices"],
        100 * p["efficiency"],
        color=st["color"],
        marker=st["marker"],
        linestyle=st["linestyle"],
        markersize=5,
        label=f"{s['label']} (base N={int(s['base_devices'])})",
    )
    drawn = []
    if "efficiency_ci95_low" in p:
        ci = p[p["efficiency_ci95_low"].notna() & (p["devices"] != s["base_devices"])]
        ax.vlines(
            ci["devices"],
            100 * ci["efficiency_ci95_low"],
            (100 * ci["efficiency_ci95_high"]).clip(upper=top),
            color=st["color"],
            linewidth=1.2,
            alpha=0.7,
        )
        drawn += [("ci", st["color"])] if len(ci) else []
        cut = ci[efficiency_cut(ci, top)]
        if len(cut):
            x = cut["devices"] * st["caret_shift"]
            ax.plot(x, [top] * len(cut), color=st["color"], **CUT_UP)
            drawn.append(("cut", st["color"]))
    knee = _mark_knee(ax, s, p, threshold, st)
    return drawn + ([(knee, st["color"])] if knee else [])


#: what each efficiency mark is called in the title and the legend, and its legend swatch
EFFICIENCY_MARKS = {
    "ci": ("95 % CI", None, None),
    "cut": ("caret: CI cut at the axis", CUT_LABEL, _swatch(CUT_UP)),
    "star": ("star: knee", "knee", dict(KNEE_STAR, markersize=9)),
    "range": ("bar on the threshold: knee range", "knee range (the data cannot tell)", KNEE_BAR),
}


def _efficiency_legend(ax, marks: list) -> None:
    """The series' legend, with the knee marker and the knee range bar where one is drawn,
    each in the colours of the series it is drawn for."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    for mark, (_, label, style) in EFFICIENCY_MARKS.items():
        colors = [c for m, c in marks if m == mark]
        if label and colors:
            handles.append(series_legend_handle(colors, **style))
            labels.append(label)
    legend(ax, handles, labels, loc="lower left", frameon=True)


def efficiency_title(marks: list) -> str:
    """The efficiency figure's title, naming only the marks drawn."""
    drawn = {m for m, _ in marks}
    names = [title for mark, (title, _, _) in EFFICIENCY_MARKS.items() if mark in drawn]
    return "Scaling efficiency vs devices" + (f" ({'; '.join(names)})" if names else "")


@styled
def efficiency_figure(points: pd.DataFrame, series: pd.DataFrame, threshold: float):
    """Scaling efficiency vs devices, threshold line, knee of every series marked; the axis
    stops at :func:`.limits.efficiency_top`, an interval beyond it is cut with a caret."""
    points, series = plot_series(points, series)
    points, unit = throughput_unit(points, series)
    fig, (ax,) = new_figure(7.2, 4.6)
    styles = _series_styles(series)
    top, _cap = efficiency_top(points[points["efficiency"].notna()])
    marks = []
    for _, s in series.sort_values(["framework", "label"]).iterrows():
        p = points[(points["series"] == s["series"]) & points["efficiency"].notna()]
        if len(p):
            marks += _plot_efficiency_series(ax, s, p, styles[s["series"]], threshold, top)
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
    ax.set_ylim(0, top)  # every point; intervals up to a cap (.limits.efficiency_top)
    ax.set_xlabel("devices (workers)")
    ax.set_ylabel("scaling efficiency (%)")
    wrapped_title(ax, efficiency_title(marks))
    _efficiency_legend(ax, marks)
    return fig


def _mark_knee(ax, s, p, threshold: float, st: dict) -> Optional[str]:
    """A star at the knee when the data place it; a bar along the threshold from the
    confident lower end to the upper end when they only bound it (each series' bar
    ``bar_offset_pt`` points off the line, so that the bars of several series all show)."""
    color = st["color"]
    lo, hi = s.get("knee_low"), s.get("knee_high")
    if missing(lo) and s.get("knee_reason"):  # no knee the data support (docs/metrics.md)
        return None
    if missing(lo):
        lo = hi = s.get("knee_devices")
    if missing(lo):
        return None
    if lo == hi:
        kp = p[p["devices"] == lo]
        if not len(kp):
            return None
        ax.plot(
            kp["devices"], 100 * kp["efficiency"], markersize=16, color=color, zorder=5, **KNEE_STAR
        )
        return "star"
    shifted = offset_copy(ax.transData, fig=ax.figure, y=st["bar_offset_pt"], units="points")
    ax.plot([lo, hi], [100 * threshold] * 2, color=color, zorder=4, transform=shifted, **KNEE_BAR)
    return "range"


@styled
def busbw_figure(ar: pd.DataFrame):
    """Allreduce bus bandwidth vs message size, one line per configuration."""
    fig, (ax,) = new_figure(7.2, 4.6, bottom=0.19)
    if not len(ar):
        return fig
    colors = framework_colors(ar["framework"])
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
    count_axis(ax)
    ax.set_ylabel("global throughput (samples/s)")
    ax2.set_ylabel("scaling efficiency (%)")
    ax2.set_ylim(0, 110)
    ax.set_title("Throughput: model (dashed, band: interval) vs measured", fontsize=10)
    ax2.set_title("Efficiency: model (dashed, band: interval) vs measured", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    colors = [PALETTE[i % len(PALETTE)] for i in range(pred["series"].nunique())]
    handles.append(series_legend_handle(colors, linestyle="--"))
    labels.append("alpha-beta model")
    legend(ax, handles, labels, loc="upper left", fontsize=8)
    return fig
