"""TensorFlow workload: ``MultiWorkerMirroredStrategy`` with a pure-TensorFlow training loop.

``python -m ddlbench.workloads.tf.tf_main run.json`` on every task. Before TensorFlow is
imported the workload builds ``TF_CONFIG`` from the Slurm environment (``tfconfig``; an existing
``TF_CONFIG`` is kept), hides the GPUs on a CPU run and quietens TensorFlow's C++ logging.

One training step is one ``tf.function`` that calls ``strategy.run``: each worker computes its
gradients on its own shard with ``tf.GradientTape``, the gradients are summed across workers
with an explicit ``ReplicaContext.all_reduce`` (the implementation from
``framework_options.communication``: ``ring``, ``nccl`` or ``auto``, via
``tf.distribute.experimental.CommunicationOptions``) and SGD with momentum is applied with
``strategy.extended.update`` in cross-replica context. The loss is divided by the *global*
batch, so the sum over workers is the mean gradient of the global batch. No Keras optimizer,
loss or metric is involved; the model itself is built by ``models_tf`` with the Keras layers
that ship with TensorFlow. A step ends when its loss has been read back (``.numpy()``), and the
returned loss carries control dependencies on the updated parameters, so the step time
includes the gradient all-reduce and the update even on an asynchronous GPU.

The set-up helpers here (environment, strategy, data, evaluation) are shared with the
``keras`` workload. See docs/workloads.md.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..common import (
    Context,
    Knobs,
    RankInfo,
    SGDSettings,
    TrainData,
    cpu_name,
    cpu_threads,
    eval_result,
    framework_options,
    image_mean_std,
    imagefolder_split,
    input_channels,
    param_checksum,
    rank_train_data,
    resolve_precision,
    shard_indices,
    steps_per_epoch,
    training_flops,
    warmup_steps,
    workload_main,
)
from ..vocabulary import TRANSFORMER_SHAPES
from . import models_tf
from .tfconfig import ensure_tf_config, tf_config_rank, tf_config_world_size

COMMUNICATIONS = ("auto", "ring", "nccl")
NumpyBatch = Tuple[np.ndarray, np.ndarray]


# -- before TensorFlow is imported -------------------------------------------------------------


def quiet_environment(cfg: Dict[str, Any]) -> None:
    """Before ``import tensorflow``: quieten its C++ logging, hide the GPUs on a CPU run."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if cfg["device"] == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def prepare_environment(cfg: Dict[str, Any], info: RankInfo) -> Optional[Dict[str, Any]]:
    """Set what TensorFlow reads at import time; returns the ``TF_CONFIG`` in force (or None).

    Must run before ``import tensorflow``. ``TF_CONFIG`` is built from the Slurm/ddlbench
    variables unless it is already set; a single process started by hand (no SLURM_NTASKS)
    runs without one, which ``MultiWorkerMirroredStrategy`` treats as one local worker.
    """
    quiet_environment(cfg)
    if os.environ.get("TF_CONFIG"):
        config: Optional[Dict[str, Any]] = json.loads(os.environ["TF_CONFIG"])
    elif os.environ.get("SLURM_NTASKS"):
        config = ensure_tf_config()
    else:
        config = None
    if config is not None:
        rank, world = tf_config_rank(config), tf_config_world_size(config)
        if (rank, world) != (info.rank, info.world_size):
            raise RuntimeError(
                f"TF_CONFIG puts this task at worker {rank} of {world}, but the Slurm "
                f"environment says rank {info.rank} of {info.world_size}"
            )
    return config


