"""``ddlbench predict``: what it takes from a campaign's series (a language model's sequence
length, parallel mode, checkpointing and precision; one series of several), the bytes each
sharded mode reduces, and the bad input it refuses (docs/scaling-model.md)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from ddlbench.analyse import hierarchy, sharded, validation, whatif
from ddlbench.analyse.scaling_model import campaign_inputs, campaign_series
from tests.support.cli import invoke
from tests.support.lm_inputs import lm_campaign as _lm_campaign
from tests.support.synth import SynthRun, write_campaign

LM = ["predict", "--model", "mpt-13b", "--seq", "2048", "--batch", "2", "--precision", "bf16",
      "--base-throughput", "30000", "--base-devices", "8", "--gpus-per-node", "8",
      "--intra-busbw", "nvlink-h100", "--inter-busbw", "ndr", "--nics-per-node", "8"]  # fmt: skip


@pytest.fixture
def lm_from(monkeypatch):
    from ddlbench.cli import cmd_predict

    camp = _lm_campaign()
    monkeypatch.setattr(cmd_predict, "_from_campaign", lambda kw: camp)
    return ["predict", "--from", "lm", "--nodes", "1,2"]


def test_from_a_language_model_series_predicts_its_own_configuration(lm_from):
    res = invoke(lm_from + ["--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # the series' sequence length, not the shape's position table (256 for gpt-tiny)
    assert out["seq"] == 128 and out["base_throughput"] == pytest.approx(6.49 * 128)
    assert (out["parallel"], out["precision"], out["series"]) == ("fsdp", "bf16", camp_label())
    # the measured points in the table's unit: tokens/s
    (m,) = out["measured"]
    assert m["measured_throughput"] == pytest.approx(out["points"][0]["throughput"])
    text = invoke(lm_from)
    assert text.exit_code == 0, text.output
    head = text.stdout.splitlines()[0]
    assert "batch 4/device x 128 tokens, 2 device(s) 831 tokens/s" in head, head
    assert "(fsdp)" in head


def camp_label() -> str:
    return _lm_campaign().label


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--parallel", "ddp"], "--parallel ddp: series 'pytorch fsdp ckpt none'"),
        (["--seq", "256"], "--seq 256: series"),
        (["--precision", "fp32"], "ran bf16"),
        (["--activation-checkpointing", "full"], "ran none"),
    ],
)
def test_an_option_that_contradicts_the_campaign_series_is_refused(lm_from, extra, says):
    res = invoke(lm_from + extra)
    assert res.exit_code == 2, res.output
    assert says in res.stderr and "--series" in res.stderr and "Traceback" not in res.output


def test_another_batch_than_the_campaign_measured_is_refused(lm_from):
    # its throughput was measured at batch 4: no base for batch 8 (test_predict_refusals.py)
    res = invoke(lm_from + ["--batch", "8", "--json"])
    assert res.exit_code == 2 and "measured its throughput at batch 4/device" in res.stderr


def _analysis(rows) -> SimpleNamespace:
    """An analysis of series each measured at 2 and 4 devices: ``rows`` of (label, variant,
    parallel, checkpointing, seq_len)."""
    series, points, runs = [], [], []
    for i, (label, variant, parallel, ckpt, seq) in enumerate(rows):
        sid = f"s{i}"
        series.append(dict(series=sid, label=label, mode="throughput", scaling="weak",
                           model="gpt-tiny", framework="pytorch", batch_size=4))  # fmt: skip
        for n in (2, 4):
            g = f"{sid}-n{n}"
            points.append(dict(series=sid, devices=n, nodes=1, group=g, efficiency=4 / (2 + n),
                               throughput_gmean=3.0 * n * 4 / (2 + n) * (i + 1),
                               ci95_low=math.nan, ci95_high=math.nan))  # fmt: skip
            runs.append(dict(run_id=g, group=g, complete=False, variant=variant, parallel=parallel,
                             activation_checkpointing=ckpt, seq_len=float(seq),
                             precision="bf16"))  # fmt: skip
    return SimpleNamespace(series=pd.DataFrame(series), points=pd.DataFrame(points),
                           runs=pd.DataFrame(runs), allreduce=pd.DataFrame())  # fmt: skip


def test_campaign_inputs_take_the_chosen_series_and_its_configuration():
    a = _analysis([("pytorch ddp seq 128", "ddp", "ddp", "none", 128),
                   ("pytorch fsdp seq 512", "fsdp-long", "fsdp", "full", 512)])  # fmt: skip
    data = SimpleNamespace(manifest={"cluster": {"gpus_per_node": 4}}, ranks=pd.DataFrame())
    assert [(c.label, c.variant, c.points) for c in campaign_series(a)] == [
        ("pytorch ddp seq 128", "ddp", 2), ("pytorch fsdp seq 512", "fsdp-long", 2)
    ]  # fmt: skip
    c = campaign_inputs(a, data, label="pytorch fsdp seq 512")
    assert (c.parallel, c.checkpointing, c.seq, c.precision) == ("fsdp", "full", 512, "bf16")
    # only that series' points: its own base (6 samples/s per device) and its 4 devices
    assert c.single_throughput == pytest.approx(6.0) and [m[0] for m in c.measured] == [2, 4]
    first = campaign_inputs(a, data)
    assert (first.parallel, first.seq, first.single_throughput) == ("ddp", 128, 3.0)


def test_a_campaign_of_several_series_asks_which(results):
    runs = [SynthRun(fw, nodes=1, tasks_per_node=tp, repeat=r)
            for fw in ("pytorch", "horovod") for tp in (1, 2) for r in range(2)]  # fmt: skip
    write_campaign(results, "two", runs)
    args = ["predict", "--from", "two", "--results", results, "--nodes", "1", "--json"]
    res = invoke(args)
    assert res.exit_code == 2, res.output
    assert "holds 2 weak-scaling series" in res.stderr and "--series" in res.stderr
    assert "'horovod'" in res.stderr and "'pytorch'" in res.stderr
    assert "Traceback" not in res.output
    res = invoke(args + ["--series", "horovod"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["series"] == "horovod" and out["bucket_mb"] == 64.0  # Horovod's fusion
    bad = invoke(args + ["--series", "horovd"])
    assert bad.exit_code == 2 and "did you mean 'horovod'" in bad.stderr
    assert (
        invoke(
            [
                "predict",
                "--model",
                "resnet50",
                "--batch",
                "8",
                "--single-device-throughput",
                "100",
                "--series",
                "x",
            ]
        ).exit_code
        == 2
    )


def test_points_below_the_base_are_refused_and_left_out_of_the_default_list():
    args = ["predict", "--model", "mpt-13b", "--batch", "2", "--base-throughput", "30000",
            "--base-devices", "16", "--gpus-per-node", "8"]  # fmt: skip
    res = invoke(args + ["--nodes", "1,2,4"])
    assert res.exit_code == 2 and "--nodes 1: 8 devices, fewer than the base's 16" in res.stderr
    out = json.loads(invoke(args + ["--json"]).stdout)
    assert [p["devices"] for p in out["points"]][:3] == [16, 32, 64]
    assert all(p["efficiency"] <= 1.0 for p in out["points"])


@pytest.mark.parametrize(
    "args, says",
    [
        (["--model", "mpt-13b", "--gpus-per-node", "0"], "--gpus-per-node must be positive, not 0"),
        (["--model", "mpt-13b", "--batch", "0"], "--batch must be positive, not 0"),
        (["--transformer", "24,2048,16,50257,5,5504"], "KV_HEADS a divisor of HEADS"),
        (["--transformer", "24,2048,16,50257,32,5504"], "KV_HEADS a divisor of HEADS"),
        (["--model", "gpt-tiny", "--seq", "4096"], "--seq 4096 exceeds gpt-tiny's 256 positions"),
        (["--model", "mpt-13b", "--seq", "100000"], "exceeds mpt-13b's 2048 positions"),
        (["--model", "mpt-13"], "did you mean 'mpt-13b'?"),
        (["--model", "mpt-13b", "--reduce-dtype", "fp8"], "--reduce-dtype: unknown value"),
    ],
)
def test_bad_input_is_refused(args, says):
    base = ["predict", "--batch", "2", "--base-throughput", "30000", "--base-devices", "8",
            "--nodes", "1,2"]  # fmt: skip
    res = invoke(base + args)  # the later --batch wins
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("ddlbench: ") and says in res.stderr, res.stderr
    assert "Traceback" not in res.output


def _at8(parallel: str, *extra: str) -> dict:
    res = invoke(LM + ["--nodes", "1", "--parallel", parallel, "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["points"][0]


def test_each_mode_reduces_what_the_workload_reduces():
    ddp, zero1, fsdp = _at8("ddp"), _at8("zero1"), _at8("fsdp")
    # ZeRO-1 is DDP's fp32 allreduce plus the all-gather of the fp32 parameters: half an
    # allreduce of the same bytes more
    layers = whatif.layers_of(whatif.Case("mpt-13b", 2, 1.0, seq=2048))
    params = sum(la.params for la in layers)
    topo = hierarchy.Topology(8, 1, hierarchy.preset("nvlink-h100"), hierarchy.preset("ndr"), 8,
                              hierarchy.base_latency_s())  # fmt: skip
    gather = sharded.gather(topo, params * 4).time_s
    assert zero1["comm_s"] == pytest.approx(ddp["comm_s"] + gather, rel=0.02)
    assert zero1["comm_s"] > 1.4 * ddp["comm_s"]
    # FSDP reduces in fp32 (reduce_dtype=float32) and gathers bf16 parameters
    assert fsdp["grad_bytes"] == params * 4 == ddp["grad_bytes"]
    pure = _at8("fsdp", "--reduce-dtype", "bf16")
    assert pure["grad_bytes"] == params * 2 and pure["comm_s"] < fsdp["comm_s"]


def test_the_llm_foundry_rows_reduce_in_bf16_as_their_source_did():
    """``mixed_precision: PURE`` (the A100 40GB table) reduces in bf16; the H100 table's
    ``DEFAULT`` reduced in fp32 in the Composer versions that gathered bf16 parameters."""
    rows = [r for r in validation.rows() if r["table"] == "llm-foundry-a100-40gb"]
    assert rows and all(r["reduce_dtype"] == "bf16" for r in rows)
    assert all(not r["reduce_dtype"] for r in validation.rows() if r not in rows)
