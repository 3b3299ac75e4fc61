"""How the report writes a value: numbers, percentages, sizes, text; ``-`` when missing.

Every table cell, sentence and figure label of the report is formatted here, and a value is
missing as :func:`ddlbench.values.missing` says.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..values import fsig, missing  # noqa: F401 - fsig: the report's, defined with missing

__all__ = [
    "fbytes",
    "fdevices",
    "fint",
    "fms",
    "fnum",
    "fpct",
    "frange",
    "fsig",
    "ftext",
    "md_cell",
    "missing",
    "short_list",
]


def fnum(v: Any, digits: int = 1) -> str:
    """A number with thousands separators; '-' when missing."""
    if missing(v):
        return "-"
    return f"{float(v):,.{digits}f}"


def fpct(v: Any, digits: int = 1) -> str:
    """A fraction as a percentage: ``0.815`` -> ``81.5 %``."""
    return "-" if missing(v) else f"{100 * float(v):.{digits}f} %"


def fint(v: Any) -> str:
    return "-" if missing(v) else f"{int(v)}"


def fms(v: Any) -> str:
    """Seconds as milliseconds, two decimals."""
    return "-" if missing(v) else f"{1e3 * float(v):.2f}"


def ftext(v: Any) -> str:
    """Text; empty when missing."""
    return "" if missing(v) else str(v)


def fdevices(n: Any) -> str:
    """``1 device``, ``8 devices``."""
    return f"{fint(n)} device" + ("" if not missing(n) and int(n) == 1 else "s")


def fbytes(v: Any) -> str:
    """A size in bytes with a binary unit, to three significant figures and no trailing zeros:
    ``1 KiB``, ``64 MiB``, ``403 MiB``, ``1.25 GiB``."""
    if missing(v):
        return "-"
    v = float(v)
    for unit, div in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(v) >= div:
            return f"{_sig3(v / div)} {unit}"
    return f"{_sig3(v)} B"


def _sig3(x: float) -> str:
    """``x`` to three significant figures, thousands separators, no exponent nor trailing 0."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    text = f"{round(x, digits):,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def frange(lo: Any, hi: Any) -> str:
    """``lo - hi`` as numbers."""
    return f"{fnum(lo)} - {fnum(hi)}"


def md_cell(s: Any) -> str:
    """Text that stays in one Markdown table cell."""
    return str(s).replace("|", "\\|").replace("\n", " ")


def short_list(items: Sequence[str], limit: int = 40) -> str:
    """The items joined by commas; the first ``limit`` and a count when there are more."""
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", ... ({len(items)} in all)"
