"""The transformer language-model path of the ``tensorflow`` and ``keras`` workloads
(docs/workloads.md#transformers).

``tensorflow.body`` and ``keras.body`` hand a run whose model is a transformer shape to
:func:`lm_body`, with themselves as ``tools`` (their set-up helpers: ``TF_CONFIG`` before
TensorFlow is imported, the device, the precision policy, ``MultiWorkerMirroredStrategy`` with
``framework_options.communication``, the checksum and the ranks' sum; this module does not
import them, they import it). The model is ``models_lm_tf``'s, the tokens ``data_lm``'s (the
same as PyTorch's), the optimizer Keras' ``AdamW`` (betas 0.9, 0.95, epsilon 1e-8, as
``parallel_torch``), data-parallel only (``lm.parallel: ddp``).

One step is one ``tf.function`` calling ``strategy.run``: each worker sums the gradients of
its ``grad_accum`` micro-batches (the loss of each is its summed next-token cross-entropy
divided by the step's tokens over all workers, so the sum over workers is the global mean),
densifies them (the token table's gradient is sparse: it is all-reduced whole, as DDP does),
and then

* ``tensorflow``: all-reduces them itself (``ReplicaContext.all_reduce`` with the
  ``CommunicationOptions`` of ``framework_options.communication``) and applies AdamW in
  cross-replica context (``merge_call``);
* ``keras``: hands them to ``optimizer.apply_gradients`` in replica context, which all-reduces
  them (Keras' TensorFlow optimizer) and applies them.

The loss returned depends on the updated variables, so the step ends after the update. The
records are the PyTorch path's (``lm_common``): tokens per step, FLOPs per token per
convention, the start-up split (``process_group_s``: creating the strategy, which connects the
workers), the peak memory (the CPU's resident set above the one before the model is built; on
a GPU TensorFlow's peak allocated bytes).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional

from ..common import Context
from ..common.data_lm import lm_settings, lm_train_data
from ..common.lm_common import RssPeak, import_seconds, lm_meta, token_fields, train_loop
from ..vocabulary import TRANSFORMER_SHAPES

#: AdamW's betas and epsilon (as the PyTorch path's)
ADAM_BETAS = (0.9, 0.95)
ADAM_EPS = 1e-8


def import_tf() -> Any:
    """``(tensorflow, keras)``, Keras 3 on the TensorFlow backend."""
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras
    import tensorflow as tf

    if int(str(keras.__version__).split(".")[0]) < 3:
        raise RuntimeError(f"the transformer path needs Keras 3, found keras {keras.__version__}")
    return tf, keras


def check_lm(lm: Dict[str, Any], precision: str) -> None:
    """What this path cannot do (``spec/lm.py`` refuses it before a run is planned)."""
    if lm["parallel"] != "ddp":
        raise ValueError(f"parallel {lm['parallel']!r}: TensorFlow/Keras train data-parallel (ddp)")
    if lm["activation_checkpointing"] != "none":
        raise ValueError("activation checkpointing is not built for TensorFlow/Keras")
    if precision == "amp":
        raise ValueError("precision amp (fp16 loss scaling) is not built for the transformers")


class GpuPeak:
    """TensorFlow's peak allocated bytes on the GPU (``get_memory_info``), reset at start."""

    def __init__(self, tf: Any) -> None:
        self.tf = tf

    def start(self) -> None:
        self.tf.config.experimental.reset_memory_stats("GPU:0")

    def fields(self) -> Dict[str, Any]:
        peak = self.tf.config.experimental.get_memory_info("GPU:0")["peak"]
        return {"peak_allocated_bytes": int(peak)}


def make_optimizer(keras: Any, cfg: Dict[str, Any]) -> Any:
    """Keras' AdamW (the keras workload's)."""
    opt = cfg["optimizer"]
    return keras.optimizers.AdamW(
        learning_rate=float(opt["lr"]),
        weight_decay=float(opt.get("weight_decay") or 0.0),
        beta_1=ADAM_BETAS[0],
        beta_2=ADAM_BETAS[1],
        epsilon=ADAM_EPS,
    )


