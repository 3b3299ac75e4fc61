"""Model FLOP utilisation of the transformer language models under each named convention
(docs/mfu.md#language-models): the FLOPs per token of ``workloads/flops_lm.py`` times the tokens
per second of one device, over the device's dense peak for the precision that ran.

A value above 100 % cannot be a measurement: either the convention over-counts (causal attention
counted in full at long sequences) or the peak is wrong (another device's, or a sparse one). It
is never returned as a result: the value is None and ``mfu_flag`` says which and why.

The achieved TFLOP/s per device (:func:`lm_tflops`) needs no peak, so a CPU run has it too; the
report shows PaLM's, the convention of the MFU usually quoted.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional

from ddlbench.workloads.flops_lm import CONVENTIONS

#: the run-table column of each convention
MFU_COLUMN = {"palm": "mfu_palm", "megatron": "mfu_megatron", "hfu": "hfu"}


#: the convention of the report's achieved TFLOP/s per device of a transformer run
TFLOPS_CONVENTION = "palm"


def lm_tflops(tokens_per_s_per_device: Optional[float], flops_per_token: Any) -> Optional[float]:
    """Achieved TFLOP/s of one device: tokens/s per device x FLOPs per token / 1e12 (None when
    either is unknown or not a positive number)."""
    try:
        tokens, flops = float(tokens_per_s_per_device), float(flops_per_token)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(tokens) and math.isfinite(flops)) or tokens <= 0 or flops <= 0:
        return None
    return tokens * flops / 1e12


def lm_utilisation(
    tokens_per_s_per_device: Optional[float],
    flops_per_token: Optional[Mapping[str, Any]],
    peak_tflops: Optional[float],
) -> Dict[str, Any]:
    """``{mfu_palm, mfu_megatron, hfu}`` as fractions (None when unknown or impossible) and
    ``mfu_flag``: the conventions that came out above 100 %, in words (else None)."""
    out: Dict[str, Any] = {MFU_COLUMN[c]: None for c in CONVENTIONS}
    out["mfu_flag"] = None
    if not tokens_per_s_per_device or not flops_per_token or not peak_tflops:
        return out
    over = []
    for convention in CONVENTIONS:
        achieved = lm_tflops(tokens_per_s_per_device, flops_per_token.get(convention))
        if achieved is None:
            continue
        value = achieved / peak_tflops
        if value > 1.0:
            over.append(f"{convention} {100 * value:.0f} %")
        else:
            out[MFU_COLUMN[convention]] = value
    if over:
        out["mfu_flag"] = (
            f"above 100 % ({', '.join(over)}) of a {peak_tflops:g} TFLOP/s peak: the FLOP "
            "convention over-counts or the peak is not this device's dense peak for the "
            "precision that ran; not a result"
        )
    return out
