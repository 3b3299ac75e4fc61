"""Rounds of node pairs for the pairwise communication test (pure; Python 3.8 syntax).

The circle method of a round-robin tournament: every node is in one pair per round (one node
sits out a round when the count is odd), N/2 pairs run at once, and the N-1 rounds (``all``)
pair every node with every other once. ``log`` keeps the first ceil(log2 N) rounds: each node
then meets that many distinct partners, enough for a slow node to be the one common to the
slow pairs.
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

Pair = Tuple[str, str]


def round_count(n: int, rounds: str) -> int:
    if n < 2:
        return 0
    full = n - 1 if n % 2 == 0 else n
    if rounds == "all":
        return full
    if rounds == "log":
        return min(full, max(1, math.ceil(math.log2(n))))
    raise ValueError(f"pairwise rounds must be 'log' or 'all', not {rounds!r}")


def pair_rounds(nodes: Sequence[str], rounds: str = "all") -> List[List[Pair]]:
    """The rounds: each a list of disjoint pairs of ``nodes``."""
    names = list(nodes)
    if len(names) % 2:
        names.append("")  # the bye
    n = len(names)
    out: List[List[Pair]] = []
    for r in range(round_count(len(nodes), rounds)):
        order = [names[0]] + names[1:][r:] + names[1:][:r] if n > 1 else names
        pairs = []
        for i in range(n // 2):
            a, b = order[i], order[n - 1 - i]
            if a and b:
                pairs.append((a, b) if a < b else (b, a))
        out.append(pairs)
    return out
