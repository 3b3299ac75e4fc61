"""Which node is slow: outliers of the per-node and pairwise communication tests (pure).

Threshold (stated with the results): the reference is the median of the upper half of the
values (those at or above the median), so that up to half of them may be slow: with one slow
node among four, half of the pairs are slow. A value is an outlier when it is below
``reference - max(K_MAD * 1.4826 * MAD, REL * reference)``, the MAD taken over the upper half
too: a statistically clear gap that is also at least ``REL`` of the reference. With two values
this is ``(1 - REL) * best``. A node is named when it is an outlier alone, or when more than
half of its pairs (at least two) are slow.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Dict, Hashable, List, Sequence, Tuple

from ddlbench.campaign import states as S
from ddlbench.campaign.evidence import health_failures, node_comm_records
from ddlbench.campaign.hangs import describe, hang_summary
from ddlbench.campaign.manifest import load_campaign
from ddlbench.campaign.paths import CampaignPaths
from ddlbench.spec.preflight_policy import preflight_policy

K_MAD = 3.0
REL = 0.2
#: why evidence from a run on one node names no suspect
ONE_NODE = "a run on one node: no other node to compare with, so not a suspect"
THRESHOLD_TEXT = (
    f"below r - max({K_MAD:g} x 1.4826 x MAD, {REL:.0%} of r), r and MAD over the upper half "
    "of the values (r: their median)"
)


def low_outliers(values: Dict[Hashable, float]) -> Tuple[float, List[Hashable]]:
    """``(threshold, keys below it)`` for bandwidth-like ``values`` (higher is better)."""
    vals = list(values.values())
    if not vals:
        return 0.0, []
    med = statistics.median(vals)
    upper = [v for v in vals if v >= med]
    ref = statistics.median(upper)
    mad = statistics.median(abs(v - ref) for v in upper)
    threshold = ref - max(K_MAD * 1.4826 * mad, REL * ref)
    return threshold, sorted((k for k, v in values.items() if v < threshold), key=str)


def name_slow_nodes(
    node_bw: Dict[str, float], pair_bw: Dict[Tuple[str, str], float]
) -> Dict[str, object]:
    """Rank nodes and pairs, flag the outliers, name the slow nodes with the evidence."""
    node_thr, slow_alone = low_outliers(node_bw)
    pair_thr, slow_pairs = low_outliers(pair_bw)
    in_pairs: Dict[str, List[Tuple[str, str]]] = {}
    for pair in pair_bw:
        for node in pair:
            in_pairs.setdefault(node, []).append(pair)
    named: Dict[str, List[str]] = {n: ["slow alone"] for n in slow_alone}
    undecided: List[str] = []
    for node, pairs in in_pairs.items():
        slow = [p for p in pairs if p in slow_pairs]
        if len(pairs) > 1 and len(slow) * 2 > len(pairs):
            named.setdefault(node, []).append(f"in {len(slow)} of its {len(pairs)} slow pairs")
    for pair in slow_pairs:
        if not any(n in named for n in pair):
            undecided.extend(pair)
    return {
        "nodes": _ranked(node_bw),
        "pairs": [{"pair": list(p), "busbw_gbps": v} for p, v in _ranked_items(pair_bw)],
        "node_threshold_gbps": node_thr,
        "pair_threshold_gbps": pair_thr,
        "slow_alone": slow_alone,
        "slow_pairs": [list(p) for p in slow_pairs],
        "named": [{"node": n, "why": w} for n, w in sorted(named.items())],
        "undecided": sorted(set(undecided)),
        "threshold": THRESHOLD_TEXT,
    }


def _ranked_items(values: Dict) -> List[Tuple]:
    return sorted(values.items(), key=lambda kv: (-kv[1], str(kv[0])))


def _ranked(values: Dict[str, float]) -> List[Dict[str, object]]:
    return [{"node": k, "busbw_gbps": v} for k, v in _ranked_items(values)]


def from_records(records: Sequence[Dict]) -> Dict[str, object]:
    """:func:`name_slow_nodes` of ``node_comm`` records (one per group and test)."""
    node_bw: Dict[str, float] = {}
    pair_bw: Dict[Tuple[str, str], float] = {}
    for rec in records:
        nodes = rec.get("nodes") or []
        bw = float(rec.get("busbw_gbps") or rec.get("algbw_gbps") or 0.0)
        if rec.get("test") == "node" and len(nodes) == 1:
            node_bw[str(nodes[0])] = bw
        elif rec.get("test") == "pair" and len(nodes) == 2:
            a, b = sorted(str(n) for n in nodes)
            pair_bw[(a, b)] = bw
    return name_slow_nodes(node_bw, pair_bw)


# ---------------------------------------------------------------- the campaign's suspects

#: one piece of evidence: the node it names, its kind, what was seen
Evidence = List[Tuple[str, str, Dict[str, Any]]]


def _add(suspects: Dict[str, Dict[str, Any]], node: str, kind: str, item: Dict) -> None:
    entry = suspects.setdefault(node, {"node": node, "evidence": []})
    entry["evidence"].append(dict(item, kind=kind))


def _hang_evidence(row: Dict[str, Any], run_dir: Path) -> Evidence:
    summary = hang_summary(run_dir)
    if summary is None:
        return []
    row["hang"] = summary
    row["reason"] = describe(summary)
    out: Evidence = []
    for h in summary["not_arrived"]:
        item = {"run_id": row["run_id"], "rank": h["rank"], "phase": h["phase"]}
        item.update(last_step=h["last_step"], stacks=h["stacks"])
        out.append((str(h["host"]), "hang", item))
    return out


def _pairwise_evidence(row: Dict[str, Any], run_dir: Path) -> Evidence:
    records = node_comm_records(run_dir)
    if not records:
        return []
    found = from_records(records)
    row["pairwise"] = found
    out: Evidence = []
    for named in found["named"]:
        item = {"run_id": row["run_id"], "why": named["why"], "slow_pairs": found["slow_pairs"]}
        out.append((str(named["node"]), "pairwise", item))
    return out


def _health_evidence(row: Dict[str, Any], run_dir: Path) -> Evidence:
    bad = health_failures(run_dir)
    if bad:
        row["bad_nodes"] = bad
    return [
        (
            b["node"],
            "health",
            {"run_id": row["run_id"], "checks": [c.get("check") for c in b["failed"]]},
        )
        for b in bad
    ]


def spans_nodes(planned_nodes: Any, row: Dict[str, Any], evidence: Evidence) -> bool:
    """Whether a run ran on more than one node: planned for more than one (Slurm allocates
    them all), its scheduler's node list names more than one, or its evidence does (the
    Slurm nodes of its ranks' hang records, its failed health checks). Evidence from a run on
    one node names no suspect: there is no other node to compare with."""
    from ddlbench.execute.hostlist import expand

    nodes = {node for node, _kind, _item in evidence}
    hang = row.get("hang") or {}
    nodes.update(str(h.get("host")) for h in hang.get("ranks", []) + hang.get("no_record", []))
    nodes.update(expand(str(row.get("nodelist") or "")))
    nodes.discard("None")
    planned = planned_nodes if isinstance(planned_nodes, int) else 1
    return max(planned, len(nodes)) > 1


def _file(evidence: Evidence, spans: bool, suspects: Dict, seen: Dict) -> None:
    """Evidence of a run on several nodes names suspects; on one node it is only seen."""
    for node, kind, item in evidence:
        _add(suspects if spans else seen, node, kind, item)


def _evidence_sources(campaign_dir: Path) -> Tuple[set, bool, Dict[str, Any]]:
    """Which runs can hold evidence, from the manifest alone, so that ``status`` reads no rank
    log or pre-flight folder of a run that cannot have any: the ``mode: allreduce`` runs of a
    spec with ``allreduce.pairwise``, and the pre-flight reports only when its policy is on;
    and the planned nodes of every run."""
    raw = load_campaign(campaign_dir).raw
    spec, cluster = raw.get("spec") or {}, raw.get("cluster") or {}
    pairwise = set()
    if (spec.get("allreduce") or {}).get("pairwise"):
        pairwise = {str(r["run_id"]) for r in raw["runs"] if r.get("mode") == "allreduce"}
    planned = {str(r["run_id"]): r.get("nodes") for r in raw.get("runs", [])}
    return pairwise, preflight_policy(cluster.get("preflight")) != "off", planned


def _sorted(found: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    return sorted(found.values(), key=lambda s: s["node"])


def annotate_status(campaign_dir: Path, status: Dict[str, Any]) -> Dict[str, Any]:
    """Add ``hang``, ``pairwise`` and ``bad_nodes`` to the rows of ``status`` (a
    ``campaign_status`` dict), the campaign's ``suspects`` (one entry per node with every
    piece of evidence against it: hang, pairwise, health, from runs on more than one node) and
    ``seen_on_one_node`` (the same for runs on one node: what was seen there, no suspect)."""
    paths = CampaignPaths.of(campaign_dir)
    pairwise, health, planned = _evidence_sources(campaign_dir)
    suspects: Dict[str, Dict[str, Any]] = {}
    seen: Dict[str, Dict[str, Any]] = {}
    for row in status.get("runs", []):
        if row.get("state") == S.NOT_SUBMITTED:
            continue
        run_dir = paths.run_dir(row["run_id"])
        evidence: Evidence = []
        if row.get("state") in (S.HUNG, S.FAILED):
            evidence += _hang_evidence(row, run_dir)
        if row.get("state") == S.COMPLETED and row["run_id"] in pairwise:
            evidence += _pairwise_evidence(row, run_dir)
        if health:
            evidence += _health_evidence(row, run_dir)
        _file(evidence, spans_nodes(planned.get(row["run_id"]), row, evidence), suspects, seen)
    status["suspects"] = _sorted(suspects)
    status["seen_on_one_node"] = _sorted(seen)
    return status


def evidence_text(e: Dict[str, Any]) -> str:
    if e["kind"] == "hang":
        return f"{e['run_id']}: rank {e['rank']} never arrived ({e['phase']})"
    if e["kind"] == "pairwise":
        return f"{e['run_id']}: {'; '.join(e['why'])}"
    if e["kind"] == "straggler":
        what = "compute time" if e["metric"] == "compute" else "step time"
        noise = e.get("noise")
        beyond = f", step-to-step noise {noise:.0%}" if isinstance(noise, float) else ""
        return f"{e['run_id']}: slowest rank, straggler index {e['index']:.3g} (by {what}{beyond})"
    return f"{e['run_id']}: health check failed ({', '.join(map(str, e['checks']))})"


def suspects_lines(
    suspects: Sequence[Dict[str, Any]], seen: Sequence[Dict[str, Any]] = ()
) -> List[str]:
    """One text line per suspected node, then one per node of a one-node run with evidence."""
    lines = [
        f"suspect node {s['node']}: " + "; ".join(evidence_text(e) for e in s["evidence"])
        for s in suspects
    ]
    return lines + [
        f"seen on node {s['node']} ({ONE_NODE}): "
        + "; ".join(evidence_text(e) for e in s["evidence"])
        for s in seen
    ]


def straggler_evidence(stragglers: Any) -> Dict[str, List[Dict[str, Any]]]:
    """host -> the runs whose slowest rank ran there and whose straggler index is evidence
    against its node (``suspect`` of the straggler table: more than one node, and the index
    above the threshold by more than the run's step-to-step noise), with the index (the
    compute-time one where logged), its metric and that noise."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    if stragglers is None or not len(stragglers) or "slowest_host" not in stragglers:
        return out
    for r in stragglers.to_dict("records"):
        host = r.get("slowest_host")
        if not _true(r.get("suspect")) or not isinstance(host, str) or not host:
            continue
        item = {"run_id": r["run_id"], "index": float(r["straggler_index"])}
        item.update(metric=r.get("straggler_metric"), rank=r.get("slowest_rank"))
        item.update(noise=r.get("straggler_noise"))
        out.setdefault(host, []).append(item)
    return out


