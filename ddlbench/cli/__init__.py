"""The ``ddlbench`` command line.

Every module ``ddlbench/cli/cmd_<name>.py`` defines a click command named ``command``; the group
registers them all, so adding a command touches nothing else. Command modules keep heavy
imports (pandas, matplotlib) inside their functions so that ``ddlbench --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import sys

import click

import ddlbench
from ddlbench.errors import DDLBenchError

EPILOG = """\b
Typical use on a login node:
  ddlbench init                                     # example specs, a cluster profile
  ddlbench validate configs/resnet50.yaml
  ddlbench plan configs/resnet50.yaml
  ddlbench submit configs/resnet50.yaml --dry-run   # render only
  ddlbench submit configs/resnet50.yaml
  ddlbench status
  ddlbench report

Exit codes: 0 success, 2 bad input, 1 any other failure, 3 nothing to report yet
(`report` without a complete run), 74 the output could not be written (`> /dev/full`),
75 the scheduler did not answer, 124 `wait --timeout` passed, 141 the reader closed the
output early (`| head`: nothing is printed). What each looks like: `ddlbench docs failures`.
Set DDLBENCH_DEBUG=1 to see tracebacks of unexpected errors.
"""


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list:
        return sorted(_commands())

    def get_command(self, ctx: click.Context, name: str):
        module = _commands().get(name)
        if module is None:
            return None
        return importlib.import_module(f"{__name__}.{module}").command

    def resolve_command(self, ctx, args):
        # suggest the closest command for a typo
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            from ddlbench.errors import did_you_mean

            if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
                raise click.UsageError(
                    f"no such command '{args[0]}'{did_you_mean(args[0], _commands())}", ctx
                ) from None
            raise exc

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except DDLBenchError as exc:
            for line in str(exc).splitlines():
                click.echo(f"ddlbench: {line}" if not _has_position(line) else line, err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("ddlbench: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:  # noqa: BLE001 - last line of defence: no traceback for users
            if isinstance(exc, BrokenPipeError) and _output_closed():
                # `ddlbench docs | head -2`: the reader has what it wanted; a broken pipe of
                # ddlbench's own (the figure worker's) stays an internal error
                _quiet_output()
                ctx.exit(EXIT_BROKEN_PIPE)
            from ddlbench.diskfull import DiskFull, detail_of, folder_of, is_disk_full

            if _output_not_written(ctx, exc):
                return None
            if is_disk_full(exc) and not os.environ.get("DDLBENCH_DEBUG"):
                full = DiskFull(folder_of(exc), detail_of(exc))
                click.echo(f"ddlbench: {full}", err=True)
                ctx.exit(full.exit_code)
            if os.environ.get("DDLBENCH_DEBUG"):
                raise
            click.echo(
                f"ddlbench: internal error: {type(exc).__name__}: {exc} "
                "(set DDLBENCH_DEBUG=1 for the traceback)",
                err=True,
            )
            ctx.exit(1)


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a program killed by it


def _output_not_written(ctx: click.Context, exc: BaseException) -> bool:
    """A failed write to stdout or stderr (``> /dev/full``): say so (not "no space left on the
    disk that holds" the current folder, whose disk may be fine) and exit 74."""
    code = output_failure_code(exc)
    if code is None:
        return False
    ctx.exit(code)
    return True  # pragma: no cover - ctx.exit raises


def output_failure_code(exc: BaseException):
    """Say that the output could not be written and return its exit code (74), when ``exc`` is
    a failed write to stdout or stderr; None otherwise (or with DDLBENCH_DEBUG set)."""
    from ddlbench.diskfull import OutputNotWritten, detail_of, failed_stream

    stream = failed_stream(exc)
    if stream is None or os.environ.get("DDLBENCH_DEBUG"):
        return None
    said = OutputNotWritten(stream, detail_of(exc))
    with contextlib.suppress(OSError, ValueError):
        click.echo(f"ddlbench: {said}", err=True)
    if stream == "stdout":
        _quiet_stdout()
    return said.exit_code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for it cannot fail again at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # a test's buffer
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _output_closed() -> bool:
    """Whether the reader of stdout or stderr has gone: poll reports an error on the write end
    of a pipe whose read end is closed (Linux, macOS)."""
    import select

    if not hasattr(select, "poll"):  # pragma: no cover - no poll: trust the exception
        return True
    poller = select.poll()
    for fd in (1, 2):
        poller.register(fd, select.POLLOUT)
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in poller.poll(0))


def _quiet_output() -> None:
    """Point stdout and stderr at /dev/null, so that the interpreter's last flush of what is
    still buffered cannot fail again and print "Exception ignored ... BrokenPipeError"
    (Python's documentation on SIGPIPE); SIGPIPE's handling is left as it is."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # a test's buffer
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


def _has_position(line: str) -> bool:
    head = line.split(": ", 1)[0]
    return ":" in head and any(ch.isdigit() for ch in head.rsplit(":", 1)[-1])


_CACHE: dict = {}


def _commands() -> dict:
    if not _CACHE:
        for info in pkgutil.iter_modules(__path__):
            if info.name.startswith("cmd_"):
                _CACHE[info.name[4:].replace("_", "-")] = info.name
    return _CACHE


@click.group(cls=_Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(ddlbench.__version__, prog_name="ddlbench")
def main() -> None:
    """Benchmark distributed deep-learning training across frameworks and scales on Slurm.

    A YAML experiment spec says what to run (model, frameworks, scale points, batch sizes,
    learning-rate rule, repeats); a cluster profile says where (partition, GPUs per node,
    modules or venvs per framework). ddlbench renders one sbatch script per run, submits and
    tracks the jobs, and turns the ranks' logs into tables, scaling plots and reports.
    """


def run() -> None:
    """The ``ddlbench`` program (console script, ``python -m ddlbench``): :func:`main`, then
    a quick exit (output flushed, no teardown) after a command that asked for it
    (:func:`ddlbench.cli.common.exit_quickly`)."""
    from ddlbench.cli.common import quick_exit_requested

    try:
        main()
    except SystemExit as exc:
        if not (exc.code is None or isinstance(exc.code, int)):
            raise
        code = exc.code or 0
    except OSError as exc:  # click's own output (--version, --help) could not be written
        code = output_failure_code(exc)
        if code is None:
            raise
    else:  # pragma: no cover - click's standalone main always raises SystemExit
        code = 0
    if code == 1 and isinstance(sys.stdout, click.utils.PacifyFlushWrapper):
        code = EXIT_BROKEN_PIPE  # click's own answer to a closed pipe (its help, its errors)
    if not _flush_output():
        code = EXIT_BROKEN_PIPE
    if quick_exit_requested():
        os._exit(code)
    sys.exit(code)


def _flush_output() -> bool:
    """Flush stdout and stderr; False when the reader of one has gone (``| head``), which then
    leaves it pointing at /dev/null so that nothing complains at the interpreter's exit."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        _quiet_output()
        return False
    except (OSError, ValueError):  # a closed stream: nothing left to say
        pass
    return True


if __name__ == "__main__":  # pragma: no cover
    run()
