"""A transformer series as ``predict --from`` reads it from a campaign, for the tests of
``predict``'s inputs and refusals."""

from __future__ import annotations

from ddlbench.analyse.scaling_model import CampaignInputs


def lm_campaign(**kw) -> CampaignInputs:
    """A gpt-tiny series as ``campaign_inputs`` reads it: seq 128, fsdp, bf16, 2 CPU ranks
    measured at 6.49 samples/s together (831 tokens/s)."""
    base = dict(label="pytorch fsdp ckpt none", model="gpt-tiny", precision="bf16",
                framework="pytorch", batch=4, single_throughput=6.49 / 2, base_devices=2,
                gpus_per_node=2, intra=None, inter=None, overlap_fraction=None,
                overlap_source="", measured=((2, 1.0, 6.49),), parallel="fsdp",
                checkpointing="none", seq=128)  # fmt: skip
    return CampaignInputs(**{**base, **kw})
