"""Horovod workload with TensorFlow.

``python -m ddlbench.workloads.hvd.horovod_tf run.json`` on every task. Rendezvous as in
``horovod_torch`` (``horovod_rendezvous.setup_horovod_env``; gloo or mpi controller).
The model is the shared Keras definition (``models_tf``), the data, device set-up,
precision policy and checksum are the tensorflow workload's; gradients are averaged by
``hvd.DistributedGradientTape`` and applied by the same SGD as the other workloads
(momentum, Nesterov, L2 weight decay added to the gradient, as ``torch.optim.SGD``).
All model variables (and momentum buffers) are broadcast from rank 0 before training.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Tuple

from ..common import Context, SGDSettings, eval_result, workload_main
from ..tf import models_tf
from ..tf.tf_main import quiet_environment
from .horovod_rendezvous import (
    horovod_backend,
    horovod_compression,
    horovod_session,
    setup_horovod_env,
)


def make_step_fn(
    tf: Any,
    hvd: Any,
    model: Any,
    cfg: dict,
    use_amp: bool,
    fixed: Optional[Tuple[Any, Any]],
    compression: Any,
) -> Tuple[Any, List[Any]]:
    """``(step_fn, optimizer variables)``: the tensorflow workload's SGD (``TFSGD``) on
    gradients averaged by ``hvd.DistributedGradientTape``; with AMP, dynamic loss scaling
    decided on the averaged gradients (the same on all ranks, so all agree)."""
    from ..tf.tf_main import TFSGD, after

    opt = TFSGD(tf, SGDSettings.from_config(cfg), model, use_amp)
    apply = _apply(tf, opt)

    @tf.function
    def train_step(x: Any, y: Any, lr: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
            scaled = loss * opt.loss_scale if use_amp else loss
        tape = hvd.DistributedGradientTape(tape, compression=compression, op=hvd.Average)
        apply(tape.gradient(scaled, opt.variables), lr)
        return after(tf, loss, opt.variables)  # readable only once the update is done

    def step_fn(batch: Optional[Any], lr: float) -> float:
        x, y = fixed if batch is None else batch
        return float(train_step(x, y, tf.constant(lr, tf.float32)).numpy())

    return step_fn, opt.optimizer_variables()


def _apply(tf: Any, opt: Any) -> Callable[[List[Any], Any], None]:
    """``apply(grads, lr)``: the SGD update of every variable; with AMP, unscale, update
    only when all gradients are finite, and move the loss scale."""

    def apply_all(grads: List[Any], lr: Any) -> None:
        for var, grad, buf in zip(opt.variables, grads, opt.buffers):
            opt.update(var, grad, buf, lr)

    if not opt.use_amp:
        return apply_all

    def apply_scaled(grads: List[Any], lr: Any) -> None:
        grads, finite = opt.unscale(grads)

        def do_apply() -> Any:
            apply_all(grads, lr)
            return tf.constant(True)

        tf.cond(finite, do_apply, lambda: tf.constant(False))
        grow = opt.grows(finite)
        opt.loss_scale.assign(opt.next_scale(opt.loss_scale, finite, grow))
        opt.good_steps.assign(opt.next_good_steps(opt.good_steps, finite, grow))

    return apply_scaled


def make_evaluate(
    tf: Any, hvd: Any, model: Any, val: Callable[[], Iterator[Any]]
) -> Callable[[int], Tuple[float, float, int]]:
    """Global ``(accuracy, mean loss, samples)``: local sums, one ``hvd.allreduce``."""
    from ..tf.tf_main import local_eval_totals

    local_totals = local_eval_totals(tf, model)

    def evaluate(_epoch: int) -> Tuple[float, float, int]:
        totals = tf.constant(local_totals(val))
        return eval_result(hvd.allreduce(totals, op=hvd.Sum, name="ddlbench.eval").numpy())

    return evaluate


def body(ctx: Context) -> None:
    cfg = ctx.cfg
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is run by the allreduce_horovod workload")
    controller = setup_horovod_env(cfg)
    quiet_environment(cfg)
    import horovod.tensorflow as hvd
    import tensorflow as tf  # noqa: F401 - TensorFlow is loaded before hvd.init()

    with horovod_session(hvd, ctx.info):
        # the model and its step outlive hvd.shutdown()
        trained = _train(ctx, hvd, controller)  # noqa: F841
        hvd.join()


def _train(ctx: Context, hvd: Any, controller: str) -> Tuple[Any, Any]:
    """The tensorflow workload's model, data and set-up with Horovod's averaging; returns
    the model and its step function."""
    import horovod
    import tensorflow as tf

    from ..tf.tf_main import (
        apply_knobs,
        build_rank_model,
        make_data,
        meta_fields,
        model_checksum,
        setup_device,
        tf_variable,
    )

    cfg, info = ctx.cfg, ctx.info
    keras = tf.keras
    device, device_name = setup_device(tf, cfg, info)
    knobs = apply_knobs(tf, cfg, keras, xla=False)
    model = build_rank_model(keras, cfg)
    ctx.write_meta(
        f"horovod {horovod.__version__}, tensorflow {tf.__version__}",
        device_name,
        models_tf.count_params(model.trainable_variables),
        horovod_backend(hvd, cfg["device"] == "gpu", controller),
        controller=controller,
        **meta_fields(tf, cfg, knobs),
    )
    data = make_data(tf, cfg, info, device)
    compression = horovod_compression(hvd, cfg)
    step_fn, opt_vars = make_step_fn(
        tf, hvd, model, cfg, knobs.loss_scaling, data.fixed, compression
    )
    # Keras 3 wraps tf.Variables; Horovod assigns to the tf.Variable behind each
    variables = [tf_variable(v) for v in model.variables]
    hvd.broadcast_variables(variables + opt_vars, root_rank=0)
    ctx.train(
        step_fn,
        data,
        lambda val: make_evaluate(tf, hvd, model, val),
        lambda: model_checksum(model),
        lambda values: [
            float(v)
            for v in hvd.allreduce(
                tf.constant(values, dtype=tf.float64), op=hvd.Sum, name="ddlbench.window"
            ).numpy()
        ],
    )
    return model, step_fn


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
