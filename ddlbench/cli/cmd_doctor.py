"""ddlbench doctor."""

from __future__ import annotations

from pathlib import Path

import click

from ddlbench.cli.common import cluster_option, results_option, stdout_console

MARKS = {"ok": "[green]ok[/]  ", "fail": "[red]FAIL[/]", "skip": "[dim]skip[/]"}


@click.command(
    epilog="""\b
Examples:
  ddlbench doctor                              # every framework, with the default profile
  ddlbench doctor --cluster localslurm
  ddlbench doctor configs/resnet50.yaml        # the spec's frameworks, on its cluster
  ddlbench doctor --json
"""
)
@click.argument("spec_path", metavar="[SPEC]", required=False)
@cluster_option
@results_option
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def command(spec_path: str | None, cluster: str | None, results: Path, as_json: bool) -> None:
    """Report which frameworks are usable with a cluster profile, and why not.

    Each framework's set-up from the profile (modules, venv or conda, container) runs in a
    fresh shell, exactly as in a job script, and the framework is imported there; its version or
    the import error is shown; a framework the profile does not set up is "not configured"
    (unless the spec names it). On Slurm profiles the scheduler and the partition are checked
    too; on GPU profiles the GPUs against gpus_per_node, the driver, CUDA, NCCL and NVML (each
    skipped, with the reason, where this node has no GPU). Also: the results folder is
    writable, and environments built by scripts/make-envs.sh match their pins. Exit code 0
    when nothing checked failed, 1 otherwise.
    """
    from ddlbench.doctor import Entry, files_in_use, run_doctor
    from ddlbench.doctor import as_json as to_json
    from ddlbench.spec.load import choose_profile, load_profile, load_spec

    entries = None
    if spec_path:
        spec = load_spec(spec_path)
        profile, why = choose_profile(spec, cluster)
        entries = [
            Entry(e.name, e.id_label, e.options.model_dump(exclude_none=True))
            for e in spec.value.frameworks
        ]
    else:
        from ddlbench.spec.load import default_profile_name, option_profile

        if cluster:
            profile, why = option_profile(cluster), "--cluster"
        else:
            name, why = default_profile_name()
            profile = load_profile(name)
    checks = run_doctor(profile.value, entries, results)
    files = files_in_use(profile.value, profile.path, spec_path)
    if as_json:
        click.echo(to_json(profile.value, checks, files))
    else:
        console = stdout_console()
        from rich.markup import escape

        console.print(f"cluster profile [bold]{profile.value.name}[/] [dim]({escape(why)})[/]")
        print_files(console, files)
        for c in checks:
            mark = MARKS.get(c.state, "[dim]--[/]  ")
            took = f" [dim]({c.seconds:.1f} s)[/]" if c.seconds else ""
            console.print(f"  {mark} {c.name:<14} {escape(str(c.detail))}{took}", markup=True)
        unset = [c.name for c in checks if c.state == "not configured"]
        if unset:
            console.print(f"not configured in the profile: {', '.join(unset)}")
        console.print(not_usable_line(checks), markup=False, highlight=False)
    if not all(c.ok for c in checks):
        raise SystemExit(1)


def print_files(console, files) -> None:
    """Which profile file and template folders are in use (site overrides come first)."""
    console.print(f"  profile file   {files.profile}", markup=False, highlight=False)
    for i, folder in enumerate(files.templates):
        last = i == len(files.templates) - 1
        why = files.templates_from if last else "the profile's 'templates'"
        label = "templates" if i == 0 else ""
        console.print(f"  {label:<14} {folder} ({why})", markup=False, highlight=False)
    if files.examples:
        console.print(f"  example specs  {files.examples}", markup=False, highlight=False)


def not_usable_line(checks) -> str:
    """``all usable``, or the failed checks grouped by the docs page that says how to fix them."""
    pages: dict = {}
    for c in checks:
        if not c.ok:
            pages.setdefault(c.docs, []).append(c.name)
    if not pages:
        return "all usable"
    parts = [
        ", ".join(names) + (f" (see 'ddlbench docs {page}')" if page else "")
        for page, names in pages.items()
    ]
    return "not usable: " + "; ".join(parts)
