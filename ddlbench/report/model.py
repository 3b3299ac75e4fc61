"""The report's scaling-model section: the model built from the allreduce sweep
(:mod:`ddlbench.analyse.scaling_model`), its tables, notes and figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pandas as pd

from ..analyse.analysis import Analysis
from ..collect.collector import CampaignData, ensure_collected
from .captions import ALPHA_BETA_TITLE
from .format import fint, fms, fnum, fpct, fsig
from .table import Column, Table, col, make_table, text


def scaling_model(
    a: Analysis, data: CampaignData, calibration, run_states, say: Callable
) -> Tuple[Any, Optional[str]]:
    """The scaling model and ``None``, or ``None`` and why there is none, when the campaign
    has allreduce runs or a calibration campaign was named; ``(None, None)`` otherwise."""
    if calibration is None and not len(a.allreduce):
        return None, None  # no sweep to build it from (the model's modules are not imported)
    from ..analyse.scaling_model import NoModel, build

    cal = None
    if calibration is not None:
        say("collecting the calibration campaign")
        cal = ensure_collected(Path(calibration), run_states=run_states, progress=say)
    built = build(a, data, cal)
    if isinstance(built, NoModel):
        return None, built.reason
    return built, None


def _interval(r) -> str:
    lo, hi = r.get("predicted_efficiency_low"), r.get("predicted_efficiency_high")
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return ""
    return f"{fpct(lo)}-{fpct(hi)}"


def _verdict(r) -> str:
    inside = r.get("inside")
    if inside is None or pd.isna(inside):
        return ""
    return "inside" if bool(inside) else "OUTSIDE"


FITS: List[Column] = [
    col("ranks", "world_size", fint),
    col("nodes", "nodes", fint),
    Column("alpha (us)", lambda r: fnum(1e6 * r["alpha_s"], 1)),
    col("busbw (GB/s)", "busbw_gbps", fsig),
    col("sizes", "points", fint),
    col("fit rms error", "rms_rel_error", fpct),
]
PREDICTIONS: List[Column] = [
    text("series", "label"),
    col("N", "devices", fint),
    col("nodes", "nodes", fint),
    col("predicted step ms", "predicted_step_s", fms),
    col("allreduce ms", "predicted_allreduce_s", fms),
    col("predicted samples/s", "predicted_throughput", fnum),
    col("measured samples/s (geometric mean)", "throughput_gmean", fnum),
    col("error", "throughput_error", fpct),
    col("sync ms", "predicted_sync_s", fms),
    col("slowdown ms", "predicted_overlap_slowdown_s", fms),
    col("predicted efficiency", "predicted_efficiency", fpct),
    Column("interval", _interval),
    col("measured efficiency", "efficiency", fpct),
    Column("measured", _verdict),
]


def model_tables(model) -> List[Table]:
    fits = pd.DataFrame([f.__dict__ for f in model.fits])
    t1 = make_table(ALPHA_BETA_TITLE, FITS, fits)
    t2 = make_table(
        "Predicted vs measured",
        PREDICTIONS,
        model.predictions.sort_values(["label", "devices"]),
        flag=lambda r: not r["measured"],
    )
    return [t1, t2]


def model_notes(model) -> List[str]:
    if model is None:
        return []
    out = list(model.assumptions)
    out[:0] = disagreements(model)
    err = model.error_summary()
    if err:
        out.insert(
            0,
            f"Prediction error of the throughput on the {err['points']} measured points: mean "
            f"|error| {fpct(err['mean_abs'])}, largest {fpct(err['max_abs'])}.",
        )
    return out


def disagreements(model) -> List[str]:
    """One line per measured point outside its predicted interval, with the term that would
    explain it where the campaign's data say so."""
    p = model.predictions
    if not len(p) or "inside" not in p:
        return []
    out = []
    for _, r in p[p["measured"] & (p["inside"] == False)].iterrows():  # noqa: E712
        below = r["efficiency"] < r["predicted_efficiency_low"]
        what = "below" if below else "above"
        why = _why(r, model) if below else "the links or the base are better than the inputs"
        out.append(
            f"Measured point outside the model's interval: {r['label']} at N={int(r['devices'])} "
            f"measured {fpct(r['efficiency'])}, {what} the predicted "
            f"{fpct(r['predicted_efficiency_low'])}-{fpct(r['predicted_efficiency_high'])}: "
            f"{why}."
        )
    return out


