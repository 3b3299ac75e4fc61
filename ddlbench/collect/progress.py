"""Progress messages on stderr for long work (a rich spinner on a terminal, lines otherwise)."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Callable, Iterator


def spinner_console():
    """The terminal's spinner console: messages shown as given, a ``[bold]`` in a campaign's
    path or a ``:smile:`` in a run's name stays text (as on the CLI's stderr console)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, markup=False, emoji=False)


@contextlib.contextmanager
def progress(prefix: str = "ddlbench", quiet: bool = False) -> Iterator[Callable[[str], None]]:
    """Yields ``say(message)``; on a terminal the messages update one spinner line."""
    if quiet:
        yield lambda _m: None
        return
    start = time.perf_counter()
    if sys.stderr.isatty():
        from rich.text import Text

        # a str would be read as markup by the spinner whatever the console says: Text is not
        with spinner_console().status(Text(f"{prefix}: starting")) as status:

            def say(msg: str) -> None:
                status.update(Text(f"{prefix}: {msg} [{time.perf_counter() - start:.1f} s]"))

            yield say
        return

    def say_plain(msg: str) -> None:
        print(f"{prefix}: {msg} [{time.perf_counter() - start:.1f} s]", file=sys.stderr)

    yield say_plain