class TFAdamW:
    """AdamW on TensorFlow variables, as ``torch.optim.AdamW`` (decoupled weight decay
    ``w -= lr * wd * w``; ``w -= lr / (1 - b1^t) * m / (sqrt(v / (1 - b2^t)) + eps)``), applied
    in cross-replica context to all-reduced gradients (the tensorflow workload's: Keras'
    optimizers apply only in replica context, where they all-reduce themselves). Create it
    under the strategy's scope."""

    def __init__(self, tf: Any, tools: Any, model: Any, cfg: Dict[str, Any]) -> None:
        self.tf = tf
        opt = cfg["optimizer"]
        self.weight_decay = float(opt.get("weight_decay") or 0.0)
        self.variables = [tools.tf_variable(v) for v in model.trainable_variables]
        self.moments = [
            (
                tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"m_{i}"),
                tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"v_{i}"),
            )
            for i, v in enumerate(self.variables)
        ]
        self.learning_rate = tf.Variable(float(opt["lr"]), trainable=False, dtype=tf.float32)
        self.steps = tf.Variable(0.0, trainable=False, dtype=tf.float32)

    def update(self, var: Any, grad: Any, m: Any, v: Any, corrections: Any) -> Any:
        tf, (b1, b2) = self.tf, ADAM_BETAS
        lr = tf.identity(self.learning_rate)
        if self.weight_decay:
            var.assign_sub(lr * self.weight_decay * var)
        m.assign(b1 * m + (1.0 - b1) * grad)
        v.assign(b2 * v + (1.0 - b2) * tf.square(grad))
        denom = tf.sqrt(v / corrections[1]) + ADAM_EPS
        return var.assign_sub(lr / corrections[0] * m / denom)

    def apply(self, distribution: Any, grads: List[Any]) -> None:
        """``merge_call``'s function: every variable's update, then the step count."""
        t = self.steps + 1.0
        corrections = (1.0 - ADAM_BETAS[0] ** t, 1.0 - ADAM_BETAS[1] ** t)
        for var, grad, (m, v) in zip(self.variables, grads, self.moments):
            distribution.extended.update(
                var, self.update, args=(grad, m, v, corrections), group=False
            )
        distribution.extended.update(self.steps, lambda s: s.assign(t), group=False)


def local_grads(tf: Any, model: Any, accum: int, global_tokens: float) -> Callable[[Any], Any]:
    """``(loss share, dense gradients)`` of one worker over its ``accum`` micro-batches."""
    variables = model.trainable_variables

    def grads_of(tokens: Any) -> Any:
        total, grads = tf.constant(0.0), None
        for chunk in tf.split(tokens, accum):
            with tf.GradientTape() as tape:
                logits = tf.cast(model(chunk[:, :-1], training=True), tf.float32)
                ce = tf.nn.sparse_softmax_cross_entropy_with_logits(chunk[:, 1:], logits)
                loss = tf.reduce_sum(ce) / global_tokens
            g = [tf.convert_to_tensor(x) for x in tape.gradient(loss, variables)]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            total += loss
        return total, grads

    return grads_of


def make_lm_step(
    tf: Any,
    tools: Any,
    strategy: Any,
    model: Any,
    optimizer: Any,
    settings: Dict[str, Any],
) -> Callable[[Optional[Any], float], float]:
    """The step function of ``run_training``: ``settings`` has ``accum``, ``global_tokens``,
    ``options`` (the tensorflow workload's ``CommunicationOptions``, None for keras) and
    ``fixed`` (synthetic tokens)."""
    variables = model.trainable_variables
    grads_of = local_grads(tf, model, settings["accum"], float(settings["global_tokens"]))
    options = settings["options"]

    def replica_step(tokens: Any) -> Any:
        loss, grads = grads_of(tokens)
        ctx = tf.distribute.get_replica_context()
        if options is None:  # keras: the optimizer all-reduces in replica context
            optimizer.apply_gradients(zip(grads, variables))
        else:  # tensorflow: all-reduced here, applied by TFAdamW in cross-replica context
            grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads, options=options)
            ctx.merge_call(optimizer.apply, args=(grads,))
        return tools.after(tf, loss, variables)

    @tf.function
    def train_step(tokens: Any) -> Any:
        per_replica = strategy.run(replica_step, args=(tokens,))
        return strategy.experimental_local_results(per_replica)[0]

    replicas = float(strategy.num_replicas_in_sync)
    current: Dict[str, Optional[float]] = {"lr": None}

    def step_fn(batch: Optional[Any], lr: float) -> float:
        if current["lr"] != lr:
            optimizer.learning_rate.assign(lr)
            current["lr"] = lr
        tokens = settings["fixed"] if batch is None else batch[0]
        # the worker's share of the global mean, times the workers: its local mean loss
        return float(train_step(tokens).numpy()) * replicas

    return step_fn


