"""Predictive data-parallel scaling model (definitions: ``docs/scaling-model.md``).

From measured inputs only:

1. an allreduce sweep (``mode: allreduce`` runs of this campaign or of a calibration
   campaign on the same cluster) fitted per layout to the alpha-beta model of a ring
   allreduce, ``t(M) = alpha + (2 (n - 1) / n) M / busbw`` (least squares on relative error);
   a layout that was not swept gets the hierarchical ring of ``hierarchy.py`` on the links
   of the largest one-node and several-node fits (:func:`links_from_fits`);
2. the gradient bytes, ``param_count`` (rank ``meta`` record) x 4 bytes (fp32 gradients,
   which DDP also keeps under amp);
3. the compute time per step ``C`` of the series' smallest scale: its step time when
   that scale is 1 device (nothing to communicate), else the logged ``compute_s`` (else the
   step time), each a run's median over ranks and the geometric mean over repeats; weak
   scaling keeps ``C`` at every ``N``, strong scaling scales it by the per-device batch;
4. the overlapped fraction ``f`` of the gradient allreduce: ``f = 1 - comm_s / t_ar(N)``
   (median over the measured ``N > 1`` that log the exposed ``comm_s``); without a logged
   ``comm_s`` the exposed time is estimated by wait-free backprop over the model's layer
   sizes (``overlap.py``), and for a model without a layer table ``f = 0``.

Predicted step time ``T(N) = C (1 + sync(N)) + exposed(N) + slowed(N)``,
``exposed = (1 - f) t_ar(N, grad bytes)`` (``t_ar = 0`` for ``N = 1``), ``sync`` the wait for
the slowest of ``N`` ranks and ``slowed`` the compute's slowdown while the allreduce overlaps
it (both ``costs.py``, as in ``ddlbench predict``),
throughput ``N b / T(N)``, efficiency ``T(base) / T(N)`` (weak scaling; strong: with the
global batch fixed, ``(T(base) base) / (T(N) N)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import pandas as pd

from ..values import missing
from . import costs, hierarchy, overlap
from .alpha_beta import AlphaBeta, allreduce_time, fit_sweep, links_from_fits
from .series import RATE_APPLIED
from .stats import repeat_centre

GRAD_BYTES_PER_PARAM = 4


@dataclass
class ScalingModel:
    fits: List[AlphaBeta]
    predictions: pd.DataFrame  # one row per (series, N): measured and predicted
    assumptions: List[str] = field(default_factory=list)
    max_devices: Optional[int] = None

    def error_summary(self) -> Dict[str, float]:
        p = self.predictions
        e = p["throughput_error"].dropna() if len(p) else pd.Series(dtype=float)
        if not len(e):
            return {}
        return {
            "points": int(len(e)),
            "mean_abs": float(e.abs().mean()),
            "max_abs": float(e.abs().max()),
        }


def _run_inputs(runs: pd.DataFrame, ranks: pd.DataFrame) -> pd.DataFrame:
    """Per complete run: params, median compute_s and comm_s over ranks."""
    done = runs[runs["complete"]]
    if not len(done) or not len(ranks):
        return pd.DataFrame()
    cols = [c for c in ("param_count", "compute_median_s", "comm_median_s") if c in ranks]
    r = ranks[ranks["run_id"].isin(set(done["run_id"]))]
    per = r.groupby("run_id")[cols].median()
    return done.set_index("run_id")[["group", "step_time_median_s"]].join(per)


def predict(
    analysis, data, fits: List[AlphaBeta], max_devices: Optional[int], gpus_per_node: int
) -> ScalingModel:
    """Predictions for every throughput scaling series of the analysis."""
    rows = []
    assumptions = [
        "ring allreduce: time = alpha + 2(n-1)/n x bytes / busbw per swept layout; other "
        "layouts: NCCL's ring over the fitted intra- and inter-node links "
        "(docs/scaling-model.md)",
        f"gradient bytes = parameter count x {GRAD_BYTES_PER_PARAM} (fp32 gradients)",
        "measured overlap: one allreduce of all the gradient bytes per step; estimated "
        "overlap: one allreduce per gradient bucket, each paying the latency",
    ]
    if fits and not any(f.nodes > 1 for f in fits):
        assumptions.append(
            "no layout across nodes was swept: a prediction across nodes uses the one-node "
            "fit for the network too (sweep at 2 nodes or more for the network's own)"
        )
    inputs = _run_inputs(analysis.runs, data.ranks)
    pts, series = analysis.points, analysis.series
    if not len(pts) or not fits or not len(inputs):
        return ScalingModel(fits, pd.DataFrame(), assumptions, max_devices)
    for label in series.loc[_backup(series), "label"]:
        assumptions.append(
            f"{label}: not modelled (backup workers: the model does not predict the applied "
            "rate of a step that drops b ranks' gradients)"
        )
    for _, s in series[(series["mode"] == "throughput") & ~_backup(series)].iterrows():
        p = pts[(pts["series"] == s["series"]) & pts["throughput_gmean"].notna()]
        if not len(p):
            continue
        rows.extend(
            _series_rows(
                s, p, inputs, fits, max_devices, gpus_per_node, assumptions, analysis.runs, data
            )
        )
    return ScalingModel(
        fits, pd.DataFrame(rows), sorted(set(assumptions), key=assumptions.index), max_devices
    )


def _backup(series: pd.DataFrame) -> pd.Series:
    """The series of the applied rate (backup workers, b > 0), which the model leaves out."""
    if "rate" not in series:
        return pd.Series(False, index=series.index)
    return series["rate"] == RATE_APPLIED


def _weak(series: pd.DataFrame) -> pd.DataFrame:
    """The weak-scaling throughput series ``predict --from`` can take."""
    keep = (series["mode"] == "throughput") & (series["scaling"] != "strong") & ~_backup(series)
    return series[keep]


def _group_inputs(inputs: pd.DataFrame, group: str) -> pd.Series:
    """A configuration's inputs over its repeats: each column's repeat centre (the geometric
    mean of :func:`~ddlbench.analyse.stats.repeat_centre`)."""
    g = inputs[inputs["group"] == group]
    if not len(g):
        return pd.Series(dtype=float)
    num = g.select_dtypes("number")
    return pd.Series({c: repeat_centre(num[c].to_numpy(dtype=float)) for c in num.columns})


@dataclass
class _Comm:
    """The communication of one series: measured overlap ``f`` when logged, else the
    wait-free-backprop estimate from the model's layer sizes (``overlap.wait_free``)."""

    fits: List[AlphaBeta]
    gpn: int
    grad_bytes: float
    f: Optional[float]
    layers: Optional[list]
    bucket_bytes: float
    first_bucket_bytes: float
    jitter: Tuple[float, ...] = ()  # the base's relative step times (costs.py)
    ar_scale: float = 1.0  # the allreduce at an end of its interval (1 +- the fits' rms)
    #: compute slowed by this share of the allreduce it overlaps (costs.OVERLAP_SLOWDOWN)
    slowdown: float = costs.OVERLAP_SLOWDOWN[0]

    def allreduce(self, n: int, nbytes: float) -> float:
        return self.ar_scale * allreduce_time(self.fits, n, math.ceil(n / self.gpn), nbytes)

    def sync(self, n: int) -> float:
        """The synchronisation fraction at ``n`` ranks: the expected maximum of ``n`` of the
        base's measured step times (the default jitter when none were logged)."""
        if self.jitter:
            return costs.sync_fraction_empirical(self.jitter, n)
        return costs.sync_fraction_normal(n, costs.JITTER_CV)

    def exposed(self, n: int, compute_s: float) -> float:
        t_ar = self.allreduce(n, self.grad_bytes)
        if n <= 1 or t_ar <= 0:
            return 0.0
        if self.f is not None or not self.layers:
            return (1 - (self.f or 0.0)) * t_ar
        per_param = self.grad_bytes / sum(la.params for la in self.layers)
        est = overlap.wait_free(
            self.layers, compute_s, lambda b: self.allreduce(n, b), per_param,
            self.bucket_bytes, self.first_bucket_bytes,
        )  # fmt: skip
        return est.exposed_s


