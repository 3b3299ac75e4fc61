"""The sweep planner: counts, ids, batch and learning-rate rules, zip, determinism."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlbench.errors import InputError
from ddlbench.names import SAFE_NAME
from ddlbench.plan import plan_runs, scaled_lr
from ddlbench.spec.cluster import ClusterProfile
from ddlbench.spec.experiment import ExperimentSpec
from ddlbench.spec.load import load_spec_text

GPU4 = ClusterProfile(name="gpu4", scheduler="slurm", gpus_per_node=4)


def spec(**kw) -> ExperimentSpec:
    base = {
        "name": "t",
        "model": "resnet50",
        "frameworks": ["pytorch"],
        "batch_size": 32,
        "scale": {"nodes": [1, 2], "gpus_per_node": 4},
    }
    base.update(kw)
    if base.get("scaling") == "strong" or base.get("mode") == "allreduce":
        base.pop("batch_size")  # not used there, and refused
    return ExperimentSpec.model_validate(base)


def test_cross_product_and_order():
    s = spec(frameworks=["pytorch", "mxnet"], batch_size=[32, 64], repeats=2)
    runs = plan_runs(s, GPU4).runs
    assert len(runs) == 2 * 2 * 2 * 2
    # repeats outermost: every configuration's r0 comes before any r1
    assert [r.repeat for r in runs] == [0] * 8 + [1] * 8
    assert runs[0].run_id == "pytorch-resnet50-n1x4-b32-r0"
    assert runs[3].run_id == "pytorch-resnet50-n2x4-b64-r0"
    assert runs[4].run_id == "mxnet-resnet50-n1x4-b32-r0"
    assert runs[8].group == runs[0].group == "pytorch-resnet50-n1x4-b32"


def test_global_batch_and_linear_lr():
    runs = plan_runs(spec(batch_size=64, scale={"nodes": [1, 8], "gpus_per_node": 4}), GPU4).runs
    # Goyal et al.: lr = 0.1 x global/256
    assert [(r.world_size, r.global_batch_size) for r in runs] == [(4, 256), (32, 2048)]
    assert runs[0].lr == pytest.approx(0.1)
    assert runs[1].lr == pytest.approx(0.8)


def test_lr_rules():
    assert scaled_lr(0.1, 1024, "linear", 256) == pytest.approx(0.4)
    assert scaled_lr(0.1, 1024, "sqrt", 256) == pytest.approx(0.2)
    assert scaled_lr(0.1, 1024, "none", 256) == pytest.approx(0.1)


def test_strong_scaling_keeps_global_batch():
    s = spec(scaling="strong", global_batch_size=256, scale={"points": ["1x1", "1x4", "2x4"]})
    runs = plan_runs(s, GPU4).runs
    assert [r.global_batch_size for r in runs] == [256, 256, 256]
    assert [r.batch_size for r in runs] == [256, 64, 32]
    assert runs[2].run_id == "pytorch-resnet50-n2x4-g256-r0"


def test_strong_scaling_must_divide():
    s = spec(scaling="strong", global_batch_size=100, scale={"points": ["1x3"]})
    with pytest.raises(InputError, match="does not divide evenly over 3 devices"):
        plan_runs(s, ClusterProfile(name="c", scheduler="slurm", gpus_per_node=4))


def test_zip_pairs_axes():
    s = spec(
        batch_size=[32, 64, 128],
        scale={"points": ["1x1", "1x2", "1x4"]},
        zip=["scale", "batch_size"],
    )
    runs = plan_runs(s, GPU4).runs
    assert [(r.world_size, r.batch_size) for r in runs] == [(1, 32), (2, 64), (4, 128)]


def test_zip_lengths_must_match():
    s = spec(batch_size=[32, 64], scale={"points": ["1x1"]}, zip=["scale", "batch_size"])
    with pytest.raises(
        InputError, match="zipped axes differ in length: scale has 1, batch_size has 2"
    ):
        plan_runs(s, GPU4)


def test_variants_override_lr_scaling():
    s = spec(
        lr_scaling={"rule": "linear", "base_batch_size": 256, "decay_epochs": [30]},
        variants=[
            {"label": "warmup", "lr_scaling": {"warmup_epochs": 5}},
            {"label": "nowarmup", "lr_scaling": {"warmup_epochs": 0}},
        ],
    )
    runs = plan_runs(s, GPU4).runs
    assert [r.variant for r in runs[:2]] == ["warmup", "nowarmup"]
    assert runs[0].run_id == "pytorch-resnet50-n1x4-b32-warmup-r0"
    assert runs[0].lr_scaling["warmup_epochs"] == 5
    assert runs[1].lr_scaling["warmup_epochs"] == 0
    assert runs[0].lr_scaling["decay_epochs"] == [30]  # not overridden, kept


def test_profile_limits():
    with pytest.raises(InputError, match="8 GPUs per node asked, but profile 'gpu4' has 4") as e:
        plan_runs(spec(scale={"nodes": [1, 2], "gpus_per_node": 8}), GPU4)
    assert len(e.value.problems) == 1 and e.value.problems[0].where == "scale.gpus_per_node"
    assert "scale.points such as [1x4, 2x4]" in str(e.value)
    with pytest.raises(InputError) as e:
        plan_runs(spec(scale={"points": ["1x4", "2x8", "4x8"]}), GPU4)
    assert [p.where for p in e.value.problems] == ["scale.points[1]", "scale.points[2]"]
    small = ClusterProfile(name="small", scheduler="slurm", gpus_per_node=4, max_nodes=2)
    with pytest.raises(InputError, match="4 nodes asked, but profile 'small' allows at most 2"):
        plan_runs(spec(scale={"nodes": [1, 4]}), small)


def test_nccl_on_a_cpu_profile_is_refused_at_its_backend_key():
    """NCCL needs GPUs: on a CPU profile the entry's ``backend`` key is refused, with its line;
    ranks per node are no limit there (CPU ranks are processes), so 1x64 plans."""
    text = (
        "name: t\nmodel: lenet\nframeworks:\n  - {name: pytorch, backend: nccl}\n"
        "  - {name: pytorch, label: g, backend: gloo}\nscale:\n  points: [1x1, 1x2, 1x64]\n"
    )
    loaded = load_spec_text(text, "s.yaml")
    cpu = ClusterProfile(name="cpu", scheduler="local", device="cpu", gpus_per_node=2)
    with pytest.raises(InputError) as info:
        plan_runs(loaded.value, cpu, loaded.source)
    [problem] = info.value.problems
    assert str(problem).startswith("s.yaml:4:21: frameworks[0].backend: pytorch: backend nccl")
    assert "profile 'cpu' is a CPU profile (device: cpu); use backend: gloo" in str(problem)
    plan_runs(loaded.value, GPU4.model_copy(update={"gpus_per_node": 64}), loaded.source)
    gloo = load_spec_text(text.replace("backend: nccl}", "backend: gloo, label: h}"), "s.yaml")
    assert max(r.tasks_per_node for r in plan_runs(gloo.value, cpu, gloo.source).runs) == 64


@pytest.mark.parametrize("framework", ["tensorflow", "keras"])
def test_tf_nccl_communication_on_a_cpu_profile_is_refused(framework):
    """The launcher says what its device cannot run: TensorFlow's and Keras's NCCL collectives
    fail at start on the CPU, so the entry's ``communication`` key is refused when planned."""
    text = f"name: t\nmodel: lenet\nframeworks:\n  - {{name: {framework}, communication: nccl}}\n"
    text += "scale:\n  points: [1x2]\n"
    loaded = load_spec_text(text, "s.yaml")
    cpu = ClusterProfile(name="cpu", scheduler="local", device="cpu", gpus_per_node=2)
    with pytest.raises(InputError) as info:
        plan_runs(loaded.value, cpu, loaded.source)
    [problem] = info.value.problems
    assert str(problem).startswith("s.yaml:4:")
    assert f"frameworks[0].communication: {framework}: communication nccl needs GPUs" in str(
        problem
    )
    assert "use communication: ring or auto (the default)" in str(problem)
    assert len(plan_runs(loaded.value, GPU4, loaded.source).runs) > 0