def _framework_meta(tf: Any, keras: Any, framework: str) -> Dict[str, Any]:
    if framework == "keras":
        return {"framework_version": keras.__version__, "tensorflow_version": tf.__version__}
    return {"framework_version": tf.__version__, "keras_version": keras.__version__}


def _build(
    tf: Any, keras: Any, tools: Any, strategy: Any, cfg: Dict[str, Any], framework: str
) -> List[Any]:
    """``[model, optimizer]`` under the strategy's scope (variables mirrored on every worker):
    Keras' AdamW for the keras workload, :class:`TFAdamW` for the tensorflow workload."""
    from .models_lm_tf import build_lm  # imports Keras: after KERAS_BACKEND is set

    with strategy.scope():
        model = build_lm(cfg["model"], int(cfg["lm"]["seq_len"]), seed=cfg["seed"])
        if framework == "keras":
            optimizer = make_optimizer(keras, cfg)
            optimizer.build(model.trainable_variables)
        else:
            optimizer = TFAdamW(tf, tools, model, cfg)
    return [model, optimizer]


def lm_body(ctx: Context, framework: str, tools: Any) -> None:
    """The body of a transformer run of the ``tensorflow`` or ``keras`` workload
    (``framework``); ``tools``: that workload's module (see the module docstring)."""
    cfg, info = ctx.cfg, ctx.info
    startup = import_seconds(ctx)
    tf_config = tools.prepare_environment(cfg, info)
    tf, keras = import_tf()
    device, device_name = tools.setup_device(tf, cfg, info)
    knobs = tools.apply_knobs(tf, cfg, keras, xla=False)
    lm = cfg["lm"] = lm_settings(cfg)
    check_lm(lm, knobs.precision)
    t0 = time.time()
    strategy, options, comm_name = tools.make_strategy(tf, cfg, info)
    startup["process_group_s"] = time.time() - t0
    shape = TRANSFORMER_SHAPES[cfg["model"]]

    def on_device(a: Any) -> Any:
        with tf.device(device):
            return tf.identity(tf.constant(a.astype("int32")))

    data = lm_train_data(cfg, info, on_device, shape.vocab)
    memory = GpuPeak(tf) if device.startswith("/GPU") else RssPeak()
    memory.start()
    t0 = time.time()
    model, optimizer = _build(tf, keras, tools, strategy, cfg, framework)
    startup["build_shard_s"] = time.time() - t0
    from .models_lm_tf import param_count  # Keras: imported once the environment is set

    meta = _framework_meta(tf, keras, framework)
    ctx.write_meta(
        meta.pop("framework_version"),
        device_name,
        param_count(model),
        comm_name,
        strategy="MultiWorkerMirroredStrategy",
        threads=tf.config.threading.get_intra_op_parallelism_threads() or None,
        **meta,
        **tools.communication_meta(cfg, comm_name, tf_config),
        **knobs.knobs.meta(),
        **lm_meta(cfg, lm, startup),
    )
    _train(ctx, tf, tools, strategy, (model, optimizer), data, memory, options, framework)


def _train(
    ctx: Context,
    tf: Any,
    tools: Any,
    strategy: Any,
    built: Any,
    data: Any,
    memory: Any,
    options: Any,
    framework: str,
) -> None:
    """Training, then the summary with tokens and memory."""
    cfg, lm = ctx.cfg, ctx.cfg["lm"]
    model, optimizer = built
    accum = int(lm["grad_accum"])
    settings = dict(
        accum=accum,
        global_tokens=int(cfg["global_batch_size"]) * accum * int(lm["seq_len"]),
        options=options if framework == "tensorflow" else None,
        fixed=data.fixed[0] if data.fixed is not None else None,
    )
    step_fn = make_lm_step(tf, tools, strategy, model, optimizer, settings)
    loop_cfg = dict(cfg, batch_size=int(cfg["batch_size"]) * accum)
    sums = tools.strategy_float_sum(tf, strategy)
    measurement = train_loop(ctx, loop_cfg, step_fn, data, sums)
    fields = measurement.summary_fields()
    fields.update(token_fields(cfg, fields), **memory.fields())
    param_sum, param_sha = tools.model_checksum(model)
    ctx.finish(fields, param_sum, param_sha)