def _comm(s, p, inputs, fits, gpn, grad_bytes, assumptions) -> _Comm:
    f, how = _overlap(p, inputs, fits, grad_bytes)
    model = str(s.get("model", ""))
    layers = overlap.layer_sizes(model) if model in overlap.MODEL_INPUT else None
    horovod = "horovod" in str(s.get("framework", ""))
    bucket = (64.0 if horovod else overlap.DDP_BUCKET_MB) * 1e6
    first = 0 if horovod else overlap.DDP_FIRST_BUCKET_BYTES
    if f is None and layers:
        how = (
            f"no comm_s logged: estimated by wait-free backprop over the {model} layer sizes, "
            f"{bucket / 1e6:g} MB buckets, backward = 2/3 of the compute"
        )
    shown = f"{f:.2f}" if f is not None else ("estimated per N" if layers else "0.00")
    assumptions.append(f"{s['label']}: overlapped fraction of the allreduce f = {shown} ({how})")
    return _Comm(fits, gpn, grad_bytes, f, layers, bucket, first)


def _series_rows(s, p, inputs, fits, max_devices, gpn, assumptions, runs=None, data=None):
    p = p.sort_values("devices")
    base = p.iloc[0]
    bi = _group_inputs(inputs, base["group"])
    params = bi.get("param_count", math.nan)
    if not _ok(params):
        return []
    grad_bytes = float(params) * GRAD_BYTES_PER_PARAM
    comp = bi.get("compute_median_s", math.nan)
    if int(base["devices"]) == 1 or not _ok(comp):
        c_base, c_src = float(bi["step_time_median_s"]), "step time"
    else:
        c_base, c_src = float(comp), "compute_s"
    assumptions.append(
        f"{s['label']}: compute per step C = {1e3 * c_base:.2f} ms (median {c_src} at "
        f"N={int(base['devices'])}); gradients {grad_bytes / 1e6:.2f} MB"
    )
    comm = _comm(s, p, inputs, fits, gpn, grad_bytes, assumptions)
    comm = replace(comm, jitter=jitter_samples(runs, data, str(base["group"])) if data else ())
    assumptions.append(_sync_note(s, comm))
    assumptions.append(f"{s['label']}: {costs.OVERLAP_SLOWDOWN_SOURCE}")
    strong = s["scaling"] == "strong"
    b0 = int(base["devices"])
    top = max_devices or 4 * int(p["devices"].max())
    ns = sorted(
        set(int(d) for d in p["devices"]) | {2**k for k in range(0, 20) if b0 <= 2**k <= top}
    )
    rms = max((f.rms_rel_error for f in fits if _ok(f.rms_rel_error)), default=0.0)
    u = _half_width(base) or costs.BASE_UNCERTAINTY
    if u > costs.NOISY_BASE:
        assumptions.append(
            f"{s['label']}: the base's 95 % interval is {costs.factor_words(u)} of its "
            "throughput: too noisy for a useful interval (more repeats, a quieter machine)"
        )
    _mid, opt, pess = costs.OVERLAP_SLOWDOWN
    ends = {"mid": (comm, 1.0), "pess": (replace(comm, ar_scale=1 + rms, slowdown=pess), 1.25),
            "opt": (replace(comm, ar_scale=max(0.0, 1 - rms), slowdown=opt), 0.75)}  # fmt: skip
    return [_row(s, p, n, b0, c_base, strong, ends, u) for n in ns]


