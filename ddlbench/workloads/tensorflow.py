"""TensorFlow workload: ``MultiWorkerMirroredStrategy`` with a pure-TensorFlow training loop.

``python -m ddlbench.workloads.tensorflow run.json`` on every task. Before TensorFlow is
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
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import models_tf
from .common import (
    Context,
    Knobs,
    LRSchedule,
    RankInfo,
    TrainData,
    cpu_name,
    cpu_threads,
    data_seed,
    image_mean_std,
    imagefolder_split,
    input_channels,
    load_rank_data,
    param_checksum,
    resolve_precision,
    run_training,
    shard_indices,
    steps_per_epoch,
    synthetic_batch,
    training_flops,
    warmup_steps,
    workload_main,
)
from .tfconfig import ensure_tf_config, tf_config_rank, tf_config_world_size

COMMUNICATIONS = ("auto", "ring", "nccl")
NumpyBatch = Tuple[np.ndarray, np.ndarray]


# -- before TensorFlow is imported -------------------------------------------------------------


def prepare_environment(cfg: Dict[str, Any], info: RankInfo) -> Optional[Dict[str, Any]]:
    """Set what TensorFlow reads at import time; returns the ``TF_CONFIG`` in force (or None).

    Must run before ``import tensorflow``. ``TF_CONFIG`` is built from the Slurm/ddlbench
    variables unless it is already set; a single process started by hand (no SLURM_NTASKS)
    runs without one, which ``MultiWorkerMirroredStrategy`` treats as one local worker.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if cfg["device"] == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
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
    value = str((cfg.get("framework_options") or {}).get("communication") or "auto").lower()
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
    kind = cfg["data"]["kind"]
    batch = int(cfg["batch_size"])
    seed = data_seed(cfg["seed"], info.rank)
    if kind == "synthetic":
        x, y = synthetic_batch(
            batch,
            int(cfg["image_size"]),
            int(cfg["num_classes"]),
            input_channels(cfg["model"]),
            "NHWC",
            seed,
        )
        with tf.device(device):
            fixed = (tf.identity(tf.constant(x)), tf.identity(tf.constant(y.astype(np.int32))))
        samples = int(cfg["data"].get("samples") or cfg["global_batch_size"])
        return TrainData(samples / cfg["global_batch_size"], fixed=fixed)
    if kind in ("digits", "mnist"):
        data = load_rank_data(cfg, info, "NHWC")

        def to_tensors(bx: np.ndarray, by: np.ndarray) -> Tuple[Any, Any]:
            return tf.convert_to_tensor(bx), tf.convert_to_tensor(by.astype(np.int32))

        def batches(epoch: int) -> Iterator[Any]:
            for bx, by in data.epoch_batches(epoch, batch, seed):
                yield to_tensors(bx, by)

        def val() -> Iterator[Any]:
            for bx, by in data.val.batches(max(batch, 256)):
                yield to_tensors(bx, by)

        return TrainData(data.steps_per_epoch, batches=batches, val=val)
    if kind == "imagefolder":
        return _imagefolder_data(tf, cfg, info, seed)
    raise ValueError(f"unknown data kind {kind!r}")


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
def make_evaluate(
    tf: Any, strategy: Any, model: Any, val: Callable[[], Iterator[Any]]
) -> Callable[[int], Tuple[float, float, int]]:
    """Global ``(accuracy, mean loss, samples)`` over all workers' validation shards.

    Each worker evaluates its shard locally (no collective, so shards may differ in size);
    the three totals are then summed across workers with one ``strategy.reduce``."""

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

    @tf.function
    def global_sum(totals: Any) -> Any:
        per_replica = strategy.run(tf.identity, args=(totals,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def evaluate(_epoch: int) -> Tuple[float, float, int]:
        totals = np.zeros(3, dtype=np.float64)
        for x, y in val():
            totals += eval_batch(x, y).numpy()
        correct, loss_sum, n = (float(v) for v in global_sum(tf.constant(totals)).numpy())
        return (correct / n if n else 0.0), (loss_sum / n if n else float("nan")), int(n)

    return evaluate


# -- the pure-TensorFlow training step ---------------------------------------------------------
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
    """SGD (momentum, Nesterov, L2 weight decay added to the gradient, as ``torch.optim.SGD``)
    on gradients all-reduced across workers; with AMP, dynamic loss scaling (initial scale
    2^15, halved and the update skipped on non-finite gradients, doubled after 2000 finite
    steps; the decision is taken on the all-reduced gradients, so all workers agree)."""
    opt = cfg["optimizer"]
    if opt.get("name", "sgd") != "sgd":
        raise ValueError(f"optimizer {opt.get('name')!r} is not supported (only sgd)")
    momentum = float(opt.get("momentum") or 0.0)
    weight_decay = float(opt.get("weight_decay") or 0.0)
    nesterov = bool(opt.get("nesterov")) and momentum > 0
    global_batch = float(cfg["global_batch_size"])
    variables = [tf_variable(v) for v in model.trainable_variables]
    with strategy.scope():
        buffers = [
            tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"momentum_{i}")
            for i, v in enumerate(variables)
        ]
        loss_scale = tf.Variable(2.0**15 if use_amp else 1.0, trainable=False, dtype=tf.float32)
        good_steps = tf.Variable(0, trainable=False, dtype=tf.int64)

    def update(var: Any, grad: Any, buf: Any, lr: Any) -> Any:
        if weight_decay:
            grad = grad + weight_decay * var
        if momentum:
            new_buf = momentum * buf + grad
            grad = grad + momentum * new_buf if nesterov else new_buf
            buf.assign(new_buf)
        return var.assign_sub(lr * grad)

    def apply(distribution: Any, grads: List[Any], lr: Any, finite: Any) -> None:
        def do_apply() -> Any:
            for var, grad, buf in zip(variables, grads, buffers):
                distribution.extended.update(var, update, args=(grad, buf, lr), group=False)
            return tf.constant(True)

        if not use_amp:
            do_apply()
            return
        tf.cond(finite, do_apply, lambda: tf.constant(False))
        grow = tf.logical_and(finite, tf.equal(good_steps, 1999))
        distribution.extended.update(
            loss_scale,
            lambda s: s.assign(
                tf.where(finite, tf.where(grow, s * 2.0, s), tf.maximum(s * 0.5, 1.0))
            ),
            group=False,
        )
        distribution.extended.update(
            good_steps,
            lambda c: c.assign(tf.where(tf.logical_and(finite, tf.logical_not(grow)), c + 1, 0)),
            group=False,
        )

    def local_grads(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            loss = tf.reduce_sum(per_example) / global_batch
            scaled = loss * loss_scale if use_amp else loss
        return loss, tape.gradient(scaled, variables)

    if jit:  # XLA compiles the replica's forward and backward; the all-reduce stays outside
        local_grads = tf.function(local_grads, jit_compile=True)

    def replica_step(x: Any, y: Any, lr: Any) -> Any:
        loss, grads = local_grads(x, y)
        ctx = tf.distribute.get_replica_context()
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads, options=comm_options)
        finite = tf.constant(True)
        if use_amp:
            grads = [g / loss_scale for g in grads]
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
        ctx.merge_call(apply, args=(grads, lr, finite))
        # this worker's share of the global mean loss, readable only after the update
        return after(tf, loss, variables)

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


# -- the workload ------------------------------------------------------------------------------
def body(ctx: Context) -> None:
    cfg, info = ctx.cfg, ctx.info
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is not provided by the tensorflow workload")
    tf_config = prepare_environment(cfg, info)
    import tensorflow as tf

    keras = tf.keras
    device, device_name = setup_device(tf, cfg, info)
    knobs = apply_knobs(tf, cfg, keras)
    strategy, comm_options, comm_name = make_strategy(tf, cfg, info)
    with strategy.scope():
        model = models_tf.build_model(
            keras, cfg["model"], int(cfg["image_size"]), int(cfg["num_classes"]), seed=cfg["seed"]
        )
    ctx.write_meta(
        tf.__version__,
        device_name,
        models_tf.count_params(model.trainable_variables),
        comm_name,
        strategy="MultiWorkerMirroredStrategy",
        threads=tf.config.threading.get_intra_op_parallelism_threads() or None,
        **communication_meta(cfg, comm_name, tf_config),
        flops_per_sample=training_flops(cfg),
        **knobs.knobs.meta(),
    )
    data = make_data(tf, cfg, info, device)
    step_fn = make_step_fn(
        tf, strategy, model, cfg, comm_options, knobs.loss_scaling, data.fixed, knobs.jit
    )
    schedule = LRSchedule.from_config(cfg, data.steps_per_epoch)
    evaluate_fn = None
    if cfg["mode"] == "convergence":
        if data.val is None:
            raise ValueError("convergence mode needs a validation split")
        evaluate_fn = make_evaluate(tf, strategy, model, data.val)
    measurement = run_training(cfg, ctx.measurement(), step_fn, schedule, data.batches, evaluate_fn)
    psum, sha = model_checksum(model)
    ctx.finish(measurement.summary_fields(), psum, sha)


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
