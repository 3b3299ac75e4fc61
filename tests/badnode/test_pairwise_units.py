"""Round and pair scheduling, and the naming of the slow node, as pure functions on more
nodes than the loopback cluster has."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest

from ddlbench.analyse.suspects import low_outliers, name_slow_nodes, straggler_evidence
from ddlbench.workloads.common.pairs import pair_rounds, round_count


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 8, 16])
def test_every_node_in_one_pair_per_round(n):
    nodes = [f"n{i:02d}" for i in range(n)]
    rounds = pair_rounds(nodes, "all")
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    for pairs in rounds:
        members = [x for p in pairs for x in p]
        assert len(members) == len(set(members))  # no node twice in a round
        assert len(pairs) == n // 2  # N/2 pairs at once
    every = {p for r in rounds for p in r}
    assert every == {tuple(sorted(p)) for p in itertools.combinations(nodes, 2)}
    logr = pair_rounds(nodes, "log")
    assert len(logr) == round_count(n, "log") == min(len(rounds), math.ceil(math.log2(n)))
    assert logr == rounds[: len(logr)]


def test_bad_rounds_word():
    with pytest.raises(ValueError):
        round_count(4, "some")


def _bandwidths(nodes, slow, rounds="log"):
    node_bw = {n: (5.0 if n == slow else 10.0 + 0.1 * i) for i, n in enumerate(nodes)}
    pair_bw = {}
    for pairs in pair_rounds(nodes, rounds):
        for a, b in pairs:
            pair_bw[(a, b)] = 4.0 if slow in (a, b) else 9.0 + 0.05 * len(pair_bw)
    return node_bw, pair_bw


@pytest.mark.parametrize("n", [4, 8, 16])
def test_the_node_common_to_the_slow_pairs_is_named(n):
    nodes = [f"n{i:02d}" for i in range(n)]
    node_bw, pair_bw = _bandwidths(nodes, "n03")
    found = name_slow_nodes({}, pair_bw)  # the pairs alone name it
    assert [x["node"] for x in found["named"]] == ["n03"]
    assert all("n03" in p for p in found["slow_pairs"])
    found = name_slow_nodes(node_bw, pair_bw)
    assert [x["node"] for x in found["named"]] == ["n03"]
    assert found["nodes"][-1]["node"] == "n03" and found["pairs"][-1]["busbw_gbps"] == 4.0


def test_two_nodes_one_pair_the_alone_test_decides():
    found = name_slow_nodes({"a": 10.0, "b": 5.0}, {("a", "b"): 4.0})
    assert [x["node"] for x in found["named"]] == ["b"]
    assert found["undecided"] == []
    # a slow pair with both nodes fine alone: the link, undecided between the two
    found = name_slow_nodes({"a": 10.0, "b": 9.9}, {("a", "b"): 4.0})
    assert found["named"] == [] and found["undecided"] == []  # one pair: nothing to compare


def test_threshold_is_robust():
    thr, low = low_outliers({"a": 10.0, "b": 10.2, "c": 9.9, "d": 10.1, "e": 6.0})
    assert low == ["e"] and 6.0 < thr < 9.9
    _, low = low_outliers({"a": 10.0, "b": 10.2, "c": 9.9, "d": 10.1, "e": 9.5})
    assert low == []  # within 20 % of the median: noise, not a bad node
    _, low = low_outliers({"a": 10.0, "b": 7.0})
    assert low == ["b"]


def test_straggler_evidence_per_host():
    df = pd.DataFrame(
        [
            {
                "run_id": "r1",
                "straggler": True,
                "suspect": True,
                "slowest_host": "n2",
                "straggler_index": 1.4,
                "straggler_metric": "compute",
                "slowest_rank": 3,
            },
            {  # above the threshold, but not by more than its noise: no evidence
                "run_id": "r3",
                "straggler": True,
                "suspect": False,
                "slowest_host": "n3",
                "straggler_index": 1.3,
                "straggler_metric": "compute",
                "slowest_rank": 5,
            },
            {
                "run_id": "r2",
                "straggler": False,
                "suspect": False,
                "slowest_host": "n1",
                "straggler_index": 1.01,
                "straggler_metric": "compute",
                "slowest_rank": 0,
            },
        ]
    )
    ev = straggler_evidence(df)
    assert list(ev) == ["n2"] and ev["n2"][0]["index"] == 1.4
