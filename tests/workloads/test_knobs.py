"""Performance knobs applied by the real frameworks on the CPU (LeNet, a few steps).

What a CPU can show: channels-last weights and inputs, the autocast dtype, a compiled module
(torch.compile), XLA on for TensorFlow and Keras, MXNet's NHWC blocks, every knob recorded
in the meta record, fallbacks labelled, compilation kept out of the measured window.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.envs import require_env
from tests.support.repo import ROOT

pytestmark = pytest.mark.frameworks

LENET_TRAINING_FLOPS = 3 * 2 * 416_520  # conv1, conv2, fc1..fc3 MACs; docs/mfu.md


def run_probe(env: str, code: str) -> dict:
    python = require_env(env)
    proc = subprocess.run(
        [python, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


TORCH_PROBE = r"""
import json, torch
from ddlbench.workloads.pytorch.torch_main import apply_knobs, make_optimizer, make_step_fn
from ddlbench.workloads.pytorch.models_torch import build_model
cfg = {"precision": "bf16", "layout": "channels_last", "compile": True, "mode": "throughput",
       "steps": {"warmup": 1, "measure": 2}, "framework_options": {"compile_mode": "default"},
       "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}}
k = apply_knobs(cfg, torch.device("cpu"))
model = k.prepare_model(build_model("lenet", 10, 28, seed=1))
seen = {}
def hook(module, inputs, output):
    seen["conv_in"] = inputs[0].is_contiguous(memory_format=torch.channels_last)
    seen["conv_out_dtype"] = str(output.dtype)
model.features[0].register_forward_hook(hook)
x, y = torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,))
step = make_step_fn(model, make_optimizer(cfg, model), torch.device("cpu"), k.precision, (x, y),
                    channels_last=k.channels_last)
loss = step(None, 0.1)
print(json.dumps({"meta": k.knobs.meta(), "loss": loss, "steps": cfg["steps"],
    "weights_cl": model.features[0].weight.is_contiguous(memory_format=torch.channels_last),
    "compiled": type(k.compiled(model)).__name__, "eager": type(model).__name__, **seen}))
"""


def test_torch_channels_last_bf16_autocast_and_compile_wrapper():
    out = run_probe("torch", TORCH_PROBE)
    assert out["weights_cl"] is True and out["conv_in"] is True
    assert out["conv_out_dtype"] == "torch.bfloat16"  # autocast on the CPU, no scaling
    assert out["compiled"] == "OptimizedModule" and out["eager"] == "LeNet"
    meta = out["meta"]
    assert meta["precision"] == "bf16" and "precision_requested" not in meta
    assert meta["autocast_dtype"] == "bfloat16" and meta["loss_scaling"] is False
    assert meta["layout"] == "NHWC" and meta["compile"] == "torch.compile(mode=default)"
    assert meta["tf32_matmul"] is None and meta["fallbacks"] == []  # CPU: no TF32 switch
    assert out["steps"]["warmup"] == 5 and meta["warmup_requested"] == 1


def test_torch_without_compile_runs_eager_and_says_so():
    """A torch < 2.0 (no ``torch.compile``; here the attribute is removed) that validate
    could not see (a venv): the step runs eager, recorded as a fallback, never a crash."""
    code = (
        "import json, torch\n"
        "del torch.compile\n"
        "from ddlbench.workloads.pytorch.torch_main import apply_knobs\n"
        'cfg = {"compile": True, "mode": "throughput", "steps": {"warmup": 1, "measure": 2}}\n'
        'k = apply_knobs(cfg, torch.device("cpu"))\n'
        'print(json.dumps({"meta": k.knobs.meta(), "mode": k.compile_mode}))\n'
    )
    out = run_probe("torch", code)
    assert out["mode"] is None and out["meta"]["compile"] == "eager"
    assert out["meta"]["knobs_requested"]["compile"] is True
    assert out["meta"]["fallbacks"][0].startswith("compile: torch ")
    assert out["meta"]["fallbacks"][0].endswith("has no torch.compile (>= 2.0)")


def test_torch_compiled_run_records_knobs_and_compile_time(launch_ranks, run_config, validate_log):
    cfg = run_config(
        "pytorch",
        data={"kind": "synthetic", "samples": 256},
        precision="tf32",  # not on a CPU: a labelled fallback to fp32
        layout="channels_last",
        compile=True,
        steps={"warmup": 1, "measure": 3},
    )
    result = launch_ranks("pytorch", cfg, world_size=1, timeout=900)
    result.check_ok()
    validate_log(result.logs[0])
    meta = result.logs[0][0]
    assert meta["precision"] == "fp32" and meta["precision_requested"] == "tf32"
    assert meta["fallbacks"] == ["precision tf32 is not available on the CPU; running fp32"]
    assert meta["layout"] == "NHWC" and meta["compile"].startswith("torch.compile")
    assert meta["flops_per_sample"] == LENET_TRAINING_FLOPS
    steps = result.records(0, "step")
    assert [s["phase"] for s in steps] == ["warmup"] * 5 + ["measure"] * 3
    summary = result.logs[0][-1]
    first = steps[0]["t_end"] - steps[0]["t_start"]
    assert summary["first_step_s"] == pytest.approx(first)
    # compilation happened in the first (warmup) step, outside the measured window
    assert summary["compile_s"] > 0 and first > 5 * summary["step_time_median_s"]


def test_torch_ddp_two_ranks_compiled_bf16_channels_last(
    launch_ranks, run_config, check_data_parallel
):
    """torch.compile of the DDP module with ddlbench's comm hook: ranks stay in step."""
    cfg = run_config(
        "pytorch",
        framework_options={"backend": "gloo"},
        precision="bf16",
        layout="channels_last",
        compile=True,
        steps={"warmup": 5, "measure": 3},
    )
    result = launch_ranks("pytorch", cfg, world_size=2, timeout=1200)
    check_data_parallel(result)
    for records in result.logs:
        meta = records[0]
        assert meta["ddp"] is True and meta["compile"] == "torch.compile(mode=default)"
        assert meta["precision"] == "bf16" and meta["layout"] == "NHWC"
    steps = result.records(0, "step")
    assert all(s["comm_s"] is not None for s in steps if s["phase"] == "measure")


