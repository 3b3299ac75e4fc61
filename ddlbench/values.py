"""Whether a value is missing: the one definition that the collector, the analysis, the
report and the commands share.

A value read from a data file is missing when it is ``None``, pandas' ``NA`` or a float NaN
(Python's or NumPy's). Standard library only: pandas and NumPy values can only exist once
those libraries are imported, so they are looked up in ``sys.modules`` instead of imported
here (the command line starts without them).
"""

from __future__ import annotations

import math
import sys
from typing import Any


def missing(v: Any) -> bool:
    """``None``, ``pandas.NA`` or a NaN of any float type."""
    if v is None:
        return True
    if isinstance(v, float):  # numpy.float64 included
        return math.isnan(v)
    pd = sys.modules.get("pandas")
    if pd is not None and v is pd.NA:
        return True
    np = sys.modules.get("numpy")
    return np is not None and isinstance(v, np.floating) and bool(np.isnan(v))


def sig_places(v: float, sig: int) -> int:
    """The decimal places that give nonzero ``v`` ``sig`` significant digits (negative: it
    rounds to tens, hundreds...)."""
    return sig - 1 - int(math.floor(math.log10(abs(v))))


def fsig(v: Any, sig: int = 3) -> str:
    """A number to ``sig`` significant digits (thousands separators); '-' when missing.
    Here, not in the report's formats, so that ``plan`` (before any report) says numbers
    the same way."""
    if missing(v):
        return "-"
    v = float(v)
    if v == 0:
        return "0"
    return f"{v:,.{max(0, sig_places(v, sig))}f}"