def _sync_note(s, comm: _Comm) -> str:
    if comm.jitter:
        return (f"{s['label']}: synchronisation = the expected maximum of N of the "
                f"{len(comm.jitter)} measured per-rank step times at the base (each over its "
                "rank's median); interval: 0.75-1.25 x")  # fmt: skip
    return f"{s['label']}: synchronisation: {costs.JITTER_SOURCE}"


def _step(
    comm: _Comm, n: int, compute: float, sync_scale: float
) -> Tuple[float, float, float, float]:
    """(step time, exposed communication, synchronisation, the compute's slowdown while the
    allreduce overlaps it) at ``n`` devices: the step is the compute and the other three."""
    exposed = comm.exposed(n, compute)
    sync = compute * comm.sync(n) * sync_scale
    t_ar = comm.allreduce(n, comm.grad_bytes) if n > 1 else 0.0
    slowed = costs.overlap_slowdown_s(comm.slowdown, t_ar, exposed, compute)
    return compute + sync + exposed + slowed, exposed, sync, slowed


def _row(s, p, n, b0, c_base, strong, ends, u: float) -> dict:
    compute = c_base * ((b0 / n) if strong else 1.0)  # strong: per-device work shrinks
    samples = float(s["global_batch_size"]) if strong else float(s["batch_size"]) * n
    eff, thr = {}, {}
    for end, (comm, scale) in ends.items():
        t_base = _step(comm, b0, c_base, scale)[0]
        t, exposed, sync, slowed = _step(comm, n, compute, scale)
        eff[end] = (t_base * b0) / (t * n) if strong else t_base / t
        thr[end] = samples / t
        if end == "mid":
            mid = (t, exposed, sync, slowed, comm)
    t, exposed, sync, slowed, comm = mid
    meas = p[p["devices"] == n]
    m = float(meas["throughput_gmean"].iloc[0]) if len(meas) else math.nan
    e_lo, e_hi = costs.efficiency_interval(min(eff.values()), max(eff.values()), u, n == b0)
    measured_eff = float(meas["efficiency"].iloc[0]) if len(meas) else math.nan
    return {
        "series": s["series"],
        "label": s["label"],
        "devices": n,
        "nodes": math.ceil(n / comm.gpn),
        "measured": bool(len(meas)),
        "predicted_step_s": t,
        "predicted_allreduce_s": comm.allreduce(n, comm.grad_bytes),
        "predicted_exposed_s": exposed,
        "predicted_sync_s": sync,
        "predicted_overlap_slowdown_s": slowed,
        "predicted_throughput": thr["mid"],
        "predicted_throughput_low": min(thr.values()) * (1 - u),
        "predicted_throughput_high": max(thr.values()) * (1 + u),
        "predicted_efficiency": eff["mid"],
        "predicted_efficiency_low": e_lo,
        "predicted_efficiency_high": e_hi,
        "throughput_gmean": m,
        "efficiency": measured_eff,
        "throughput_error": (thr["mid"] - m) / m if _ok(m) and m else math.nan,
        "inside": bool(e_lo <= measured_eff <= e_hi) if _ok(measured_eff) else None,
    }


