"""ddlbench validate SPEC."""

from __future__ import annotations

import click

from ddlbench.cli.common import cluster_option, node_hours_text


@click.command(
    epilog="""\b
Examples:
  ddlbench validate configs/resnet50.yaml            # on the spec's cluster (iris: GPUs)
  ddlbench validate configs/quickstart.yaml configs/lenet-mnist.yaml --cluster local

The specs in configs/ that use nccl (resnet50, vgg16, llama3-8b) need a GPU profile: with
--cluster local (CPU only) they are refused, exit 2.
"""
)
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@cluster_option
def command(specs: tuple, cluster: str | None) -> None:
    """Check experiment specs and their cluster profiles without rendering anything.

    Every problem is printed as FILE:LINE:COL: WHERE: WHAT, and the exit code is 2 if any
    spec is invalid. The sweep is planned too, so impossible scale points are caught here.
    A valid spec that would measure too little (fewer than 3 repeats, a measured window that
    may be shorter than 5 s) gets FILE:LINE: warning: lines on stderr; they do not change
    the exit code.
    """
    from ddlbench.errors import InputError
    from ddlbench.plan import plan_runs
    from ddlbench.plan.advice import measurement_warnings
    from ddlbench.plan.data_check import data_warnings
    from ddlbench.spec.load import choose_profile, load_spec

    problems = []
    for path in specs:
        try:
            spec = load_spec(path)
            profile, _why = choose_profile(spec, cluster)
            plan = plan_runs(spec.value, profile.value, spec.source)
            click.echo(
                f"{path}: ok ({len(plan.runs)} runs on '{profile.value.name}', "
                f"{node_hours_text(plan.node_hours)} node-hours requested)"
            )
            warnings = measurement_warnings(spec.value, spec.source)
            for line in warnings + data_warnings(plan, spec.source):
                click.echo(line, err=True)
        except InputError as exc:
            problems += exc.problems
    if problems:
        raise InputError(problems)
