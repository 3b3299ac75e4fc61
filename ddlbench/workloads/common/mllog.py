"""MLPerf ``:::MLLOG`` lines (mlcommons/logging's format) on rank 0.

The keys are those the MLPerf training compliance checker (``mlperf-logging``,
``python -m mlperf_logging.compliance_checker --usage training``) requires: the submission
metadata (run config ``mllog``: ``org``, ``platform``, ``division``, ``status``), the benchmark
name mapped from the model (:data:`MLPERF_BENCHMARKS`), ``cache_clear``, ``train_samples``,
``eval_samples``, the hyper-parameters (``sgd_opt_*`` for SGD, as the closed ResNet rules name
them) and ``run_stop`` at the evaluation that reaches the target accuracy. See
docs/log-format.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, Optional, Set, TextIO

POINT_IN_TIME = "POINT_IN_TIME"
INTERVAL_START = "INTERVAL_START"
INTERVAL_END = "INTERVAL_END"

#: ddlbench model -> MLPerf training benchmark name; other models keep their own name
MLPERF_BENCHMARKS = {"resnet50": "resnet"}

#: submission metadata when the run config's ``mllog`` is just ``true`` (a research run)
SUBMISSION_DEFAULTS = {
    "org": "unspecified",
    "platform": "unspecified",
    "division": "open",
    "status": "research",
}


def submission(cfg: Dict[str, Any]) -> Dict[str, str]:
    """The run config's submission metadata, defaults filled in."""
    given = cfg.get("mllog")
    out = dict(SUBMISSION_DEFAULTS)
    if isinstance(given, dict):
        out.update({k: str(v) for k, v in given.items() if k in out and v not in (None, "")})
    return out


def final_lr(cfg: Dict[str, Any]) -> float:
    """The learning rate after the schedule's last decay (peak rate times the decays)."""
    sched = cfg["lr_schedule"]
    decays = len(sched.get("decay_epochs") or [])
    return float(cfg["optimizer"]["lr"]) * float(sched.get("decay_factor", 0.1)) ** decays


class MLLog:
    """Prints ``:::MLLOG {json}`` lines when enabled, else does nothing.

    After ``run_stop`` nothing more is printed: MLPerf's run ends there (a second ``run_stop``,
    e.g. the end of the planned epochs after the target was reached, is dropped).
    """

    def __init__(self, enabled: bool, stream: Optional[TextIO] = None) -> None:
        self.enabled = bool(enabled)
        self.stream = stream
        self.stopped = False
        self._once: Set[str] = set()

    def event(
        self,
        key: str,
        value: Any = None,
        metadata: Optional[Dict[str, Any]] = None,
        event_type: str = POINT_IN_TIME,
    ) -> None:
        if not self.enabled or self.stopped:
            return
        self.stopped = key == "run_stop"
        frame = sys._getframe(1)
        while frame.f_back is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back
        meta = {"file": os.path.basename(frame.f_code.co_filename), "lineno": frame.f_lineno}
        if metadata:
            meta.update(metadata)
        record = {
            "namespace": "",
            "time_ms": int(time.time() * 1000),
            "event_type": event_type,
            "key": key,
            "value": value,
            "metadata": meta,
        }
        stream = self.stream or sys.stdout
        stream.write(":::MLLOG " + json.dumps(record, default=str) + "\n")
        stream.flush()

    def once(self, key: str, value: Any = None, metadata: Optional[Dict[str, Any]] = None) -> None:
        """``event`` unless ``key`` was already logged through ``once``."""
        if key not in self._once:
            self._once.add(key)
            self.event(key, value, metadata)

    def start(self, key: str, value: Any = None, metadata: Optional[Dict[str, Any]] = None) -> None:
        self.event(key, value, metadata, INTERVAL_START)

    def end(self, key: str, value: Any = None, metadata: Optional[Dict[str, Any]] = None) -> None:
        self.event(key, value, metadata, INTERVAL_END)

    def run_config(self, cfg: Dict[str, Any]) -> None:
        """The submission and hyper-parameter keys MLPerf tooling expects at the start of a run."""
        meta = submission(cfg)
        for name in ("org", "platform", "division", "status"):
            self.event("submission_" + name, meta[name])
        self.event("submission_benchmark", MLPERF_BENCHMARKS.get(cfg["model"], cfg["model"]))
        # ddlbench does not drop the page cache between runs (that needs root)
        self.event("cache_clear", False)
        self.event("seed", cfg["seed"])
        self.event("global_batch_size", cfg["global_batch_size"])
        self.event("gradient_accumulation_steps", 1)
        opt, sched = cfg["optimizer"], cfg["lr_schedule"]
        self.event("opt_name", opt.get("name", "sgd"))
        self.event("opt_base_learning_rate", opt["lr"])
        self.event("opt_learning_rate_warmup_epochs", sched.get("warmup_epochs") or 0)
        self.event("opt_learning_rate_decay_boundary_epochs", list(sched.get("decay_epochs") or []))
        self.event("opt_weight_decay", opt.get("weight_decay", 0.0))
        self.event("opt_momentum", opt.get("momentum", 0.0))
        # batch-norm statistics are each rank's own (no synchronised batch norm)
        self.event("model_bn_span", cfg["batch_size"])
        if opt.get("name", "sgd") == "sgd":
            self._sgd_keys(cfg)

    def _sgd_keys(self, cfg: Dict[str, Any]) -> None:
        """The ``sgd_opt_*`` names of MLPerf's ResNet rules. ddlbench's schedule is a linear
        warmup then step decays, not MLPerf's polynomial decay: the poly power is null."""
        opt = cfg["optimizer"]
        self.event("sgd_opt_base_learning_rate", opt["lr"])
        self.event("sgd_opt_end_learning_rate", final_lr(cfg))
        self.event("sgd_opt_learning_rate_decay_poly_power", None, {"schedule": "step"})
        self.event("sgd_opt_weight_decay", opt.get("weight_decay", 0.0))
        self.event("sgd_opt_momentum", opt.get("momentum", 0.0))

    def schedule(self, cfg: Dict[str, Any], schedule: Any) -> None:
        """Keys that need the data's size (``schedule`` is the run's ``LRSchedule``):
        ``train_samples`` (one epoch), the SGD decay steps, and ``eval_samples`` = 0 when the
        run does not evaluate (else it is logged at the first evaluation)."""
        self.once("train_samples", int(round(schedule.steps_per_epoch)) * cfg["global_batch_size"])
        if cfg["optimizer"].get("name", "sgd") == "sgd":
            steps = [int(round(s)) for s in schedule.decay_steps]
            self.once("sgd_opt_learning_rate_decay_steps", steps)
        if cfg["mode"] != "convergence":
            self.once("eval_samples", 0)
