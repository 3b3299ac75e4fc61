"""The provenance's nodes: the hosts the ranks ran on, and the scheduler's node names where
they differ (emulated Slurm nodes on one host are two nodes to the suspects' rule)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from ddlbench.analyse.analysis import _scheduler_nodes
from ddlbench.report.narrative import provenance


def _nodes(prov: dict) -> str:
    return dict(provenance(SimpleNamespace(provenance=prov)))["nodes"]


def test_scheduler_names_are_shown_where_they_differ_from_the_hosts():
    runs = pd.DataFrame({"nodelist": ["node[1-2]", "node1", None]})
    assert _scheduler_nodes(runs) == ["node1", "node2"]
    two_on_one = {"hosts": ["vm"], "scheduler_nodes": ["node1", "node2"]}
    assert _nodes(two_on_one) == "2: node1, node2 (the scheduler's names; host(s) 1: vm)"
    same = {"hosts": ["gpu01", "gpu02"], "scheduler_nodes": ["gpu01", "gpu02"]}
    assert _nodes(same) == "2: gpu01, gpu02"
    assert _nodes({"hosts": ["vm"]}) == "1: vm"