def _overlap(p, inputs, fits, grad_bytes) -> Tuple[Optional[float], str]:
    vals, ratios = [], []
    for _, r in p[p["devices"] > 1].iterrows():
        gi = _group_inputs(inputs, r["group"])
        comm = gi.get("comm_median_s", math.nan)
        if not _ok(comm):
            continue
        n = int(r["devices"])
        nodes = int(r["nodes"]) if _ok(r["nodes"]) else 1
        t_ar = allreduce_time(fits, n, nodes, grad_bytes)
        if t_ar > 0:
            vals.append(min(max(1 - float(comm) / t_ar, 0.0), 1.0))
            ratios.append(float(comm) / t_ar)
    if vals:
        how = "measured: 1 - logged exposed comm_s / predicted allreduce time"
        ratio = float(np.median(ratios))
        if ratio > 1:
            how += (
                f"; the logged exposed communication is {ratio:.1f}x the allreduce model's "
                "time: ranks wait for each other (imbalance, contention) beyond the allreduce"
            )
        return float(np.median(vals)), how
    return None, "no comm_s logged and no layer table for this model: no overlap assumed"


def _ok(v) -> bool:
    try:
        return v is not None and not math.isnan(float(v))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class NoModel:
    """Why a campaign that has an allreduce sweep (its own or a calibration's) has no model:
    one sentence for the report's model section and a warning."""

    reason: str


