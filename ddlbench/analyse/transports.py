"""The transport comparison: the same job over RDMA and over TCP (``network.transport``), the
measured throughput ratio tcp / rdma with its interval, beside the model's ratio for the
cluster's presets (docs/scaling-model.md#transport-comparison).

Measured: for each multi-node point that ran over both transports with everything else equal
(the scaling series' fields, the fixed batch, nodes and ranks per node), ``R = gmean(tcp) /
gmean(rdma)`` throughput, the ratio of the geometric means over repeats, with its 95 %
interval by :func:`~ddlbench.analyse.stats.ratio_interval` (Welch's t on the difference of the
mean logs): the same interval the verdicts use.

Model: :func:`~ddlbench.analyse.whatif.point` for the campaign's model and per-device batch,
based on the rdma series' smallest measured point, once with the profile's ``rdma`` preset
between nodes and once with its ``tcp`` preset (``network.presets`` of the cluster profile);
the ratio of the two efficiencies. Its interval divides the tcp prediction's ends by the rdma
prediction's opposite ends (each end from the presets' ranges and the jitter; the base
measurement's uncertainty, common to both, left out): conservative.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..values import missing
from .series import SERIES_FIELDS
from .stats import ratio_interval

#: the NCCL network each transport must show in ``nccl_net``
NCCL_NET = {"rdma": "IB", "tcp": "Socket"}
PRESET_KEYS = ("intra", "rdma", "tcp")


@dataclass
class TransportComparison:
    """One row per multi-node point measured over both transports, and what to say."""

    rows: pd.DataFrame
    presets: Optional[Dict[str, str]]
    notes: List[str] = field(default_factory=list)


def _pair_key(r: pd.Series) -> str:
    fixed = f"G{r['global_batch_size']}" if r.get("scaling") == "strong" else f"B{r['batch_size']}"
    words = [r.get(f) for f in SERIES_FIELDS if f != "transport"]
    return "|".join("" if missing(w) else str(w) for w in [*words, fixed])


def _nets(runs: pd.DataFrame, group: str) -> str:
    if "nccl_net" not in runs:
        return ""
    got = runs.loc[runs["group"] == group, "nccl_net"].dropna().astype(str).unique()
    return ",".join(sorted(got))


def _measured(c: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The pairs (same key, nodes, ranks per node; nodes > 1) and their measured ratio."""
    c = c[c["transport"].isin(list(NCCL_NET)) & (c["nodes"] > 1) & (c["mode"] != "allreduce")]
    c = c.copy()
    if not len(c):
        return pd.DataFrame()
    c["pair"] = [_pair_key(r) for _, r in c.iterrows()]
    on = ["pair", "nodes", "tasks_per_node"]
    rdma, tcp = (c[c["transport"] == t] for t in ("rdma", "tcp"))
    both = rdma.merge(tcp, on=on, suffixes=("_rdma", "_tcp"), how="inner")
    if not len(both):
        return both
    ratio, lo, hi = ratio_interval(
        *(both[f"throughput_{k}_tcp"] for k in ("log_mean", "log_sd")), both["repeats_tcp"],
        *(both[f"throughput_{k}_rdma"] for k in ("log_mean", "log_sd")), both["repeats_rdma"],
    )  # fmt: skip
    both["measured_ratio"], both["measured_low"], both["measured_high"] = ratio, lo, hi
    for t in NCCL_NET:
        both[f"nccl_net_{t}"] = [_nets(runs, g) for g in both[f"group_{t}"]]
    return both


def _off_transport(r: pd.Series) -> List[str]:
    """The transports whose runs NCCL ran over another network than asked for."""
    out = []
    for t, want in NCCL_NET.items():
        got = str(r.get(f"nccl_net_{t}") or "")
        if got and any(n.lower() != want.lower() for n in got.split(",")):
            out.append(f"{t} ran over NCCL network {got}")
    return out


def _base(c: pd.DataFrame, pair: str) -> Optional[pd.Series]:
    """The rdma configuration with the fewest devices of a pair's series: the model's base."""
    s = c[(c["pair"] == pair) & (c["transport"] == "rdma") & c["throughput_mean"].notna()]
    return None if not len(s) else s.sort_values("world_size").iloc[0]


