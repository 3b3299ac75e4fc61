"""MXNet workload: Gluon with a parameter-server kvstore (``dist_sync`` / ``dist_device_sync``).

``python -m ddlbench.workloads.mx.mxnet_main run.json`` runs in three Slurm steps that differ
only in ``DMLC_ROLE`` (docs/run-config.md, slurm_templates/mxnet.sh.j2):

* ``scheduler`` and ``server``: the process only imports ``mxnet``. MXNet's ps-lite runs the
  role inside that import and calls ``sys.exit()`` when the workers have finalised the kvstore,
  so these processes exit 0 by themselves at the end of the job. They write no rank log (they
  are not ranks).
* ``worker`` (the default): trains. The rank (log file, data shard) is ``SLURM_PROCID`` of the
  worker step (0..W-1). ``kv.rank`` is *not* that: ps-lite's scheduler numbers the workers by
  sorting their (address, port) pairs, and the ports are random, so ``kv.rank`` is an arbitrary
  permutation of the Slurm ranks (it is recorded as ``kv_rank`` in the meta record). It cannot
  be imposed: ``DMLC_RANK`` is where ps-lite *caches* the rank it was assigned, and a preset
  ``DMLC_RANK`` stops the node from taking its assigned id (training then silently diverges
  across workers). The workload only uses ``kv.rank`` where MXNet does: the initial parameters
  are broadcast from kvstore rank 0 (all ranks build them from the same seed anyway).

Before importing MXNet the workload also sets ``DMLC_NODE_HOST`` to this node's Slurm
``NodeAddr`` (from ``DDLBENCH_HOSTS``/``DDLBENCH_ADDRS``, unless it or ``DMLC_INTERFACE`` is
set), since node names need not resolve, and ``OMP_NUM_THREADS`` on the CPU (unless set).

Training: ``gluon.Trainer(params, "sgd"/"nag", kvstore=kv, update_on_kvstore=False)``. The
servers only sum: each worker pushes its gradients, pulls the sum over workers and applies the
optimizer locally (identical on every worker), so the learning-rate schedule can be set per step
(with ``update_on_kvstore=True`` the optimizer would run, pickled, on the servers, out of the
workers' reach). The per-sample losses are summed and ``trainer.step(global_batch)`` rescales
the summed gradients by ``1 / global_batch``: the mean gradient of the global batch. A step ends
after ``mx.nd.waitall()``, i.e. after the push/pull and the update have completed (MXNet's
engine is asynchronous).

See docs/workloads.md.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..common import (
    Context,
    Knobs,
    RankInfo,
    SGDSettings,
    cpu_name,
    cpu_threads,
    eval_result,
    framework_options,
    param_checksum,
    resolve_precision,
    training_flops,
    warmup_steps,
    workload_main,
)
from ..common.ps_cpus import bind_ps_role
from ..vocabulary import DEFAULT_MXNET_KVSTORE, MXNET_KVSTORES, MXNET_PRECISIONS
from . import models_mxnet
from .data_mxnet import make_data

PS_ROLES = ("scheduler", "server")
# kvstore keys for the evaluation totals and the measured window's agreement; the Trainer
# uses the parameter indices 0..n-1
EVAL_KEY = 999_983
WINDOW_KEY = 999_979


def role() -> str:
    return (os.environ.get("DMLC_ROLE") or "worker").strip().lower()


def node_host(env: Optional[Dict[str, str]] = None) -> Optional[str]:
    """This node's address (``DDLBENCH_ADDRS`` at the index of ``SLURMD_NODENAME`` in
    ``DDLBENCH_HOSTS``), or None when the environment does not say."""
    env = os.environ if env is None else env  # type: ignore[assignment]
    assert env is not None
    hosts = [h.strip() for h in env.get("DDLBENCH_HOSTS", "").split(",") if h.strip()]
    addrs = [a.strip() for a in env.get("DDLBENCH_ADDRS", "").split(",") if a.strip()]
    name = env.get("SLURMD_NODENAME") or ""
    if name and len(hosts) == len(addrs) and name in hosts:
        return addrs[hosts.index(name)]
    return None


def prepare_ps_environment(env: Optional[Dict[str, str]] = None) -> None:
    """Variables ps-lite reads when ``mxnet`` is imported (call before the import)."""
    env = os.environ if env is None else env  # type: ignore[assignment]
    assert env is not None
    if env.get("DMLC_RANK"):
        raise RuntimeError(
            "DMLC_RANK is set: ps-lite would not take the id its scheduler assigns (unset it)"
        )
    # ps-lite prefers DMLC_NODE_HOST to DMLC_INTERFACE: set it only when no interface is named
    if role() != "scheduler" and not env.get("DMLC_NODE_HOST") and not env.get("DMLC_INTERFACE"):
        host = node_host(env)
        if host:
            env["DMLC_NODE_HOST"] = host


def run_ps_role(which: str) -> int:
    """Scheduler or server: MXNet runs the role during ``import mxnet`` and exits from it."""
    prepare_ps_environment()
    # Slurm's --signal=USR1 warning is for the workers, which stop and record it; a scheduler
    # or server killed by it first would leave them waiting in a push
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    env = os.environ
    bind_ps_role(dict(env), which)  # on the cores the workers leave (docs/launching.md#mxnet)
    sys.stderr.write(
        f"ddlbench[mxnet]: {which} starting (scheduler {env.get('DMLC_PS_ROOT_URI')}:"
        f"{env.get('DMLC_PS_ROOT_PORT')}, {env.get('DMLC_NUM_WORKER')} workers, "
        f"{env.get('DMLC_NUM_SERVER')} servers)\n"
    )
    sys.stderr.flush()
    import mxnet  # noqa: F401 - ps-lite runs the role here and raises SystemExit(None) at the end

    sys.stderr.write(f"ddlbench[mxnet]: import mxnet returned in role {which}: not a PS process\n")
    return 1


def kvstore_type(cfg: Dict[str, Any]) -> str:
    value = str(framework_options(cfg).get("kvstore") or DEFAULT_MXNET_KVSTORE)
    if value not in MXNET_KVSTORES:
        raise ValueError(f"framework_options.kvstore must be one of {', '.join(MXNET_KVSTORES)}")
    return value


# -- data --------------------------------------------------------------------------------------
# what mx.image.imread (the OpenCV inside libmxnet) reads of common's IMAGE_EXTENSIONS
def apply_knobs(cfg: Dict[str, Any]) -> Knobs:
    """Precision, layout and hybridisation for MXNet; call before ``import mxnet``.

    MXNet 1.9 has no TF32 or bfloat16 training path (the spec refuses them; a hand-written
    run.json asking for them gets a recorded fallback). fp32 on a GPU sets
    ``NVIDIA_TF32_OVERRIDE=0`` so that cuBLAS/cuDNN cannot use TF32 on Ampere and newer.
    NHWC needs cuDNN: on the CPU the run falls back to NCHW.
    """
    knobs = Knobs.from_config(cfg)
    gpu = cfg["device"] == "gpu"
    resolve_precision(knobs, gpu, trains=MXNET_PRECISIONS, framework="mxnet")
    if gpu and knobs.precision == "fp32":
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    knobs.extra.update(
        tf32_matmul=False if gpu and knobs.precision == "fp32" else None,
        tf32_conv=False if gpu and knobs.precision == "fp32" else None,
        loss_scaling=knobs.precision == "amp",
    )
    knobs.layout = "NCHW"
    if knobs.requested["layout"] == "channels_last":
        if gpu:
            knobs.layout = "NHWC"
        else:
            knobs.fallback("layout channels_last: MXNet runs NHWC through cuDNN only; using NCHW")
    static = knobs.requested["compile"]
    knobs.compile = "hybridize(static_alloc=True, static_shape=True)" if static else "hybridize"
    warmup_steps(cfg, knobs)
    return knobs


# -- training ----------------------------------------------------------------------------------
def make_trainer(mx: Any, cfg: Dict[str, Any], net: Any, kv: Any, use_amp: bool) -> Any:
    from mxnet import gluon

    sgd = SGDSettings.from_config(cfg)
    trainer = gluon.Trainer(
        net.collect_params(),
        "nag" if sgd.nesterov else "sgd",
        {"learning_rate": sgd.lr, "momentum": sgd.momentum, "wd": sgd.weight_decay},
        kvstore=kv,
        update_on_kvstore=False,
    )
    sync_initial_params(mx, trainer, kv)
    if use_amp:
        from mxnet.contrib import amp

        amp.init_trainer(trainer)
    return trainer


def sync_initial_params(mx: Any, trainer: Any, kv: Any) -> None:
    """Put the initial parameters on the servers and give every worker kvstore rank 0's copy,
    before the first step, in an order that cannot race.

    Gluon does this lazily inside the first ``trainer.step()`` (``kv.broadcast``: init, then
    pull), and with MXNet 1.9 on ``dist_sync`` that races: ``init`` lets kvstore rank 0 enter
    its barrier before the servers have stored its push, so another worker's pull (or first
    gradient push, which a server takes as the initial value of a key it does not hold yet)
    can get there first. Seen on 2 CPU workers in about one run in five: a worker starting
    from the wrong weights (the ranks' parameter checksums then differ) or a server aborting
    with ``init <key> first``. Here rank 0 reads its pushes back (the server answers them in
    order, so the values are stored) before anyone pulls, and a barrier separates each phase.
    """
    trainer._init_kvstore()
    if trainer._kvstore is None:
        return
    params = list(trainer._params)
    keys = [trainer._param2idx[p.name] for p in params]
    # host copies in the default layout (MKL-DNN may hold conv weights in its own layout,
    # which the kvstore cannot send)
    values = [mx.nd.array(p.list_data()[0].asnumpy(), dtype=p.dtype) for p in params]
    kv.init(keys, values)
    if kv.rank == 0:
        kv.pull(keys, out=[mx.nd.zeros_like(v) for v in values])
        mx.nd.waitall()
    kv._barrier()
    kv.pull(keys, out=values)
    mx.nd.waitall()
    for p, v in zip(params, values):
        p.set_data(v)
    mx.nd.waitall()
    kv._barrier()
    trainer._params_to_init = []


def momentum_correction(trainer: Any, ratio: float) -> None:
    """Rescale gluon's ``sgd`` and ``nag`` momentum states by ``new_lr / old_lr`` when the
    rate changes: their ``state = m state - lr g`` holds the rate (``w += state``, or for
    ``nag`` ``w += m state - lr g``, whatever NAG's docstring says), so without this the steps
    after a change keep the old one (after a 10x decay about 9x too large for some 10 steps).
    With it the update equals ``state = m state + g; w -= lr state`` (Nesterov: ``w -= lr (g +
    m state)``) step for step, as PyTorch, TensorFlow and Horovod apply it (Goyal et al. 2017,
    momentum correction). A multi-precision state is ``(momentum, fp32 weights)``: only the
    momentum is scaled."""
    if ratio == 1.0:
        return
    for updater in getattr(trainer, "_updaters", None) or []:
        for state in updater.states.values():
            mom = state[0] if isinstance(state, (tuple, list)) else state
            if mom is not None:
                mom *= ratio


def make_step_fn(
    mx: Any,
    net: Any,
    trainer: Any,
    cfg: Dict[str, Any],
    use_amp: bool,
    fixed: Optional[Tuple[Any, Any]] = None,
    contexts: Optional[List[Any]] = None,
) -> Callable[[Optional[Any], float], float]:
    """One training step; with several ``contexts`` (one worker per node) each batch is split
    across them and the kvstore sums their gradients before the push."""
    from mxnet import autograd, gluon

    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    global_batch = int(cfg["global_batch_size"])
    current = {"lr": None}

    def step_fn(batch: Optional[Any], lr: float) -> float:
        if current["lr"] != lr:
            trainer.set_learning_rate(lr)
            if current["lr"]:
                momentum_correction(trainer, lr / current["lr"])
            current["lr"] = lr
        x, y = fixed if batch is None else batch
        if contexts:
            xs = gluon.utils.split_and_load(x, contexts, even_split=True)
            ys = gluon.utils.split_and_load(y, contexts, even_split=True)
        else:
            xs, ys = [x], [y]
        with autograd.record():
            losses = [loss_fn(net(xi), yi) for xi, yi in zip(xs, ys)]  # per sample
            if use_amp:
                from mxnet.contrib import amp

                with amp.scale_loss(losses, trainer) as scaled:
                    autograd.backward(scaled)
            else:
                autograd.backward(losses)  # sum over the batch
        # push the summed gradients, pull their sum over workers, scale by 1/global batch
        trainer.step(global_batch)
        mx.nd.waitall()  # the push/pull and the update have completed
        return float(np.mean([float(loss.mean().asscalar()) for loss in losses]))

    return step_fn


def make_evaluate(
    mx: Any, net: Any, kv: Any, ctx: Any, val: Callable[[], Iterator[Any]]
) -> Callable[[int], Tuple[float, float, int]]:
    """Global ``(accuracy, mean loss, samples)``: local sums, then one kvstore push/pull of
    the three totals (the servers sum them over workers)."""
    from mxnet import gluon

    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    kv.init(EVAL_KEY, mx.nd.zeros((3,), ctx=ctx, dtype="float64"))

    def evaluate(_epoch: int) -> Tuple[float, float, int]:
        totals = np.zeros(3, dtype=np.float64)
        for x, y in val():
            out = net(x)
            totals[0] += float((out.argmax(axis=1) == y).sum().asscalar())
            totals[1] += float(loss_fn(out, y).sum().asscalar())
            totals[2] += int(y.shape[0])
        buf = mx.nd.array(totals, ctx=ctx, dtype="float64")
        kv.push(EVAL_KEY, buf)
        kv.pull(EVAL_KEY, out=buf)
        return eval_result(buf.asnumpy())

    return evaluate


def kv_float_sum(mx: Any, kv: Any, ctx: Any) -> Callable[[List[float]], List[float]]:
    """Two floats summed over the workers by a kvstore push/pull (``steps.measure_seconds``)."""
    kv.init(WINDOW_KEY, mx.nd.zeros((2,), ctx=ctx, dtype="float64"))

    def sum_ranks(values: List[float]) -> List[float]:
        buf = mx.nd.array(values, ctx=ctx, dtype="float64")
        kv.push(WINDOW_KEY, buf)
        kv.pull(WINDOW_KEY, out=buf)
        return [float(v) for v in buf.asnumpy()]

    return sum_ranks


def model_checksum(net: Any) -> Tuple[float, str]:
    arrays = (np.asarray(a, dtype=np.float32) for a in models_mxnet.trainable_numpy(net))
    return param_checksum(arrays)


def devices_per_worker(cfg: Dict[str, Any]) -> int:
    """The devices one worker drives: the node's with ``workers: per-node``, else 1."""
    if (cfg.get("framework_options") or {}).get("workers") == "per-node":
        return int(cfg["tasks_per_node"])
    return 1


def setup_contexts(mx: Any, cfg: Dict[str, Any], n: int) -> List[Any]:
    """A per-node worker's contexts: the node's ``n`` GPUs, or ``n`` CPU contexts."""
    if cfg["device"] != "gpu":
        return [mx.cpu(i) for i in range(n)]
    if mx.context.num_gpus() < n:
        raise RuntimeError(f"workers per-node needs {n} GPUs, MXNet sees {mx.context.num_gpus()}")
    return [mx.gpu(i) for i in range(n)]


def setup_device(mx: Any, cfg: Dict[str, Any], info: RankInfo) -> Tuple[Any, str]:
    """``(context, device name)``: the rank's GPU by SLURM_LOCALID, else the CPU."""
    if cfg["device"] != "gpu":
        return mx.cpu(), cpu_name()
    n_gpus = mx.context.num_gpus()
    if n_gpus == 0:
        raise RuntimeError("device gpu requested but MXNet sees no GPU")
    dev = mx.gpu(info.local_rank % n_gpus)
    return dev, _gpu_name(dev.device_id)


def _gpu_name(index: int) -> str:
    """The name nvidia-smi gives GPU ``index`` (``gpu <index>`` when it cannot say)."""
    device_name = f"gpu {index}"
    try:
        import subprocess

        names = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.splitlines()
        device_name = names[index].strip() or device_name
    except (OSError, IndexError, subprocess.SubprocessError):
        pass
    return device_name


def create_kvstore(mx: Any, name: str, info: RankInfo) -> Any:
    """The parameter-server kvstore; its worker count must be the world size."""
    kv = mx.kv.create(name)
    if kv.num_workers != info.world_size:
        raise RuntimeError(
            f"kvstore has {kv.num_workers} workers but the worker step has {info.world_size} "
            "tasks (DMLC_NUM_WORKER must equal the world size)"
        )
    if not 0 <= kv.rank < kv.num_workers:
        raise RuntimeError(f"kvstore rank {kv.rank} outside 0..{kv.num_workers - 1}")
    return kv


def build_net(cfg: Dict[str, Any], knobs: Knobs, dev: Any) -> Any:
    """The run's model in the knobs' layout, seeded, initialised on ``dev``, hybridised."""
    channels = models_mxnet.default_channels(cfg["model"])
    image_size = int(cfg["image_size"])
    layout = knobs.layout
    net = models_mxnet.build_model(cfg["model"], int(cfg["num_classes"]), image_size, layout)
    models_mxnet.initialize(net, dev, image_size, channels, int(cfg["seed"]), layout)
    static = bool(knobs.requested["compile"])
    net.hybridize(static_alloc=static, static_shape=static)
    return net


def body(ctx: Context) -> None:
    cfg, info = ctx.cfg, ctx.info
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is not provided by the mxnet workload")
    kv_name = kvstore_type(cfg)
    prepare_ps_environment()
    if cfg["device"] == "cpu":
        os.environ.setdefault("OMP_NUM_THREADS", str(cpu_threads(cfg, info)))
    knobs = apply_knobs(cfg)
    import mxnet as mx

    dev, device_name = setup_device(mx, cfg, info)
    per_worker = devices_per_worker(cfg)
    contexts = setup_contexts(mx, cfg, per_worker) if per_worker > 1 else None
    if contexts:
        dev = contexts[0]
        cfg["batch_size"] = int(cfg["batch_size"]) * per_worker  # the worker's batch
    with dev:  # Parameter.data() with no context reads the first device's copy
        _train(ctx, mx, knobs, kv_name, dev, device_name, contexts)


def _train(
    ctx: Context,
    mx: Any,
    knobs: Knobs,
    kv_name: str,
    dev: Any,
    device_name: str,
    contexts: Optional[List[Any]],
) -> None:
    cfg, info = ctx.cfg, ctx.info
    use_amp = knobs.precision == "amp"
    if use_amp:
        from mxnet.contrib import amp

        amp.init()
    kv = create_kvstore(mx, kv_name, info)
    net = build_net(cfg, knobs, contexts or dev)
    ctx.write_meta(
        mx.__version__,
        device_name,
        models_mxnet.count_params(net),
        kv_name,
        kv_rank=kv.rank,
        num_servers=int(os.environ.get("DMLC_NUM_SERVER") or 0) or None,
        update_on_kvstore=False,
        threads=int(os.environ["OMP_NUM_THREADS"]) if cfg["device"] == "cpu" else None,
        flops_per_sample=training_flops(cfg),
        **({"devices_per_worker": len(contexts)} if contexts else {}),
        **knobs.meta(),
    )
    data = make_data(mx, cfg, info, dev, knobs.layout)
    trainer = make_trainer(mx, cfg, net, kv, use_amp)
    step_fn = make_step_fn(mx, net, trainer, cfg, use_amp, data.fixed, contexts)
    ctx.train(
        step_fn,
        data,
        lambda val: make_evaluate(mx, net, kv, dev, val),
        lambda: model_checksum(net),
        kv_float_sum(mx, kv, dev) if (cfg["steps"] or {}).get("measure_seconds") else None,
    )


def main() -> int:
    which = role()
    if which in PS_ROLES:
        return run_ps_role(which)
    if which != "worker":
        sys.stderr.write(f"ddlbench[mxnet]: unknown DMLC_ROLE {which!r}\n")
        return 2
    rc = workload_main(body)
    if rc != 0:
        # A failed worker must not wait in the kvstore's exit barrier for peers that are
        # blocked in a push/pull it will never send: leave at once (the log is written).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