@pytest.mark.parametrize("workload", ["tensorflow", "keras"])
def test_tf_and_keras_xla_and_bf16_policy(workload, launch_ranks, run_config, validate_log):
    cfg = run_config(
        workload,
        data={"kind": "synthetic", "samples": 256},
        precision="bf16",
        layout="channels_last",
        compile=True,
        steps={"warmup": 5, "measure": 3},
    )
    result = launch_ranks(workload, cfg, world_size=1, env="tensorflow", timeout=600)
    result.check_ok()
    validate_log(result.logs[0])
    meta = result.logs[0][0]
    assert meta["precision"] == "bf16" and meta["dtype_policy"] == "mixed_bfloat16"
    assert meta["loss_scaling"] is False and meta["fallbacks"] == []
    assert meta["compile"] == "tf.function(jit_compile=True)" and meta["layout"] == "NHWC"
    assert meta["flops_per_sample"] == LENET_TRAINING_FLOPS
    assert result.logs[0][-1]["compile_s"] is not None


MXNET_PROBE = r"""
import json
from ddlbench.workloads.mx import mxnet_main as w, models_mxnet as m
knobs = w.apply_knobs({"precision": "amp", "layout": "channels_last", "compile": True,
                       "device": "cpu", "mode": "throughput", "steps": {"warmup": 9, "measure": 1}})
import mxnet
net = m.build_model("resnet50", 1000, 224, "NHWC")
convs = [b for b in net.collect_params().keys()]
blocks = []
def walk(block):
    blocks.append(block)
    for child in block._children.values():
        walk(child)
walk(net)
layouts = sorted({b._kwargs.get("layout") for b in blocks if type(b).__name__ == "Conv2D"})
pools = sorted({b._kwargs.get("layout") for b in blocks if "Pool" in type(b).__name__})
axes = sorted({b._kwargs.get("axis") for b in blocks if type(b).__name__ == "BatchNorm"})
print(json.dumps({"meta": knobs.meta(), "conv": layouts, "pool": pools, "bn_axis": axes}))
"""


def test_mxnet_nhwc_blocks_and_cpu_fallbacks():
    out = run_probe("mxnet", MXNET_PROBE)
    assert out["conv"] == ["NHWC"] and out["pool"] == ["NHWC"] and out["bn_axis"] == [3]
    meta = out["meta"]
    assert meta["layout"] == "NCHW" and meta["precision"] == "fp32"  # the CPU cannot
    assert len(meta["fallbacks"]) == 2 and "cuDNN" in meta["fallbacks"][1]
    assert meta["compile"] == "hybridize(static_alloc=True, static_shape=True)"


def test_horovod_torch_bf16_channels_last(launch_ranks, run_config, check_data_parallel):
    """Horovod-PyTorch applies the same knobs as the pytorch workload (shared helpers)."""
    cfg = run_config(
        "horovod_torch",
        framework="horovod",
        framework_options={"wraps": "pytorch", "controller": "gloo"},
        precision="bf16",
        layout="channels_last",
        steps={"warmup": 2, "measure": 4},
    )
    server = ["ddlbench.workloads.hvd.horovod_rendezvous", "--tasks-per-node", "2"]
    result = launch_ranks("horovod_torch", cfg, env="horovod", background=server, timeout=300)
    check_data_parallel(result)
    for records in result.logs:
        meta = records[0]
        assert meta["precision"] == "bf16" and meta["autocast_dtype"] == "bfloat16"
        assert meta["layout"] == "NHWC" and meta["compile"] == "eager"
        assert meta["flops_per_sample"] == LENET_TRAINING_FLOPS
        # Horovod's collectives need contiguous tensors: a labelled partial fallback
        assert meta["channels_last_weights"] is False
        assert meta["fallbacks"] and "Horovod needs contiguous" in meta["fallbacks"][0]
