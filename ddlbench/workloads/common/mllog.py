"""MLPerf-style ``:::MLLOG`` lines (mlcommons/logging's format) on rank 0."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, Optional, TextIO

POINT_IN_TIME = "POINT_IN_TIME"
INTERVAL_START = "INTERVAL_START"
INTERVAL_END = "INTERVAL_END"


class MLLog:
    """Prints ``:::MLLOG {json}`` lines when enabled, else does nothing.

    Keys follow mlcommons/logging (``mlperf_logging.mllog.constants``): ``submission_benchmark``,
    ``seed``, ``global_batch_size``, ``opt_name``, ``opt_base_learning_rate``,
    ``opt_learning_rate_warmup_epochs``, ``init_start``/``init_stop``, ``run_start``/``run_stop``,
    ``epoch_start``/``epoch_stop``, ``eval_start``/``eval_stop``, ``eval_accuracy``,
    ``train_samples``, ``eval_samples``.
    """

    def __init__(self, enabled: bool, stream: Optional[TextIO] = None) -> None:
        self.enabled = bool(enabled)
        self.stream = stream

    def event(
        self,
        key: str,
        value: Any = None,
        metadata: Optional[Dict[str, Any]] = None,
        event_type: str = POINT_IN_TIME,
    ) -> None:
        if not self.enabled:
            return
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

    def start(self, key: str, value: Any = None, metadata: Optional[Dict[str, Any]] = None) -> None:
        self.event(key, value, metadata, INTERVAL_START)

    def end(self, key: str, value: Any = None, metadata: Optional[Dict[str, Any]] = None) -> None:
        self.event(key, value, metadata, INTERVAL_END)

    def run_config(self, cfg: Dict[str, Any]) -> None:
        """The hyper-parameter keys MLPerf tooling expects at the start of a run."""
        opt, sched = cfg["optimizer"], cfg["lr_schedule"]
        self.event("submission_benchmark", cfg["model"])
        self.event("seed", cfg["seed"])
        self.event("global_batch_size", cfg["global_batch_size"])
        self.event("opt_name", opt.get("name", "sgd"))
        self.event("opt_base_learning_rate", opt["lr"])
        self.event("opt_learning_rate_warmup_epochs", sched.get("warmup_epochs") or 0)
        self.event("opt_learning_rate_decay_boundary_epochs", list(sched.get("decay_epochs") or []))
        self.event("opt_weight_decay", opt.get("weight_decay", 0.0))
        self.event("opt_momentum", opt.get("momentum", 0.0))
