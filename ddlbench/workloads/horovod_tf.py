"""Horovod workload with TensorFlow.

``python -m ddlbench.workloads.horovod_tf run.json`` on every task. Rendezvous as in
``horovod_torch`` (``horovod_rendezvous.setup_horovod_env``; gloo or mpi controller).
The model is the shared Keras definition (``models_tf``), the data, device set-up,
precision policy and checksum are the tensorflow workload's; gradients are averaged by
``hvd.DistributedGradientTape`` and applied by the same SGD as the other workloads
(momentum, Nesterov, L2 weight decay added to the gradient, as ``torch.optim.SGD``).
All model variables (and momentum buffers) are broadcast from rank 0 before training.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from . import models_tf
from .common import Context, LRSchedule, run_training, training_flops, workload_main
from .horovod_rendezvous import setup_horovod_env


def make_step_fn(
    tf: Any,
    hvd: Any,
    model: Any,
    cfg: dict,
    use_amp: bool,
    fixed: Optional[Tuple[Any, Any]],
    compression: Any,
) -> Tuple[Any, List[Any]]:
    """``(step_fn, optimizer variables)``; with AMP, dynamic loss scaling (initial 2^15,
    halved and the update skipped on non-finite averaged gradients, doubled after 2000
    finite steps: the averaged gradients are the same on all ranks, so all agree)."""
    from .tensorflow import after, tf_variable

    opt = cfg["optimizer"]
    if opt.get("name", "sgd") != "sgd":
        raise ValueError(f"optimizer {opt.get('name')!r} is not supported (only sgd)")
    momentum = float(opt.get("momentum") or 0.0)
    weight_decay = float(opt.get("weight_decay") or 0.0)
    nesterov = bool(opt.get("nesterov")) and momentum > 0
    variables = [tf_variable(v) for v in model.trainable_variables]
    buffers = [
        tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"momentum_{i}")
        for i, v in enumerate(variables)
    ]
    loss_scale = tf.Variable(2.0**15 if use_amp else 1.0, trainable=False, dtype=tf.float32)
    good_steps = tf.Variable(0, trainable=False, dtype=tf.int64)

    def apply(grads: List[Any], lr: Any) -> None:
        for var, grad, buf in zip(variables, grads, buffers):
            if weight_decay:
                grad = grad + weight_decay * var
            if momentum:
                new_buf = momentum * buf + grad
                grad = grad + momentum * new_buf if nesterov else new_buf
                buf.assign(new_buf)
            var.assign_sub(lr * grad)

    @tf.function
    def train_step(x: Any, y: Any, lr: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
            scaled = loss * loss_scale if use_amp else loss
        tape = hvd.DistributedGradientTape(tape, compression=compression, op=hvd.Average)
        grads = tape.gradient(scaled, variables)
        if use_amp:
            grads = [g / loss_scale for g in grads]
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])

            def do_apply() -> Any:
                apply(grads, lr)
                return tf.constant(True)

            tf.cond(finite, do_apply, lambda: tf.constant(False))
            grow = tf.logical_and(finite, tf.equal(good_steps, 1999))
            loss_scale.assign(
                tf.where(
                    finite,
                    tf.where(grow, loss_scale * 2.0, loss_scale),
                    tf.maximum(loss_scale * 0.5, 1.0),
                )
            )
            good_steps.assign(
                tf.where(tf.logical_and(finite, tf.logical_not(grow)), good_steps + 1, 0)
            )
        else:
            apply(grads, lr)
        return after(tf, loss, variables)  # readable only once the update is done

    def step_fn(batch: Optional[Any], lr: float) -> float:
        x, y = fixed if batch is None else batch
        return float(train_step(x, y, tf.constant(lr, tf.float32)).numpy())

    return step_fn, buffers + [loss_scale, good_steps]


def make_evaluate(tf: Any, hvd: Any, model: Any, val: Any) -> Any:
    """Global ``(accuracy, mean loss, samples)``: local sums, one ``hvd.allreduce``."""

    @tf.function(reduce_retracing=True)
    def eval_batch(x: Any, y: Any) -> Any:
        logits = tf.cast(model(x, training=False), tf.float32)
        correct = tf.reduce_sum(
            tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), y), tf.float64)
        )
        loss = tf.reduce_sum(
            tf.cast(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits), tf.float64)
        )
        return tf.stack([correct, loss, tf.cast(tf.shape(y)[0], tf.float64)])

    def evaluate(_epoch: int) -> Tuple[float, float, int]:
        totals = np.zeros(3, dtype=np.float64)
        for x, y in val():
            totals += eval_batch(x, y).numpy()
        summed = hvd.allreduce(tf.constant(totals), op=hvd.Sum, name="ddlbench.eval").numpy()
        correct, loss_sum, n = (float(v) for v in summed)
        return (correct / n if n else 0.0), (loss_sum / n if n else float("nan")), int(n)

    return evaluate


def body(ctx: Context) -> None:
    import os

    cfg, info = ctx.cfg, ctx.info
    opts = cfg.get("framework_options") or {}
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is run by the allreduce_horovod workload")
    controller = setup_horovod_env(cfg)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if cfg["device"] == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import horovod
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from .tensorflow import (
        apply_knobs,
        make_data,
        model_checksum,
        setup_device,
        tf_variable,
    )

    hvd.init()
    try:
        if hvd.rank() != info.rank or hvd.size() != info.world_size:
            raise RuntimeError(
                f"Horovod rank {hvd.rank()}/{hvd.size()} differs from Slurm's "
                f"{info.rank}/{info.world_size}"
            )
        keras = tf.keras
        device, device_name = setup_device(tf, cfg, info)
        knobs = apply_knobs(tf, cfg, keras, xla=False)
        use_amp = knobs.loss_scaling
        model = models_tf.build_model(
            keras, cfg["model"], int(cfg["image_size"]), int(cfg["num_classes"]), seed=cfg["seed"]
        )
        backend = "nccl" if cfg["device"] == "gpu" and hvd.nccl_built() else controller
        ctx.write_meta(
            f"horovod {horovod.__version__}, tensorflow {tf.__version__}",
            device_name,
            models_tf.count_params(model.trainable_variables),
            backend,
            controller=controller,
            threads=tf.config.threading.get_intra_op_parallelism_threads() or None,
            flops_per_sample=training_flops(cfg),
            **knobs.knobs.meta(),
        )
        data = make_data(tf, cfg, info, device)
        compression = hvd.Compression.fp16 if opts.get("fp16_allreduce") else hvd.Compression.none
        step_fn, opt_vars = make_step_fn(tf, hvd, model, cfg, use_amp, data.fixed, compression)
        # Keras 3 wraps tf.Variables; Horovod assigns to the tf.Variable behind each
        variables = [tf_variable(v) for v in model.variables]
        hvd.broadcast_variables(variables + opt_vars, root_rank=0)
        schedule = LRSchedule.from_config(cfg, data.steps_per_epoch)
        evaluate_fn = None
        if cfg["mode"] == "convergence":
            if data.val is None:
                raise ValueError("convergence mode needs a validation split")
            evaluate_fn = make_evaluate(tf, hvd, model, data.val)
        measurement = run_training(
            cfg, ctx.measurement(), step_fn, schedule, data.batches, evaluate_fn
        )
        psum, sha = model_checksum(model)
        ctx.finish(measurement.summary_fields(), psum, sha)
        hvd.join()
    finally:
        hvd.shutdown()


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
