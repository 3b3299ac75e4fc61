"""Keras workload: Keras 3 (TensorFlow backend) under ``MultiWorkerMirroredStrategy``.

``python -m ddlbench.workloads.tf.keras_main run.json`` on every task. The job set-up is the
TensorFlow workload's (``TF_CONFIG`` from the Slurm environment before TensorFlow is imported,
one replica per task, ``framework_options.communication`` as the strategy's default
``CommunicationOptions``); the training program is written against the Keras 3 API:
``keras.Model`` from ``models_tf``, ``keras.optimizers.SGD`` (wrapped in
``keras.optimizers.LossScaleOptimizer`` for AMP), ``keras.losses.SparseCategoricalCrossentropy``,
``keras.ops`` and the ``mixed_float16`` dtype policy. The Keras optimizer all-reduces the
gradients across workers itself (``apply_gradients`` in replica context).

Why not ``model.fit``: Keras 3's ``fit`` under ``MultiWorkerMirroredStrategy`` is broken
upstream (keras-team/keras#20585: the distributed dataset / step function path fails), so the
workload runs the loop that Keras documents for custom training on the TensorFlow backend
(``tf.GradientTape`` + ``optimizer.apply_gradients`` inside ``strategy.run``). The numbers are
still those of a Keras program: Keras layers, loss, optimizer update rule and loss scaling.

Differences from the ``tensorflow`` workload, on purpose (they are Keras' semantics):

* SGD is Keras' formulation, ``v = momentum * v - lr * g; w += v``: the velocity carries the
  rate. It equals PyTorch's ``v = momentum * v + g; w -= lr * v`` while the rate is constant;
  when it changes (warmup, decay) the velocity is rescaled by ``new / old``
  (:func:`momentum_correction`, Goyal et al.'s momentum correction), which keeps the two
  equal step for step (without it, after a 10x decay the next steps were about 9x too large
  for some 10 steps; docs/workloads.md#learning-rate-schedule).
* Weight decay is an L2 term ``0.5 * wd * sum(w^2)`` added to each replica's loss and divided by
  the number of replicas (``tf.nn.scale_regularization_loss``'s rule, because the optimizer sums
  the replicas' gradients), so its gradient is ``wd * w`` as in ``torch.optim.SGD``. The logged
  loss is the cross-entropy alone, as in every other workload.
* With AMP, Keras' ``LossScaleOptimizer`` decides "finite or not" from each worker's *local*
  gradients before its inner optimizer all-reduces them; two workers could disagree and one of
  them would skip the all-reduce (a hang). The workload therefore all-reduces a non-finite count
  first and poisons every worker's gradients when any worker overflowed, so all of them skip.

See docs/workloads.md.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..common import Context, SGDSettings, eval_result, workload_main
from ..vocabulary import TRANSFORMER_SHAPES
from . import models_tf
from .tf_main import (
    after,
    apply_knobs,
    build_rank_model,
    communication_meta,
    make_data,
    make_strategy,
    meta_fields,
    model_checksum,
    prepare_environment,
    setup_device,
    strategy_float_sum,
    strategy_sum,
)


def import_keras() -> Tuple[Any, Any]:
    """``(tensorflow, keras)`` with Keras 3 on the TensorFlow backend."""
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras
    import tensorflow as tf

    major = int(str(keras.__version__).split(".")[0])
    if major < 3:
        raise RuntimeError(f"the keras workload needs Keras 3, found keras {keras.__version__}")
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(f"Keras backend is {keras.backend.backend()!r}, expected tensorflow")
    return tf, keras


def make_optimizer(keras: Any, cfg: Dict[str, Any], use_amp: bool) -> Any:
    sgd = SGDSettings.from_config(cfg)
    optimizer = keras.optimizers.SGD(
        learning_rate=sgd.lr, momentum=sgd.momentum, nesterov=sgd.nesterov
    )
    if use_amp:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def make_step_fn(
    tf: Any,
    keras: Any,
    strategy: Any,
    model: Any,
    optimizer: Any,
    cfg: Dict[str, Any],
    use_amp: bool,
    fixed: Optional[Tuple[Any, Any]] = None,
    jit: bool = False,
) -> Callable[[Optional[Any], float], float]:
    replicas = float(strategy.num_replicas_in_sync)
    variables = model.trainable_variables
    lr_var = optimizer.learning_rate  # a Keras variable; assigned from the host when it changes
    local_grads = _local_grads(tf, keras, model, optimizer, cfg, replicas)
    if jit:  # XLA (Keras' jit_compile) for the replica's forward and backward
        local_grads = tf.function(local_grads, jit_compile=True)

    def replica_step(x: Any, y: Any) -> Any:
        loss, grads = local_grads(x, y)
        if use_amp:
            grads = _skip_together(tf, keras.ops, grads)
        optimizer.apply_gradients(zip(grads, variables))
        return after(tf, loss, variables)

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        per_replica = strategy.run(replica_step, args=(x, y))
        return strategy.experimental_local_results(per_replica)[0]

    current = {"lr": None}
    correct = momentum_correction(tf, optimizer)

    def step_fn(batch: Optional[Any], lr: float) -> float:
        if current["lr"] != lr:
            lr_var.assign(lr)
            if current["lr"]:
                correct(lr / current["lr"])
            current["lr"] = lr
        x, y = fixed if batch is None else batch
        return float(train_step(x, y).numpy()) * replicas

    return step_fn


def momentum_correction(tf: Any, optimizer: Any) -> Callable[[float], None]:
    """``correct(new_lr / old_lr)``: rescale Keras SGD's velocities (``v = m v - lr g``
    holds the rate) when the rate changes, so that the update equals ``v = m v + g; w -= lr
    v`` step for step, as the other workloads apply it (Goyal et al. 2017, momentum
    correction). One graph call per change; nothing before the optimizer has built its
    velocities (the first step) or without momentum."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)  # under a LossScaleOptimizer

    @tf.function
    def rescale(ratio: Any) -> None:
        for v in getattr(inner, "momentums", None) or []:
            if v is not None:
                v.assign(v * tf.cast(ratio, v.dtype))

    def correct(ratio: float) -> None:
        if ratio != 1.0 and getattr(inner, "momentums", None):
            rescale(tf.constant(ratio, tf.float32))

    return correct


