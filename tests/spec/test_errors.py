"""Bad specs and profiles give one `file:line:col: where: what` line per problem."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ddlbench.errors import InputError, closest
from ddlbench.spec.load import load_spec_text, validate_profile
from ddlbench.spec.yamlsource import parse_yaml
from ddlbench.workloads.vocabulary import TRANSFORMER_MODELS

GOOD = """\
name: demo
model: resnet50
frameworks:
  - name: pytorch
    backend: nccl
batch_size: 32
scale:
  nodes: [1, 2]
  gpus_per_node: 4
"""


def errors(text: str) -> list[str]:
    with pytest.raises(InputError) as info:
        load_spec_text(textwrap.dedent(text), "x.yaml")
    return [str(p) for p in info.value.problems]


def test_good_spec_loads():
    spec = load_spec_text(GOOD, "x.yaml").value
    assert spec.frameworks[0].options.backend == "nccl"
    assert spec.batch_sizes == [32]


@pytest.mark.parametrize(
    "old,new,expected",
    [
        (
            "    backend: nccl",
            "    backend: ncl",
            "x.yaml:5:5: frameworks[0].backend: 'ncl' is not one of nccl, gloo, mpi "
            "(did you mean 'nccl'?)",
        ),
        (
            "model: resnet50",
            "modle: resnet50",
            "x.yaml:2:1: modle: unknown key 'modle' (did you mean 'model'?)",
        ),
        (
            "model: resnet50",
            "model: resnet5",
            "x.yaml:2:1: model: 'resnet5' is not one of resnet50, vgg16, vgg19, lenet, "
            + ", ".join(TRANSFORMER_MODELS)
            + " (did you mean 'resnet50'?)",
        ),
        (
            "batch_size: 32",
            "batch_size: big",
            "x.yaml:6:1: batch_size: expected an integer, got 'big'",
        ),
        (
            "  - name: pytorch",
            "  - name: pytorh",
            "x.yaml:4:5: frameworks[0].name: 'pytorh' is not one of horovod, keras, mxnet, "
            "pytorch, tensorflow (did you mean 'pytorch'?)",
        ),
        (
            "  gpus_per_node: 4",
            "  gpus_per_nod: 4",
            "x.yaml:9:3: scale.gpus_per_nod: unknown key 'gpus_per_nod' "
            "(did you mean 'gpus_per_node'?)",
        ),
        (
            "  nodes: [1, 2]",
            "  nodes: [1, 0]",
            "x.yaml:8:14: scale.nodes[1]: node counts must be at least 1 (got 0)",
        ),
        (
            "name: demo",
            "name: ../evil",
            "x.yaml:1:1: name: name '../evil' must start with a letter or digit",
        ),
    ],
)
def test_one_problem(old, new, expected):
    text = GOOD.replace(old, new)
    assert text != GOOD
    got = errors(text)
    assert len(got) == 1, got
    assert got[0].startswith(expected), got[0]


def test_all_problems_reported_in_file_order():
    text = GOOD.replace("model: resnet50", "model: resnet5").replace("backend: nccl", "backend: x")
    text += "repeats: 0\n"
    got = errors(text)
    assert [g.split(":")[1] for g in got] == ["2", "5", "10"]
    assert "must be at least 1, got 0" in got[2]


def test_each_bad_item_of_a_sweep_list_is_reported_at_its_own_line():
    """Batch sizes, sequence lengths, node counts: the item's line, not the list's key."""
    text = GOOD.replace("batch_size: 32", "batch_size:\n  - 32\n  - -128\n  - 32\n  - 0")
    assert errors(text) == [
        "x.yaml:8:5: batch_size[1]: batch sizes must be at least 1 (got -128)",
        "x.yaml:9:5: batch_size[2]: batch sizes must not repeat: 32 is also item 0",
        "x.yaml:10:5: batch_size[3]: batch sizes must be at least 1 (got 0)",
    ]
    lm = GOOD.replace("model: resnet50", "model: gpt2-124m\nseq_len: [128, 1, 128]")
    assert errors(lm) == [
        "x.yaml:3:16: seq_len[1]: sequence lengths must be at least 2 (got 1)",
        "x.yaml:3:19: seq_len[2]: sequence lengths must not repeat: 128 is also item 0",
    ]
    assert errors(GOOD.replace("batch_size: 32", "batch_size: 0")) == [  # at the key
        "x.yaml:6:1: batch_size: batch sizes must be at least 1 (got 0)"
    ]
    assert errors(GOOD.replace("batch_size: 32", "batch_size: []")) == [
        "x.yaml:6:1: batch_size: list at least one batch size"
    ]


def test_missing_required_key():
    got = errors("name: demo\nscale: {nodes: [1]}\n")
    assert got == ["x.yaml:1:1: frameworks: required key is missing"]


def test_framework_option_of_other_framework():
    got = errors(GOOD.replace("backend: nccl", "kvstore: dist_sync"))
    assert len(got) == 1
    assert got[0].startswith("x.yaml:5:5: frameworks[0].kvstore: unknown key 'kvstore' (allowed: ")
    assert "backend" in got[0] and "bucket_cap_mb" in got[0]


def test_yaml_syntax_error_has_position():
    with pytest.raises(InputError) as info:
        parse_yaml("a: [1, 2\nb: 3\n", "s.yaml")
    assert str(info.value).startswith("s.yaml:")
    assert "YAML syntax error" in str(info.value)


def test_duplicate_key():
    with pytest.raises(InputError, match=r"s.yaml:2:1: duplicate key 'a'"):
        parse_yaml("a: 1\na: 2\n", "s.yaml")


def test_not_a_mapping():
    with pytest.raises(InputError, match="x.yaml:1:1: an experiment spec must be a YAML mapping"):
        load_spec_text("- 1\n- 2\n", "x.yaml")


@pytest.mark.parametrize(
    "points, expected",
    [
        (
            "[1x1, 1x2, 0x2]",  # YAML 1.1: 0x2 is the hexadecimal number 2
            "x.yaml:8:22: scale.points[2]: scale point 2 is a number, not NODESxGPUS (written "
            "0x2? YAML reads that as the hexadecimal number 2); nodes and GPUs per node must "
            "each be at least 1, e.g. 1x2",
        ),
        (
            "[1x1, '0x2']",
            "x.yaml:8:17: scale.points[1]: scale point '0x2': nodes and GPUs per node must "
            "each be at least 1",
        ),
        ("[2x0]", "x.yaml:8:12: scale.points[0]: scale point '2x0': nodes and GPUs per node"),
    ],
)
def test_a_scale_point_with_zero_nodes_or_gpus_says_so(points, expected):
    text = GOOD.replace("  nodes: [1, 2]\n  gpus_per_node: 4\n", f"  points: {points}\n")
    [got] = errors(text)
    assert got.startswith(expected), got


def test_a_boolean_is_said_as_yaml_spells_it():
    [got] = errors(GOOD.replace("batch_size: 32", "batch_size: true"))
    assert got == (
        "x.yaml:6:1: batch_size: expected an integer, got true, a boolean (YAML reads yes and "
        "on as true too)"
    )


def test_the_slurm_time_message_lists_the_forms_spec_md_allows():
    from ddlbench.spec.slurmtime import FORMATS, parse_minutes
    from tests.support.repo import ROOT

    [row] = [
        line
        for line in (ROOT / "docs" / "spec.md").read_text().splitlines()
        if line.startswith("| `time` | string |")
    ]
    documented = row.split("Slurm time: ")[1].split(";")[0].replace("`", "").split(", ")
    assert FORMATS.replace(" or ", ", ").split(", ") == documented
    for form, value in zip(documented, ["30", "30:00", "01:00:00", "1-2", "1-2:30", "1-2:3:4"]):
        assert parse_minutes(value) > 0, form
    with pytest.raises(ValueError, match=f"is not a Slurm time \\({FORMATS}, e.g. 02:00:00\\)"):
        parse_minutes("1h")


def test_consistency_rules():
    assert any("needs 'epochs'" in e for e in errors(GOOD + "mode: convergence\n"))
    assert any("needs 'global_batch_size'" in e for e in errors(GOOD + "scaling: strong\n"))
    no_batch = GOOD.replace("batch_size: 32\n", "")
    assert any(
        "has no allreduce workload" in e
        for e in errors(
            no_batch.replace("name: pytorch\n    backend: nccl", "name: mxnet")
            + "mode: allreduce\n"
        )
    )
    assert any(
        "'batch_size' is not used here" in e
        for e in errors(GOOD + "scaling: strong\nglobal_batch_size: 256\n")
    )


def test_profile_errors():
    source = parse_yaml(
        "name: p\nscheduler: slurmm\nslurm:\n  partiton: gpu\n  time_limit: 1 hour\n", "p.yaml"
    )
    with pytest.raises(InputError) as info:
        validate_profile(source)
    got = [str(p) for p in info.value.problems]
    assert (
        got[0]
        == "p.yaml:2:1: scheduler: 'slurmm' is not one of slurm, local (did you mean 'slurm'?)"
    )
    assert (
        got[1] == "p.yaml:4:3: slurm.partiton: unknown key 'partiton' (did you mean 'partition'?)"
    )
    assert got[2].startswith(
        "p.yaml:5:3: slurm.time_limit: time limit '1 hour' is not a Slurm time"
    )


def test_unsafe_values_rejected():
    source = parse_yaml(
        "name: p\nscheduler: slurm\nslurm:\n  partition: 'gpu; rm -rf ~'\n"
        "  extra_sbatch: ['--comment=$(id)']\nenv:\n  'BAD NAME': x\n",
        "p.yaml",
    )
    with pytest.raises(InputError) as info:
        validate_profile(source)
    wheres = [p.where for p in info.value.problems]
    assert wheres == ["slurm.partition", "slurm.extra_sbatch[0]", "env.BAD NAME"]


def test_closest():
    assert closest("glo", ["nccl", "gloo", "mpi"]) == "gloo"
    assert closest("zzzz", ["nccl", "gloo", "mpi"]) is None


def test_cli_bad_spec_exit_2_no_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("backend: nccl", "backend: ncl"))
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "validate", str(bad), "--cluster", "local"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"{bad}:5:5: frameworks[0].backend: 'ncl' is not one of nccl, gloo, mpi "
        "(did you mean 'nccl'?)"
    )


@pytest.mark.parametrize(
    "value,expected",
    [
        (
            "synthetc",
            "'synthetc' is not synthetic, digits, text or a path to an image folder "
            "(with a '/') (did you mean 'synthetic'?)",
        ),
        ("mnist", "data kind 'mnist' needs a path: {kind: mnist, path: ...}"),
    ],
)
def test_data_shorthand(value, expected):
    got = errors(GOOD + f"data: {value}\n")
    assert got == [f"x.yaml:10:1: data: {expected}"]


def test_relative_data_path_is_relative_to_the_spec(tmp_path):
    from ddlbench.spec.load import load_spec

    path = tmp_path / "s.yaml"
    path.write_text(GOOD + "data: {kind: mnist, path: data/mnist}\n")
    assert load_spec(path).value.data.path == str(tmp_path / "data" / "mnist")


def test_profile_paths_must_expand(monkeypatch):
    monkeypatch.delenv("NO_SUCH_VAR", raising=False)
    source = parse_yaml(
        "name: p\nscheduler: local\nenvironments:\n  pytorch:\n    venv: $NO_SUCH_VAR/x\n"
        "templates: /no/such/folder\n",
        "p.yaml",
    )
    with pytest.raises(InputError) as info:
        validate_profile(source)
    got = [str(p) for p in info.value.problems]
    assert got == [
        "p.yaml:5:5: environments.pytorch.venv: environment variable NO_SUCH_VAR is not set "
        "(used in '$NO_SUCH_VAR/x') (export NO_SUCH_VAR before running ddlbench, or give a "
        "default: ${NO_SUCH_VAR:-...})",
        "p.yaml:6:1: templates: no such folder: /no/such/folder",
    ]


def test_environment_keys_by_label():
    source = parse_yaml(
        "name: p\nscheduler: slurm\nenvironments:\n  horovod-tf: {modules: [tf]}\n"
        "  horovod: {modules: [torch]}\n  pytorh: {}\n",
        "p.yaml",
    )
    with pytest.raises(InputError, match=r"p.yaml:6:3: environments.pytorh: 'pytorh' is not"):
        validate_profile(source)
    fixed = parse_yaml(source.text.replace("  pytorh: {}\n", ""), "p.yaml")
    profile = validate_profile(fixed)
    assert profile.setup_for("horovod", "horovod-tf").modules == ["tf"]
    assert profile.setup_for("horovod", "horovod-torch").modules == ["torch"]


@pytest.mark.parametrize("name", ["evil\nname", "red\x1b[31m", "it's"])
def test_a_profile_or_campaign_name_with_a_control_character_is_printed_escaped(tmp_path, name):
    """A newline in a name must not split the message into a line that looks like another."""
    from tests.support.cli import invoke
    from tests.support.repo import ROOT

    spec = ROOT / "configs" / "quickstart.yaml"
    for args in (["validate", spec, "--cluster", name], ["status", name, "--results", tmp_path]):
        res = invoke(args)
        assert res.exit_code == 2, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and repr(name) in lines[0], res.stderr


def test_an_epoch_size_only_for_synthetic_data():
    from ddlbench.spec.load import load_spec_text

    got = errors(GOOD + "data: {kind: digits, samples: 1000}\n")
    assert len(got) == 1 and got[0].startswith("x.yaml:10:")
    assert "samples sets the size of a synthetic epoch; data kind 'digits'" in got[0]
    digits = load_spec_text(GOOD + "data: digits\n").value.data
    assert digits.samples is None  # runs.csv showed ImageNet's 1,281,167 for the digits
    assert load_spec_text(GOOD + "data: synthetic\n").value.data.samples == 1_281_167
    assert load_spec_text(GOOD + "data: {samples: 5000}\n").value.data.samples == 5000
