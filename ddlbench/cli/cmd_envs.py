"""ddlbench envs build|check: the pinned framework environments, from a checkout or a wheel."""

from __future__ import annotations

import os
import subprocess
from typing import List, Tuple

import click

#: framework (or environment) name -> the environment ``scripts/make-envs.sh`` builds for it
ENV_OF = {
    "pytorch": "torch",
    "torch": "torch",
    "tensorflow": "tensorflow",
    "keras": "tensorflow",
    "horovod": "horovod",
    "mxnet": "mxnet",
}


def env_names(names: Tuple[str, ...]) -> List[str]:
    """The environments for framework (or environment) names, in order, each once; none
    named: every environment. An unknown name is bad input (exit 2)."""
    from ddlbench.errors import InputError, Problem, did_you_mean, quoted

    out: List[str] = []
    for name in names:
        env = ENV_OF.get(name)
        if env is None:
            known = ", ".join(sorted(ENV_OF))
            raise InputError(
                Problem(f"no environment for {quoted(name)}{did_you_mean(name, ENV_OF)}: {known}")
            )
        if env not in out:
            out.append(env)
    return out


def _run(args: List[str]) -> int:
    """Run the shipped ``make-envs.sh`` with ``args``, its output going straight through."""
    from ddlbench.errors import DDLBenchError
    from ddlbench.shipped import shipped_make_envs

    script = shipped_make_envs()
    if script is None:
        raise DDLBenchError(
            "the environment builder (scripts/make-envs.sh and its pins) is not in this "
            "installation of ddlbench: reinstall it from a wheel or an sdist"
        )
    env = dict(os.environ, DDLBENCH_ENVS_COMMAND="ddlbench envs build")
    return subprocess.run(["bash", str(script), *args], env=env).returncode


@click.group(
    epilog="""\b
Examples:
  ddlbench envs build pytorch        # the torch environment (a few minutes)
  ddlbench envs build                # torch, tensorflow, mxnet and horovod (Horovod compiles)
  DDLBENCH_ENVS=/scratch/envs ddlbench envs build tensorflow
  ddlbench envs check                # each environment usable and up to date?
"""
)
def command() -> None:
    """Build or check the pinned Python environments of the frameworks.

    One virtualenv per environment under $DDLBENCH_ENVS (default ~/.cache/ddlbench/envs), the
    folder the shipped 'local' and 'localslurm' profiles use: torch (pytorch), tensorflow
    (tensorflow, keras), horovod (Horovod with PyTorch and TensorFlow, compiled from source:
    needs cmake, g++ and make) and mxnet. The pins ship with ddlbench ('ddlbench docs
    environments').
    """


@command.command()
@click.argument("frameworks", nargs=-1, metavar="[FRAMEWORK...]")
def build(frameworks: Tuple[str, ...]) -> None:
    """Build the environments of FRAMEWORK... (default: all); up-to-date ones are skipped.

    \b
    Examples:
      ddlbench envs build pytorch
      ddlbench envs build keras mxnet
    """
    raise SystemExit(_run(env_names(frameworks)))


@command.command()
@click.argument("frameworks", nargs=-1, metavar="[FRAMEWORK...]")
def check(frameworks: Tuple[str, ...]) -> None:
    """Check that each environment exists, matches its pins and imports; exit 1 if not.

    \b
    Examples:
      ddlbench envs check
      ddlbench envs check pytorch
    """
    raise SystemExit(_run(["--check", *env_names(frameworks)]))
