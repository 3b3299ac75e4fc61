"""The scaling model against published multi-GPU tables (docs/scaling-model.md#validation).

``reference/published_scaling.csv`` holds each published point with its source and the inputs the
model gets: the model, the per-GPU batch, the measured single-GPU throughput, GPUs per node,
nodes, the interconnect presets (``reference/interconnects.yaml``, the same constants for every
table) and the framework's gradient bucket (DDP 25 MB, Horovod's 64 MB fusion buffer, 0: one
allreduce per tensor). Nothing is fitted to the tables.

Error of a point: predicted minus published efficiency, in efficiency points (efficiency is
``throughput(N) / (N x throughput(1))`` for both); the relative throughput error is given too.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Dict, List

from . import hierarchy, whatif

DATA = Path(__file__).parent / "reference" / "published_scaling.csv"
TARGET_MEAN_ABS = 0.10
TARGET_MAX_ABS = 0.20


def rows(path: Path = DATA) -> List[Dict[str, object]]:
    """Every published point with the model's prediction and its error."""
    out = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            g, k = int(r["gpus_per_node"]), int(r["nodes"])
            topo = hierarchy.Topology(
                g,
                k,
                hierarchy.preset(r["intra"], "intra"),
                hierarchy.preset(r["inter"], "inter"),
                int(r["nics_per_node"]),
                hierarchy.base_latency_s(),
            )
            case = whatif.Case(
                r["model"], int(r["batch_per_gpu"]), float(r["single_images_per_s"]),
                bucket_mb=float(r["bucket_mb"]),
                first_bucket_bytes=whatif.overlap.DDP_FIRST_BUCKET_BYTES
                if r["framework"] == "pytorch-ddp" else 0,
            )  # fmt: skip
            p = whatif.point(case, topo)
            n = g * k
            measured = float(r["images_per_s"]) / (n * float(r["single_images_per_s"]))
            out.append({
                **r,
                "devices": n,
                "measured_efficiency": measured,
                "predicted_efficiency": p["efficiency"],
                "error": p["efficiency"] - measured,
                "throughput_error": p["efficiency"] / measured - 1,
                "comm_s": p["comm_s"],
                "exposed_comm_s": p["exposed_comm_s"],
                "algorithm": p["algorithm"],
            })  # fmt: skip
    return out


def summary(points: List[Dict[str, object]]) -> Dict[str, Dict[str, float]]:
    """Per table: points, mean and largest absolute efficiency error."""
    out: Dict[str, Dict[str, float]] = {}
    for p in points:
        out.setdefault(str(p["table"]), {"points": 0, "sum": 0.0, "max_abs": 0.0})
        s = out[str(p["table"])]
        e = abs(float(p["error"]))  # type: ignore[arg-type]
        s["points"] += 1
        s["sum"] += e
        s["max_abs"] = max(s["max_abs"], e)
    for s in out.values():
        s["mean_abs"] = s.pop("sum") / s["points"]
    return out


def markdown(points: List[Dict[str, object]]) -> str:
    """The validation table of docs/scaling-model.md, one line per published point."""
    head = (
        "| table | system | model | precision | batch/GPU | GPUs/node x nodes | intra, inter "
        "| bucket MB | published E | predicted E | error (points) | throughput error |\n"
        "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for p in points:
        lines.append(
            f"| {p['table']} | {p['system']} | {p['model']} | {p['precision']} "
            f"| {p['batch_per_gpu']} | {p['gpus_per_node']} x {p['nodes']} "
            f"| {p['intra']}, {p['inter']} | {float(p['bucket_mb']):g} "  # type: ignore[arg-type]
            f"| {100 * float(p['measured_efficiency']):.1f} %"  # type: ignore[arg-type]
            f" | {100 * float(p['predicted_efficiency']):.1f} %"  # type: ignore[arg-type]
            f" | {100 * float(p['error']):+.1f}"  # type: ignore[arg-type]
            f" | {100 * float(p['throughput_error']):+.1f} % |"  # type: ignore[arg-type]
        )
    return head + "\n".join(lines) + "\n"