# -- after TensorFlow is imported --------------------------------------------------------------
def setup_device(tf: Any, cfg: Dict[str, Any], info: RankInfo) -> Tuple[str, str]:
    """``(device string, device name)``. On GPU each task keeps one GPU (by SLURM_LOCALID
    when it sees several), so that every worker has exactly one replica."""
    if cfg["device"] == "gpu":
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            raise RuntimeError("device gpu requested but TensorFlow sees no GPU")
        gpu = gpus[info.local_rank % len(gpus)]
        tf.config.set_visible_devices([gpu], "GPU")
        tf.config.experimental.set_memory_growth(gpu, True)
        details = tf.config.experimental.get_device_details(gpu) or {}
        return "/GPU:0", str(details.get("device_name") or gpu.name)
    threads = cpu_threads(cfg, info)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(min(2, threads))
    return "/CPU:0", cpu_name()


@dataclass
class TFKnobs:
    """The knobs as applied by TensorFlow/Keras (see :func:`apply_knobs`)."""

    knobs: Knobs
    precision: str
    #: fp16 with dynamic loss scaling (precision amp)
    loss_scaling: bool
    #: compile the per-replica forward/backward with XLA (``tf.function(jit_compile=True)``)
    jit: bool


def _compute_capability(tf: Any) -> Tuple[int, int]:
    gpus = tf.config.get_visible_devices("GPU")
    details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
    return tuple(details.get("compute_capability") or (0, 0))  # type: ignore[return-value]


def apply_knobs(tf: Any, cfg: Dict[str, Any], keras: Any, xla: bool = True) -> TFKnobs:
    """Apply precision, layout and XLA settings and record them. Call before the model is built.

    Precision: Keras' ``mixed_float16`` policy (with loss scaling) for amp, ``mixed_bfloat16``
    (no scaling) for bf16. TF32: TensorFlow enables it by default on Ampere and newer
    (``tf.config.experimental.enable_tensor_float_32_execution``), so an untouched "fp32" run
    is TF32; it is set here explicitly: off for fp32, on for tf32, amp and bf16. The models
    are NHWC already: ``layout: channels_last`` changes nothing and is recorded as NHWC.
    ``xla=False``: the workload cannot compile its step with XLA (a fallback if asked).
    """
    knobs = Knobs.from_config(cfg)
    gpu = cfg["device"] == "gpu"
    major = _compute_capability(tf)[0] if gpu else 0
    precision = resolve_precision(knobs, gpu, major >= 8, major >= 8)
    tf32: Optional[bool] = None
    if gpu:
        tf32 = precision != "fp32"
        tf.config.experimental.enable_tensor_float_32_execution(tf32)
    policy = {"amp": "mixed_float16", "bf16": "mixed_bfloat16"}.get(precision, "float32")
    keras.mixed_precision.set_global_policy(policy)
    knobs.extra.update(
        tf32_matmul=tf32, tf32_conv=tf32, dtype_policy=policy, loss_scaling=precision == "amp"
    )
    knobs.layout = "NHWC"
    jit = bool(knobs.requested["compile"])
    if jit and not xla:
        knobs.fallback("compile: this workload cannot compile its step with XLA; running without")
        jit = False
    knobs.compile = "tf.function(jit_compile=True)" if jit else "tf.function"
    warmup_steps(cfg, knobs)
    return TFKnobs(knobs, precision, precision == "amp", jit)


def communication(cfg: Dict[str, Any]) -> str:
    value = str(framework_options(cfg).get("communication") or "auto").lower()
    if value not in COMMUNICATIONS:
        raise ValueError(
            f"framework_options.communication must be one of {', '.join(COMMUNICATIONS)}, "
            f"not {value!r}"
        )
    if value == "nccl" and cfg["device"] != "gpu":
        raise ValueError("communication nccl needs device gpu (use ring or auto on the CPU)")
    return value


def make_strategy(tf: Any, cfg: Dict[str, Any], info: RankInfo) -> Tuple[Any, Any, str]:
    """``(strategy, CommunicationOptions, communication name)``."""
    name = communication(cfg)
    impl = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation={"auto": impl.AUTO, "ring": impl.RING, "nccl": impl.NCCL}[name]
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if strategy.num_replicas_in_sync != info.world_size:
        raise RuntimeError(
            f"MultiWorkerMirroredStrategy has {strategy.num_replicas_in_sync} replicas, "
            f"expected one per task ({info.world_size})"
        )
    return strategy, options, name


