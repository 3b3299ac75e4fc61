"""PyTorch DistributedDataParallel workload.

``python -m ddlbench.workloads.pytorch.torch_main run.json`` on every task. Rank and world
size come from SLURM_PROCID/SLURM_NTASKS, the rendezvous from
MASTER_ADDR/MASTER_PORT (``init_method="env://"``), the backend from run.json's
``backend`` (which the planner resolves: ``vocabulary.torch_backend``). See
docs/workloads.md for what is measured and how. The helpers here are shared
with ``horovod_torch``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch
from torch import nn

from ..common import (
    Context,
    Knobs,
    RankInfo,
    SGDSettings,
    cpu_name,
    cpu_threads,
    end_process,
    eval_result,
    framework_options,
    master_addr_port,
    param_checksum,
    resolve_precision,
    training_flops,
    warmup_steps,
    warn,
    watchdog,
    workload_main,
)
from ..vocabulary import TRANSFORMER_SHAPES
from .data_torch import Batch, make_data
from .models_torch import build_model, param_count

# -- set-up helpers (shared with horovod_torch) -------------------------------------------------


def setup_device(cfg: Dict[str, Any], info: RankInfo) -> Tuple[torch.device, str]:
    """``cuda:<local rank>`` on GPU (the rank's GPU by SLURM_LOCALID), else the CPU."""
    if cfg["device"] == "gpu":
        if not torch.cuda.is_available():
            raise RuntimeError("device gpu requested but torch.cuda is not available")
        index = info.local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        torch.backends.cudnn.benchmark = True
        return torch.device("cuda", index), torch.cuda.get_device_name(index)
    torch.set_num_threads(cpu_threads(cfg, info))
    return torch.device("cpu"), cpu_name()


@dataclass
class TorchKnobs:
    """The knobs as applied by PyTorch (see :func:`apply_knobs`)."""

    knobs: Knobs
    #: fp32 / tf32 / amp / bf16, after fallbacks
    precision: str
    channels_last: bool
    #: torch.compile mode, or None for eager
    compile_mode: Optional[str]

    def prepare_model(self, model: nn.Module, weights: bool = True) -> nn.Module:
        """Move the weights to channels-last when asked (before DDP wraps the model).

        ``weights=False`` (Horovod, whose collectives need contiguous tensors) keeps the
        weights in the default layout: the channels-last inputs still make the convolutions
        run NHWC, and the gradients keep their weights' layout (PyTorch's gradient layout
        contract). Recorded as a fallback and as ``channels_last_weights`` in meta."""
        if not self.channels_last:
            return model
        self.knobs.extra["channels_last_weights"] = weights
        if not weights:
            self.knobs.fallback(
                "layout channels_last: Horovod needs contiguous tensors, so the weights stay "
                "in the default layout; inputs and activations are channels-last"
            )
            return model
        return model.to(memory_format=torch.channels_last)

    def compiled(self, model: nn.Module) -> nn.Module:
        """``torch.compile(model, mode=...)`` when compilation is on (lazy: compiles in step 0)."""
        if self.compile_mode is None:
            return model
        return torch.compile(model, mode=self.compile_mode)

    def compile_counts(self) -> Dict[str, Any]:
        """What ``torch.compile`` compiled in this process, from Dynamo's counters: graphs and
        graph breaks (summary fields ``compiled_graphs``, ``graph_breaks``); a warning when
        it compiled nothing (every frame ran eagerly). Empty when compilation is off."""
        if self.compile_mode is None:
            return {}
        from torch._dynamo.utils import counters

        graphs = int(counters["stats"]["unique_graphs"])
        if not graphs:
            warn("compile: torch.compile compiled no graph; the steps ran eagerly")
        breaks = int(sum(counters["graph_break"].values()))
        return {"compiled_graphs": graphs, "graph_breaks": breaks}

    def prepare_batch(self, batch: Optional[Batch]) -> Optional[Batch]:
        if batch is None or not self.channels_last:
            return batch
        x, y = batch
        return x.contiguous(memory_format=torch.channels_last), y


AUTOCAST_DTYPES = {"amp": torch.float16, "bf16": torch.bfloat16}


def cpu_compiler_missing() -> Optional[str]:
    """Why inductor cannot compile for the CPU on this node (None: it can). Its CPU kernels are
    C++ built by the compiler that ``$CXX`` names, else ``g++`` (``torch._inductor.config.cpp.
    cxx``); without one the first compiled step would fail."""
    import shutil

    cxx = os.environ.get("CXX") or "g++"
    if shutil.which(cxx) is None:
        return (
            "inductor builds its CPU kernels with a C++ compiler ($CXX, else g++) and "
            f"{cxx!r} is not on this node's PATH"
        )
    return None


def apply_knobs(cfg: Dict[str, Any], device: torch.device) -> TorchKnobs:
    """Apply precision, layout and compilation settings for this rank and record them.

    TF32: PyTorch's defaults are ``torch.backends.cuda.matmul.allow_tf32 = False`` and
    ``torch.backends.cudnn.allow_tf32 = True`` (convolutions in TF32 on Ampere and newer), so
    an untouched "fp32" run is not fp32. Both flags are set here explicitly: off for fp32, on
    for tf32, amp and bf16 (the ops autocast leaves in float32 then use tensor cores too).
    """
    knobs = Knobs.from_config(cfg)
    cuda = device.type == "cuda"
    tf32_ok = cuda and torch.cuda.get_device_capability(device)[0] >= 8
    bf16_ok = cuda and torch.cuda.is_bf16_supported()
    precision = resolve_precision(knobs, cuda, tf32_ok, bf16_ok)
    tf32: Optional[bool] = None
    if cuda:
        tf32 = precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    dtype = AUTOCAST_DTYPES.get(precision)
    knobs.extra.update(
        tf32_matmul=tf32,
        tf32_conv=tf32,
        autocast_dtype=None if dtype is None else str(dtype).replace("torch.", ""),
        loss_scaling=precision == "amp",
    )
    channels_last = knobs.requested["layout"] == "channels_last"
    knobs.layout = "NHWC" if channels_last else "NCHW"
    mode = None
    knobs.compile = "eager"
    if knobs.requested["compile"] and not hasattr(torch, "compile"):
        # torch < 2.0 (a site module validate could not read the version of): eager, said
        knobs.fallback(f"compile: torch {torch.__version__} has no torch.compile (>= 2.0)")
        cfg["compile"] = False
    elif knobs.requested["compile"] and not cuda and cpu_compiler_missing():
        knobs.fallback(f"compile: {cpu_compiler_missing()}; the step runs eagerly")
        cfg["compile"] = False  # what runs: no compile_s, no longer warmup
    elif knobs.requested["compile"]:
        mode = str(framework_options(cfg).get("compile_mode") or "default")
        knobs.compile = f"torch.compile(mode={mode})"
    warmup_steps(cfg, knobs)
    return TorchKnobs(knobs, precision, channels_last, mode)


def make_optimizer(cfg: Dict[str, Any], model: nn.Module) -> torch.optim.Optimizer:
    sgd = SGDSettings.from_config(cfg)
    return torch.optim.SGD(
        model.parameters(),
        lr=sgd.lr,
        momentum=sgd.momentum,
        weight_decay=sgd.weight_decay,
        nesterov=sgd.nesterov,
    )


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def model_checksum(model: nn.Module) -> Tuple[float, str]:
    """Checksum of the parameters in ``model.parameters()`` order (float32 on the host)."""
    return param_checksum(p.detach().float().cpu().numpy() for p in model.parameters())


def evaluate(
    model: nn.Module,
    val: Callable[[], Iterator[Batch]],
    device: torch.device,
    allreduce_sum: Callable[[torch.Tensor], torch.Tensor],
) -> Tuple[float, float, int]:
    """Global ``(accuracy, mean loss, samples)`` over all ranks' validation shards."""
    crit = nn.CrossEntropyLoss(reduction="sum")
    totals = torch.zeros(3, dtype=torch.float64, device=device)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for x, y in val():
            out = model(x)
            totals[0] += (out.argmax(1) == y).sum().double()
            totals[1] += crit(out.float(), y).double()
            totals[2] += y.numel()
    model.train(was_training)
    return eval_result(allreduce_sum(totals).cpu())


def rank_sum(
    allreduce_sum: Callable[[torch.Tensor], torch.Tensor], device: torch.device
) -> Callable[[List[float]], List[float]]:
    """``sum_ranks`` for ``steps.measure_seconds``: a list of floats summed over the ranks by
    ``allreduce_sum`` of a float64 tensor on ``device``."""

    def sum_ranks(values: List[float]) -> List[float]:
        return allreduce_sum(torch.tensor(values, dtype=torch.float64, device=device)).tolist()

    return sum_ranks


def make_evaluate(
    model: nn.Module,
    device: torch.device,
    allreduce_sum: Callable[[torch.Tensor], torch.Tensor],
) -> Callable[[Callable[[], Iterator[Batch]]], Callable[[int], Tuple[float, float, int]]]:
    """``make_evaluate(val)`` for :meth:`Context.train`: :func:`evaluate` of ``model``."""

    def on_split(val: Callable[[], Iterator[Batch]]) -> Callable[[int], Tuple[float, float, int]]:
        def evaluate_fn(_epoch: int) -> Tuple[float, float, int]:
            return evaluate(model, val, device, allreduce_sum)

        return evaluate_fn

    return on_split


# -- compute / communication split -----------------------------------------------------------
class CommTimer:
    """A DDP communication hook that does what DDP's default allreduce hook does (divide
    the bucket by the world size, allreduce it asynchronously) and records, per bucket,
    when the bucket was handed to communication (all its gradients computed) and when its
    allreduce completed.

    ``comm_s`` of a step is the *exposed* communication time: from the moment the last
    bucket became ready (backward has no gradient left to compute) to the completion of
    the last allreduce, i.e. the part of the gradient exchange that did not overlap with
    backward computation (waiting for slower ranks included). ``compute_s`` is the rest of
    the step. On the CPU the ends are host timestamps (the completion one taken in the
    future's callback); on GPU they are CUDA events recorded on the streams.
    """

    def __init__(self, world_size: int, cuda: bool) -> None:
        self.world_size = world_size
        self.cuda = cuda
        self.intervals: List[Tuple[Any, Any]] = []
        self.step_start: Any = None

    def begin_step(self) -> None:
        self.intervals = []
        if self.cuda:
            self.step_start = torch.cuda.Event(enable_timing=True)
            self.step_start.record()

    def _now(self) -> Any:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def hook(self, _state, bucket):  # no annotations: DDP checks them against GradBucket
        import torch.distributed as dist

        start = self._now()
        tensor = bucket.buffer()
        tensor.div_(self.world_size)
        fut = dist.all_reduce(tensor, async_op=True).get_future()

        def done(f):
            self.intervals.append((start, self._now()))
            return f.value()[0]

        return fut.then(done)

    def comm_seconds(self) -> Optional[float]:
        """Exposed communication of the step (call after the step has synchronised)."""
        if not self.intervals:
            return None
        if self.cuda:
            ref = self.step_start
            spans = [
                (ref.elapsed_time(a) / 1e3, ref.elapsed_time(b) / 1e3) for a, b in self.intervals
            ]
        else:
            spans = self.intervals
        last_ready = max(a for a, _ in spans)
        last_done = max(b for _, b in spans)
        return max(0.0, last_done - last_ready)


def make_step_fn(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    precision: Union[str, bool] = "fp32",
    fixed: Optional[Batch] = None,
    comm_timer: Optional[CommTimer] = None,
    horovod_optimizer: bool = False,
    channels_last: bool = False,
) -> Callable[[Optional[Batch], float], Any]:
    """One training step: forward, backward (gradient averaging happens in DDP's backward
    hooks or in Horovod's optimizer), optimizer step; returns the loss read back from the
    device (and, with ``comm_timer`` or Horovod, the compute/comm split).

    ``precision`` is the applied one: ``amp`` runs the forward pass under fp16 autocast with
    a GradScaler, ``bf16`` under bf16 autocast without scaling (``True`` means ``amp``)."""
    if isinstance(precision, bool):
        precision = "amp" if precision else "fp32"
    cuda = device.type == "cuda"
    scaler = torch.amp.GradScaler(device.type) if precision == "amp" else None
    forward_loss = _forward_loss(model, device, AUTOCAST_DTYPES.get(precision))
    hvd_update = _horovod_update(optimizer, scaler, cuda) if horovod_optimizer else None
    if channels_last and fixed is not None:
        fixed = (fixed[0].contiguous(memory_format=torch.channels_last), fixed[1])

    def step_fn(batch: Optional[Batch], lr: float) -> Any:
        x, y = fixed if batch is None else batch
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        t0 = time.perf_counter()
        if comm_timer is not None:
            comm_timer.begin_step()
        set_lr(optimizer, lr)
        model.zero_grad(set_to_none=True)  # Horovod's optimizer lacks set_to_none
        hvd_comm: Optional[float] = None
        loss = forward_loss(x, y)  # the loop marked the phase "step": the forward pass
        watchdog.mark("backward")  # DDP's gradient allreduce (and its wait) is in backward
        if hvd_update is not None:
            hvd_comm = hvd_update(loss)
        elif scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:  # DDP averages the gradients during backward
            loss.backward()
            optimizer.step()
        if cuda:
            torch.cuda.synchronize()
        value = loss.item()  # on the CPU this read is the synchronisation
        if hvd_comm is not None:
            return value, max(0.0, time.perf_counter() - t0 - hvd_comm), hvd_comm
        if comm_timer is None:
            return value
        comm = comm_timer.comm_seconds()
        if comm is None:
            return value, None, None
        elapsed = time.perf_counter() - t0
        return value, max(0.0, elapsed - comm), comm

    return step_fn


def _forward_loss(
    model: nn.Module, device: torch.device, dtype: Optional[torch.dtype]
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Cross-entropy of ``model(x)``, under autocast to ``dtype`` when one is given."""
    crit = nn.CrossEntropyLoss()

    def forward_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if dtype is None:
            return crit(model(x), y)
        with torch.autocast(device.type, dtype=dtype):
            return crit(model(x), y)

    return forward_loss


def _horovod_update(optimizer: Any, scaler: Any, cuda: bool) -> Callable[[torch.Tensor], float]:
    """Backward (Horovod starts each gradient's allreduce as soon as it is ready), then an
    explicit, timed ``optimizer.synchronize()`` and the step under ``skip_synchronize()``;
    with a GradScaler (GPU only), unscaling between the two. Returns the wait in seconds."""
    if scaler is None:

        def update(loss: torch.Tensor) -> float:
            loss.backward()
            if cuda:
                torch.cuda.synchronize()  # so that the wait below is communication only
            t_wait = time.perf_counter()
            optimizer.synchronize()
            hvd_comm = time.perf_counter() - t_wait
            with optimizer.skip_synchronize():
                optimizer.step()
            return hvd_comm

        return update

    def scaled_update(loss: torch.Tensor) -> float:
        scaler.scale(loss).backward()
        torch.cuda.synchronize()
        t_wait = time.perf_counter()
        optimizer.synchronize()
        hvd_comm = time.perf_counter() - t_wait
        scaler.unscale_(optimizer)
        with optimizer.skip_synchronize():
            scaler.step(optimizer)
        scaler.update()
        return hvd_comm

    return scaled_update


# -- the workload ------------------------------------------------------------------------------
def init_distributed(cfg: Dict[str, Any], info: RankInfo, device: torch.device) -> str:
    """``init_process_group(backend, init_method="env://")`` with run.json's ``backend``;
    returns the backend name."""
    import torch.distributed as dist

    opts = framework_options(cfg)
    backend = str(cfg["backend"])
    addr, port = master_addr_port()
    os.environ.setdefault("MASTER_ADDR", addr)
    os.environ.setdefault("MASTER_PORT", str(port))
    timeout = timedelta(seconds=int(opts.get("timeout_s", 600)))
    kwargs: Dict[str, Any] = {}
    if backend == "nccl":
        kwargs["device_id"] = device
    dist.init_process_group(
        backend,
        init_method="env://",
        rank=info.rank,
        world_size=info.world_size,
        timeout=timeout,
        **kwargs,
    )
    return backend


def build_rank_model(
    cfg: Dict[str, Any], device: torch.device, knobs: TorchKnobs, weights: bool = True
) -> nn.Module:
    """The run's model, seeded (the same initial weights on every rank), on ``device`` in
    the knobs' layout (``weights``: see :meth:`TorchKnobs.prepare_model`)."""
    model = build_model(
        cfg["model"], int(cfg["num_classes"]), int(cfg["image_size"]), seed=cfg["seed"]
    )
    return knobs.prepare_model(model.to(device), weights=weights)


def meta_fields(cfg: Dict[str, Any], knobs: TorchKnobs) -> Dict[str, Any]:
    """The meta record's extras common to the torch workloads (threads, FLOPs, knobs)."""
    return dict(
        threads=torch.get_num_threads(),
        flops_per_sample=training_flops(cfg),
        **knobs.knobs.meta(),
    )


def wrap_ddp(
    model: nn.Module, cfg: Dict[str, Any], info: RankInfo, device: torch.device, backend: str
) -> Tuple[nn.Module, Optional[CommTimer]]:
    """``DistributedDataParallel(model)`` and its :class:`CommTimer` hook (None when
    ``framework_options.comm_timing`` is off or the backend is not one it knows)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    opts = framework_options(cfg)
    ddp = DDP(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        bucket_cap_mb=int(opts.get("bucket_cap_mb", 25)),
    )
    comm_timer = None
    if opts.get("comm_timing", True) and backend in ("gloo", "nccl", "mpi"):
        comm_timer = CommTimer(info.world_size, device.type == "cuda")
        ddp.register_comm_hook(None, comm_timer.hook)
    return ddp, comm_timer


def _lm_setup(cfg: Dict[str, Any], info: RankInfo) -> Tuple[torch.device, str, TorchKnobs]:
    device, device_name = setup_device(cfg, info)
    return device, device_name, apply_knobs(cfg, device)


def body(ctx: Context) -> None:
    import torch.distributed as dist

    cfg, info = ctx.cfg, ctx.info
    opts = framework_options(cfg)
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is run by the allreduce_torch workload")
    if cfg["model"] in TRANSFORMER_SHAPES:  # a language model: lm_torch
        from .lm_torch import lm_body

        return lm_body(ctx, _lm_setup, init_distributed)
    device, device_name = setup_device(cfg, info)
    knobs = apply_knobs(cfg, device)
    distributed = info.world_size > 1 or bool(opts.get("ddp_single_rank"))
    backend = str(cfg["backend"])
    if distributed:
        init_distributed(cfg, info, device)
    try:
        # the DDP module outlives the process group's teardown below, as the reducer and
        # its communication hook expect
        trained = _train(ctx, device, device_name, knobs, backend, distributed)  # noqa: F841
        if distributed:
            dist.barrier()  # gloo can abort at exit when a peer tears down first
    finally:
        # after a failure there is no barrier: the peers may never reach it
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


def _train(
    ctx: Context,
    device: torch.device,
    device_name: str,
    knobs: TorchKnobs,
    backend: str,
    distributed: bool,
) -> nn.Module:
    """Model, meta record, data, optimizer and step (DDP when ``distributed``), training;
    returns the module trained (the DDP wrapper when distributed)."""
    import torch.distributed as dist

    cfg, info = ctx.cfg, ctx.info
    if distributed and framework_options(cfg).get("backup_workers") is not None:
        from .backup_sync import train_with_backups  # synchronous SGD with backup workers

        return train_with_backups(ctx, device, device_name, knobs, backend, sys.modules[__name__])
    model = build_rank_model(cfg, device, knobs)
    n_params = param_count(model)
    ctx.write_meta(
        torch.__version__,
        device_name,
        n_params,
        backend,
        ddp=distributed,
        **meta_fields(cfg, knobs),
    )
    data = make_data(cfg, info, device)
    train_model, comm_timer = model, None
    if distributed:
        train_model, comm_timer = wrap_ddp(model, cfg, info, device, backend)
    optimizer = make_optimizer(cfg, model)
    step_fn = make_step_fn(
        knobs.compiled(train_model),
        optimizer,
        device,
        knobs.precision,
        data.fixed,
        comm_timer,
        channels_last=knobs.channels_last,
    )
    from .inject_torch import with_injection  # straggler injection (common/inject.py)

    step_fn = with_injection(ctx, model, device, step_fn)

    def allreduce_sum(t: torch.Tensor) -> torch.Tensor:
        if distributed:
            dist.all_reduce(t)
        return t

    evaluate_on = make_evaluate(model, device, allreduce_sum)
    sums = rank_sum(allreduce_sum, device)
    ctx.train(step_fn, data, evaluate_on, lambda: model_checksum(model), sums)
    return train_model


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    end_process(main())
