"""Code shared by every ddlbench workload (PyTorch, TensorFlow, Keras, Horovod, MXNet).

Imports only the standard library and numpy (scikit-learn lazily, for the
``digits`` data). Python 3.8 syntax. The public API is re-exported here; see
docs/workloads.md for how a workload uses it.
"""

from __future__ import annotations

from .allreduce import bandwidths, message_sizes, run_allreduce_sweep
from .checksum import param_checksum
from .config import (
    RUN_FORMAT,
    RunConfigError,
    SGDSettings,
    framework_options,
    input_channels,
    load_run_config,
    normalize_run_config,
)
from .data import (
    ArraySplit,
    RankData,
    Shard,
    TrainData,
    data_seed,
    data_workers,
    image_folder_index,
    image_mean_std,
    imagefolder_split,
    load_array_split,
    load_digits_split,
    load_mnist_split,
    load_rank_data,
    rank_train_data,
    read_idx,
    shard_indices,
    steps_per_epoch,
    synthetic_batch,
    upsample_bilinear,
)
from .env import (
    RankInfo,
    cpu_name,
    cpu_threads,
    job_ports,
    master_addr_port,
    node_addresses,
    parse_tasks_per_node,
    port_base,
    rank_info,
)
from .knobs import MIN_COMPILE_WARMUP, Knobs, resolve_precision, training_flops, warmup_steps
from .logger import FORMAT_VERSION, RankLogger, build_meta, warn
from .loop import Measurement, eval_result, run_training
from .mllog import MLLog
from .runner import Context, Terminated, end_process, workload_main
from .schedule import LRSchedule

__all__ = [
    "FORMAT_VERSION",
    "MIN_COMPILE_WARMUP",
    "Knobs",
    "resolve_precision",
    "training_flops",
    "warmup_steps",
    "RUN_FORMAT",
    "ArraySplit",
    "Context",
    "LRSchedule",
    "MLLog",
    "Measurement",
    "RankData",
    "RankInfo",
    "RankLogger",
    "RunConfigError",
    "SGDSettings",
    "Shard",
    "Terminated",
    "bandwidths",
    "build_meta",
    "cpu_name",
    "data_seed",
    "data_workers",
    "end_process",
    "eval_result",
    "framework_options",
    "image_folder_index",
    "image_mean_std",
    "imagefolder_split",
    "input_channels",
    "load_array_split",
    "load_digits_split",
    "load_mnist_split",
    "load_rank_data",
    "load_run_config",
    "master_addr_port",
    "message_sizes",
    "node_addresses",
    "normalize_run_config",
    "param_checksum",
    "parse_tasks_per_node",
    "job_ports",
    "port_base",
    "rank_info",
    "TrainData",
    "cpu_threads",
    "rank_train_data",
    "read_idx",
    "run_allreduce_sweep",
    "run_training",
    "shard_indices",
    "steps_per_epoch",
    "synthetic_batch",
    "upsample_bilinear",
    "warn",
    "workload_main",
]
