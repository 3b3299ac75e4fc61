"""A transformer campaign through the real (loopback) Slurm cluster: gpt-tiny on Shakespeare at
two emulated nodes, FSDP against HSDP (the 2-D mesh replicates across the two nodes), collected
into tokens/s, the memory and start-up columns; HSDP against DDP (both with full checkpointing)
in the report's language-model comparisons."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.e2e import run_campaign
from tests.support.envs import require_envs

SPEC = """\
name: lm-slurm
model: gpt-tiny
data: text
frameworks:
  - {name: pytorch, backend: gloo}
seq_len: 64
batch_size: 2
steps: {warmup: 1, measure: 4, measure_seconds: 0}   # a fixed step count: the losses compare
optimizer: {name: adamw, lr: 0.001, weight_decay: 0.0}
lr_scaling: {rule: none}
scale: {points: [2x1]}
variants:
  - {label: fsdp, parallel: fsdp}
  - {label: hsdp, parallel: hsdp, activation_checkpointing: full}
  - {label: ddp, parallel: ddp, activation_checkpointing: full}
slurm: {time: "00:05:00"}
"""


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_transformer_campaign_on_slurm(tmp_path, slurm_cluster):
    require_envs("pytorch")
    from tests.support.cli import ddlbench

    campaign = run_campaign(SPEC, "localslurm", "lm-slurm", tmp_path)
    got = ddlbench("collect", "lm-slurm", results=campaign.parent)
    assert got.returncode == 0, got.stderr
    runs = pd.read_parquet(campaign / "data" / "runs.parquet").set_index("parallel")
    assert set(runs.index) == {"fsdp", "hsdp", "ddp"}
    assert (runs["status"] == "ok").all() and (runs["nodes"] == 2).all()
    for _, row in runs.iterrows():
        assert row["seq_len"] == 64
        assert row["tokens_per_s"] == pytest.approx(row["throughput"] * 64)
        assert row["tokens_per_s_per_device"] == pytest.approx(row["tokens_per_s"] / 2)
        assert row["flops_per_token_palm"] > row["flops_per_token_megatron"] > 0
        assert row["peak_rss_model_bytes"] > 0 and row["startup_build_shard_s"] > 0
        assert pd.isna(row["mfu_palm"])  # a CPU has no peak: no MFU, no flag
    assert runs.loc["hsdp", "activation_checkpointing"] == "full"
    # the same seed and data: the two sharding layouts give the same losses
    assert runs.loc["fsdp", "final_loss"] == pytest.approx(runs.loc["hsdp", "final_loss"], rel=1e-4)
    # the report compares HSDP with DDP at the same checkpointing (one repeat: no test)
    got = ddlbench("report", "lm-slurm", "--format", "md", "-q", results=campaign.parent)
    assert got.returncode == 0, got.stderr
    md = (campaign / "report" / "report.md").read_text()
    assert "hsdp vs ddp at pytorch gpt-tiny fp32, 2 ranks (2x1), seq 64, micro-batch 2, " in md
    table = pd.read_csv(campaign / "report" / "lm_comparisons.csv")
    assert list(zip(table["variant"], table["reference"], table["verdict"])) == [
        ("hsdp", "ddp", "inconclusive")
    ]
    assert "fewer than 2 complete repeats (hsdp: 1, ddp: 1)" in table["reason"][0]


TF_SPEC = """\
name: lm-tf-slurm
model: llama-tiny
data: text
frameworks:
  - {name: tensorflow, communication: ring}
seq_len: 32
batch_size: 2
grad_accum: 2
steps: {warmup: 1, measure: 4, measure_seconds: 0}
optimizer: {name: adamw, lr: 0.001, weight_decay: 0.0}
lr_scaling: {rule: none}
scale: {points: [2x1]}
slurm: {time: "00:05:00"}
"""


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_tensorflow_transformer_on_slurm(tmp_path, slurm_cluster):
    """llama-tiny under MultiWorkerMirroredStrategy across the two nodes (TF_CONFIG from Slurm),
    collected into the same transformer columns as PyTorch's."""
    require_envs("tensorflow")
    from tests.support.cli import ddlbench

    campaign = run_campaign(TF_SPEC, "localslurm", "lm-tf-slurm", tmp_path)
    got = ddlbench("collect", "lm-tf-slurm", results=campaign.parent)
    assert got.returncode == 0, got.stderr
    (row,) = pd.read_parquet(campaign / "data" / "runs.parquet").to_dict("records")
    assert row["framework"] == "tensorflow" and row["status"] == "ok" and row["nodes"] == 2
    assert row["parallel"] == "ddp" and row["grad_accum"] == 2 and row["seq_len"] == 32
    assert row["tokens_per_s"] == pytest.approx(row["throughput"] * 32)
    assert row["flops_per_token_palm"] > row["flops_per_token_megatron"] > 0
    assert row["peak_rss_model_bytes"] > 0 and row["startup_process_group_s"] > 0
