"""Analytic FLOP counts of the benchmark models, for the analysis (login-node safe).

The counter lives in ``ddlbench.workloads.flops`` (standard library only) because the
workloads record it in their meta record on the compute nodes, where only the workloads are
frozen into the campaign; this module re-exports it. Counting rules: docs/mfu.md.
"""

from __future__ import annotations

from ddlbench.workloads.flops import (
    FLOPS_PER_MAC,
    TRAINING_FACTOR,
    Layer,
    forward_flops,
    forward_macs,
    model_layers,
    per_layer,
    summary,
    training_flops_per_sample,
)

__all__ = [
    "FLOPS_PER_MAC",
    "TRAINING_FACTOR",
    "Layer",
    "forward_flops",
    "forward_macs",
    "model_layers",
    "per_layer",
    "summary",
    "training_flops_per_sample",
]
