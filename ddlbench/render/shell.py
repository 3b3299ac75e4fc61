"""Shell quoting for templates: every value is quoted unless it is a :class:`ShellSafe`.

Templates are rendered with a Jinja ``finalize`` hook that applies :func:`to_shell` to every
``{{ expression }}``. Strings from YAML are therefore always single-quoted words; only
fragments that ddlbench builds itself from validated parts are wrapped in :class:`ShellSafe`
(and the ``raw`` filter, for site-administrator text such as a profile's ``commands``).
"""

from __future__ import annotations

import shlex
from typing import Any, Iterable


class ShellSafe(str):
    """Text that is already valid, quoted shell and is emitted as is."""


def to_shell(value: Any) -> str:
    kind = type(value)  # exact types first: this runs for every {{ }} of every script
    if kind is ShellSafe:
        return value
    if kind is int or kind is float:
        return repr(value)
    if kind is str:
        quoted = shlex.quote(value)
        # "=x" needs no quotes, but after "NAME=" it reads as "==" to people and to shellcheck
        return f"'{value}'" if quoted == value and value[:1] == "=" else quoted
    if isinstance(value, ShellSafe):
        return str(value)
    if value is None:
        return "''"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    return shlex.quote(str(value))


def words(values: Iterable[Any]) -> ShellSafe:
    """Quote each value and join them into one safe command-line fragment."""
    return ShellSafe(" ".join(to_shell(v) for v in values))
