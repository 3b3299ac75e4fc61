"""Slurm host lists: ``n[1-3,7],gpu01`` <-> ``["n1", "n2", "n3", "n7", "gpu01"]``.

Standard library only: the ``srun``/``scontrol`` shims of the local executor import it.
"""

from __future__ import annotations

import re
from typing import List, Sequence


def _split_top(text: str) -> List[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced brackets in host list {text!r}")
    parts.append("".join(cur))
    return [p for p in (s.strip() for s in parts) if p]


def _expand_one(word: str) -> List[str]:
    m = re.search(r"\[([^\[\]]*)\]", word)
    if not m:
        return [word]
    head, tail = word[: m.start()], word[m.end() :]
    out: List[str] = []
    for rng in m.group(1).split(","):
        rng = rng.strip()
        if "-" in rng:
            lo, hi = rng.split("-", 1)
            width = len(lo) if lo.startswith("0") else 0
            if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo):
                raise ValueError(f"bad range {rng!r} in host list {word!r}")
            nums = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
        else:
            if not rng.isdigit():
                raise ValueError(f"bad entry {rng!r} in host list {word!r}")
            nums = [rng]
        for n in nums:
            out.extend(_expand_one(head + n + tail))
    return out


def expand(text: str) -> List[str]:
    """Expand a Slurm host list (``n[01-03],x``) into names, in order."""
    names: List[str] = []
    for word in _split_top(text or ""):
        names.extend(_expand_one(word))
    return names


def compress(names: Sequence[str]) -> str:
    """The compact form Slurm prints (``n[1-3,7]``); keeps the given order of prefixes."""
    groups: dict = {}
    order: List[str] = []
    plain: List[str] = []
    for name in names:
        m = re.match(r"^(.*?)(\d+)$", name)
        if not m:
            key = ("", name)
            if key not in groups:
                groups[key] = None
                order.append(name)
                plain.append(name)
            continue
        prefix, num = m.group(1), m.group(2)
        padded = num.startswith("0") and len(num) > 1
        key = (prefix, len(num) if padded else 0)
        if not padded and (prefix, len(num)) in groups:
            key = (prefix, len(num))  # 10 continues 08, 09
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(num)
    out: List[str] = []
    for key in order:
        if isinstance(key, str):
            out.append(key)
            continue
        prefix, width = key
        nums = sorted(set(groups[key]), key=int)
        if len(nums) == 1:
            out.append(prefix + nums[0])
            continue
        ranges, start, prev = [], nums[0], nums[0]
        for n in nums[1:]:
            if int(n) == int(prev) + 1:
                prev = n
                continue
            ranges.append(start if start == prev else f"{start}-{prev}")
            start = prev = n
        ranges.append(start if start == prev else f"{start}-{prev}")
        out.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)
