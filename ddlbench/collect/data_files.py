"""The collected data files in ``results/<campaign>/data/``: their names, writing and reading them.

The names of the data files are spelled here and nowhere else in the package (a test guards
this); ``collect.json`` is the campaign paths' ``COLLECT_INFO``. Every file is written
atomically (a temporary file, then a rename) with deterministic content; ``collect.json`` is
written last, so data with a current ``collect.json`` is whole. Importing this module is
cheap: pandas and pyarrow load on first use of a function.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, List

from ..campaign.paths import COLLECT_INFO
from ..diskfull import atomic_path

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

#: the per-run, per-rank and record tables, written as ``<name>.parquet``
TABLES = ("ranks", "runs", "evals", "allreduce", "files")
RUNS_CSV = "runs.csv"


def table_file(name: str) -> str:
    """The file of a table (one of :data:`TABLES`, or ``"steps"``)."""
    return f"{name}.parquet"


STEPS_FILE = table_file("steps")
#: without any of these, collected data is stale (``freshness.is_stale``)
REQUIRED_FILES = (table_file("runs"), table_file("ranks"), STEPS_FILE)
#: every file of ``data/``, in the order a report lists its copies of them
DATA_FILES = (
    RUNS_CSV,
    table_file("runs"),
    table_file("ranks"),
    STEPS_FILE,
    table_file("evals"),
    table_file("allreduce"),
    table_file("files"),
    COLLECT_INFO,
)


def write_atomic(path: Path, writer: Callable[[Path], None]) -> None:
    """Whole or not at all; a full disk is one DiskFull naming the folder."""
    with atomic_path(path) as tmp:
        writer(tmp)


def parquet_writer(table: pa.Table) -> Callable[[Path], None]:
    import pyarrow.parquet as pq

    return lambda p: pq.write_table(table, p, compression="zstd")


def start_steps_write(data_dir: Path, steps: pa.Table) -> Callable[[], None]:
    """Write steps.parquet in a thread (Arrow's encoder runs without the GIL, so this
    overlaps with the Python work that follows); returns a function that waits for it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    error: List[BaseException] = []

    def run() -> None:
        try:
            write_atomic(data_dir / STEPS_FILE, parquet_writer(steps))
        except BaseException as exc:  # noqa: BLE001 - re-raised by wait()
            error.append(exc)

    th = threading.Thread(target=run, name=STEPS_FILE, daemon=True)
    th.start()

    def wait() -> None:
        th.join()
        if error:
            raise error[0]

    return wait


def write_tables(out: Path, frames: dict) -> None:
    """The tables (``frames``: name -> DataFrame), runs.csv, then collect.json."""
    import pyarrow as pa

    for name in TABLES:
        table = pa.Table.from_pandas(frames[name], preserve_index=False)
        write_atomic(out / table_file(name), parquet_writer(table))
    write_atomic(out / RUNS_CSV, lambda p: frames["runs"].to_csv(p, index=False))


def write_info(out: Path, info: dict) -> None:
    text = json.dumps(info, indent=2, sort_keys=True) + "\n"
    write_atomic(out / COLLECT_INFO, lambda p: p.write_text(text))


def read_table(data_dir: Path, name: str) -> pd.DataFrame:
    import pyarrow.parquet as pq

    return pq.read_table(data_dir / table_file(name)).to_pandas()


def read_steps(data_dir: Path) -> pa.Table:
    import pyarrow.parquet as pq

    return pq.read_table(data_dir / STEPS_FILE)