def _true(value: Any) -> bool:
    """True for ``True`` and numpy's true only (not for NaN or a missing value)."""
    return str(value) == "True"


def campaign_suspects(
    campaign_dir: Path, run_ids: Sequence[str], stragglers: Any = None, complete: Any = ()
) -> Dict[str, Any]:
    """Every suspected node of the campaign's runs with its evidence (hang, straggler,
    pairwise, health), what hang and health evidence saw on runs on one node (no suspects,
    :func:`spans_nodes`), and the pairwise results per run:
    ``{"suspects", "seen_on_one_node", "pairwise"}``.

    Rank logs and pre-flight folders are read only where evidence can be (as in
    :func:`annotate_status`): hang records in runs not in ``complete`` (a fired watchdog ends
    its rank before the summary), pairwise records in the pairwise allreduce runs, pre-flight
    reports when the profile's pre-flight is on."""
    paths = CampaignPaths.of(campaign_dir)
    pairwise_runs, health, planned = _evidence_sources(campaign_dir)
    done = set(map(str, complete))
    suspects: Dict[str, Dict[str, Any]] = {}
    seen: Dict[str, Dict[str, Any]] = {}
    pairwise: Dict[str, Dict[str, Any]] = {}
    for run_id in run_ids:
        row: Dict[str, Any] = {"run_id": run_id}
        run_dir = paths.run_dir(run_id)
        evidence: Evidence = []
        if run_id not in done:
            evidence += _hang_evidence(row, run_dir)
        if run_id in pairwise_runs:
            evidence += _pairwise_evidence(row, run_dir)
        if "pairwise" in row:
            pairwise[run_id] = row["pairwise"]
        if health:
            evidence += _health_evidence(row, run_dir)
        _file(evidence, spans_nodes(planned.get(run_id), row, evidence), suspects, seen)
    for host, items in straggler_evidence(stragglers).items():
        for item in items:
            _add(suspects, host, "straggler", item)
    return {
        "suspects": _sorted(suspects),
        "seen_on_one_node": _sorted(seen),
        "pairwise": pairwise,
    }
