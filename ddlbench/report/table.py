"""A report table described as data (:class:`TableSpec`) and the one function that fills it.

A spec names the :class:`~ddlbench.analyse.analysis.Analysis` table it shows (``source``),
how to pick and order its rows (``select``), its columns (header, cell formatter, alignment)
and its note. :func:`tables_by_section` turns a list of specs into the report's tables; a
spec whose source is empty, or whose ``select`` says None, gives no table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import pandas as pd

Row = Any  # a row of a DataFrame (pandas.Series)
Columns = Union[Sequence["Column"], Callable[[pd.DataFrame, pd.DataFrame], Sequence["Column"]]]


@dataclass
class Table:
    """A filled table, as the templates show it (every cell already text)."""

    title: str
    columns: List[str]
    rows: List[List[str]]
    numeric: List[bool]
    note: str = ""
    flags: List[bool] = field(default_factory=list)  # highlighted rows


@dataclass(frozen=True)
class Column:
    """A column: its header, the text of its cell in a row, right-aligned or not, and
    (``when``) whether the table has it, given the source table."""

    header: str
    cell: Callable[[Row], str]
    numeric: bool = True
    when: Optional[Callable[[pd.DataFrame], bool]] = None


def raw(v: Any) -> Any:
    """A cell shown as it is (names, ids)."""
    return v


def col(header: str, key: str, fmt: Callable[[Any], Any], numeric: bool = True) -> Column:
    """A column that shows ``fmt(row[key])``."""
    return Column(header, lambda r: fmt(r[key]), numeric)


def text(header: str, key: str, fmt: Callable[[Any], Any] = raw) -> Column:
    """A left-aligned column that shows ``fmt(row[key])``."""
    return col(header, key, fmt, numeric=False)


@dataclass(frozen=True)
class TableSpec:
    """One table of the report: in which section, from which analysis table, which rows
    (``select``: None when there is no table to show) and columns, its note (text, or a
    function of the analysis settings) and which rows are highlighted."""

    section: str
    title: str
    source: str
    columns: Columns
    select: Callable[[pd.DataFrame], Optional[pd.DataFrame]] = raw
    note: Union[str, Callable[[Any], str]] = ""
    flag: Optional[Callable[[Row], bool]] = None

    def table(self, source: pd.DataFrame, settings: Any = None) -> Optional[Table]:
        """The filled table of ``source`` (None when there is none)."""
        if not len(source):
            return None
        rows = self.select(source)
        if rows is None:
            return None
        if callable(self.columns):
            cols = list(self.columns(source, rows))
        else:
            cols = [c for c in self.columns if c.when is None or c.when(source)]
        note = self.note(settings) if callable(self.note) else self.note
        return make_table(self.title, cols, rows, note, self.flag)


def make_table(
    title: str,
    columns: Sequence[Column],
    df: pd.DataFrame,
    note: str = "",
    flag: Optional[Callable[[Row], bool]] = None,
) -> Table:
    """Every row of ``df`` through the columns' formatters."""
    rows, flags = [], []
    for _, r in df.iterrows():
        rows.append([c.cell(r) for c in columns])
        flags.append(bool(flag(r)) if flag else False)
    return Table(
        title, [c.header for c in columns], rows, [c.numeric for c in columns], note, flags
    )


def tables_by_section(specs: Sequence[TableSpec], analysis: Any) -> Dict[str, List[Table]]:
    """The tables of ``specs`` that ``analysis`` has data for, by section, in spec order."""
    out: Dict[str, List[Table]] = {}
    for spec in specs:
        t = spec.table(getattr(analysis, spec.source), analysis.settings)
        if t is not None:
            out.setdefault(spec.section, []).append(t)
    return out
