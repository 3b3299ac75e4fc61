"""ddlbench init [DIR]."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(
    epilog="""\b
Examples:
  ddlbench init                  # ./configs/*.yaml and ./configs/clusters/<cluster>.yaml
  ddlbench init ~/bench && cd ~/bench
  ddlbench validate configs/quickstart.yaml --cluster mycluster   # the profile init wrote
"""
)
@click.argument("folder", default=".", metavar="[DIR]", type=click.Path(file_okay=False))
def command(folder: str) -> None:
    """Start a working folder: the example specs and a commented cluster profile.

    Writes the example specs to DIR/configs/ and a cluster profile to
    DIR/configs/clusters/NAME.yaml, where specs in DIR/configs/ (and commands run in DIR) find
    it. On a Slurm login node the profile is filled from sinfo and scontrol show node (the
    default partition, GPUs per node from Gres, CPUs, memory) and named after the Slurm
    cluster; elsewhere it is a skeleton to fill in. A file that exists is never overwritten.
    """
    from ddlbench.cli.common import check_output_folder
    from ddlbench.site_init import init_folder

    root = Path(folder)
    check_output_folder(root, "DIR")
    result = init_folder(root)
    for path in result.written:
        click.echo(f"wrote {path}")
    for path in result.kept:
        click.echo(f"kept  {path} (exists; not overwritten)")
    name = result.profile_name
    if result.from_slurm:
        click.echo(f"cluster profile '{name}' filled from this node's Slurm; check it, then:")
    elif result.sinfo_problem:
        click.echo(
            f"cluster profile '{name}' is a skeleton: sinfo is here but failed "
            f"({result.sinfo_problem}); fill it in (or delete it and run ddlbench init again "
            "once sinfo answers), then:"
        )
    else:
        click.echo(f"cluster profile '{name}' is a skeleton (no Slurm here): fill it in, then:")
    cd = "" if root.resolve() == Path.cwd().resolve() else f"cd {root} && "
    # quickstart (1 node, 2 CPU ranks, gloo) fits any profile, a CPU one included; the GPU
    # specs (resnet50, vgg16: nccl, up to 8 nodes) need a GPU profile that large
    click.echo(f"  {cd}ddlbench validate configs/quickstart.yaml --cluster {name}")
    click.echo("  ddlbench submit configs/quickstart.yaml    # runs on this machine, no cluster")
    click.echo("  ddlbench docs cluster-profiles            # what each profile key means")
