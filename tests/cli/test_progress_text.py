"""The terminal's spinner shows progress text as given: no markup, no emoji codes."""

from __future__ import annotations

import io
import sys

from ddlbench.collect import progress as progress_mod


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_spinner_shows_brackets_and_colons_as_they_are(monkeypatch):
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    shown = []
    from rich.status import Status

    original = Status.update

    def spy(self, status=None, **kwargs):
        original(self, status, **kwargs)
        shown.append(self.renderable.text.plain)

    monkeypatch.setattr(Status, "update", spy)
    with progress_mod.progress("ddlbench report") as say:
        say("reading [bold]results/x[/bold] :smile: [red]")
    assert len(shown) == 1
    assert shown[0].startswith("ddlbench report: reading [bold]results/x[/bold] :smile: [red] [")
    assert shown[0].endswith(" s]")
