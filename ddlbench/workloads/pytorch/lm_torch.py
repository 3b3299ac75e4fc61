"""The transformer language-model path of the ``pytorch`` workload (docs/workloads.md#transformers).

``pytorch.body`` hands a run whose model is a transformer shape to :func:`lm_body`: the model
of ``models_lm_torch``, the tokens of ``data_lm``, the parallelism of ``parallel_torch``
(``lm.parallel``), activation checkpointing (``lm.activation_checkpointing``), gradient
accumulation (``lm.grad_accum``) and AdamW. It records tokens per step, the FLOPs per token
under each convention (``flops_lm``), the time to the first step split into its parts, and the
peak memory of the rank.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Tuple

import torch
from torch import nn

from ..common import Context, framework_options, param_checksum
from ..common.data_lm import lm_settings, lm_train_data
from ..common.lm_common import RssPeak, import_seconds, lm_meta, token_fields, train_loop
from .models_lm_torch import build_lm, lm_loss, lm_shape, split_batch
from .parallel_torch import (
    FSDP_MODES,
    fsdp_sharder,
    gradient_sync,
    make_lm_optimizer,
    wrap_parallel,
)


def warm_imports() -> None:
    """Import what building, sharding and the first optimizer step import lazily (about 65 MiB
    of Python objects for torch.optim and torch.distributed), so that the memory measured after
    it is the run's tensors."""
    import torch.distributed.fsdp  # noqa: F401
    import torch.distributed.optim  # noqa: F401
    import torch.nn.parallel  # noqa: F401

    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])


class PeakMemory:
    """Peak memory of the rank while training: on a GPU the allocator's peak allocated and
    reserved bytes; on the CPU the peak resident set (``VmHWM``) above the resident set just
    before the model was built (``lm_common.RssPeak``), so that the interpreter, the libraries
    and the data set are not counted."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.rss = None if self.cuda else RssPeak()

    def start(self) -> None:
        warm_imports()
        if self.rss is None:
            torch.cuda.reset_peak_memory_stats()
        else:
            self.rss.start()

    def fields(self) -> Dict[str, Any]:
        if self.rss is not None:
            return self.rss.fields()
        return {
            "peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
        }


def make_lm_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    accum: int,
    autocast: Optional[torch.dtype],
    fixed: Optional[torch.Tensor],
) -> Callable[[Any, float], float]:
    """One optimizer step over ``accum`` micro-batches; returns the step's mean loss."""

    def forward_loss(chunk: torch.Tensor) -> torch.Tensor:
        x, y = split_batch(chunk)
        if autocast is None:
            return lm_loss(model(x), y)
        with torch.autocast(device.type, dtype=autocast):
            return lm_loss(model(x), y)

    def step_fn(batch: Any, lr: float) -> float:
        tokens = fixed if batch is None else batch[0]
        for group in optimizer.param_groups:
            group["lr"] = lr
        model.zero_grad(set_to_none=True)  # Horovod's optimizer lacks set_to_none
        total = torch.zeros((), device=device)
        for i, chunk in enumerate(tokens.chunk(accum)):
            with gradient_sync(model, i == accum - 1):
                loss = forward_loss(chunk) / accum
                loss.backward()
            total += loss.detach()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return float(total.item())

    return step_fn


def build_parallel_model(
    cfg: Dict[str, Any], lm: Dict[str, Any], device: torch.device, distributed: bool, bf16: bool
) -> Tuple[nn.Module, nn.Module]:
    """``(model, module to train)``: the seeded model, checkpointing set, then wrapped. Under
    an FSDP mode each block is sharded as the build creates it (``build_lm``'s
    ``shard_block``), and the root once every block is: no rank holds the whole model."""
    mode = str(lm["parallel"])
    shard_block = shard_root = None
    if distributed and mode in FSDP_MODES:
        nodes, per_node = int(cfg.get("nodes") or 1), int(cfg.get("tasks_per_node") or 1)
        blocks = lm_shape(cfg["model"]).layers
        shard_block, shard_root = fsdp_sharder(mode, device, nodes, per_node, bf16, blocks)
    model = build_lm(cfg["model"], int(lm["seq_len"]), cfg["seed"], device, shard_block)
    model.set_recompute(str(lm["activation_checkpointing"]))
    if shard_root is not None:
        return model, shard_root(model)
    return model, wrap_parallel(model, mode, device, distributed)


def lm_checksum(model: nn.Module) -> Tuple[float, str]:
    """Checksum of the full parameters (FSDP shards gathered first: a collective)."""
    tensors = []
    for p in model.parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        tensors.append(full.detach().float().cpu().numpy())
    return param_checksum(tensors)


def horovod_model(
    cfg: Dict[str, Any], lm: Dict[str, Any], device: torch.device, hvd: Any
) -> Tuple[nn.Module, torch.optim.Optimizer]:
    """The seeded model and ``hvd.DistributedOptimizer(AdamW)``: gradients averaged by
    Horovod as they are produced, once per ``grad_accum`` backward passes."""
    model = build_lm(cfg["model"], int(lm["seq_len"]), seed=cfg["seed"], device=device)
    model.set_recompute(str(lm["activation_checkpointing"]))
    optimizer = make_lm_optimizer(cfg, model, "ddp", False)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        op=hvd.Average,
        backward_passes_per_step=int(lm["grad_accum"]),
    )
    return model, optimizer


