"""The training figures of a report (matplotlib, Agg backend, the style of :mod:`.plots`):
final accuracy vs global batch size, and the validation curves per epoch."""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

import pandas as pd
from matplotlib import colormaps
from matplotlib.ticker import MaxNLocator, NullFormatter

from .plots import framework_colors, new_figure, styled

#: the accuracy figure's lines stand side by side at a batch size, this factor apart (at
#: most ACCURACY_SPREAD, in log2 units, between the outermost), so that none hides another
ACCURACY_DODGE = 1.06
ACCURACY_SPREAD = 0.5


def accuracy_dodge(count: int) -> List[float]:
    """The factors by which the ``count`` lines of the accuracy figure shift their batch
    sizes: centred on 1, ``ACCURACY_DODGE`` apart, all within ``ACCURACY_SPREAD``."""
    if count < 2:
        return [1.0] * count
    step = min(math.log2(ACCURACY_DODGE), ACCURACY_SPREAD / (count - 1))
    return [2 ** (step * (i - (count - 1) / 2)) for i in range(count)]


def _accuracy_lines(conv: pd.DataFrame, xcol: str) -> List[Tuple[str, str, pd.DataFrame, str]]:
    """``(study, arm, rows, label)`` of every line with a mean; a line whose points are those
    of an earlier one says so in its label (both are drawn, side by side)."""
    lines, seen = [], {}
    for (name, warm), g in conv.sort_values(xcol).groupby(["_study", "warmup"]):
        g = g[g["final_accuracy_mean"].notna()]
        if not len(g):
            continue
        label = f"{name}, {warm}"
        key = (tuple(g[xcol]), tuple(g["final_accuracy_mean"].round(12)))
        same = seen.setdefault(key, label)
        label += f" (same points as {same})" if same != label else ""
        lines.append((name, warm, g, label))
    return lines


@styled
def accuracy_batch_figure(conv: pd.DataFrame):
    """Final top-1 accuracy vs global batch size, with and without gradual warmup; the
    intervals where a configuration has them (two repeats or more); the lines side by side
    (:func:`accuracy_dodge`), so that equal points stay visible."""
    fig, (ax,) = new_figure(7.2, 4.4)
    if not len(conv):
        return fig
    xcol, xlabel = _batch_axis(conv)
    study = (
        conv["study_label"] if "study_label" in conv else conv["framework"] + " " + conv["model"]
    )
    conv = conv.assign(_study=study)
    colors, has_ci = framework_colors(conv["_study"]), False
    lines = _accuracy_lines(conv, xcol)
    for (name, warm, g, label), dodge in zip(lines, accuracy_dodge(len(lines))):
        warmup = warm != "no warmup"
        # points: the mean of the repeats; bars: its interval (one statistic)
        ax.errorbar(  # no yerr: the bars are drawn only where there is an interval
            g[xcol] * dodge,  # lines side by side
            100 * g["final_accuracy_mean"],
            color=colors[name],
            marker="o" if warmup else "s",
            linestyle="-" if warmup else "--",
            label=label,
        )
        has_ci |= _interval_bars(ax, g, xcol, dodge, colors[name])
    _target_line(ax, conv["target_accuracy"].dropna().unique())
    ax.set_xscale("log", base=2)
    ticks = sorted(set(int(v) for v in conv[xcol].dropna() if v > 0))
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("final validation accuracy (%)")
    ci = ", its 95 % CI" if has_ci else ""
    arms = "warmup vs none" if conv["warmup"].nunique() > 1 else conv["warmup"].iloc[0]
    ax.set_title(f"Accuracy vs global batch (mean of repeats{ci}; {arms})")
    ax.legend(loc="lower left")
    return fig


def _interval_bars(ax, g: pd.DataFrame, xcol: str, dodge: float, color) -> bool:
    """The 95 % CI bars of the configurations of one line that have one (two repeats or
    more); none where a configuration has no interval, not a bar of zero length, which
    would read as certainty. Returns whether any bar was drawn."""
    c = g[g["final_accuracy_ci95_low"].notna() & g["final_accuracy_ci95_high"].notna()]
    if not len(c):
        return False
    mean = c["final_accuracy_mean"]
    lo = (mean - c["final_accuracy_ci95_low"]).clip(lower=0)
    hi = (c["final_accuracy_ci95_high"] - mean).clip(lower=0)
    ax.errorbar(
        c[xcol] * dodge,
        100 * mean,
        yerr=[100 * lo, 100 * hi],
        fmt="none",
        capsize=3,
        color=color,
    )
    return True


def _batch_axis(conv: pd.DataFrame) -> Tuple[str, str]:
    """The x axis of the accuracy figure: the global batch, or, where backup workers drop
    gradients, the global batch applied per step ((ranks - b) x batch)."""
    if (
        "applied_batch_size" in conv
        and (
            conv["applied_batch_size"].fillna(conv["global_batch_size"])
            != conv["global_batch_size"]
        ).any()
    ):
        return "applied_batch_size", "global batch applied per step: (ranks - b) x batch"
    return "global_batch_size", "global batch size (samples)"


def _target_line(ax, targets) -> None:
    """The target accuracy, when the runs share one."""
    if len(targets) != 1:
        return
    ax.axhline(100 * targets[0], color="black", linestyle=":", linewidth=1)
    ax.text(
        0.01,
        100 * targets[0],
        f" target {100 * targets[0]:g} %",
        transform=ax.get_yaxis_transform(),
        va="bottom",
        fontsize=8.5,
    )


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
        style = _curve_styles(c)
        for run_id, g in c.groupby("run_id", sort=True):
            b = g["global_batch_size"].iloc[0]
            linestyle, label = style[run_id]
            ax.plot(
                g["epoch"] + 1,
                100 * g["accuracy"],
                color=color.get(b, "grey"),
                marker=".",
                linestyle=linestyle,
                label=label,
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


CURVE_STYLES = ("-", "--", ":", "-.")


def _curve_styles(c: pd.DataFrame) -> Dict[str, Tuple[str, str]]:
    """``run_id -> (linestyle, legend label)`` of one arm's curves: ``GBS n`` when one
    configuration has that global batch; where several do (two frameworks, two entries), each
    configuration its own line style and its name in the label, so that no two are mistaken
    for repeats of one."""
    out: Dict[str, Tuple[str, str]] = {}
    group = c["group"] if "group" in c else c["run_id"]
    for b, g in c.assign(_group=group).groupby("global_batch_size", sort=True):
        groups = sorted(g["_group"].unique())
        for run_id, cfg in g.groupby("run_id")["_group"].first().items():
            if len(groups) == 1:
                out[run_id] = ("-", f"GBS {int(b)}")
            else:
                i = groups.index(cfg)
                out[run_id] = (CURVE_STYLES[i % len(CURVE_STYLES)], f"GBS {int(b)}: {cfg}")
    return out
