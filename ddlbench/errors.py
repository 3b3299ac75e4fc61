"""Errors that ddlbench reports to users without a traceback.

``InputError`` (exit code 2) is bad input: a spec, a profile, an option. It carries one
``Problem`` per thing that is wrong, each printed on its own line as
``file:line:col: where: what (did you mean ...)``. ``DDLBenchError`` (exit code 1) is any other
failure that ddlbench understood well enough to explain in one line.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True)
class Problem:
    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None
    where: str | None = None

    def __str__(self) -> str:
        prefix = ""
        if self.file:
            prefix = self.file
            if self.line is not None:
                prefix += f":{self.line}"
                if self.col is not None:
                    prefix += f":{self.col}"
            prefix += ": "
        where = f"{self.where}: " if self.where else ""
        return f"{prefix}{where}{self.message}"


class DDLBenchError(Exception):
    """A failure explained in one line; the CLI exits with ``exit_code``."""

    exit_code = 1


class InputError(DDLBenchError):
    """Bad user input; the CLI prints every problem and exits with 2."""

    exit_code = 2

    def __init__(self, problems: Problem | str | Sequence[Problem]):
        if isinstance(problems, (Problem, str)):
            problems = [problems if isinstance(problems, Problem) else Problem(problems)]
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def _edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions, transpositions."""
    prev2: list = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def closest(word: object, choices: Iterable[str]) -> str | None:
    """The choice a typo most likely meant, or None when nothing is close."""
    if not isinstance(word, str) or not word:
        return None
    best = None
    best_key = None
    for choice in choices:
        dist = _edit_distance(word.lower(), choice.lower())
        ratio = difflib.SequenceMatcher(None, word.lower(), choice.lower()).ratio()
        if dist > max(1, len(choice) // 3) and ratio < 0.75:
            continue
        key = (dist, len(word) != len(choice), -ratio)
        if best_key is None or key < best_key:
            best, best_key = choice, key
    return best


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """Return `` (did you mean 'x'?)`` for the closest choice, or an empty string."""
    close = closest(word, choices)
    return f" (did you mean '{close}'?)" if close else ""


def quoted(value: str) -> str:
    """A name a user typed, quoted for a message on one line: ``'iris'``, or Python's escaped
    form (``'evil\\nname'``) when it holds a newline or another control character."""
    if value.isprintable() and "'" not in value:
        return f"'{value}'"
    return repr(value)