def _build(
    cfg: Dict[str, Any], lm: Dict[str, Any], device: torch.device, distributed: bool, hvd: Any
) -> Tuple[nn.Module, nn.Module, torch.optim.Optimizer]:
    """``(model, module to train, optimizer)``: Horovod's when ``hvd`` is given."""
    if hvd is not None:
        model, optimizer = horovod_model(cfg, lm, device, hvd)
        return model, model, optimizer
    bf16 = cfg["precision"] == "bf16"
    fsdp_bf16 = bf16 and str(lm["parallel"]).startswith(("fsdp", "hsdp"))
    model, train_model = build_parallel_model(cfg, lm, device, distributed, fsdp_bf16)
    optimizer = make_lm_optimizer(cfg, train_model, str(lm["parallel"]), distributed)
    return model, train_model, optimizer


#: what a rank says when its precision fell back to amp (bf16 on a GPU without bfloat16)
AMP_LM_MESSAGE = (
    "precision amp: the transformer path has no fp16 autocast with loss scaling; running fp32"
)


def lm_precision(knobs: Any, device: torch.device) -> str:
    """The precision the transformer path trains in. It has fp32, tf32 and bf16, not amp (the
    spec refuses amp for a transformer); amp still arrives as ``precision_fallback``'s answer
    to bf16 on a GPU without bfloat16. Such a run would train in float32 while its meta said
    amp (and MFU read the fp16 peak): it runs, and is recorded as, fp32 with TF32 off, as a
    fallback."""
    if knobs.precision != "amp":
        return str(knobs.precision)
    knobs.precision = knobs.knobs.precision = "fp32"
    knobs.knobs.fallback(AMP_LM_MESSAGE)
    tf32: Optional[bool] = None
    if device.type == "cuda":
        tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    knobs.knobs.extra.update(
        tf32_matmul=tf32, tf32_conv=tf32, autocast_dtype=None, loss_scaling=False
    )
    return "fp32"


def train_lm(
    ctx: Context,
    device: torch.device,
    device_name: str,
    knobs: Any,
    distributed: bool,
    startup: Dict[str, Any],
    hvd: Any = None,
    framework: Tuple[str, str, Dict[str, Any]] = ("", "", {}),
) -> nn.Module:
    """Data, model, parallelism, optimizer; the meta record; training and the summary.
    ``hvd``: Horovod's torch module (the ``horovod_torch`` workload); ``framework``: its
    ``(framework_version, backend, meta extras)``."""
    cfg, info = ctx.cfg, ctx.info
    shape = lm_shape(cfg["model"])
    lm = cfg["lm"] = lm_settings(cfg)
    data = lm_train_data(cfg, info, lambda a: torch.from_numpy(a).to(device), shape.vocab)
    memory = PeakMemory(device)
    memory.start()
    t0 = time.time()
    cfg["precision"] = lm_precision(knobs, device)  # the one that runs, after any fallback
    model, train_model, optimizer = _build(cfg, lm, device, distributed, hvd)
    startup["build_shard_s"] = time.time() - t0
    n_params = sum(p.numel() for p in model.parameters())  # global counts, also when sharded
    version, backend, extra = framework
    ctx.write_meta(
        version or torch.__version__,
        device_name,
        n_params,
        backend or str(cfg["backend"]),
        threads=torch.get_num_threads(),
        **(extra if hvd is not None else {"ddp": distributed}),
        **knobs.knobs.meta(),
        **lm_meta(cfg, lm, startup),
    )
    fixed = data.fixed[0] if data.fixed is not None else None
    # FSDP computes in bf16 through its MixedPrecisionPolicy; where it is not applied (one
    # rank, no process group) the plain model runs under autocast as DDP's does
    fsdp = str(lm["parallel"]).startswith(("fsdp", "hsdp")) and hvd is None and distributed
    autocast = torch.bfloat16 if knobs.precision == "bf16" and not fsdp else None
    step_fn = make_lm_step(
        knobs.compiled(train_model), optimizer, device, int(lm["grad_accum"]), autocast, fixed
    )
    loop_cfg = dict(cfg, batch_size=int(cfg["batch_size"]) * int(lm["grad_accum"]))
    sums = rank_sum(device, distributed, hvd)
    measurement = train_loop(ctx, loop_cfg, step_fn, data, sums)
    fields = measurement.summary_fields()
    fields.update(token_fields(cfg, fields), **memory.fields(), **knobs.compile_counts())
    param_sum, param_sha = lm_checksum(model)
    ctx.finish(fields, param_sum, param_sha)
    return train_model


def rank_sum(device: torch.device, distributed: bool, hvd: Any) -> Any:
    """``sum_ranks`` for ``steps.measure_seconds``: floats summed over the ranks by one small
    allreduce (Horovod's when ``hvd`` is given), between two steps."""

    def sum_ranks(values: Any) -> Any:
        t = torch.tensor(values, dtype=torch.float64, device=device)
        if hvd is not None:
            t = hvd.allreduce(t, op=hvd.Sum)
        elif distributed:
            import torch.distributed as dist

            dist.all_reduce(t)
        return t.tolist()

    return sum_ranks


def lm_body(ctx: Context, setup: Any, init_distributed: Any) -> None:
    """The body of a transformer run (``setup``: ``pytorch.setup_device`` and
    ``apply_knobs``; ``init_distributed``: ``pytorch.init_distributed``)."""
    import torch.distributed as dist

    cfg, info = ctx.cfg, ctx.info
    startup = import_seconds(ctx)
    device, device_name, knobs = setup(cfg, info)
    distributed = info.world_size > 1 or bool(framework_options(cfg).get("ddp_single_rank"))
    t0 = time.time()
    if distributed:
        init_distributed(cfg, info, device)
    startup["process_group_s"] = time.time() - t0 if distributed else None
    kept = []  # the wrapped module outlives the process group's teardown, as DDP expects
    try:
        kept.append(train_lm(ctx, device, device_name, knobs, distributed, startup))
        if distributed:
            dist.barrier()
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()
