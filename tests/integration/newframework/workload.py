"""numpyref workload: softmax regression on the synthetic batch with numpy, one rank each.

Copied to ``ddlbench/workloads/numpyref.py`` by tests/integration/test_new_framework.py.
"""

from __future__ import annotations

import numpy as np

from .common import (
    Context,
    LRSchedule,
    input_channels,
    run_training,
    synthetic_batch,
    workload_main,
)


def body(ctx: Context) -> None:
    cfg = ctx.cfg
    side, classes = int(cfg["image_size"]), int(cfg["num_classes"])
    x, y = synthetic_batch(
        int(cfg["batch_size"]), side, classes, input_channels(cfg["model"]), "NCHW", seed=1
    )
    x = x.reshape(len(x), -1)
    w = np.zeros((x.shape[1], classes), dtype=np.float32)
    ctx.write_meta(np.__version__, "cpu", int(w.size), "none")

    def step(_batch, lr):
        logits = x @ w
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        loss = float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())
        p[np.arange(len(y)), y] -= 1.0
        w[...] -= lr * (x.T @ p) / len(y)
        return loss

    measurement = run_training(cfg, ctx.measurement(), step, LRSchedule.from_config(cfg, 1e9))
    ctx.finish(measurement.summary_fields(), float(w.sum()))


if __name__ == "__main__":
    raise SystemExit(workload_main(body))