def _local_grads(
    tf: Any, keras: Any, model: Any, optimizer: Any, cfg: Dict[str, Any], replicas: float
) -> Callable[[Any, Any], Tuple[Any, Any]]:
    """``(loss, gradients)`` of one replica: the cross-entropy summed and divided by the
    global batch, plus its share of the L2 term, scaled by the optimizer (AMP)."""
    ops = keras.ops
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    global_batch = float(cfg["global_batch_size"])
    l2 = 0.5 * float(cfg["optimizer"].get("weight_decay") or 0.0) / replicas
    variables = model.trainable_variables

    def local_grads(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, ops.cast(logits, "float32")) / global_batch
            total = loss
            if l2:
                total = total + l2 * ops.sum(ops.stack([ops.sum(ops.square(v)) for v in variables]))
            scaled = optimizer.scale_loss(total)
        return loss, tape.gradient(scaled, variables)

    return local_grads


def _skip_together(tf: Any, ops: Any, grads: List[Any]) -> List[Any]:
    """The gradients, all NaN on every worker when any worker's are not finite (the
    count is all-reduced), so that every LossScaleOptimizer skips the same steps."""
    ctx = tf.distribute.get_replica_context()
    local_bad = ops.sum(
        ops.stack([ops.sum(ops.cast(ops.logical_not(ops.isfinite(g)), "float32")) for g in grads])
    )
    any_bad = ctx.all_reduce(tf.distribute.ReduceOp.SUM, local_bad) > 0
    return [ops.where(any_bad, ops.full_like(g, float("nan")), g) for g in grads]


def make_evaluate(
    tf: Any, keras: Any, strategy: Any, model: Any, val: Callable[[], Iterator[Any]]
) -> Callable[[int], Tuple[float, float, int]]:
    """Global ``(accuracy, mean loss, samples)``: each worker evaluates its shard with Keras
    ops (no collective inside, so shards may differ in size), then the totals are summed
    across workers with one ``strategy.reduce``."""
    ops = keras.ops

    @tf.function(reduce_retracing=True)
    def eval_batch(x: Any, y: Any) -> Any:
        logits = ops.cast(model(x, training=False), "float32")
        hits = ops.equal(ops.argmax(logits, axis=-1), ops.cast(y, "int64"))
        loss = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
        return ops.stack(
            [
                ops.sum(ops.cast(hits, "float64")),
                ops.sum(ops.cast(loss, "float64")),
                ops.cast(ops.shape(y)[0], "float64"),
            ]
        )

    global_sum = strategy_sum(tf, strategy)

    def evaluate(_epoch: int) -> Tuple[float, float, int]:
        totals = np.zeros(3, dtype=np.float64)
        for x, y in val():
            totals += np.asarray(eval_batch(x, y))
        return eval_result(global_sum(tf.constant(totals)).numpy())

    return evaluate


def body(ctx: Context) -> None:
    cfg, info = ctx.cfg, ctx.info
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is not provided by the keras workload")
    if cfg["model"] in TRANSFORMER_SHAPES:  # a language model: lm_tf, this module's helpers
        from .lm_tf import lm_body

        return lm_body(ctx, "keras", sys.modules[__name__])
    tf_config = prepare_environment(cfg, info)
    tf, keras = import_keras()
    device, device_name = setup_device(tf, cfg, info)
    knobs = apply_knobs(tf, cfg, keras)
    use_amp = knobs.loss_scaling
    strategy, _options, comm_name = make_strategy(tf, cfg, info)
    with strategy.scope():
        model = build_rank_model(keras, cfg)
        optimizer = make_optimizer(keras, cfg, use_amp)
        optimizer.build(model.trainable_variables)
    ctx.write_meta(
        keras.__version__,
        device_name,
        models_tf.count_params(model.trainable_variables),
        comm_name,
        strategy="MultiWorkerMirroredStrategy",
        tensorflow_version=tf.__version__,
        keras_backend=keras.backend.backend(),
        **meta_fields(tf, cfg, knobs, communication_meta(cfg, comm_name, tf_config)),
    )
    data = make_data(tf, cfg, info, device)
    step_fn = make_step_fn(
        tf, keras, strategy, model, optimizer, cfg, use_amp, data.fixed, knobs.jit
    )
    ctx.train(
        step_fn,
        data,
        lambda val: make_evaluate(tf, keras, strategy, model, val),
        lambda: model_checksum(model),
        strategy_float_sum(tf, strategy),
    )


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
