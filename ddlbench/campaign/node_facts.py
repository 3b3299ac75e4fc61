"""The nodes' facts of a campaign (``provenance/node-<host>.json`` of every run), summed up
for the report's provenance table: CPU and NUMA layout, the NCCL the runs loaded, GPU-to-GPU
links, RDMA adapters and the network interfaces in use. Nodes with the same facts share one
line; an item no node could read says why. Standard library only.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

from ddlbench.campaign.paths import CampaignPaths

ITEMS = ("cpu", "nccl", "gpu_links", "network")


def read_node_facts(campaign_dir: Path) -> Dict[str, Dict[str, Any]]:
    """host -> facts, over every run (a later run's file replaces an earlier one's)."""
    out: Dict[str, Dict[str, Any]] = {}
    for run in CampaignPaths.of(campaign_dir).run_folders():
        for path in run.node_facts():
            try:
                facts = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(facts, dict):
                out[str(facts.get("host") or path.stem[len("node-") :])] = facts
    return out


def _absent(value: Any) -> Optional[str]:
    return value.get("absent") if isinstance(value, dict) and "absent" in value else None


def cpu_text(facts: Dict[str, Any]) -> str:
    cpu = facts.get("cpu") or {}
    why = _absent(cpu)
    if why:
        return f"absent ({why})"
    numa = cpu.get("numa")
    layout = (
        f"absent ({_absent(numa)})"
        if _absent(numa)
        else ", ".join(f"node {n['node']}: {n['n_cpus']} CPUs, {n['mem_gib']} GiB" for n in numa)
    )
    return f"{cpu.get('model')} x {cpu.get('logical_cpus')} logical CPUs; NUMA {layout}"


def nccl_text(facts: Dict[str, Any]) -> str:
    nccl = facts.get("nccl") or {}
    why = _absent(nccl)
    return f"absent ({why})" if why else f"NCCL {nccl.get('version')} ({nccl.get('library')})"


def links_text(facts: Dict[str, Any]) -> str:
    links = facts.get("gpu_links") or {}
    why = _absent(links)
    if why:
        return f"absent ({why})"
    kinds = Counter(c for row in links.get("matrix", []) for c in row if c != "X")
    gpus = links.get("gpus")
    if not kinds:  # one GPU: no pair to link
        return f"{gpus} GPU{'' if gpus == 1 else 's'}; no GPU pairs"
    return f"{gpus} GPUs; pairs: " + ", ".join(f"{k} x{n}" for k, n in kinds.items())


def network_text(facts: Dict[str, Any]) -> str:
    ib, nics = facts.get("infiniband"), facts.get("interfaces")
    if _absent(ib):
        rdma = "no RDMA adapter"
    else:
        ports = [
            f"{d['device']}/{p['port']} {p.get('link_layer')} {p.get('rate')} {p.get('state')}"
            for d in ib
            for p in d.get("ports", [])
        ]
        rdma = ", ".join(ports) or "RDMA adapters without ports"
    if _absent(nics):
        return f"{rdma}; interfaces absent ({_absent(nics)})"
    used = [
        n["name"]
        + (f" {n['speed_mbps']} Mb/s" if n.get("speed_mbps") else "")
        + (" (default route)" if n.get("default_route") else "")
        + (" (NCCL_SOCKET_IFNAME)" if n.get("nccl_socket_ifname") else "")
        for n in nics
    ]
    return f"{rdma}; interfaces {', '.join(used)}"


TEXTS = {"cpu": cpu_text, "nccl": nccl_text, "gpu_links": links_text, "network": network_text}


def summarise(facts_by_host: Dict[str, Dict[str, Any]]) -> Dict[str, str]:
    """item -> ``host, host: text; host: text`` (hosts grouped by equal text); ``-`` when no
    node wrote its facts."""
    out: Dict[str, str] = {}
    for item in ITEMS:
        groups: Dict[str, List[str]] = {}
        for host in sorted(facts_by_host):
            groups.setdefault(TEXTS[item](facts_by_host[host]), []).append(host)
        if len(groups) == 1 and groups:
            ((text, _hosts),) = groups.items()
            out[item] = text  # the same on every node
        else:
            out[item] = "; ".join(f"{', '.join(h)}: {t}" for t, h in groups.items()) or "-"
    return out


def node_summary(campaign_dir: Path) -> Dict[str, str]:
    return summarise(read_node_facts(campaign_dir))
