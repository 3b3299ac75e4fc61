"""The step record's fields and their Arrow types (``docs/log-format.md#step``): what the
reader's two paths (:mod:`.reader`, :mod:`.step_lines`) make of a ``step`` line."""

from __future__ import annotations

from typing import List, Tuple

import pyarrow as pa

STEP_FIELDS: List[Tuple[str, pa.DataType]] = [
    ("step", pa.int64()),
    ("epoch", pa.int64()),
    ("phase", pa.string()),
    ("t_start", pa.float64()),
    ("t_end", pa.float64()),
    ("samples", pa.int64()),
    ("loss", pa.float64()),
    ("lr", pa.float64()),
    ("compute_s", pa.float64()),
    ("comm_s", pa.float64()),
]
STEP_SCHEMA = pa.schema(STEP_FIELDS)
PARSE_SCHEMA = pa.schema([("type", pa.string())] + STEP_FIELDS)
