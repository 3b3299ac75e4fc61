"""Run columns from where the ranks ran: shared devices, CPU binding, NCCL's transport.

Read from the newest attempt folder of a run that has them:

- ``logs/attempt-<k>/placement/rank-<r>.json`` (format ``ddlbench-placement/1``, written by
  ``ddlbench.workloads.node.rank_start``): each rank's host, device identity (a GPU's UUID and PCI
  bus id) and the CPUs it was bound to;
- ``logs/attempt-<k>/nccl/rank-<r>.<host>.<pid>.log``: NCCL's INIT and NET debug lines of each
  rank of the first node (``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,NET``).

Two ranks of one node that recorded the same device make the run ``failed``: its figures are
not those of the planned scale. A multi-node run whose NCCL network is not the profile's
``network.nccl``, or whose channels on the first node leave an adapter of ``network.ib_hca``
unused, gets a note in ``problems`` (docs/launching.md#placement-and-transport).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pandas as pd

from ddlbench.campaign.paths import RunPaths

PLACEMENT_COLUMNS = [
    "shared_device",
    "cpu_binding",
    "nccl_net",
    "nccl_transports",
    "nccl_channel_nics",
]

_NET = re.compile(r"NCCL INFO Using network (?P<net>\S.*?)\s*$")
_NET_DEV = re.compile(r"NCCL INFO NET/(?P<net>[A-Za-z0-9_]+) : Using (?P<devs>.*?)(?: ; OOB .*)?$")
_VIA = re.compile(r"NCCL INFO Channel .* via (?P<via>\S+)")
# "Channel 01/0 : 0[1a000] -> 8[1a000] [send] via NET/IB/1/GDRDMA" (older: "Channel 01 : ...")
_NET_CHANNEL = re.compile(
    r"NCCL INFO Channel (?P<ch>\d+)(?:/\d+)? :.* via NET/[A-Za-z0-9_]+/(?P<dev>\d+)"
)
# one device of the "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE" list
_DEV_ITEM = re.compile(r"\[(?P<i>\d+)\](?P<name>[^\s/\[]+)")
_VERSION = re.compile(r"NCCL version (?P<v>\S+)")


def parse_nccl_log(text: str) -> Dict[str, Any]:
    """NCCL's INIT/NET lines -> ``{"version", "net", "devices", "transports"}``.

    ``net`` is the network NCCL chose for inter-node traffic (``IB``, ``Socket`` or a
    plugin's name); ``transports`` the distinct ``via ...`` of its channels, with the device
    index dropped (``NET/IB``, ``P2P/IPC``, ``SHM/direct``).
    """
    out: Dict[str, Any] = {"version": None, "net": None, "devices": None, "transports": []}
    seen: List[str] = []
    channels: Dict[int, set] = {}  # NET device index -> channels over it
    for line in text.splitlines():
        m = _VERSION.search(line)
        if m and out["version"] is None:
            out["version"] = m.group("v")
        m = _NET.search(line)
        if m:
            out["net"] = m.group("net")
        m = _NET_DEV.search(line)
        if m:
            out["devices"] = m.group("devs").strip()
            out["net"] = out["net"] or m.group("net")
        m = _NET_CHANNEL.search(line)
        if m:
            channels.setdefault(int(m.group("dev")), set()).add(int(m.group("ch")))
        m = _VIA.search(line)
        if m:
            via = "/".join(m.group("via").split("/")[:2])
            if via not in seen:
                seen.append(via)
    out["transports"] = sorted(seen)
    out["channel_nics"] = channel_nics(out["devices"], channels)
    return out


def channel_nics(devices: Optional[str], channels: Dict[int, set]) -> Dict[str, List[int]]:
    """NIC name -> the channels that ran over it, from the NET device list and the index each
    channel line names (``via NET/IB/1``); an index missing from the list keeps its number."""
    names = {int(m.group("i")): m.group("name") for m in _DEV_ITEM.finditer(devices or "")}
    out: Dict[str, List[int]] = {}
    for dev, chans in sorted(channels.items()):
        out.setdefault(names.get(dev, f"NET device {dev}"), []).extend(sorted(chans))
    return out


def format_channel_nics(nics: Dict[str, List[int]]) -> Optional[str]:
    """``mlx5_0:1 (0,2), mlx5_1:1 (1,3)``: each NIC and its channels (None when none)."""
    parts = [f"{nic} ({','.join(str(c) for c in chans)})" for nic, chans in nics.items()]
    return ", ".join(parts) or None


def shared_devices(records: List[Dict[str, Any]]) -> List[str]:
    """Ranks of one node that recorded the same device: one message per shared device."""
    seen: Dict[Tuple[str, str], List[int]] = {}
    for rec in records:
        dev = rec.get("device") or {}
        ident = dev.get("uuid") if isinstance(dev, dict) else None
        if not ident or str(ident).startswith("cpu:"):
            continue
        seen.setdefault((str(rec.get("host")), str(ident)), []).append(int(rec["rank"]))
    return [
        f"ranks {', '.join(map(str, sorted(ranks)))} on {host} shared device {ident}"
        for (host, ident), ranks in sorted(seen.items())
        if len(ranks) > 1
    ]


def _attempt_dir(run_dir: Path) -> Optional[Path]:
    """The newest attempt folder that holds placement records."""
    paths = RunPaths(run_dir)
    folders = [paths.attempt(k) for k in reversed(paths.attempts())]
    return next((f for f in folders if (f / "placement").is_dir()), None)


def _records(folder: Path) -> List[Dict[str, Any]]:
    out = []
    for path in sorted(folder.glob("placement/rank-*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and "rank" in rec:
            out.append(rec)
    return out


def _binding(records: List[Dict[str, Any]]) -> Optional[str]:
    """The policy, and every rank that was not bound as the policy says."""
    if not records:
        return None
    policies = sorted({str((r.get("binding") or {}).get("policy")) for r in records})
    odd = []
    for r in sorted(records, key=lambda r: int(r["rank"])):
        b = r.get("binding") or {}
        if str(b.get("how", "")).startswith("block"):
            odd.append(f"rank {r['rank']}: {b.get('how')}")
        cores, wanted = b.get("cores"), b.get("cores_per_task")
        if isinstance(cores, int) and isinstance(wanted, int) and 0 < cores < wanted:
            odd.append(f"rank {r['rank']}: {cores} of {wanted} cores")
    return "; ".join([",".join(policies), *odd])


def placement_fields(run_dir: Path, nodes: Any) -> Dict[str, Any]:
    """The :data:`PLACEMENT_COLUMNS` of one run, and its problems ``(failure, note)``."""
    out: Dict[str, Any] = dict.fromkeys(PLACEMENT_COLUMNS)
    out["_failure"] = out["_note"] = None
    folder = _attempt_dir(run_dir)
    if folder is None:
        return out
    records = _records(folder)
    shared = shared_devices(records)
    out["shared_device"] = "; ".join(shared) or None
    out["_failure"] = out["shared_device"]
    out["cpu_binding"] = _binding(records)
    multi = nodes is not None and not pd.isna(nodes) and int(nodes) > 1
    out.update(_nccl_fields(folder, records, multi))
    return out


def _log_rank(path: Path) -> int:
    """``rank-3.<host>.<pid>.log`` -> 3 (logs of other names last)."""
    m = re.match(r"^rank-(\d+)\.", path.name)
    return int(m.group(1)) if m else 1 << 30


def _expected(records: List[Dict[str, Any]], key: str) -> Optional[str]:
    return next((str(r[key]) for r in records if r.get(key)), None)


def unused_nics(expected: str, used: List[str]) -> List[str]:
    """The adapters of ``network.ib_hca`` (``mlx5_0:1`` or ``mlx5_0``) no channel used."""
    names = [n.strip() for n in expected.lstrip("=^").split(",") if n.strip()]
    return [n for n in names if not any(u == n or u.startswith(n + ":") for u in used)]


def _nccl_fields(folder: Path, records: List[Dict[str, Any]], multi: bool) -> Dict[str, Any]:
    """``nccl_net``, ``nccl_transports`` (rank 0's log), ``nccl_channel_nics`` (every logged
    rank's), and a note for a multi-node run off the expected network or NICs."""
    logs = sorted(folder.glob("nccl/*.log"), key=lambda p: (_log_rank(p), p.name))
    if not logs:
        return {}
    parsed = [(_log_rank(p), parse_nccl_log(p.read_text(errors="replace"))) for p in logs]
    first = parsed[0][1]
    per_rank = [f"rank {r}: {format_channel_nics(n['channel_nics'])}" for r, n in parsed
                if n["channel_nics"]]  # fmt: skip
    out: Dict[str, Any] = {
        "nccl_net": first["net"],
        "nccl_transports": ",".join(first["transports"]) or None,
        "nccl_channel_nics": "; ".join(per_rank) or None,
    }
    notes = []
    expected = _expected(records, "nccl_expected")
    if multi and expected and str(first["net"] or "").lower() != expected.lower():
        notes.append(f"NCCL used network {first['net'] or 'unknown'}, not {expected}")
    nics = _expected(records, "nccl_expected_nics")
    used = sorted({nic for _, n in parsed for nic in n["channel_nics"]})
    unused = unused_nics(nics, used) if nics and used else []
    if multi and unused:
        notes.append(
            f"NCCL's channels on the first node used {', '.join(used)}, not {', '.join(unused)} "
            "(network.ib_hca)"
        )
    if notes:
        out["_note"] = "; ".join(notes)
    return out


def add_placement_columns(runs: pd.DataFrame, campaign_dir: Path) -> pd.DataFrame:
    """``runs`` with :data:`PLACEMENT_COLUMNS`; a run whose ranks shared a device is failed."""
    rows = [
        placement_fields(campaign_dir / str(r["run_dir"]), r.get("nodes"))
        for r in runs.to_dict("records")
    ]
    out = runs.copy()
    for c in PLACEMENT_COLUMNS:
        out[c] = [r[c] for r in rows]
    for i, r in zip(out.index, rows):
        if r["_failure"]:
            out.at[i, "status"] = "failed"
            out.at[i, "complete"] = False
            out.at[i, "error_message"] = f"ranks shared a device: {r['_failure']}"
        note = r["_note"] or (r["_failure"] and f"ranks shared a device: {r['_failure']}")
        if note:
            old = out.at[i, "problems"]
            out.at[i, "problems"] = "; ".join(x for x in (old, note) if isinstance(x, str) and x)
    return out