def build(analysis, data, calibration=None) -> Union[ScalingModel, NoModel]:
    """The model of a campaign: the allreduce sweep comes from ``calibration`` (collected
    data of another campaign on the same cluster) when given, else from this campaign's
    own allreduce runs. :class:`NoModel` with the reason when none can be built."""
    from .analysis import allreduce_table

    if calibration is not None:
        sweep = allreduce_table(calibration.runs, calibration.allreduce)
        whose = f"the calibration campaign {calibration.name}'s allreduce sweep"
    else:
        sweep, whose = analysis.allreduce, "this campaign's allreduce sweep"
    if not len(sweep):
        return NoModel(f"{whose} has no complete run")
    if not len(analysis.series) or not (analysis.series["mode"] == "throughput").any():
        return NoModel("the campaign has no throughput series to predict")
    fits, gaps = fit_sweep(sweep)
    if not fits:
        return NoModel(f"no layout of {whose} could be fitted: " + "; ".join(gaps))
    cluster = (data.manifest or {}).get("cluster") or {}
    gpn = int(cluster.get("gpus_per_node") or 1)
    max_nodes = cluster.get("max_nodes")
    max_devices = int(max_nodes) * gpn if max_nodes else None
    model = predict(analysis, data, fits, max_devices, gpn)
    if not len(model.predictions):
        return NoModel(
            "no throughput series has a complete run whose ranks logged their parameter "
            "count (the rank meta record's param_count), which the gradient bytes need"
        )
    if max_devices is None:
        model.assumptions.append(
            "the cluster profile sets no max_nodes: predictions reach 4x the largest measured N"
        )
    model.assumptions.extend(f"not fitted: {g}" for g in gaps)
    return model


@dataclass
class CampaignInputs:
    """What ``ddlbench predict --from CAMPAIGN`` takes from a campaign."""

    label: str
    model: str
    precision: str
    framework: str
    batch: int
    single_throughput: float
    base_devices: int
    gpus_per_node: int
    intra: Optional[hierarchy.Link]
    inter: Optional[hierarchy.Link]
    overlap_fraction: Optional[float]
    overlap_source: str
    jitter_samples: Tuple[float, ...] = ()  # the base's step times over their rank's median
    base_uncertainty: Optional[float] = None  # the base throughput's 95 % CI half-width, relative
    measured: Tuple[Tuple[int, float, float], ...] = ()  # (devices, efficiency, samples/s)
    device: str = ""  # the series' device kind ("gpu", "cpu"; empty: not logged)
    #: a language model's configuration, as its base runs logged it (CNN: ddp, none, 0)
    parallel: str = "ddp"
    checkpointing: str = "none"
    seq: int = 0
    link_gaps: Tuple[str, ...] = ()  # the sweep's layouts that gave no fit, and why
    grad_accum: int = 1  # micro-batches per step (``batch`` is one micro-batch)


@dataclass(frozen=True)
class SeriesChoice:
    """A weak-scaling throughput series ``predict --from`` can take: its label, the spec
    variant of its base runs ('' when none) and its number of measured points."""

    label: str
    variant: str
    points: int


def campaign_series(analysis) -> List[SeriesChoice]:
    """The campaign's weak-scaling throughput series with a measured point, in order."""
    series, pts = analysis.series, analysis.points
    if not len(series) or not len(pts):
        return []
    out = []
    weak = _weak(series)
    for _, s in weak.iterrows():
        p = pts[(pts["series"] == s["series"]) & pts["throughput_gmean"].notna()]
        if len(p):
            group = str(p.sort_values("devices").iloc[0]["group"])
            variant = _run_field(analysis.runs, group, "variant")
            out.append(SeriesChoice(str(s["label"]), variant, len(p)))
    return out


def _run_field(runs: pd.DataFrame, group: str, col: str) -> str:
    """A group's value of a run column ('' when missing or not logged)."""
    if col not in runs or "group" not in runs:
        return ""
    vals = [v for v in runs.loc[runs["group"] == group, col] if not missing(v)]
    return str(vals[0]) if vals else ""