def communication_meta(
    cfg: Dict[str, Any], name: str, tf_config: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """Extra meta fields: what ``auto`` resolves to where it is known (on the CPU only the
    ring exists) and the cluster of ``TF_CONFIG`` (provenance of the rendezvous)."""
    fields: Dict[str, Any] = {
        "communication_effective": "ring"
        if cfg["device"] == "cpu"
        else (name if name != "auto" else None)
    }
    if tf_config is not None:
        fields["tf_config"] = tf_config
    return fields


def tf_variable(v: Any) -> Any:
    """The ``tf.Variable`` behind a Keras variable (Keras 3 wraps them; Keras 2 does not)."""
    import tensorflow as tf

    return v if isinstance(v, tf.Variable) else v.value


def after(tf: Any, value: Any, variables: List[Any]) -> Any:
    """``value``, made to depend on reads of ``variables``: reading it back from the device
    then waits for the updates of those variables (honest step ends on an async GPU)."""
    reads = [tf.identity(tf_variable(v)) for v in variables]
    with tf.control_dependencies(reads):
        return tf.identity(value)


def build_rank_model(keras: Any, cfg: Dict[str, Any]) -> Any:
    """The run's ``models_tf`` model, seeded (the same initial weights on every rank)."""
    return models_tf.build_model(
        keras, cfg["model"], int(cfg["image_size"]), int(cfg["num_classes"]), seed=cfg["seed"]
    )


def meta_fields(
    tf: Any, cfg: Dict[str, Any], knobs: TFKnobs, communication: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """The meta record's extras common to the TensorFlow workloads: threads, the
    ``communication`` fields (:func:`communication_meta`) if any, FLOPs, knobs."""
    return dict(
        threads=tf.config.threading.get_intra_op_parallelism_threads() or None,
        **(communication or {}),
        flops_per_sample=training_flops(cfg),
        **knobs.knobs.meta(),
    )


def model_checksum(model: Any) -> Tuple[float, str]:
    """Checksum of ``model.trainable_variables`` in the model's fixed order (float32)."""
    return param_checksum(
        np.asarray(v.numpy(), dtype=np.float32) for v in model.trainable_variables
    )


# -- data --------------------------------------------------------------------------------------
# what tf.io.decode_image reads of common's IMAGE_EXTENSIONS (not PPM/PGM, not TIFF)
DECODABLE = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def make_data(tf: Any, cfg: Dict[str, Any], info: RankInfo, device: str) -> TrainData:
    """This rank's training (and validation) data, NHWC (common/data.py for the kinds)."""

    def on_device(x: np.ndarray, y: np.ndarray) -> Tuple[Any, Any]:
        with tf.device(device):
            return tf.identity(tf.constant(x)), tf.identity(tf.constant(y.astype(np.int32)))

    def to_tensors(bx: np.ndarray, by: np.ndarray) -> Tuple[Any, Any]:
        return tf.convert_to_tensor(bx), tf.convert_to_tensor(by.astype(np.int32))

    def imagefolder(seed: int) -> TrainData:
        return _imagefolder_data(tf, cfg, info, seed)

    return rank_train_data(cfg, info, "NHWC", on_device, to_tensors, imagefolder)


def _imagefolder_data(tf: Any, cfg: Dict[str, Any], info: RankInfo, seed: int) -> TrainData:
    """``train/<class>/<image>`` folders decoded by a ``tf.data`` pipeline: resize the shorter
    side to ``size * 256 / 224``, random crop and flip (centre crop for validation),
    normalised by ``image_mean_std`` (gray for 1-channel models). Each rank reads its own
    shard of the file list."""
    (train_paths, train_labels, _classes), val_index = imagefolder_split(
        cfg["data"].get("path"), cfg["num_classes"], DECODABLE
    )
    size, batch = int(cfg["image_size"]), int(cfg["batch_size"])
    channels = input_channels(cfg["model"])
    mean, std = (tf.constant(v) * 255.0 for v in image_mean_std(channels))
    autotune = tf.data.AUTOTUNE

    def load(p: Any, label: Any, train: bool) -> Tuple[Any, Any]:
        img = tf.io.decode_image(tf.io.read_file(p), channels=channels, expand_animations=False)
        img = tf.cast(img, tf.float32)
        shape = tf.cast(tf.shape(img)[:2], tf.float32)
        scale = (size * 256.0 / 224.0) / tf.reduce_min(shape)
        new = tf.maximum(tf.cast(tf.round(shape * scale), tf.int32), size)
        img = tf.image.resize(img, new)
        if train:
            img = tf.image.random_crop(img, [size, size, channels])
            img = tf.image.random_flip_left_right(img)
        else:
            img = tf.image.resize_with_crop_or_pad(img, size, size)
        return (img - mean) / std, tf.cast(label, tf.int32)

    def dataset(paths: List[str], labels: np.ndarray, train: bool, epoch: int) -> Any:
        idx = shard_indices(len(paths), info.rank, info.world_size)
        ds = tf.data.Dataset.from_tensor_slices(([paths[i] for i in idx], labels[idx]))
        if train:
            ds = ds.shuffle(len(idx), seed=seed + epoch, reshuffle_each_iteration=False)
        ds = ds.map(lambda p, lab: load(p, lab, train), num_parallel_calls=autotune)
        return ds.batch(batch, drop_remainder=train).prefetch(autotune)

    spe = steps_per_epoch(len(train_paths), info.world_size, batch)

    def batches(epoch: int) -> Iterator[Any]:
        return iter(dataset(train_paths, train_labels, True, epoch).take(spe))

    val = None
    if val_index is not None:
        val_paths, val_labels, _ = val_index

        def val() -> Iterator[Any]:
            return iter(dataset(val_paths, val_labels, False, 0))

    return TrainData(spe, batches=batches, val=val)


# -- evaluation --------------------------------------------------------------------------------
def local_eval_totals(tf: Any, model: Any) -> Callable[[Callable[[], Iterator[Any]]], np.ndarray]:
    """``totals(val)``: this rank's ``(correct, loss sum, samples)`` over its validation
    shard, evaluated locally (no collective, so shards may differ in size)."""

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

    def totals(val: Callable[[], Iterator[Any]]) -> np.ndarray:
        out = np.zeros(3, dtype=np.float64)
        for x, y in val():
            out += eval_batch(x, y).numpy()
        return out

    return totals


def strategy_sum(tf: Any, strategy: Any) -> Callable[[Any], Any]:
    """A ``tf.function`` summing a tensor over all workers with one ``strategy.reduce``."""

    @tf.function
    def global_sum(totals: Any) -> Any:
        per_replica = strategy.run(tf.identity, args=(totals,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return global_sum


def strategy_float_sum(tf: Any, strategy: Any) -> Callable[[List[float]], List[float]]:
    """A list of floats summed over all workers (``steps.measure_seconds``'s agreement)."""
    global_sum = strategy_sum(tf, strategy)

    def sum_ranks(values: List[float]) -> List[float]:
        return [float(v) for v in global_sum(tf.constant(values, dtype=tf.float64)).numpy()]

    return sum_ranks


def make_evaluate(
    tf: Any, strategy: Any, model: Any, val: Callable[[], Iterator[Any]]
) -> Callable[[int], Tuple[float, float, int]]:
    """Global ``(accuracy, mean loss, samples)`` over all workers' validation shards: local
    totals, then summed across workers with one ``strategy.reduce``."""
    local_totals = local_eval_totals(tf, model)
    global_sum = strategy_sum(tf, strategy)

    def evaluate(_epoch: int) -> Tuple[float, float, int]:
        return eval_result(global_sum(tf.constant(local_totals(val))).numpy())

    return evaluate


# -- the pure-TensorFlow training step ---------------------------------------------------------
class TFSGD:
    """The workloads' SGD on TensorFlow variables (as ``torch.optim.SGD``: L2 weight decay
    added to the gradient, momentum, Nesterov) with, for AMP, dynamic loss scaling (initial
    scale 2^15, halved, at least 1, and the update skipped on non-finite gradients, doubled
    after 2000 finite steps in a row). Create it under the strategy's scope, if any."""

    def __init__(self, tf: Any, sgd: SGDSettings, model: Any, use_amp: bool) -> None:
        self.tf, self.sgd, self.use_amp = tf, sgd, use_amp
        self.variables = [tf_variable(v) for v in model.trainable_variables]
        self.buffers = [
            tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"momentum_{i}")
            for i, v in enumerate(self.variables)
        ]
        self.loss_scale = tf.Variable(
            2.0**15 if use_amp else 1.0, trainable=False, dtype=tf.float32
        )
        self.good_steps = tf.Variable(0, trainable=False, dtype=tf.int64)

    def optimizer_variables(self) -> List[Any]:
        """The momentum buffers and the loss-scaling state."""
        return self.buffers + [self.loss_scale, self.good_steps]

    def update(self, var: Any, grad: Any, buf: Any, lr: Any) -> Any:
        """One variable's update from its (averaged, unscaled) gradient."""
        sgd = self.sgd
        if sgd.weight_decay:
            grad = grad + sgd.weight_decay * var
        if sgd.momentum:
            new_buf = sgd.momentum * buf + grad
            grad = grad + sgd.momentum * new_buf if sgd.nesterov else new_buf
            buf.assign(new_buf)
        return var.assign_sub(lr * grad)

    def unscale(self, grads: List[Any]) -> Tuple[List[Any], Any]:
        """``(grads / loss scale, whether all of them are finite)``."""
        tf = self.tf
        grads = [g / self.loss_scale for g in grads]
        return grads, tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])

    def grows(self, finite: Any) -> Any:
        """Whether this finite step is the 2000th in a row (the scale then doubles)."""
        return self.tf.logical_and(finite, self.tf.equal(self.good_steps, 1999))

    def next_scale(self, scale: Any, finite: Any, grow: Any) -> Any:
        tf = self.tf
        return tf.where(finite, tf.where(grow, scale * 2.0, scale), tf.maximum(scale * 0.5, 1.0))

    def next_good_steps(self, count: Any, finite: Any, grow: Any) -> Any:
        tf = self.tf
        return tf.where(tf.logical_and(finite, tf.logical_not(grow)), count + 1, 0)


def make_step_fn(
    tf: Any,
    strategy: Any,
    model: Any,
    cfg: Dict[str, Any],
    comm_options: Any,
    use_amp: bool,
    fixed: Optional[Tuple[Any, Any]] = None,
    jit: bool = False,
) -> Callable[[Optional[Any], float], float]:
    """SGD (:class:`TFSGD`) on gradients all-reduced across workers; with AMP, dynamic loss
    scaling decided on the all-reduced gradients, so all workers agree."""
    sgd = SGDSettings.from_config(cfg)
    with strategy.scope():
        opt = TFSGD(tf, sgd, model, use_amp)
    local_grads = _local_grads(tf, model, opt, float(cfg["global_batch_size"]))
    if jit:  # XLA compiles the replica's forward and backward; the all-reduce stays outside
        local_grads = tf.function(local_grads, jit_compile=True)
    apply = _cross_replica_apply(tf, opt)

    def replica_step(x: Any, y: Any, lr: Any) -> Any:
        loss, grads = local_grads(x, y)
        ctx = tf.distribute.get_replica_context()
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads, options=comm_options)
        finite = tf.constant(True)
        if use_amp:
            grads, finite = opt.unscale(grads)
        ctx.merge_call(apply, args=(grads, lr, finite))
        # this worker's share of the global mean loss, readable only after the update
        return after(tf, loss, opt.variables)

    @tf.function
    def train_step(x: Any, y: Any, lr: Any) -> Any:
        per_replica = strategy.run(replica_step, args=(x, y, lr))
        # one local replica per worker: no cross-worker collective just to log the loss
        return strategy.experimental_local_results(per_replica)[0]

    world = float(strategy.num_replicas_in_sync)

    def step_fn(batch: Optional[Any], lr: float) -> float:
        x, y = fixed if batch is None else batch
        # the worker's loss share times the number of workers is its local mean loss
        return float(train_step(x, y, tf.constant(lr, tf.float32)).numpy()) * world

    return step_fn


