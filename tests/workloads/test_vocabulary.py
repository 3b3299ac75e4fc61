"""The vocabulary is the one source of the allowed values: the rank-log schema, the spec, the
framework options and the run-config loader agree with it, and its fallback rule is the one
every workload applies."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from ddlbench.analyse.device_peaks import PEAKS
from ddlbench.frameworks import launchers
from ddlbench.spec.experiment import ExperimentSpec, Variant
from ddlbench.workloads import vocabulary as v
from ddlbench.workloads.common.config import RunConfigError, normalize_run_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "ddlbench" / "schemas" / "rank-log-v1.schema.json").read_text())


def literal_values(model, field: str) -> tuple:
    """The values a pydantic field's ``Literal`` (or ``Optional[Literal]``) allows."""
    ann = model.model_fields[field].annotation
    args = [a for a in typing.get_args(ann) if a is not type(None)] or [ann]
    if typing.get_origin(args[0]) is typing.Literal:
        return typing.get_args(args[0])
    return typing.get_args(ann)


def test_rank_log_schema_enumerations_are_the_vocabulary():
    meta = SCHEMA["$defs"]["meta"]["properties"]
    assert tuple(meta["precision"]["enum"]) == v.PRECISIONS
    assert tuple(meta["precision_requested"]["enum"]) == v.PRECISIONS
    assert tuple(meta["layout"]["enum"]) == v.RAN_LAYOUTS
    assert tuple(meta["mode"]["enum"]) == v.MODES
    assert tuple(meta["device"]["enum"]) == v.DEVICES


def test_spec_and_framework_options_allow_the_vocabulary():
    assert literal_values(ExperimentSpec, "precision") == v.PRECISIONS
    assert literal_values(ExperimentSpec, "layout") == v.LAYOUTS
    assert literal_values(ExperimentSpec, "mode") == v.MODES
    assert literal_values(Variant, "precision") == v.PRECISIONS
    fields = ExperimentSpec.model_fields
    assert {k: fields[k].default for k in v.KNOBS} == v.KNOB_DEFAULTS
    assert fields["mode"].default == v.DEFAULT_MODE
    fw = launchers()
    for name, launcher in fw.items():
        assert literal_values(launcher.options, "precision") == v.PRECISIONS, name
        assert literal_values(launcher.options, "layout") == v.LAYOUTS, name
    assert literal_values(fw["pytorch"].options, "backend") == v.TORCH_BACKENDS
    assert literal_values(fw["tensorflow"].options, "communication") == v.TF_COMMUNICATIONS
    assert literal_values(fw["keras"].options, "communication") == v.TF_COMMUNICATIONS
    assert literal_values(fw["horovod"].options, "controller") == v.HOROVOD_CONTROLLERS
    assert literal_values(fw["mxnet"].options, "kvstore") == v.MXNET_KVSTORES
    for entry in PEAKS:
        assert set(entry.tflops) <= set(v.PRECISIONS), entry.key


def test_planned_backend_is_the_vocabularys_rule():
    torch = launchers()["pytorch"]
    for device in v.DEVICES:
        for asked in (None,) + v.TORCH_BACKENDS:
            opts = torch.options(backend=asked)
            assert torch.backend(opts, device) == v.torch_backend(asked, device)
    assert v.torch_backend(None, "gpu") == "nccl" and v.torch_backend(None, "cpu") == "gloo"


def test_run_config_loader_checks_and_fills_from_the_vocabulary():
    base = {"run_id": "r", "workload": "pytorch", "mode": "throughput", "log_dir": "/tmp/x"}
    cfg = normalize_run_config(base)
    assert {k: cfg[k] for k in v.KNOBS} == v.KNOB_DEFAULTS and cfg["device"] == v.DEFAULT_DEVICE
    assert cfg["backend"] == "gloo"  # a hand-written config gets the planner's rule
    assert normalize_run_config({**base, "device": "gpu"})["backend"] == "nccl"
    assert normalize_run_config({**base, "backend": "mpi"})["backend"] == "mpi"
    assert normalize_run_config({**base, "workload": "tensorflow"})["backend"] is None
    for model, shape in v.MODEL_SHAPES.items():
        got = normalize_run_config({**base, "model": model})
        assert (got["image_size"], got["num_classes"]) == shape
    for key, bad in (("precision", "fp8"), ("layout", "nhwc"), ("mode", "x"), ("device", "tpu")):
        with pytest.raises(RunConfigError, match=f"unknown {key}"):
            normalize_run_config({**base, key: bad})