def campaign_inputs(
    analysis, data, calibration=None, label: Optional[str] = None
) -> Optional[CampaignInputs]:
    """The weak-scaling throughput series ``label`` of a campaign (its first when None): its
    per-device throughput at its smallest scale, its model, batch and (a language model) its
    parallel mode, checkpointing, sequence length and precision; the links fitted from the
    allreduce sweep (this campaign's or ``calibration``'s); its measured overlap when
    ``comm_s`` was logged."""
    from .analysis import allreduce_table

    sweep = (
        allreduce_table(calibration.runs, calibration.allreduce)
        if calibration is not None
        else analysis.allreduce
    )
    fits, gaps = fit_sweep(sweep) if len(sweep) else ([], [])
    series, pts = analysis.series, analysis.points
    if not len(series) or not len(pts):
        return None
    weak = _weak(series)
    for _, s in weak.iterrows():
        p = pts[(pts["series"] == s["series"]) & pts["throughput_gmean"].notna()]
        if not len(p) or (label is not None and str(s["label"]) != label):
            continue
        base = p.sort_values("devices").iloc[0]
        f, how = (None, "")
        if fits:
            inputs = _run_inputs(analysis.runs, data.ranks)
            params = _group_inputs(inputs, base["group"]).get("param_count", math.nan)
            if len(inputs) and _ok(params):
                f, how = _overlap(p, inputs, fits, float(params) * GRAD_BYTES_PER_PARAM)
        intra, inter = links_from_fits(fits) if fits else (None, None)
        if not any(f.nodes > 1 for f in fits):
            inter = None  # no layout across nodes swept: the network is the options' or assumed
        cluster = (data.manifest or {}).get("cluster") or {}
        group = str(base["group"])
        return CampaignInputs(
            str(s["label"]), str(s["model"]), _run_field(analysis.runs, group, "precision"),
            str(s.get("framework", "")), int(s["batch_size"]),
            float(base["throughput_gmean"]) / int(base["devices"]), int(base["devices"]),
            int(cluster.get("gpus_per_node") or 1), intra, inter, f, how,
            jitter_samples(analysis.runs, data, group),
            _half_width(base), _measured(p), _device(analysis.runs, group),
            **_lm_config(analysis.runs, group), link_gaps=tuple(gaps),
        )  # fmt: skip
    return None


def _lm_config(runs: pd.DataFrame, group: str) -> dict:
    """A group's language-model configuration (its runs' ``parallel``,
    ``activation_checkpointing``, ``seq_len`` and ``grad_accum``); a CNN's: ddp, none, 0, 1."""
    seq = _run_field(runs, group, "seq_len")
    accum = _run_field(runs, group, "grad_accum")
    return {
        "parallel": _run_field(runs, group, "parallel") or "ddp",
        "checkpointing": _run_field(runs, group, "activation_checkpointing") or "none",
        "seq": int(float(seq)) if seq else 0,
        "grad_accum": int(float(accum)) if accum else 1,
    }


def _device(runs: pd.DataFrame, group: str) -> str:
    """The device kind the group's runs logged ("gpu", "cpu"; empty when none or mixed)."""
    if "device" not in runs or "group" not in runs:
        return ""
    kinds = {str(v) for v in runs.loc[runs["group"] == group, "device"] if not missing(v)}
    return kinds.pop() if len(kinds) == 1 else ""


def jitter_samples(runs: pd.DataFrame, data, group: str) -> Tuple[float, ...]:
    """The measured step times of a group's complete runs, each over its rank's median: the
    draws of the synchronisation term (``costs.sync_fraction_empirical``). ``compute_s`` when
    logged (the rank's own work, without the wait for the others), else the step time."""
    ids = set(runs[(runs["group"] == group) & runs["complete"]]["run_id"])
    out: List[float] = []
    for rid in sorted(ids):
        try:
            st = data.steps(rid)
        except (OSError, ValueError, KeyError):
            return ()
        if not len(st) or not {"t_start", "t_end", "rank"} <= set(st.columns):
            continue
        if "phase" in st:
            st = st[st["phase"] != "warmup"]
        t = (
            st["compute_s"]
            if st["compute_s"].notna().all() and len(st)
            else st["t_end"] - st["t_start"]
        )
        for _, g in t.groupby(st["rank"]):
            med = float(g.median())
            if med > 0:
                out.extend(float(v) / med for v in g if v > 0)
    return tuple(out)


def _half_width(base) -> Optional[float]:
    """The base throughput's uncertainty: its 95 % interval as a factor either way of the
    geometric mean (:func:`costs.relative_half_width`)."""
    lo, hi = base.get("ci95_low"), base.get("ci95_high")
    if not (_ok(lo) and _ok(hi)) or float(lo) <= 0:
        return None
    return costs.relative_half_width(float(lo), float(hi))


def _measured(p: pd.DataFrame) -> Tuple[Tuple[int, float, float], ...]:
    return tuple(
        (int(r["devices"]), float(r["efficiency"]), float(r["throughput_gmean"]))
        for _, r in p.sort_values("devices").iterrows()
        if _ok(r["efficiency"])
    )