def _model_ratio(base: pd.Series, row: pd.Series, presets: Dict[str, str]) -> Tuple[float, ...]:
    """(ratio, low, high) of the model's efficiencies over tcp and over rdma at ``row``."""
    from . import hierarchy, sharded, whatif

    n0, gpn = int(base["world_size"]), int(row["tasks_per_node"])
    case = whatif.Case(model=str(base["model"]), batch=int(base["batch_size"]),
                       single_throughput=float(base["throughput_mean"]) / n0,
                       base_devices=n0, base_uncertainty=0.0)  # fmt: skip
    intra = hierarchy.preset(presets["intra"], "intra")
    ends = {}
    for t in NCCL_NET:
        one = hierarchy.Topology(1, 1, intra, hierarchy.preset(presets[t], "inter"), 1,
                                 hierarchy.base_latency_s())  # fmt: skip
        b = replace(one, gpus_per_node=min(n0, gpn), nodes=sharded.ceil_nodes(n0, gpn))
        p = whatif.point(case, replace(one, gpus_per_node=gpn, nodes=int(row["nodes"])), b)
        ends[t] = (p["efficiency"], p["efficiency_low"], p["efficiency_high"])
    (m_t, lo_t, hi_t), (m_r, lo_r, hi_r) = ends["tcp"], ends["rdma"]
    return m_t / m_r, lo_t / hi_r, hi_t / lo_r


def _verdict(r: pd.Series) -> str:
    lo, hi = r.get("model_low"), r.get("model_high")
    if missing(lo) or missing(hi):
        return ""
    m_lo, m_hi = r["measured_low"], r["measured_high"]
    if missing(m_lo) or missing(m_hi):  # one repeat: the point estimate only
        m_lo = m_hi = r["measured_ratio"]
    if m_hi < lo:
        return "below"
    return "above" if m_lo > hi else "agrees"


def compare_transports(
    configs: pd.DataFrame, runs: pd.DataFrame, presets: Optional[Dict[str, str]]
) -> Optional[TransportComparison]:
    """The comparison of a campaign's configurations (None: no point ran over both)."""
    if "transport" not in configs or not len(configs):
        return None
    pairs = _measured(configs, runs)
    if not len(pairs):
        return None
    c = configs[configs["transport"].isin(list(NCCL_NET))].copy()
    c["pair"] = [_pair_key(r) for _, r in c.iterrows()]
    notes: List[str] = []
    model = [(np.nan, np.nan, np.nan)] * len(pairs)
    if presets:
        model = []
        for _, r in pairs.iterrows():
            base = _base(c, r["pair"])
            try:
                model.append(_model_ratio(base, r, presets) if base is not None else (np.nan,) * 3)
            except (KeyError, ValueError, ZeroDivisionError) as exc:  # a model it cannot size
                notes.append(f"No model ratio for {r['model_rdma']}: {exc}.")
                model.append((np.nan,) * 3)
    else:
        notes.append(
            "The cluster profile names no network.presets (intra, rdma, tcp): the model's "
            "ratio is not computed (docs/scaling-model.md#transport-comparison)."
        )
    pairs["model_ratio"], pairs["model_low"], pairs["model_high"] = map(list, zip(*model))
    pairs["verdict"] = [_verdict(r) for _, r in pairs.iterrows()]
    pairs["off_transport"] = ["; ".join(_off_transport(r)) for _, r in pairs.iterrows()]
    notes += _notes(pairs, presets)
    return TransportComparison(pairs.drop(columns=["pair"]), presets, notes)


def _notes(p: pd.DataFrame, presets: Optional[Dict[str, str]]) -> List[str]:
    out = []
    for _, r in p.iterrows():
        where = f"{r['framework_rdma']} at {int(r['nodes'])}x{int(r['tasks_per_node'])}"
        if r["off_transport"]:
            out.append(f"Transport comparison of {where} is not one: {r['off_transport']}.")
        if r["verdict"] in ("below", "above") and presets:
            out.append(
                f"Transport comparison of {where}: the measured tcp/rdma ratio "
                f"{r['measured_ratio']:.2f} is {r['verdict']} the model's "
                f"{r['model_low']:.2f}-{r['model_high']:.2f} for {presets['tcp']} against "
                f"{presets['rdma']}."
            )
    return out


def profile_presets(profile: Any) -> Optional[Dict[str, str]]:
    """``network.presets`` of a cluster profile as read from ``cluster.yaml`` (None: unset)."""
    net = (profile or {}).get("network") if isinstance(profile, dict) else None
    presets = (net or {}).get("presets") if isinstance(net, dict) else None
    if not isinstance(presets, dict) or not all(presets.get(k) for k in PRESET_KEYS):
        return None
    return {k: str(presets[k]) for k in PRESET_KEYS}
