"""How the report writes a value: numbers, percentages, sizes, text; ``-`` when missing.

Every table cell, sentence and figure label of the report is formatted here, and a value is
missing as :func:`ddlbench.values.missing` says.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any, Sequence

from ..values import fsig, missing, sig_places  # noqa: F401 - fsig: the report's too

__all__ = [
    "fbytes",
    "fdevices",
    "fint",
    "fms",
    "fnum",
    "fnum_in",
    "fpct",
    "fpct_in",
    "fpct_range_in",
    "fplaces",
    "frange",
    "frange_in",
    "interval_places",
    "fsig",
    "fsig_in",
    "fspeedup",
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


# ------------------------------------------- figures with an interval (docs/reports.md#digits)


def interval_places(lo: Any, hi: Any, most: int = 1) -> int:
    """The decimal places a figure whose 95 % interval is ``lo``-``hi`` is worth: the
    interval's half-width rounded as the Particle Data Group rounds an error (its three
    leading digits 100-354: two significant digits; 355-949: one; 950-999: up to 1000, two),
    and never more than ``most``. A negative count rounds to tens, hundreds... (half-width
    2,074: -2, to hundreds). ``most`` when there is no interval, or it has no width."""
    if missing(lo) or missing(hi):
        return most
    half = (float(hi) - float(lo)) / 2
    if not math.isfinite(half) or half <= 0:
        return most
    exp = int(math.floor(math.log10(half)))
    lead = min(999, max(100, int(half / 10.0 ** (exp - 2) + 1e-9)))
    if lead >= 950:
        exp, sig = exp + 1, 2
    else:
        sig = 2 if lead <= 354 else 1
    return min(most, sig - 1 - exp)


def _kept(v: Any, places: int, most: int) -> int:
    """``places``, or more where ``v`` would keep fewer than two significant digits, never
    more than ``most`` unless ``v`` would then read as 0 (a positive bound never does)."""
    x = abs(float(v))
    if x == 0 or not math.isfinite(x):
        return places
    two = sig_places(x, 2)
    kept = max(places, min(most, two))
    return two if x < 10.0**-kept else kept


def fplaces(v: Any, places: int, rounding: str = ROUND_HALF_EVEN) -> str:
    """``v`` to ``places`` decimals (negative: to tens, hundreds...), thousands separators;
    '-' when missing. ``rounding``: a :mod:`decimal` rounding (outward for an interval's
    ends: floor for its low end, ceiling for its high one)."""
    if missing(v):
        return "-"
    d = Decimal(f"{float(v):.12g}")  # 12 digits: no binary noise (100 x 1.16 = 115.99...)
    if not d.is_finite():
        return f"{float(v):g}"
    try:
        q = d.quantize(Decimal(1).scaleb(-places), rounding=rounding) + 0  # + 0: no "-0"
    except InvalidOperation:  # beyond the context's 28 digits: no rounding to speak of
        return f"{float(v):,.{max(places, 0)}f}"
    return f"{q:,.{max(places, 0)}f}"


def fnum_in(v: Any, lo: Any, hi: Any, most: int = 1) -> str:
    """A number (:func:`fnum`) to the digits its interval ``lo``-``hi`` supports, and at
    least two significant ones."""
    if missing(v):
        return "-"
    return fplaces(v, _kept(v, interval_places(lo, hi, most), most))


def frange_in(lo: Any, hi: Any, most: int = 1, sep: str = " - ") -> str:
    """An interval, ``lo - hi``, both ends to the digits it supports (:func:`fnum_in`) and
    rounded outward, so that the interval shown holds the one computed."""
    if missing(lo) or missing(hi):
        return "-"
    places = interval_places(lo, hi, most)
    low = fplaces(lo, _kept(lo, places, most), ROUND_FLOOR)
    return f"{low}{sep}{fplaces(hi, _kept(hi, places, most), ROUND_CEILING)}"


def fpct_in(v: Any, lo: Any, hi: Any, most: int = 1) -> str:
    """A fraction as a percentage (:func:`fpct`) to the digits its interval ``lo``-``hi``
    supports, in percentage points: ``0.9134`` within ``0.62``-``1.21`` -> ``91 %``."""
    if missing(v):
        return "-"
    lo, hi = (None, None) if missing(lo) or missing(hi) else (100 * float(lo), 100 * float(hi))
    return f"{fnum_in(100 * float(v), lo, hi, most)} %"


def fpct_range_in(lo: Any, hi: Any, most: int = 1, sep: str = " - ") -> str:
    """An interval of fractions as percentages (:func:`frange_in`, in percentage points),
    each end with its ``%``: ``50 % - 80 %``."""
    if missing(lo) or missing(hi):
        return "-"
    return f"{frange_in(100 * float(lo), 100 * float(hi), most, f' %{sep}')} %"


def fsig_in(v: Any, lo: Any, hi: Any, sig: int = 3) -> str:
    """A number to ``sig`` significant digits (:func:`fsig`), fewer when its interval
    ``lo``-``hi`` supports fewer."""
    if missing(v) or missing(lo) or missing(hi):
        return fsig(v, sig)
    v = float(v)
    most = 0 if v == 0 else max(0, sig_places(v, sig))
    return fplaces(v, interval_places(lo, hi, most))


def fspeedup(speedup: Any, efficiency: Any, eff_low: Any, eff_high: Any) -> str:
    """A speedup (:func:`fsig_in`): its interval is the efficiency's, scaled by the device
    counts (both are the same ratio of geometric means)."""
    if any(missing(v) for v in (speedup, efficiency, eff_low, eff_high)):
        return fsig(speedup)
    if float(efficiency) <= 0:
        return fsig(speedup)
    k = float(speedup) / float(efficiency)
    return fsig_in(speedup, float(eff_low) * k, float(eff_high) * k)


def md_cell(s: Any) -> str:
    """Text that stays in one Markdown table cell."""
    return str(s).replace("|", "\\|").replace("\n", " ")


def short_list(items: Sequence[str], limit: int = 40) -> str:
    """The items joined by commas; the first ``limit`` and a count when there are more."""
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", ... ({len(items)} in all)"
