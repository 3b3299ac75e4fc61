"""Spec values are not coerced, model-level errors sit at their key, and what the workloads
refuse at run time is refused (or warned about) by ``validate`` first."""

from __future__ import annotations

import textwrap
from typing import List

import pytest

from ddlbench.errors import InputError
from ddlbench.plan.advice import measurement_warnings
from ddlbench.plan.planner import plan_runs
from ddlbench.spec.load import load_profile, load_spec_text, validate_profile
from ddlbench.spec.yamlsource import parse_yaml
from tests.support.cli import invoke

BASE = """\
name: t15
frameworks: [pytorch]
scale: {nodes: [1]}
repeats: 3
steps: {measure_seconds: 10}
"""


def errors(text: str) -> List[str]:
    with pytest.raises(InputError) as info:
        load_spec_text(textwrap.dedent(text), "t.yaml")
    return [str(p) for p in info.value.problems]


def plan_errors(text: str) -> List[str]:
    spec = load_spec_text(textwrap.dedent(text), "t.yaml")
    with pytest.raises(InputError) as info:
        plan_runs(spec.value, load_profile("local").value, spec.source)
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    "extra, expected",
    [
        ("epochs: true\n", "t.yaml:6:1: epochs: expected an integer, got true, a boolean"),
        ('mllog: "yes"\n', "t.yaml:6:1: mllog: expected true or false, got 'yes'"),
        ('mllog: "no"\n', "t.yaml:6:1: mllog: expected true or false, got 'no'"),
        ("compile: 1\n", "t.yaml:6:1: compile: expected true or false, got 1"),
        ("seed: 1.0\n", "t.yaml:6:1: seed: expected an integer, got 1.0"),
        (
            "optimizer: {lr: true}\n",
            "t.yaml:6:13: optimizer.lr: expected a number, got true, a boolean",
        ),
        ('optimizer: {nesterov: "yes"}\n', "t.yaml:6:13: optimizer.nesterov: expected true"),
        ("watchdog: {floor_s: true}\n", "t.yaml:6:12: watchdog.floor_s: expected a number"),
        ("batch_size: [32, 128.5]\n", "t.yaml:6:18: batch_size[1]: expected an integer, got 128.5"),
        ("batch_size: 32.0\n", "t.yaml:6:1: batch_size: expected an integer, got 32.0"),
        (
            "inject: {straggler: {probability: 0.1, min_slowdown: true}}\n",
            "t.yaml:6:40: inject.straggler.min_slowdown: expected a number, got true, a boolean",
        ),
        (
            "inject: {straggler: {probability: 0.1, persist_steps: true}}\n",
            "t.yaml:6:40: inject.straggler.persist_steps: expected an integer, got true, a boolean",
        ),
    ],
)
def test_bools_and_strings_are_not_numbers(extra: str, expected: str) -> None:
    (problem,) = errors(BASE + extra)
    assert problem.startswith(expected)


def test_a_string_repeat_count_is_refused() -> None:
    text = BASE.replace("repeats: 3", 'repeats: "3"')
    assert errors(text) == ["t.yaml:4:1: repeats: expected an integer, got '3'"]


def test_a_bool_warmup_step_count_is_refused() -> None:
    text = BASE.replace("{measure_seconds: 10}", "{measure_seconds: 10, warmup: false}")
    assert errors(text) == [
        "t.yaml:5:30: steps.warmup: expected an integer, got false, a boolean "
        "(YAML reads no and off as false too)"
    ]


@pytest.mark.parametrize(
    "value, got",
    [
        ("true", "true, a boolean (YAML reads yes and on as true too)"),
        ('"1"', "'1'"),
        ("1.5", "1.5"),
    ],
)
def test_backup_workers_takes_an_integer_only(value: str, got: str) -> None:
    text = BASE.replace("[pytorch]", f"[{{name: pytorch, backup_workers: {value}}}]")
    (problem,) = errors(text)
    assert problem.startswith("t.yaml:2:")
    assert problem.endswith(f"frameworks[0].backup_workers: expected an integer, got {got}")


def test_an_integer_where_a_number_is_expected_is_fine() -> None:
    spec = load_spec_text(BASE + "optimizer: {lr: 1, momentum: 0}\n", "t.yaml").value
    assert spec.optimizer.lr == 1.0 and isinstance(spec.optimizer.lr, float)


def test_shipped_profiles_validate_strictly() -> None:
    assert load_profile("local").value.name == "local"


