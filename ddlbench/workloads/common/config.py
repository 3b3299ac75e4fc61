"""Loading ``run.json`` (format ``ddlbench-run/1``, see docs/run-config.md)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Dict

from ..vocabulary import (
    DEFAULT_DEVICE,
    DEVICES,
    KNOB_DEFAULTS,
    LAYOUTS,
    MODES,
    PRECISIONS,
    model_channels,
    model_shape,
    torch_backend,
)

RUN_FORMAT = "ddlbench-run/1"

#: the workloads that start a PyTorch process group with run.json's ``backend``
TORCH_WORKLOADS = ("pytorch", "allreduce_torch")

_REQUIRED = ("run_id", "workload", "mode", "log_dir")

_DEFAULTS: Dict[str, Any] = {
    "campaign": "adhoc",
    "framework": None,  # filled from workload below
    "framework_options": {},
    "backend": None,  # PyTorch's: filled from framework_options and device below
    "model": "lenet",
    "data": {"kind": "synthetic", "path": None, "samples": 1024},
    "image_size": None,  # filled from model below
    "num_classes": None,
    "device": DEFAULT_DEVICE,
    **KNOB_DEFAULTS,
    "nodes": 1,
    "tasks_per_node": 1,
    "world_size": 1,
    "batch_size": 32,
    "global_batch_size": None,
    "steps": {"warmup": 5, "measure": 20},
    "epochs": None,
    "target_accuracy": None,
    "optimizer": {
        "name": "sgd",
        "lr": 0.01,
        "base_lr": None,
        "momentum": 0.9,
        "weight_decay": 0.0,
        "nesterov": False,
    },
    "lr_schedule": {
        "scaling": "none",
        "base_batch_size": None,
        "warmup_epochs": 0.0,
        "decay_epochs": [],
        "decay_factor": 0.1,
    },
    "seed": 0,
    "repeat": 0,
    "allreduce": {"min_bytes": 1024, "max_bytes": 256 * 1024 * 1024, "iters": 20, "warmup": 5},
    "mllog": False,
}


class RunConfigError(ValueError):
    """run.json is unreadable or lacks what the workload needs."""


def load_run_config(path: str) -> Dict[str, Any]:
    """Read ``run.json`` and return it as a plain dict with defaults filled in.

    The planner writes every key; the defaults only make hand-written configs
    (tests, manual runs) short. Nested dicts are merged key by key.
    """
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as exc:
        raise RunConfigError(f"cannot read run config {path}: {exc}") from exc
    return normalize_run_config(raw)


def normalize_run_config(raw: Dict[str, Any]) -> Dict[str, Any]:
    """Check the format, fill defaults (see ``load_run_config``)."""
    if not isinstance(raw, dict):
        raise RunConfigError("run config must be a JSON object")
    fmt = raw.get("format", RUN_FORMAT)
    if fmt != RUN_FORMAT:
        raise RunConfigError(f"unsupported run config format {fmt!r}, expected {RUN_FORMAT!r}")
    missing = [k for k in _REQUIRED if raw.get(k) in (None, "")]
    if missing:
        raise RunConfigError("run config lacks " + ", ".join(missing))
    cfg = copy.deepcopy(_DEFAULTS)
    for key, value in raw.items():
        if isinstance(cfg.get(key), dict) and isinstance(value, dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    cfg["format"] = RUN_FORMAT
    if cfg["framework"] is None:
        cfg["framework"] = cfg["workload"]
    if not cfg["backend"] and cfg["workload"] in TORCH_WORKLOADS:
        # the planner writes it; hand-written configs get the same rule
        cfg["backend"] = torch_backend(framework_options(cfg).get("backend"), cfg["device"])
    side, classes = model_shape(cfg["model"])
    if cfg["image_size"] is None:
        cfg["image_size"] = side
    if cfg["num_classes"] is None:
        cfg["num_classes"] = classes
    if cfg["global_batch_size"] is None:
        cfg["global_batch_size"] = cfg["batch_size"] * cfg["world_size"]
    opt = cfg["optimizer"]
    if opt.get("base_lr") is None:
        opt["base_lr"] = opt["lr"]
    if cfg["lr_schedule"].get("base_batch_size") is None:
        cfg["lr_schedule"]["base_batch_size"] = cfg["global_batch_size"]
    if cfg["mode"] not in MODES:
        raise RunConfigError(f"unknown mode {cfg['mode']!r}")
    if cfg["mode"] == "convergence" and not cfg["epochs"]:
        raise RunConfigError("convergence mode needs 'epochs'")
    if cfg["device"] not in DEVICES:
        raise RunConfigError(f"unknown device {cfg['device']!r}")
    if cfg["precision"] not in PRECISIONS:
        raise RunConfigError(f"unknown precision {cfg['precision']!r}")
    if cfg["layout"] not in LAYOUTS:
        raise RunConfigError(f"unknown layout {cfg['layout']!r}")
    if not isinstance(cfg["compile"], bool):
        raise RunConfigError(f"compile must be true or false, not {cfg['compile']!r}")
    return cfg


def input_channels(model: str) -> int:
    """Channels of a model's input images: 1 for lenet, 3 for the ImageNet models."""
    return model_channels(model)


def framework_options(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """``framework_options`` of a run config (an empty dict when null)."""
    return cfg.get("framework_options") or {}


@dataclass(frozen=True)
class SGDSettings:
    """The run config's ``optimizer``, for the SGD every workload runs (as ``torch.optim.SGD``:
    Nesterov only with momentum)."""

    lr: float
    momentum: float
    weight_decay: float
    nesterov: bool

    @classmethod
    def from_config(cls, cfg: Dict[str, Any]) -> SGDSettings:
        opt = cfg["optimizer"]
        if opt.get("name", "sgd") != "sgd":
            raise ValueError(f"optimizer {opt.get('name')!r} is not supported (only sgd)")
        momentum = float(opt.get("momentum") or 0.0)
        return cls(
            lr=float(opt["lr"]),
            momentum=momentum,
            weight_decay=float(opt.get("weight_decay") or 0.0),
            nesterov=bool(opt.get("nesterov")) and momentum > 0,
        )