def test_plan_errors_point_into_the_spec():
    loaded = load_spec_text(
        "name: t\nframeworks: [pytorch]\nscale:\n  points: [1x4, 1x4]\n", "s.yaml"
    )
    with pytest.raises(InputError) as info:
        plan_runs(loaded.value, GPU4, loaded.source)
    assert str(info.value).startswith("s.yaml:4:")
    assert "listed twice" in str(info.value)


def test_two_entries_of_one_framework_need_labels():
    with pytest.raises(ValueError, match="both be labelled 'pytorch'"):
        spec(frameworks=["pytorch", {"name": "pytorch", "backend": "gloo"}])
    s = spec(frameworks=["pytorch", {"name": "pytorch", "backend": "gloo", "label": "pt-gloo"}])
    ids = [r.run_id for r in plan_runs(s, GPU4).runs]
    assert "pt-gloo-resnet50-n1x4-b32-r0" in ids


def test_horovod_ids_and_workloads():
    s = spec(frameworks=[{"name": "horovod", "wraps": "tensorflow"}, {"name": "horovod"}])
    runs = plan_runs(s, GPU4).runs
    assert {r.workload for r in runs} == {"horovod_tf", "horovod_torch"}
    assert runs[0].run_id.startswith("horovod-tf-")


def test_allreduce_mode():
    s = spec(mode="allreduce", frameworks=[{"name": "pytorch", "backend": "nccl"}, "horovod"])
    runs = plan_runs(s, GPU4).runs
    assert {r.workload for r in runs} == {"allreduce_torch", "allreduce_horovod"}
    assert runs[0].run_id == "pytorch-allreduce-n1x4-r0"


