"""Every independent problem of a spec or a profile in one pass (docs/spec.md, Validation and
errors): each bad entry of a list and each bad key of a mapping at its own line and column,
the rules between keys all at once, the planner's problems together, in file order, once."""

from __future__ import annotations

from typing import List

import pytest

from ddlbench.errors import InputError
from ddlbench.plan import plan_runs
from ddlbench.spec.cluster import ClusterProfile
from ddlbench.spec.load import load_spec_text, validate_profile, validate_spec
from ddlbench.spec.yamlsource import parse_yaml
from tests.support.cli import invoke

SBATCH = "must be a single option like --signal=USR1@60 (no spaces, quotes or shell characters)"
ENV = "is not a valid shell name"

#: independent problems in the keys and values, the variant's env name among them
BAD_SPEC = """\
name: many
frameworks: [pytorch]
scale:
  points: [1x1, 1x0, 3y2, 2x2]
slurm:
  extra_sbatch: ["--comment=x y", "--signal=USR1@60", "--foo;bar", "--mail-user=$(id)"]
env:
  GOOD: "1"
  "BAD NAME": x
variants:
  - label: a
    env:
      OK: "1"
      "ALSO BAD": y
  - label: b
    env: {"1X": z}
"""


def _problems(run, *args) -> List[str]:
    with pytest.raises(InputError) as info:
        run(*args)
    return [str(p) for p in info.value.problems]


def _spec_problems(text: str) -> List[str]:
    return _problems(validate_spec, parse_yaml(text, "s.yaml"))


def test_every_bad_entry_and_name_of_a_spec_comes_in_one_pass():
    assert _spec_problems(BAD_SPEC) == [
        "s.yaml:4:17: scale.points[1]: scale point '1x0': nodes and GPUs per node must each "
        "be at least 1",
        "s.yaml:4:22: scale.points[2]: scale point '3y2' is not of the form NODESxGPUS, e.g. 2x4",
        f"s.yaml:6:18: slurm.extra_sbatch[0]: extra sbatch option '--comment=x y' {SBATCH}",
        f"s.yaml:6:55: slurm.extra_sbatch[2]: extra sbatch option '--foo;bar' {SBATCH}",
        f"s.yaml:6:68: slurm.extra_sbatch[3]: extra sbatch option '--mail-user=$(id)' {SBATCH}",
        f"s.yaml:9:3: env.BAD NAME: environment variable name 'BAD NAME' {ENV}",
        f"s.yaml:14:7: variants[0].env.ALSO BAD: environment variable name 'ALSO BAD' {ENV}",
        f"s.yaml:16:11: variants[1].env.1X: environment variable name '1X' {ENV}",
    ]


def test_a_bad_variant_env_name_comes_with_the_other_key_errors():
    """Not only once everything else is fixed, and at the name's own line, not 'variants'."""
    text = BAD_SPEC.replace("  points: [1x1, 1x0, 3y2, 2x2]", "  points: [1x1]")
    got = _spec_problems(text.replace('  extra_sbatch: ["', '  extra_sbatch: ["--ok", "'))
    assert [g.split(": ")[0] for g in got][-3:] == ["s.yaml:9:3", "s.yaml:14:7", "s.yaml:16:11"]
    assert not any(g.split(": ")[1] == "variants" for g in got)


CONSISTENCY = """\
name: rules
frameworks: [pytorch, tensorflow]
mode: convergence
scaling: strong
target_accuracy: 0.5
scale: {nodes: [1]}
allreduce: {min_bytes: 4096, max_bytes: 1024}
variants: [{label: a}]
zip: [scale, variants, scale]
data: digits
"""


def test_every_failing_rule_between_keys_is_reported():
    got = _spec_problems(CONSISTENCY)
    assert [g.split(": ", 2)[:2] for g in got] == [
        ["s.yaml:3:1", "mode"],
        ["s.yaml:4:1", "scaling"],
        ["s.yaml:7:13", "allreduce.min_bytes"],
        ["s.yaml:9:24", "zip[2]"],
    ]
    assert got[0].endswith("mode 'convergence' needs 'epochs'")
    assert got[1].endswith("scaling 'strong' needs 'global_batch_size' (it stays fixed)")
    assert got[3].endswith("zip lists an axis twice")


def test_every_rule_of_a_mapping_is_reported():
    text = "name: d\nframeworks: [pytorch]\nscale: {nodes: [1]}\ndata:\n  kind: mnist\n"
    got = _spec_problems(text + "  samples: 10\n")
    assert [g.split(": ")[:2] for g in got] == [
        ["s.yaml:5:3", "data.kind"],
        ["s.yaml:6:3", "data.samples"],
    ]
    assert got[0].endswith("data kind 'mnist' needs a path")


def test_two_rules_at_one_key_are_both_said():
    text = "name: w\nmode: convergence\nepochs: 1\nworkload:\n  command: [x]\n"
    text += "  framework: pytorch\nscale: {nodes: [1]}\ndata: digits\n"
    got = _spec_problems(text)
    assert got == ["s.yaml:2:1: mode: a spec's own 'workload' is measured in mode throughput only"]
    text = text.replace("epochs: 1\n", "")
    assert [g.split(": ", 2)[2] for g in _spec_problems(text)] == [
        "mode 'convergence' needs 'epochs'",
        "a spec's own 'workload' is measured in mode throughput only",
    ]


