"""Performance knobs in the spec: precision, layout, compile; per-framework refusals."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ddlbench.errors import InputError
from ddlbench.plan import plan_runs
from ddlbench.render.campaign import run_config
from ddlbench.spec.cluster import ClusterProfile
from ddlbench.spec.load import load_spec_text

GPU4 = ClusterProfile(name="gpu4", scheduler="slurm", gpus_per_node=4)
CPU = ClusterProfile(name="cpu", scheduler="slurm", device="cpu", gpus_per_node=2)

SPEC = """\
name: knobs
model: resnet50
frameworks: [pytorch, mxnet]
batch_size: 32
precision: bf16
layout: channels_last
compile: true
scale: {nodes: [1], gpus_per_node: 4}
"""


def load(text: str):
    return load_spec_text(textwrap.dedent(text), "k.yaml")


def test_knobs_reach_the_runs_and_run_json():
    text = SPEC.replace("[pytorch, mxnet]", "[pytorch, tensorflow]")
    loaded = load(
        text + "variants:\n  - label: fast\n  - label: ref\n    precision: fp32\n"
        "    layout: default\n    compile: false\n"
    )
    plan = plan_runs(loaded.value, GPU4, loaded.source)
    by_variant = {(r.framework, r.variant): r for r in plan.runs}
    fast, ref = by_variant[("pytorch", "fast")], by_variant[("pytorch", "ref")]
    assert (fast.precision, fast.layout, fast.compile) == ("bf16", "channels_last", True)
    assert (ref.precision, ref.layout, ref.compile) == ("fp32", "default", False)
    cfg = run_config(fast, plan, "c", "/x")
    assert (cfg["precision"], cfg["layout"], cfg["compile"]) == ("bf16", "channels_last", True)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp", "bf16"])
def test_every_precision_is_accepted(precision):
    spec = load(SPEC.replace("[pytorch, mxnet]", "[pytorch]").replace("bf16", precision)).value
    assert spec.precision == precision


def test_unknown_precision_points_at_the_line():
    with pytest.raises(InputError) as info:
        load(SPEC.replace("precision: bf16", "precision: fp8"))
    (problem,) = info.value.problems
    assert str(problem).startswith("k.yaml:5:")
    assert "fp32" in str(problem) and "bf16" in str(problem)


def test_mxnet_refuses_bf16_where_written():
    loaded = load(SPEC)
    with pytest.raises(InputError) as info:
        plan_runs(loaded.value, GPU4, loaded.source)
    (problem,) = info.value.problems
    assert str(problem).startswith("k.yaml:5:")
    assert "mxnet" in str(problem) and "precision amp" in str(problem)


def test_mxnet_refuses_tf32_in_a_variant():
    text = SPEC.replace("precision: bf16", "precision: amp")
    text = text.replace(
        "compile: true", "compile: true\nvariants:\n  - label: t\n    precision: tf32"
    )
    loaded = load(text)
    with pytest.raises(InputError) as info:
        plan_runs(loaded.value, GPU4, loaded.source)
    (problem,) = info.value.problems
    assert str(problem).startswith("k.yaml:10:")
    assert "variants[0].precision" in str(problem) and "TF32" in str(problem)


def test_mxnet_channels_last_plans_on_gpu_and_cpu_profiles():
    # NHWC needs cuDNN: on a CPU profile the workload falls back to NCHW and records it
    # (tests/workloads/test_knobs.py), so the shipped GPU specs still run on a laptop
    text = SPEC.replace("precision: bf16", "precision: fp32")
    text = text.replace("gpus_per_node: 4", "gpus_per_node: 2")
    loaded = load(text)
    for profile in (GPU4, CPU):
        runs = plan_runs(loaded.value, profile, loaded.source).runs
        assert {r.layout for r in runs if r.framework == "mxnet"} == {"channels_last"}


def test_torch_compile_mode_option():
    text = SPEC.replace("[pytorch, mxnet]", "[{name: pytorch, compile_mode: max-autotune}]")
    plan = plan_runs(load(text).value, GPU4)
    assert plan.runs[0].framework_options["compile_mode"] == "max-autotune"
    with pytest.raises(InputError) as info:
        load(text.replace("max-autotune", "fastest"))
    assert "reduce-overhead" in str(info.value.problems[0])


def test_cli_refusal_exit_2_no_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.replace("nodes: [1], gpus_per_node: 4", "nodes: [1], gpus_per_node: 1"))
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "validate", str(bad), "--cluster", "local"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{bad}:")
    assert "mxnet" in proc.stderr
