"""Options and helpers shared by the commands."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Optional

import click

from ddlbench.campaign.resolve import DEFAULT_RESULTS, ENV_RESULTS

#: set by a command whose work is all done and written (:func:`exit_quickly`)
_QUICK_EXIT: list = []


def exit_quickly() -> None:
    """Let ``ddlbench.cli.run`` end this process without the interpreter's teardown once the
    command returns: unloading pandas and pyarrow and freeing every object takes 0.1-0.2 s of
    a ``report`` or ``collect``. Call only when every file is written and no thread that
    writes one still runs; in-process callers of the click group (tests) are not affected."""
    _QUICK_EXIT.append(True)


def quick_exit_requested() -> bool:
    return bool(_QUICK_EXIT)


RESULTS_HELP = (
    "Folder that holds the campaigns (each in RESULTS/CAMPAIGN/). The same option, with the "
    "same default, on every command."
)

results_option = click.option(
    "--results",
    "results",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    # set but empty (DDLBENCH_RESULTS=) is unset: ./results, never the current folder
    default=lambda: os.environ.get(ENV_RESULTS) or DEFAULT_RESULTS,
    show_default="./results, or $DDLBENCH_RESULTS",
    help=RESULTS_HELP,
)


def deprecated_option(old: str, dest: str, use: str, meaning: str):
    """A hidden option kept for old command lines: it still works, and says once on stderr
    which option replaces it."""

    def warn(ctx: click.Context, _param: click.Parameter, value: Optional[Path]):
        if value is not None:
            click.echo(
                f"ddlbench {ctx.info_name}: {old} is deprecated; use {use} ({meaning})",
                err=True,
            )
        return value

    return click.option(
        old,
        dest,
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        hidden=True,
        expose_value=True,
        callback=warn,
        help=f"Deprecated: use {use}.",
    )


def _refuse_out(ctx: click.Context, _param: click.Parameter, value: Optional[str]):
    if value is not None:
        raise click.UsageError(
            f"{ctx.info_name} has no --out option; the folder that holds the campaigns is "
            f"--results DIR (ddlbench {ctx.info_name} ... --results {value})",
            ctx,
        )


#: commands that take --results only: a stray --out gets a pointer to --results (exit 2)
no_out_option = click.option(
    "--out", "_out", default=None, hidden=True, expose_value=False, callback=_refuse_out
)


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user set parameter ``name`` on the command line."""
    from click.core import ParameterSource

    return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE


#: every command that prints progress takes -q (docs/cli.md#progress-and--q)
quiet_option = click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="No progress messages: only the result, warnings and errors.",
)


def _cluster_help() -> str:
    """``--cluster``'s help: where a name is looked up, and the shipped profiles, listed from
    the folder the loader reads (:func:`ddlbench.spec.load.profile_search_path`)."""
    from ddlbench.shipped import profile_names, shipped_profiles

    shipped = ", ".join(profile_names(shipped_profiles())) or "none"
    return (
        "Cluster profile: a name or a path to a YAML file. A name is looked up in "
        "$DDLBENCH_CLUSTERS, the spec's clusters/ folder, ./configs/clusters, then the "
        f"profiles ddlbench ships ({shipped}). Overrides the spec's 'cluster'."
    )


cluster_option = click.option(
    "--cluster",
    "cluster",
    metavar="PROFILE",
    default=None,
    help=_cluster_help(),
)


def stderr_console(quiet: bool = False):
    """Console for progress and notes on stderr; ``quiet`` (``-q``): it prints nothing.

    Text is printed as given: no markup (``[bold]`` in a spec's path stays), no emoji codes,
    and no line broken at the terminal's width, so a log of it can be grepped line by line."""
    from rich.console import Console

    return Console(
        stderr=True, highlight=False, quiet=quiet, markup=False, emoji=False, soft_wrap=True
    )


def check_output_folder(folder: Optional[Path], what: str) -> None:
    """Refuse (``InputError``, exit 2) a folder ddlbench could not create or write into: one
    under a regular file, or where the file system says no (``/proc``, read-only, no
    permission). Nothing is created: a probe folder is made in its nearest existing parent
    and removed again. None (an option not given) passes."""
    import tempfile

    from ddlbench.errors import InputError, Problem

    if folder is None:
        return
    folder = Path(folder).expanduser()
    parent = folder.absolute()
    why = None
    try:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        is_file = parent.exists() and not parent.is_dir()
    except OSError as exc:  # a parent that may not be entered (no permission)
        why, is_file = f"{parent} cannot be looked into ({exc.strerror or exc})", False
    if is_file:
        why = f"{parent} is a file, not a folder"
    elif why is None:
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".ddlbench-probe-", dir=parent))
        except OSError as exc:
            why = f"{parent} does not accept new files ({exc.strerror or exc})"
    if why:
        raise InputError(
            Problem(f"{what} {folder}: cannot write there: {why}; choose another folder")
        )


class _TrimmedLines:
    """stdout without the blanks a table pads its lines with: a left-aligned last column
    otherwise ends every line with spaces up to its widest cell, which a pipe keeps."""

    def __init__(self, out) -> None:
        self._out = out
        self._tail = ""

    def write(self, text: str) -> int:
        lines = (self._tail + text).split("\n")
        self._tail = lines.pop()
        if lines:
            self._out.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._tail:
            self._out.write(self._tail.rstrip(" "))
            self._tail = ""
        self._out.flush()

    def isatty(self) -> bool:
        return False


def stdout_console():
    """Console for tables: as wide as needed when stdout is a pipe, so ids are never cut, and
    without trailing blanks there."""
    from rich.console import Console

    class _StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich would point stdout at /dev/null and exit 1 itself; the CLI's one handler
            # of a closed pipe (``ddlbench.cli``) exits quietly with its own code
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    console = _StdoutConsole(highlight=False)
    if not console.is_terminal:
        console = _StdoutConsole(highlight=False, width=250, file=_TrimmedLines(sys.stdout))
    return console


def results_source(ctx: click.Context) -> str:
    """How the results folder was chosen, for a message: ``--results`` or the variable."""
    if given(ctx, "results") or not os.environ.get(ENV_RESULTS):
        return "--results"
    return f"${ENV_RESULTS}"


def node_hours_text(hours: float) -> str:
    """Node-hours as ``plan --json`` rounds them (3 decimals), without trailing zeros:
    ``0.25``, ``112.5``; the text and the JSON never disagree."""
    return f"{round(float(hours), 3):.3f}".rstrip("0").rstrip(".")


def campaign_dir(results: Path, campaign: Optional[str]) -> Path:
    """The folder of ``campaign`` (a name under ``results``, or a path); with none named, the
    latest campaign. One rule for every command: :mod:`ddlbench.campaign.resolve`."""
    from ddlbench.campaign.resolve import resolve_campaign

    return resolve_campaign(campaign, results)


def is_tty() -> bool:
    return sys.stderr.isatty()


def runs_text(n: int) -> str:
    """``1 run``, ``6 runs``."""
    return f"{n} run" if n == 1 else f"{n} runs"