def test_a_profile_bool_is_not_a_number() -> None:
    text = "name: x\nscheduler: local\ndevice: cpu\ngpus_per_node: true\n"
    with pytest.raises(InputError) as info:
        validate_profile(parse_yaml(text, "p.yaml"))
    assert (
        "p.yaml:4:1: gpus_per_node: expected an integer, got true, a boolean "
        "(YAML reads yes and on as true too)" in [str(p) for p in info.value.problems]
    )


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            "target_accuracy: 0.5\n",
            "t.yaml:6:1: target_accuracy: 'target_accuracy' applies to mode 'convergence' only",
        ),
        ("mode: convergence\n", "t.yaml:6:1: mode: mode 'convergence' needs 'epochs'"),
        (
            "scaling: strong\n",
            "t.yaml:6:1: scaling: scaling 'strong' needs 'global_batch_size'",
        ),
        (
            "global_batch_size: 64\n",
            "t.yaml:6:1: global_batch_size: 'global_batch_size' applies to scaling 'strong'",
        ),
        (
            "allreduce: {min_bytes: 2048, max_bytes: 1024}\n",
            "t.yaml:6:13: allreduce.min_bytes: allreduce.min_bytes is larger than",
        ),
        ("zip: [scale, scale]\n", "t.yaml:6:14: zip[1]: zip lists an axis twice"),
        ("zip: [scale, variants]\n", "t.yaml:6:14: zip[1]: zip names 'variants' but none"),
        ("data: {kind: digits, samples: 10}\n", "t.yaml:6:22: data.samples: samples sets"),
    ],
)
def test_rules_between_keys_point_at_the_key(extra: str, expected: str) -> None:
    (problem,) = errors(BASE + extra)
    assert problem.startswith(expected)


def test_max_measure_below_measure_points_at_max_measure() -> None:
    text = BASE.replace(
        "{measure_seconds: 10}", "{measure_seconds: 10, measure: 50, max_measure: 9}"
    )
    (problem,) = errors(text)
    assert problem.startswith("t.yaml:5:43: steps.max_measure: max_measure (9) is below")


BACKUPS = """\
name: t15
frameworks:
  - {name: pytorch, backup_workers: 0}
precision: bf16
scale: {nodes: [1], gpus_per_node: 2}
repeats: 3
steps: {measure_seconds: 10}
"""


def test_backup_workers_in_bf16_is_refused_at_the_precision() -> None:
    (problem,) = plan_errors(BACKUPS)
    assert problem.startswith(
        "t.yaml:4:1: precision: pytorch: backup_workers runs in precision fp32 or tf32 only"
    )


def test_backup_workers_in_amp_from_a_variant_is_refused_at_the_variant() -> None:
    text = BACKUPS.replace("precision: bf16\n", "variants: [{label: a, precision: amp}]\n")
    (problem,) = plan_errors(text)
    assert problem.startswith("t.yaml:4:23: variants[0].precision: pytorch: backup_workers")
    assert "not amp" in problem


def test_backup_workers_in_fp32_plans() -> None:
    spec = load_spec_text(BACKUPS.replace("bf16", "fp32"), "t.yaml")
    assert plan_runs(spec.value, load_profile("local").value, spec.source).runs


def test_validate_refuses_backup_workers_in_bf16(tmp_path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(BACKUPS)
    res = invoke(["validate", str(path), "--cluster", "local"])
    assert res.exit_code == 2, res.output
    assert f"{path}:4:1: precision: pytorch: backup_workers runs in" in res.stderr
    assert "Traceback" not in res.output


def test_convergence_on_synthetic_data_is_refused() -> None:
    (problem,) = errors(BASE + "mode: convergence\nepochs: 2\ndata: synthetic\n")
    assert problem.startswith("t.yaml:8:1: data: mode 'convergence' evaluates on a validation")


CONVERGENCE = BASE + "mode: convergence\ndata: digits\nepochs: 10\n"


def warnings_of(text: str) -> List[str]:
    spec = load_spec_text(text, "t.yaml")
    return measurement_warnings(spec.value, spec.source)


def test_warmup_longer_than_training_is_warned_at_its_line() -> None:
    found = warnings_of(CONVERGENCE + "lr_scaling: {warmup_epochs: 30}\n")
    assert len(found) == 1
    assert found[0].startswith("t.yaml:9: warning: lr_scaling.warmup_epochs: a warmup of 30")


def test_decay_after_the_end_is_warned_at_its_item() -> None:
    text = CONVERGENCE + "lr_scaling:\n  decay_epochs: [5, 10, 30]\n"
    found = warnings_of(text)
    assert [w.split(": a decay")[0] for w in found] == [
        "t.yaml:10: warning: lr_scaling.decay_epochs[1]",
        "t.yaml:10: warning: lr_scaling.decay_epochs[2]",
    ]


def test_a_variants_warmup_is_warned_at_the_variant() -> None:
    text = CONVERGENCE + "variants:\n  - {label: a, lr_scaling: {warmup_epochs: 12}}\n"
    (found,) = warnings_of(text)
    assert found.startswith("t.yaml:10: warning: variants[0].lr_scaling.warmup_epochs:")


def test_a_schedule_that_fits_gives_no_warning() -> None:
    text = CONVERGENCE + "lr_scaling: {warmup_epochs: 2, decay_epochs: [5, 9]}\n"
    assert warnings_of(text) == []


def test_validate_prints_the_schedule_warning_and_exits_0(tmp_path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(CONVERGENCE + "lr_scaling: {warmup_epochs: 30}\n")
    res = invoke(["validate", str(path), "--cluster", "local"])
    assert res.exit_code == 0, res.output
    assert f"{path}:9: warning: lr_scaling.warmup_epochs:" in res.stderr