def test_every_duplicate_framework_label_is_reported_at_its_entry():
    text = "name: d\nframeworks:\n  - pytorch\n  - pytorch\n  - tensorflow\n  - tensorflow\n"
    got = _spec_problems(text + "scale: {nodes: [1]}\n")
    assert [g.split(": ")[:2] for g in got] == [
        ["s.yaml:4:5", "frameworks[1]"],
        ["s.yaml:6:5", "frameworks[3]"],
    ]


def test_every_repeated_variant_label_is_reported_at_its_label():
    text = "name: d\nframeworks: [pytorch]\nscale: {nodes: [1]}\nvariants:\n"
    text += "  - {label: a}\n  - {label: b}\n  - {label: a}\n  - label: b\n    compile: true\n"
    assert _spec_problems(text) == [
        "s.yaml:7:6: variants[2].label: variant label 'a' is already used by variants[0]; "
        "variant labels must be unique",
        "s.yaml:8:5: variants[3].label: variant label 'b' is already used by variants[1]; "
        "variant labels must be unique",
    ]


def test_every_bad_straggler_rank_is_reported_at_its_item():
    text = "name: i\nframeworks: [pytorch]\nscale: {points: [1x4]}\ninject:\n  straggler:\n"
    text += "    slowdown: 2\n    ranks:\n      - 1\n      - -1\n      - 1\n      - 2\n"
    assert _spec_problems(text) == [
        "s.yaml:9:9: inject.straggler.ranks[1]: ranks must be 0 or more, not -1",
        "s.yaml:10:9: inject.straggler.ranks[2]: rank 1 is listed twice (also ranks[0])",
    ]


def test_every_straggler_rule_is_reported():
    text = "name: i\nframeworks: [pytorch]\nscale: {nodes: [1]}\ninject:\n  straggler:\n"
    text += "    probability: 0.5\n    slowdown: 2\n    min_slowdown: 3\n    max_slowdown: 2\n"
    got = _spec_problems(text)
    assert [g.split(": ")[:2] for g in got] == [
        ["s.yaml:7:5", "inject.straggler.slowdown"],
        ["s.yaml:8:5", "inject.straggler.min_slowdown"],
    ]


BAD_PROFILE = """\
name: p
scheduler: slurm
slurm:
  extra_sbatch: ["--comment=x y", "--foo;bar", "--mail-user=$(id)"]
  srun_options: ["--ok", "--a b"]
network:
  ib_hca: [mlx5_0, "bad name", "mlx5_1:x"]
environments:
  pytroch: {}
  default:
    modules: [cuda/12, "x; rm", "y z"]
    env: {"A B": "1"}
  tenserflow: {}
env: {"C-D": "1", OK: "2"}
"""


def test_every_bad_entry_of_a_profile_comes_in_one_pass():
    got = _problems(validate_profile, parse_yaml(BAD_PROFILE, "p.yaml"))
    assert [g.split(": ")[:2] for g in got] == [
        ["p.yaml:4:18", "slurm.extra_sbatch[0]"],
        ["p.yaml:4:35", "slurm.extra_sbatch[1]"],
        ["p.yaml:4:48", "slurm.extra_sbatch[2]"],
        ["p.yaml:5:26", "slurm.srun_options[1]"],
        ["p.yaml:7:20", "network.ib_hca[1]"],
        ["p.yaml:7:32", "network.ib_hca[2]"],
        ["p.yaml:9:3", "environments.pytroch"],
        ["p.yaml:11:24", "environments.default.modules[1]"],
        ["p.yaml:11:33", "environments.default.modules[2]"],
        ["p.yaml:12:11", "environments.default.env.A B"],
        ["p.yaml:13:3", "environments.tenserflow"],
        ["p.yaml:14:7", "env.C-D"],
    ]
    assert got[0].endswith(f"extra sbatch option '--comment=x y' {SBATCH}")
    assert "(did you mean 'pytorch'?)" in got[6] and "(did you mean 'tensorflow'?)" in got[10]


PLAN = """\
name: planned
frameworks: [pytorch]
scaling: strong
global_batch_size: 96
scale:
  points: [1x1, 2x2, 1x1, 9x1, 1x8, 5x1]
"""


def test_the_planner_reports_every_point_at_once_and_no_knock_on():
    """A point listed twice, one beyond max_nodes, one too wide and one the global batch does
    not divide over, together; the refused points' own batch problems are not said."""
    loaded = load_spec_text(PLAN, "s.yaml")
    profile = ClusterProfile(name="four", scheduler="slurm", gpus_per_node=4, max_nodes=8)
    got = _problems(plan_runs, loaded.value, profile, loaded.source)
    assert [g.split(": ")[:2] for g in got] == [
        ["s.yaml:4:1", "global_batch_size"],
        ["s.yaml:6:22", "scale.points[2]"],
        ["s.yaml:6:27", "scale.points[3]"],
        ["s.yaml:6:32", "scale.points[4]"],
    ]
    assert "over 5 devices (5x1)" in got[0] and "listed twice" in got[1]
    assert "9 nodes asked" in got[2] and "8 GPUs per node asked" in got[3]


def test_cli_validate_reports_them_all_and_exits_2(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(BAD_SPEC)
    result = invoke(["validate", path, "--cluster", "local"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 8, lines
    assert [line.split(": ")[0] for line in lines] == [
        f"{path}:4:17",
        f"{path}:4:22",
        f"{path}:6:18",
        f"{path}:6:55",
        f"{path}:6:68",
        f"{path}:9:3",
        f"{path}:14:7",
        f"{path}:16:11",
    ]
