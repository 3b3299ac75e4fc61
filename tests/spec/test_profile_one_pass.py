"""Cluster profile errors: every problem in one pass, empty interpreter/venv values, and the
key each message names."""

from __future__ import annotations

import pytest

from ddlbench.errors import InputError
from ddlbench.spec.load import validate_profile
from ddlbench.spec.yamlsource import parse_yaml
from tests.support.cli import invoke
from tests.support.repo import ROOT

BAD = """\
name: bad
scheduler: slurm
gpus_per_node: four
slurm:
  srun_options: ["--foo bar"]
environments:
  pytroch:
    modules: cuda/12
    venv: $NO_SUCH_VAR_9/x
  default:
    python: ""
templates: /no/such/templates
"""


def _problems(text: str) -> list:
    with pytest.raises(InputError) as info:
        validate_profile(parse_yaml(text, "p.yaml"))
    return [str(p) for p in info.value.problems]


def test_every_profile_problem_comes_in_one_pass(monkeypatch):
    """A typo in an environments key, an unset variable in a venv and a missing templates
    folder are reported with the model's own errors, not one round later."""
    monkeypatch.delenv("NO_SUCH_VAR_9", raising=False)
    got = _problems(BAD)
    assert [g.split(": ")[0] for g in got] == [
        "p.yaml:3:1",
        "p.yaml:5:18",
        "p.yaml:7:3",
        "p.yaml:8:5",
        "p.yaml:9:5",
        "p.yaml:11:5",
        "p.yaml:12:1",
    ], got
    assert "environments.pytroch: 'pytroch' is not 'default'" in got[2]
    assert "(did you mean 'pytorch'?)" in got[2]
    assert "environments.pytroch.venv: environment variable NO_SUCH_VAR_9 is not set" in got[4]
    assert got[6] == "p.yaml:12:1: templates: no such folder: /no/such/templates"


def test_a_problem_is_said_once_when_the_model_also_finds_it():
    got = _problems("name: p\nscheduler: slurmm\nenvironments:\n  pytroch: {}\n")
    assert len(got) == 2 and sum("'pytroch' is not" in g for g in got) == 1


@pytest.mark.parametrize("key", ["python", "venv", "conda", "module_init"])
def test_an_empty_interpreter_or_environment_path_is_an_error(key):
    text = f'name: p\nscheduler: slurm\nenvironments:\n  default:\n    {key}: " "\n'
    got = _problems(text)
    assert len(got) == 1 and got[0].startswith(f"p.yaml:5:5: environments.default.{key}: is empty")


def test_srun_options_error_names_its_own_key():
    got = _problems('name: p\nscheduler: slurm\nslurm:\n  srun_options: ["--foo bar"]\n')
    assert got == [
        "p.yaml:4:18: slurm.srun_options[0]: srun option '--foo bar' must be a single option like "
        "--network=sn_all (no spaces, quotes or shell characters)"
    ]
    sbatch = _problems('name: p\nscheduler: slurm\nslurm:\n  extra_sbatch: ["--foo bar"]\n')
    assert "slurm.extra_sbatch[0]: extra sbatch option '--foo bar'" in sbatch[0]


def test_validate_with_an_empty_python_exits_2(tmp_path):
    profile = tmp_path / "s5.yaml"
    profile.write_text(
        "name: s5\nscheduler: slurm\ngpus_per_node: 4\nslurm: {partition: gpu}\n"
        'environments:\n  default:\n    python: ""\n    venv: ""\n'
    )
    res = invoke(["validate", str(ROOT / "configs" / "quickstart.yaml"), "--cluster", profile])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert [ln.split(": ")[1] for ln in lines] == [
        "environments.default.python",
        "environments.default.venv",
    ]
    assert lines[0].startswith(f"{profile}:7:5: ") and "Traceback" not in res.stderr