# (asked, gpu, tf32_ok, bf16_ok, trains) -> what runs; message or None
RULE = [
    ("fp32", False, False, False, v.PRECISIONS, "fp32", None),
    ("bf16", False, False, False, v.PRECISIONS, "bf16", None),
    ("amp", False, False, False, v.PRECISIONS, "fp32", v.AMP_CPU_MESSAGE),
    ("tf32", False, False, False, v.PRECISIONS, "fp32", "not available on the CPU"),
    ("tf32", True, False, False, v.PRECISIONS, "fp32", "compute capability below 8.0"),
    ("tf32", True, True, True, v.PRECISIONS, "tf32", None),
    ("bf16", True, True, False, v.PRECISIONS, "amp", "bf16 is not supported by this GPU"),
    ("bf16", True, True, True, v.PRECISIONS, "bf16", None),
    ("amp", True, False, False, v.PRECISIONS, "amp", None),
    # MXNet trains fp32 and amp only
    ("tf32", True, True, True, v.MXNET_PRECISIONS, "fp32", "mxnet has no tf32 training"),
    ("bf16", True, True, True, v.MXNET_PRECISIONS, "amp", "mxnet has no bf16 training"),
    ("bf16", False, False, False, v.MXNET_PRECISIONS, "fp32", "mxnet has no bf16 training"),
    ("amp", False, False, False, v.MXNET_PRECISIONS, "fp32", v.AMP_CPU_MESSAGE),
    ("amp", True, False, False, v.MXNET_PRECISIONS, "amp", None),
]


@pytest.mark.parametrize("asked,gpu,tf32_ok,bf16_ok,trains,ran,why", RULE)
def test_precision_fallback_rule(asked, gpu, tf32_ok, bf16_ok, trains, ran, why):
    got, message = v.precision_fallback(asked, gpu, tf32_ok, bf16_ok, trains, "mxnet")
    assert got == ran
    if why is None:
        assert message is None
    else:
        assert message is not None and why in message and f"running {ran}" in message


def test_vocabulary_imports_only_the_standard_library():
    probe = (
        "import sys, json; import ddlbench.workloads.vocabulary; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('ddlbench', 'numpy')))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert json.loads(proc.stdout) == [
        "ddlbench",
        "ddlbench.workloads",
        "ddlbench.workloads.vocabulary",
    ]


def test_campaign_pkg_ships_the_vocabulary_and_run_json_carries_the_backend(tmp_path):
    """The jobs run the campaign's frozen copy: the vocabulary is in it and imports alone,
    and every run.json names the backend the planner chose."""
    from ddlbench.plan import plan_runs
    from ddlbench.render import render_campaign
    from ddlbench.render.campaign import read_run_config
    from ddlbench.spec.load import load_profile, load_spec

    spec_path = ROOT / "configs" / "quickstart.yaml"
    spec, profile = load_spec(spec_path), load_profile("local")
    plan = plan_runs(spec.value, profile.value, spec.source)
    rendered = render_campaign(
        plan, "vocab", tmp_path, spec.source.text, str(spec_path), profile.source.text,
        profile.path,
    )  # fmt: skip
    pkg = rendered.root / "pkg"
    assert (pkg / "ddlbench" / "workloads" / "vocabulary.py").is_file()
    probe = "import ddlbench.workloads.vocabulary as v, json; print(json.dumps(v.PRECISIONS))"
    proc = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(pkg)!r}); {probe}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert tuple(json.loads(proc.stdout)) == v.PRECISIONS
    manifest = json.loads((rendered.root / "campaign.json").read_text())
    torch_runs = [e for e in manifest["runs"] if e["framework"] == "pytorch"]
    assert torch_runs
    for entry in torch_runs:
        root = rendered.root
        cfg = read_run_config(root / entry["run_dir"], root / entry["script"])
        asked = (cfg["framework_options"] or {}).get("backend")
        assert cfg["backend"] == entry["backend"] == v.torch_backend(asked, cfg["device"])


def test_the_one_docs_table_of_precisions_lists_the_vocabulary():
    """docs/spec.md#performance-knobs is the page that lists the precisions; the others link it."""
    text = (ROOT / "docs" / "spec.md").read_text()
    section = text[text.index("**`precision`**") : text.index("**`layout`**")]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    rows = [line.split("|")[1].strip().strip("`") for line in lines]
    rows = [r for r in rows if r and r != "value" and not r.startswith("---")]
    assert tuple(rows) == v.PRECISIONS
    for page in ("log-format.md", "run-config.md"):
        doc = (ROOT / "docs" / page).read_text()
        assert "`fp32`, `tf32`, `amp`" not in doc and "spec.md#performance-knobs" in doc, page


@pytest.mark.parametrize(
    "name, params",
    [
        ("gpt2-124m", 124_439_808),  # Hugging Face gpt2
        ("gpt2-760m", 774_030_080),  # Hugging Face gpt2-large
        ("mpt-7b", 6_658_859_008),  # llm-foundry benchmark table n_params
        ("mpt-13b", 12_853_954_560),
        ("mpt-30b", 29_975_214_080),
        ("mpt-70b", 64_862_437_376),
        ("llama3-8b", 8_030_261_248),  # Meta's Llama 3 8B
        ("llama3-70b", 70_553_706_496),
    ],
)
def test_transformer_shapes_give_the_published_parameter_counts(name, params):
    assert v.transformer_params(v.TRANSFORMER_SHAPES[name])["total"] == params


def test_every_transformer_shape_names_its_source():
    for name, shape in v.TRANSFORMER_SHAPES.items():
        assert shape.source, name
        assert shape.d_model % shape.heads == 0 and shape.heads % shape.kv_heads == 0, name