# --- properties -----------------------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)
frameworks = st.lists(
    st.sampled_from(
        [
            {"name": "pytorch"},
            {"name": "tensorflow"},
            {"name": "keras", "communication": "ring"},
            {"name": "horovod", "wraps": "tensorflow"},
            {"name": "horovod", "wraps": "pytorch"},
            {"name": "mxnet", "servers": 2},
        ]
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda d: (d["name"], d.get("wraps")),
)
sweeps = st.fixed_dictionaries(
    {
        "name": names,
        "model": st.sampled_from(["resnet50", "vgg16", "vgg19", "lenet"]),
        "frameworks": frameworks,
        "batch_size": st.lists(st.integers(1, 512), min_size=1, max_size=3, unique=True),
        "scale": st.fixed_dictionaries(
            {
                "nodes": st.lists(st.integers(1, 64), min_size=1, max_size=4, unique=True),
                "gpus_per_node": st.integers(1, 4),
            }
        ),
        "repeats": st.integers(1, 3),
        "variants": st.lists(
            st.fixed_dictionaries({"label": names, "lr_scaling": st.just({"warmup_epochs": 1})}),
            max_size=2,
            unique_by=lambda v: v["label"],
        ),
    }
)


@settings(max_examples=150, deadline=None)
@given(sweeps)
def test_plan_is_deterministic_and_ids_unique_and_safe(data):
    s = ExperimentSpec.model_validate(data)
    first = plan_runs(s, GPU4).runs
    again = plan_runs(ExperimentSpec.model_validate(data), GPU4).runs
    assert [r.as_dict() for r in first] == [r.as_dict() for r in again]
    ids = [r.run_id for r in first]
    assert len(ids) == len(set(ids))
    for run_id in ids:
        assert SAFE_NAME.match(run_id) and ".." not in run_id and "/" not in run_id
    n_variants = max(1, len(data["variants"]))
    expected = (
        len(data["frameworks"])
        * len(data["batch_size"])
        * len(data["scale"]["nodes"])
        * n_variants
        * data["repeats"]
    )
    assert len(first) == expected
    for r in first:
        assert r.global_batch_size == r.batch_size * r.world_size
        assert r.lr == pytest.approx(0.1 * r.global_batch_size / 256)
        assert re.search(rf"-r{r.repeat}$", r.run_id)
        assert math.isclose(r.node_hours, r.nodes * r.time_limit_min / 60)


@settings(max_examples=50, deadline=None)
@given(sweeps, st.randoms())
def test_ids_do_not_depend_on_other_entries(data, rnd):
    """Adding or reordering frameworks never renames another framework's runs."""
    s = ExperimentSpec.model_validate(data)
    ids = {r.run_id for r in plan_runs(s, GPU4).runs}
    shuffled = dict(data)
    shuffled["frameworks"] = rnd.sample(data["frameworks"], len(data["frameworks"]))
    ids2 = {r.run_id for r in plan_runs(ExperimentSpec.model_validate(shuffled), GPU4).runs}
    assert ids == ids2


def test_mxnet_per_node_workers_keep_the_devices_batch_and_node_hours():
    fw = [{"name": "mxnet"}, {"name": "mxnet", "workers": "per-node", "label": "pn"}]
    runs = plan_runs(spec(frameworks=fw, scale={"nodes": [2], "gpus_per_node": 4}), GPU4).runs
    default, per_node = runs
    assert "workers" not in default.framework_options  # unset: per-device, run.json unchanged
    assert per_node.framework_options["workers"] == "per-node"
    # the same 8 devices, per-device batch, global batch and node-hours: only the launch differs
    for field in ("world_size", "gpus", "batch_size", "global_batch_size", "lr", "node_hours"):
        assert getattr(per_node, field) == getattr(default, field), field
    assert per_node.world_size == 8


def test_mxnet_workers_value_is_checked_with_its_line():
    text = GOOD_MXNET.replace("workers: per-node", "workers: per-gpu")
    with pytest.raises(InputError) as info:
        load_spec_text(text, "x.yaml")
    (problem,) = [str(p) for p in info.value.problems]
    assert problem.startswith("x.yaml:5:5: frameworks[0].workers: 'per-gpu' is not one of ")
    assert "per-device, per-node" in problem
    assert load_spec_text(GOOD_MXNET, "x.yaml").value.frameworks[0].options.workers == "per-node"


GOOD_MXNET = """\
name: demo
model: lenet
frameworks:
  - name: mxnet
    workers: per-node
batch_size: 32
scale:
  nodes: [2]
  gpus_per_node: 2
"""


def test_compile_with_a_pytorch_1_module_is_refused_at_the_line_that_asks():
    """The shipped iris profile's Horovod module is built on PyTorch 1.9 (no torch.compile)."""
    from ddlbench.spec.load import load_profile, load_spec_text
    from tests.support.repo import ROOT

    iris = load_profile(str(ROOT / "configs" / "clusters" / "iris.yaml")).value
    text = (
        "name: t\nmodel: resnet50\nframeworks:\n  - name: pytorch\n  - name: horovod\n"
        "    wraps: pytorch\n{entry}compile: true\nbatch_size: 32\nscale: {{nodes: [1]}}\n"
    )
    loaded = load_spec_text(text.format(entry=""), "s.yaml")
    with pytest.raises(InputError) as e:
        plan_runs(loaded.value, iris, loaded.source)
    assert [str(p) for p in e.value.problems] == [
        "s.yaml:7:1: compile: horovod-torch: compile: true needs torch >= 2.0 (torch.compile), "
        "but profile 'iris' loads PyTorch 1.9 (module "
        "tools/Horovod/0.22.0-fosscuda-2020b-PyTorch-1.9.0) for it; set compile: false for "
        "this entry, or load a PyTorch >= 2.0 module"
    ]
    fixed = load_spec_text(text.format(entry="    compile: false\n"), "s.yaml")
    runs = plan_runs(fixed.value, iris, fixed.source).runs
    assert [(r.label, r.compile) for r in runs] == [("pytorch", True), ("horovod-torch", False)]
