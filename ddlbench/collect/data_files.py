"""The collected data files in ``results/<campaign>/data/``: writing and reading them.

Every file is written atomically (a temporary file, then a rename) with deterministic content;
``collect.json`` is written last, so data with a current ``collect.json`` is whole.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Callable, List

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .freshness import COLLECT_INFO

STEPS_FILE = "steps.parquet"
#: the per-run, per-rank and record tables, written as ``<name>.parquet``
TABLES = ("ranks", "runs", "evals", "allreduce", "files")
RUNS_CSV = "runs.csv"


def write_atomic(path: Path, writer: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        writer(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def parquet_writer(table: pa.Table) -> Callable[[Path], None]:
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
    for name in TABLES:
        table = pa.Table.from_pandas(frames[name], preserve_index=False)
        write_atomic(out / f"{name}.parquet", parquet_writer(table))
    write_atomic(out / RUNS_CSV, lambda p: frames["runs"].to_csv(p, index=False))


def write_info(out: Path, info: dict) -> None:
    text = json.dumps(info, indent=2, sort_keys=True) + "\n"
    write_atomic(out / COLLECT_INFO, lambda p: p.write_text(text))


def read_table(data_dir: Path, name: str) -> pd.DataFrame:
    return pq.read_table(data_dir / f"{name}.parquet").to_pandas()


def read_steps(data_dir: Path) -> pa.Table:
    return pq.read_table(data_dir / STEPS_FILE)
