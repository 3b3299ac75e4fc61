"""Progress messages on stderr for long work (a rich spinner on a terminal, lines otherwise)."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Callable, Iterator


@contextlib.contextmanager
def progress(prefix: str = "ddlbench", quiet: bool = False) -> Iterator[Callable[[str], None]]:
    """Yields ``say(message)``; on a terminal the messages update one spinner line."""
    if quiet:
        yield lambda _m: None
        return
    start = time.perf_counter()
    if sys.stderr.isatty():
        from rich.console import Console

        console = Console(stderr=True, highlight=False)
        with console.status(f"{prefix}: starting") as status:

            def say(msg: str) -> None:
                status.update(f"{prefix}: {msg} [{time.perf_counter() - start:.1f} s]")

            yield say
        return

    def say_plain(msg: str) -> None:
        print(f"{prefix}: {msg} [{time.perf_counter() - start:.1f} s]", file=sys.stderr)

    yield say_plain