def _local_grads(
    tf: Any, model: Any, opt: TFSGD, global_batch: float
) -> Callable[[Any, Any], Tuple[Any, Any]]:
    """``(loss, gradients)`` of one worker: its summed loss divided by the global batch
    (the sum over workers is the global mean), the gradients of the scaled loss with AMP."""

    def local_grads(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            loss = tf.reduce_sum(per_example) / global_batch
            scaled = loss * opt.loss_scale if opt.use_amp else loss
        return loss, tape.gradient(scaled, opt.variables)

    return local_grads


def _cross_replica_apply(tf: Any, opt: TFSGD) -> Callable[..., None]:
    """``apply(distribution, grads, lr, finite)`` for ``merge_call``: the updates with
    ``strategy.extended.update``; with AMP only when ``finite``, and the loss scale moves."""

    def apply(distribution: Any, grads: List[Any], lr: Any, finite: Any) -> None:
        def do_apply() -> Any:
            for var, grad, buf in zip(opt.variables, grads, opt.buffers):
                distribution.extended.update(var, opt.update, args=(grad, buf, lr), group=False)
            return tf.constant(True)

        if not opt.use_amp:
            do_apply()
            return
        tf.cond(finite, do_apply, lambda: tf.constant(False))
        grow = opt.grows(finite)
        distribution.extended.update(
            opt.loss_scale, lambda s: s.assign(opt.next_scale(s, finite, grow)), group=False
        )
        distribution.extended.update(
            opt.good_steps, lambda c: c.assign(opt.next_good_steps(c, finite, grow)), group=False
        )

    return apply


# -- the workload ------------------------------------------------------------------------------
def body(ctx: Context) -> None:
    cfg, info = ctx.cfg, ctx.info
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is not provided by the tensorflow workload")
    if cfg["model"] in TRANSFORMER_SHAPES:  # a language model: lm_tf, this module's helpers
        from .lm_tf import lm_body

        return lm_body(ctx, "tensorflow", sys.modules[__name__])
    tf_config = prepare_environment(cfg, info)
    import tensorflow as tf

    keras = tf.keras
    device, device_name = setup_device(tf, cfg, info)
    knobs = apply_knobs(tf, cfg, keras)
    strategy, comm_options, comm_name = make_strategy(tf, cfg, info)
    with strategy.scope():
        model = build_rank_model(keras, cfg)
    ctx.write_meta(
        tf.__version__,
        device_name,
        models_tf.count_params(model.trainable_variables),
        comm_name,
        strategy="MultiWorkerMirroredStrategy",
        **meta_fields(tf, cfg, knobs, communication_meta(cfg, comm_name, tf_config)),
    )
    data = make_data(tf, cfg, info, device)
    step_fn = make_step_fn(
        tf, strategy, model, cfg, comm_options, knobs.loss_scaling, data.fixed, knobs.jit
    )
    ctx.train(
        step_fn,
        data,
        lambda val: make_evaluate(tf, strategy, model, val),
        lambda: model_checksum(model),
        strategy_float_sum(tf, strategy),
    )


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
