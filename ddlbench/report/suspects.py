"""The report's "Suspected nodes" section: which node, and the evidence against it.

One table of suspects (node, kind of evidence, run, what was seen: hang, straggler, pairwise,
health; :func:`ddlbench.analyse.suspects.campaign_suspects`), then per run of the per-node and
pairwise tests the nodes and the pairs ranked by bandwidth, the outliers highlighted, with the
threshold stated. Hangs and failed health checks of runs on one node are no evidence against
it (nothing to compare with): the "Seen on one node" section lists them (:func:`seen_tables`).
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..analyse.suspects import THRESHOLD_TEXT, campaign_suspects, evidence_text
from ..collect.collector import CampaignData
from .table import Table


def _rows(entries: List[Dict[str, Any]]) -> List[List[str]]:
    return [
        [s["node"], e["kind"], str(e["run_id"]), evidence_text(e).split(": ", 1)[1]]
        for s in entries
        for e in s["evidence"]
    ]


def _suspects_table(suspects: List[Dict[str, Any]]) -> Table:
    rows = _rows(suspects)
    return Table(
        "Suspected nodes and the evidence",
        ["node", "evidence", "run", "what was seen"],
        rows,
        [False] * 4,
        note="hang: the ranks that never arrived (stack dumps beside the rank logs); straggler: "
        "the slowest rank of a run above the straggler threshold; pairwise: the node alone or "
        "its pairs below the outlier threshold; health: the pre-flight checks that failed.",
    )


def _pairwise_tables(run_id: str, found: Dict[str, Any]) -> List[Table]:
    slow_nodes = set(found["slow_alone"])
    slow_pairs = {tuple(p) for p in found["slow_pairs"]}
    nodes = Table(
        f"{run_id}: nodes alone, best first",
        ["node", "busbw GB/s"],
        [[n["node"], f"{n['busbw_gbps']:.3f}"] for n in found["nodes"]],
        [False, True],
        note=f"outlier threshold {found['node_threshold_gbps']:.3f} GB/s ({THRESHOLD_TEXT}); "
        f"named: {', '.join(x['node'] for x in found['named']) or 'none'}",
        flags=[n["node"] in slow_nodes for n in found["nodes"]],
    )
    pairs = Table(
        f"{run_id}: node pairs, best first",
        ["pair", "busbw GB/s"],
        [[" + ".join(p["pair"]), f"{p['busbw_gbps']:.3f}"] for p in found["pairs"]],
        [False, True],
        note=f"outlier threshold {found['pair_threshold_gbps']:.3f} GB/s",
        flags=[tuple(p["pair"]) in slow_pairs for p in found["pairs"]],
    )
    return [nodes, pairs]


def _seen_table(seen: List[Dict[str, Any]]) -> Table:
    return Table(
        "Seen on runs on one node",
        ["node", "evidence", "run", "what was seen"],
        _rows(seen),
        [False] * 4,
        note="hang: the ranks that never arrived (stack dumps beside the rank logs); health: the "
        "pre-flight checks that failed. Each of these runs ran on one node: there is no other "
        "node to compare with, so none is a suspect.",
    )


def suspect_tables(a: Any, data: CampaignData) -> Dict[str, List[Table]]:
    """The tables of the "Suspected nodes" section (``suspects``: none when nothing is
    suspected and no pairwise test ran) and of the "Seen on one node" one (``seen``)."""
    runs = data.runs
    run_ids = [str(r) for r in runs["run_id"]] if "run_id" in runs else []
    done = [str(r) for r in runs.loc[runs["complete"], "run_id"]] if "complete" in runs else []
    found = campaign_suspects(data.campaign_dir, run_ids, getattr(a, "stragglers", None), done)
    tables = [_suspects_table(found["suspects"])] if found["suspects"] else []
    for run_id, result in sorted(found["pairwise"].items()):
        tables += _pairwise_tables(run_id, result)
    seen = found["seen_on_one_node"]
    return {"suspects": tables, "seen": [_seen_table(seen)] if seen else []}