def _why(r, model) -> str:
    waits = any("ranks wait for each other" in a for a in model.assumptions)
    missing = r["predicted_step_s"] * (r["predicted_efficiency"] / r["efficiency"] - 1)
    if waits:
        return (
            f"{fms(missing)} ms per step more than predicted; the logged exposed communication "
            "exceeds the allreduce model, so ranks wait for each other (contention or "
            "imbalance): synchronisation beyond the measured jitter"
        )
    return (
        f"{fms(missing)} ms per step more than predicted, in no term the campaign logs (input "
        "pipeline, framework overhead, devices that share compute)"
    )


def model_figure(model, out: Path) -> Dict[str, Path]:
    """The scaling model's predicted against measured figure, in ``out/plots``."""
    from . import plots

    return plots.save(plots.model_figure(model.predictions), out / "plots", "scaling_model")


# ------------------------------------------------------------------ transport comparison


def _range(lo_key: str, hi_key: str) -> Callable:
    def cell(r) -> str:
        lo, hi = r.get(lo_key), r.get(hi_key)
        return (
            "" if lo is None or hi is None or pd.isna(lo) or pd.isna(hi) else f"{lo:.2f}-{hi:.2f}"
        )

    return cell


TRANSPORTS: List[Column] = [
    text("framework", "framework_rdma"),
    col("nodes", "nodes", fint),
    col("ranks/node", "tasks_per_node", fint),
    col("rdma samples/s", "throughput_mean_rdma", fnum),
    col("tcp samples/s", "throughput_mean_tcp", fnum),
    Column("measured tcp/rdma", lambda r: f"{r['measured_ratio']:.2f}"),
    Column("95 % CI", _range("measured_low", "measured_high")),
    Column(
        "model tcp/rdma", lambda r: "" if pd.isna(r["model_ratio"]) else f"{r['model_ratio']:.2f}"
    ),
    Column("model interval", _range("model_low", "model_high")),
    text("measured vs model", "verdict"),
    Column(
        "NCCL used (rdma / tcp)",
        lambda r: f"{r['nccl_net_rdma'] or '-'} / {r['nccl_net_tcp'] or '-'}",
        False,
    ),
]


def campaign_transports(a: Analysis, data: CampaignData):
    """The campaign's transport comparison (None where no point ran over both transports),
    with the model's side from the profile's ``network.presets`` (its ``cluster.yaml``)."""
    if "transport" not in a.configs or a.configs["transport"].dropna().nunique() < 2:
        return None  # one transport: nothing to compare, no profile to read
    import yaml

    from ..analyse.transports import compare_transports, profile_presets
    from ..campaign.paths import CampaignPaths

    try:
        profile = yaml.safe_load(CampaignPaths.of(data.campaign_dir).cluster.read_text())
    except (OSError, yaml.YAMLError):
        profile = None
    return compare_transports(a.configs, a.runs, profile_presets(profile))


def transport_table(cmp) -> Table:
    presets = cmp.presets
    over = f": model {presets['tcp']} against {presets['rdma']}" if presets else ""
    return make_table(
        f"Transport comparison: the same job over TCP and over RDMA{over}",
        TRANSPORTS,
        cmp.rows.sort_values(["framework_rdma", "nodes"]),
        flag=lambda r: bool(r["off_transport"]) or r["verdict"] in ("below", "above"),
    )
