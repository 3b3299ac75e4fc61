"""Typing the collected tables from their column table (:mod:`ddlbench.collect.columns`)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..values import missing
from .columns import Column


def str_or_none(v: Any) -> Optional[str]:
    if missing(v):
        return None
    return str(v)


def canonical(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns as text (missing: null), then through Arrow, so that a frame fresh from
    collection and one read back from its parquet file have the same dtypes and values."""
    df = df.reset_index(drop=True)
    for c in df.columns:
        if df[c].dtype == object or str(df[c].dtype) in ("str", "string"):
            df[c] = df[c].map(str_or_none).astype(object)
    return pa.Table.from_pandas(df, preserve_index=False).to_pandas()


def typed(df: pd.DataFrame, cols: Sequence[Column]) -> pd.DataFrame:
    """``df`` with every column of ``cols`` that it holds converted to the column's kind."""
    for c in cols:
        if c.name not in df:
            continue
        s = df[c.name]
        if c.kind == "int":
            df[c.name] = pd.to_numeric(s, errors="coerce").round().astype("Int64")
        elif c.kind == "float":
            df[c.name] = pd.to_numeric(s, errors="coerce").astype(float)
        elif c.kind == "count":
            df[c.name] = np.nan_to_num(pd.to_numeric(s, errors="coerce").to_numpy(dtype=float))
            df[c.name] = df[c.name].astype("int64")
        elif c.kind == "bool":
            df[c.name] = s.map(lambda v: False if v is None or v != v else bool(v)).astype(bool)
        elif c.kind == "flag":
            df[c.name] = s.astype("boolean")
    return canonical(df)
