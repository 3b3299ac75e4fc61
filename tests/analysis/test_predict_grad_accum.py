"""``ddlbench predict`` with gradient accumulation (docs/scaling-model.md#ddlbench-predict):
a step is ``grad_accum`` micro-batches; the sharded modes reduce every micro-batch, DDP and
ZeRO-1 once per step; ``--from`` takes the campaign's count and refuses another."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from ddlbench.analyse import hierarchy, whatif
from ddlbench.cli.predict_checks import grad_accum_of
from ddlbench.errors import InputError
from tests.support.cli import invoke
from tests.support.synth import SynthRun, write_campaign

LINKS = ("--intra-busbw", "nvlink-h100", "--inter-busbw", "ndr", "--nics-per-node", "8")


def _case(parallel: str, accum: int) -> whatif.Case:
    return whatif.Case("llama3-8b", 1, 30000 / 8 / 2048, base_devices=8, parallel=parallel,
                       seq=2048, precision="bf16", grad_accum=accum)  # fmt: skip


def _topo(nodes: int) -> hierarchy.Topology:
    intra, inter = hierarchy.preset("nvlink-h100", "intra"), hierarchy.preset("ndr", "inter")
    return hierarchy.Topology(8, nodes, intra, inter, 8, hierarchy.base_latency_s())


@pytest.mark.parametrize("parallel", ["fsdp", "hsdp", "zero2"])
def test_sharded_modes_reduce_every_micro_batch(parallel):
    base = _topo(1)
    one = whatif.point(_case(parallel, 1), _topo(4), base)
    four = whatif.point(_case(parallel, 4), _topo(4), base)
    assert four["step_s"] == pytest.approx(4 * one["step_s"], rel=1e-6)
    assert four["comm_s"] == pytest.approx(4 * one["comm_s"], rel=1e-6)
    assert four["messages"] == 4 * one["messages"]
    assert four["efficiency"] == pytest.approx(one["efficiency"], rel=1e-6)


@pytest.mark.parametrize("parallel", ["ddp", "zero1"])
def test_replicated_modes_reduce_once_per_step(parallel):
    base = _topo(1)
    one = whatif.point(_case(parallel, 1), _topo(4), base)
    four = whatif.point(_case(parallel, 4), _topo(4), base)
    assert four["step_s"] == pytest.approx(4 * one["step_s"], rel=0.02)
    assert four["comm_s"] == pytest.approx(one["comm_s"], rel=1e-6)
    assert four["efficiency"] >= one["efficiency"]


def test_the_base_step_is_every_micro_batch():
    case = _case("fsdp", 3)
    assert whatif.step_samples(case) == 3
    measured, _ = whatif.base_floor(case, _topo(1))
    assert measured == pytest.approx(3 * 2048 / (30000 / 8))


def test_cli_grad_accum_in_the_table_the_json_and_the_memory():
    args = ["predict", "--model", "llama3-8b", "--seq", "2048", "--batch", "1",
            "--precision", "bf16", "--parallel", "fsdp", "--base-throughput", "30000",
            "--base-devices", "8", "--gpus-per-node", "8", "--nodes", "1,2", *LINKS]  # fmt: skip
    plain = json.loads(invoke([*args, "--json"]).stdout)
    res = invoke([*args, "--grad-accum", "4", "--json"])
    assert res.exit_code == 0, res.output
    four = json.loads(res.stdout)
    assert four["grad_accum"] == 4 and plain["grad_accum"] == 1
    assert four["points"][0]["step_s"] == pytest.approx(4 * plain["points"][0]["step_s"])
    assert four["points"][0]["memory_gib"] > plain["points"][0]["memory_gib"]  # its shards
    table = invoke([*args, "--grad-accum", "4"]).stdout
    assert "batch 1/device x 2048 tokens, 4 micro-batches per step" in table
    bad = invoke([*args, "--grad-accum", "0"])
    assert bad.exit_code == 2 and "--grad-accum must be positive, not 0" in bad.output


def test_from_a_campaign_takes_its_micro_batches_and_refuses_another(tmp_path):
    lm = {"seq_len": 64, "parallel": "fsdp", "grad_accum": 2, "activation_checkpointing": "none"}
    runs = [SynthRun(model="gpt-tiny", device="cpu", nodes=1, tasks_per_node=t, batch_size=4,
                     repeat=r, step_time=0.1, ran={"lm": lm, "tokens_per_sample": 64})
            for t in (1, 2) for r in range(2)]  # fmt: skip
    write_campaign(tmp_path, "accum", runs)
    common = ["predict", "--from", "accum", "--results", str(tmp_path), "--nodes", "1"]
    res = invoke([*common, "--gpus-per-node", "2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["grad_accum"] == 2
    bad = invoke([*common, "--gpus-per-node", "2", "--grad-accum", "1"])
    assert bad.exit_code == 2
    assert "took 2 micro-batch(es) per step" in bad.output


def test_grad_accum_of_a_campaign_series():
    camp = SimpleNamespace(grad_accum=4, label="s", batch=1)
    kw = {"grad_accum": None, "source": "c"}

    def positive(option, value):
        if value < 1:
            raise InputError(f"{option} must be positive")

    assert grad_accum_of(kw, camp, positive) == 4
    assert grad_accum_of(dict(kw, grad_accum=4), camp, positive) == 4
    assert grad_accum_of(kw, None, positive) == 1
    with pytest.raises(InputError, match="--grad-accum 2: series 's' of campaign c took 4"):
        grad_accum_of(dict(kw, grad_accum=2), camp, positive)
    assert replace(_case("ddp", 1), grad_accum=2).grad_accum == 2
