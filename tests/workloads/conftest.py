"""Fixtures of the workload tests: real ranks started as subprocesses, and real data on disk.

``launch_ranks(workload, cfg, world_size=2, env="torch", nodes=1)`` is
:func:`tests.support.ranks.launch` in the test's ``tmp_path``; framework environments that are
not built skip the test (fail under CI): :mod:`tests.support.envs`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.support.envs import env_python
from tests.support.ranks import DataSet, Launch, base_run_config, check_ddp_logs, launch
from tests.support.repo import RANK_LOG_SCHEMA


@pytest.fixture
def launch_ranks(tmp_path: Path):
    """``launch_ranks(workload, config, world_size=2, env="torch", ...) -> Launch``."""

    def _launch(workload: str, config: Dict[str, Any], **kwargs: Any) -> Launch:
        return launch(tmp_path, workload, config, **kwargs)

    return _launch


@pytest.fixture
def framework_python():
    """``framework_python(env) -> str | None``: the environment's python if it is built."""
    return env_python


@pytest.fixture
def run_config():
    """``run_config(workload, framework=None, **overrides) -> dict``: a complete run.json."""
    return base_run_config


@pytest.fixture(scope="session")
def rank_log_schema() -> Dict[str, Any]:
    return json.loads(RANK_LOG_SCHEMA.read_text())


@pytest.fixture(scope="session")
def validate_log(rank_log_schema):
    """``validate_log(records)``: every record valid, meta first, summary (if any) last."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(rank_log_schema)

    def _validate(records: List[Dict[str, Any]], complete: bool = True) -> None:
        assert records, "empty rank log"
        for rec in records:
            errors = sorted(validator.iter_errors(rec), key=lambda e: list(e.path))
            assert not errors, f"invalid {rec.get('type')} record {rec}: {errors[0].message}"
        assert records[0]["type"] == "meta", records[0]
        assert sum(r["type"] == "meta" for r in records) == 1
        if complete:
            assert records[-1]["type"] == "summary", records[-1]
            assert sum(r["type"] == "summary" for r in records) == 1

    return _validate


@pytest.fixture
def check_data_parallel(validate_log):
    """``check_data_parallel(launch)``: all ranks ok, logs valid, same parameter checksum."""

    def _check(result: Launch) -> None:
        check_ddp_logs(result, validate_log)

    return _check


# -- real data on disk (tests/support/datagen.py) ---------------------------------------------
@pytest.fixture(scope="session")
def mnist_data(tmp_path_factory) -> DataSet:
    """MNIST's four IDX files (train pair gzipped): 640 train, 100 t10k 28x28 images of 10
    classes; ``items``: ``{"train": (images, labels), "t10k": (images, labels)}``."""
    from tests.support.datagen import write_mnist

    path = tmp_path_factory.mktemp("mnist")
    return DataSet(path, write_mnist(path))


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> DataSet:
    """``train/`` (3 classes x 48) and ``val/`` (3 x 12) stripe images, PNG (RGB, gray) and
    JPEG; ``items``: ``{split: [relative paths]}``."""
    pytest.importorskip("PIL")
    from tests.support.datagen import write_image_folder

    path = tmp_path_factory.mktemp("imagefolder")
    return DataSet(path, write_image_folder(path))


@pytest.fixture(scope="session")
def id_folder(tmp_path_factory) -> DataSet:
    """``train/`` (2 x 16) and ``val/`` (2 x 5) flat gray PNGs whose value identifies them;
    ``items``: ``{split: [(value, label), ...]}`` in index order."""
    pytest.importorskip("PIL")
    from tests.support.datagen import write_id_folder

    path = tmp_path_factory.mktemp("idfolder")
    return DataSet(path, write_id_folder(path))
