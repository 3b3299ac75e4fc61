"""The report's captions and table notes that restate a formula, each written once here.

``docs/metrics.md`` defines every formula; these texts only repeat it next to a figure or a
table. A formula that two captions use is one constant below (also given to the templates
as ``formula``).
"""

from __future__ import annotations

from typing import Dict, Tuple

from .format import fpct

#: nccl-tests' bus bandwidth
BUSBW = "busbw = algbw x 2(n-1)/n"
#: the alpha-beta model of a ring allreduce (docs/scaling-model.md)
RING_TIME = "time = alpha + 2(n-1)/n x bytes / busbw"
#: scaling efficiency relative to a series' base
EFFICIENCY = "eff(N) = (throughput(N)/N) / (throughput(base)/base)"
#: coefficient of variation over repeats
CV = "CV = sample standard deviation / mean"
#: the one statistic over repeats and its interval (docs/metrics.md, Over repeats)
GMEAN = (
    "geometric mean over the complete repeats, exp(mean of ln x); 95 % interval "
    "exp(mean ln x +/- t(0.975, n-1) sd(ln x) / sqrt(n)), never below zero"
)
#: a rank's step-time jitter
JITTER = "median over ranks of 1.4826 x MAD of the step times"
#: the straggler index of a run
STRAGGLER_INDEX = "max/median over ranks of the per-rank median compute time"
#: the Stragglers section's text: which quantity the index uses, and when it names a node
STRAGGLER_TEXT = (
    "Straggler index of a run = slowest rank's median / median over ranks of the per-rank "
    "medians, of the compute time where the workload logs it (by: compute; synchronous "
    "training evens out step times) and of the step time otherwise (by: step); 1.0: no "
    "straggler. It names a suspected node only when the run spans more than one node and the "
    "index exceeds the threshold by more than the run's step-to-step noise (jitter / median "
    "step time; docs/bad-nodes.md)"
)
#: achieved FLOP rate and model FLOP utilisation (docs/mfu.md)
TFLOPS = (
    "TFLOP/s per device = samples/s per device x training FLOPs per sample (3 x the "
    "analytic forward count)"
)
MFU = "MFU = that / the device's peak for the precision that ran"

#: the formulas the templates restate
FORMULAS: Dict[str, str] = {"cv": CV, "jitter": JITTER, "straggler": STRAGGLER_TEXT, "gmean": GMEAN}

#: added to the throughput figure's caption when a series is of the applied rate (backup workers)
APPLIED_CAPTION = (
    " A series labelled 'applied samples/s' (backup workers, b > 0) counts only the samples "
    "whose gradient was applied, not those of the dropped ranks."
)
FIGURE_TEXT: Dict[str, Tuple[str, str]] = {
    "throughput": (
        "Throughput vs devices",
        "Global throughput (sum of all ranks' measured samples divided by the measured "
        f"wall-clock window): points, the {GMEAN} as error bars (with two repeats or more); "
        "dotted, in the series' colour: ideal linear scaling from the base of each series "
        "with two scales or more.",
    ),
    "efficiency": (
        "Scaling efficiency vs devices",
        f"{EFFICIENCY} from the geometric means over repeats; vertical "
        "lines: its 95 % confidence interval (Welch t interval of the difference of the mean "
        "logs, docs/metrics.md); the star marks "
        "the knee where the data place it, a thick bar on the threshold line the range of N "
        "the knee lies in when they do not (docs/metrics.md, Verdicts).",
    ),
    "ranks": (
        "Per-rank times of the largest run, in the straggler index's quantity",
        "The quantity the straggler index of the run uses (its title says which): per-rank "
        "median compute time (dot) where the workload logs it, else the median (dot), 25-75 % "
        "(bar) and 5-95 % (line) of each rank's measured step times; dashed: the median over "
        "ranks, dotted: the straggler threshold; colour alternates per host (on more than one "
        "host); the three slowest ranks are named.",
    ),
    "accuracy": (
        "Accuracy vs global batch size",
        "Final validation accuracy (points: mean of repeats; bars, with two repeats or "
        "more: its 95 % t confidence interval, clipped to [0, 1]), one line per framework "
        "entry and warmup arm that ran (Goyal et al. 2017: with and without gradual warmup).",
    ),
    "curves": ("Training curves", "Validation accuracy per epoch of every convergence run."),
    "model": (
        "Scaling model: predicted vs measured",
        "Dashed: the alpha-beta model's prediction from the allreduce sweep, the gradient "
        "bytes, the compute time per step at the smallest scale, the overlap (measured "
        "where the ranks logged it and estimated from the layer sizes otherwise) and the "
        "synchronisation of the measured per-rank step times (the notes below say which; "
        "docs/scaling-model.md); band: the prediction's interval; markers: measured geometric "
        "means over repeats.",
    ),
    "busbw": (
        "Allreduce bus bandwidth vs message size",
        f"{BUSBW} with algbw = bytes / time (nccl-tests definitions).",
    ),
}


def series_note(settings) -> str:
    """Under the scaling series table: base, knee, peak and "more devices help"."""
    return (
        "Base: the smallest device count of each series. Knee: the largest N up to "
        "which efficiency is at or above "
        f"{fpct(settings.efficiency_threshold, 0)} with "
        f"{fpct(settings.confidence, 0)} confidence; a range when the data "
        "cannot tell; none for a series measured at one device count or without an "
        "efficiency interval beyond its base (2 complete repeats at the base and at another "
        "N). Peak: the device count with the highest throughput. Every figure is "
        "a geometric mean over repeats, or a ratio of two. "
        "More devices help: the gain from the previous N is significant (one-sided "
        f"Welch test, alpha {settings.alpha:g}) and at least "
        f"{fpct(settings.min_gain, 0)} (docs/metrics.md)."
    )


#: how the tables round a figure that has an interval (docs/reports.md#digits)
DIGITS = (
    "A figure with a 95 % interval is rounded to what the interval supports, its ends outward "
    "(docs/reports.md#digits)."
)
STATS_NOTE = (
    "Min - max and CV describe the spread (as measured). Step time and jitter: medians over "
    f"the complete repeats of each run's figure (itself the median over ranks). {DIGITS}"
)
SCALES_NOTE = (
    f"Samples/s: the {GMEAN} (a language model's samples are sequences; its tokens/s: "
    "samples/s x sequence length). Speedup and efficiency: ratios of geometric means; the "
    "efficiency interval is the Welch t interval of the difference of the mean logs "
    f"(docs/metrics.md). The step verdicts test the same difference. {DIGITS}"
)
STRAGGLER_NOTE = (
    f"The index is {STRAGGLER_INDEX} "
    "where the workload logs it (by: compute; synchronous training evens out step "
    "times), else of the step time (by: step). Ranks tied at the top are not named."
)
ALLREDUCE_NOTE = (
    "Columns: framework nodes x ranks per node. Time per size: the "
    f"slowest rank's median; algbw = bytes/time; {BUSBW}."
)
EFFICIENCY_NOTE = (
    f"{TFLOPS}; {MFU} (docs/mfu.md). Power and J/sample: all the run's GPUs in the measured "
    "window (docs/telemetry.md). Bold: a fallback, throttled clocks, or a busy or shared node "
    "at the start: such a run is not a clean measurement."
)
ALPHA_BETA_TITLE = f"Allreduce alpha-beta fits (ring: {RING_TIME})"
