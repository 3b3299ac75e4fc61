"""Data parallelism for the transformer language models, PyTorch (docs/workloads.md#parallel).

``parallel`` (run.json's ``lm.parallel``):

- ``ddp``: ``DistributedDataParallel``; every rank holds the whole model, gradients and
  optimizer state, and gradients are all-reduced during backward.
- ``fsdp``: FSDP2 ``fully_shard`` on every block and on the root, full sharding (ZeRO-3):
  parameters, gradients and optimizer state are sharded over all ranks; parameters are
  all-gathered before each block's forward and again before its backward
  (``reshard_after_forward=True``), gradients reduce-scattered.
- ``fsdp-grad-op``: the same with ``reshard_after_forward=False`` (ZeRO-2-like: the gathered
  parameters stay between forward and backward, saving the second all-gather).
- ``hsdp``: hybrid sharding over a 2-D device mesh ``(nodes, tasks per node)``: sharded within a
  node, replicated across nodes (gradients reduce-scattered in the node, all-reduced across).
- ``zero1``: DDP with ``ZeroRedundancyOptimizer`` (ZeRO stage 1): the optimizer state is
  sharded, parameters and gradients are not.

With ``precision: bf16`` the FSDP modes compute in bfloat16 (``MixedPrecisionPolicy
(param_dtype=bfloat16, reduce_dtype=float32)``, float32 sharded master weights and float32
gradient reduction); DDP and ZeRO-1 keep float32 weights and gradients and compute the forward
pass under bf16 autocast, so their reduction is in float32 too. With one rank and no process
group (``ddp_single_rank`` unset) no mode wraps the model: it trains as DDP's one rank does,
under bf16 autocast.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import torch
from torch import nn

from ..vocabulary import LM_PARALLEL_MODES as PARALLEL_MODES

FSDP_MODES = ("fsdp", "fsdp-grad-op", "hsdp")
#: AdamW's betas and epsilon for the language models (GPT-3, Llama)
ADAM_BETAS = (0.9, 0.95)
ADAM_EPS = 1e-8


def _mesh(mode: str, device: torch.device, nodes: int, per_node: int) -> Any:
    from torch.distributed.device_mesh import init_device_mesh

    if mode == "hsdp":
        return init_device_mesh(
            device.type, (nodes, per_node), mesh_dim_names=("replicate", "shard")
        )
    return init_device_mesh(device.type, (nodes * per_node,), mesh_dim_names=("shard",))


def fsdp_sharder(
    mode: str, device: torch.device, nodes: int, per_node: int, bf16: bool, n_blocks: int
) -> Tuple[Callable[[int, nn.Module], None], Callable[[nn.Module], nn.Module]]:
    """``(shard_block, shard_root)``: ``fully_shard`` of one block (as the build creates it,
    ``models_lm_torch.build_lm``), and of the root (embeddings, final norm, output head) once
    every block is sharded."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = _mesh(mode, device, nodes, per_node)
    mp = MixedPrecisionPolicy()
    if bf16:
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    reshard = mode != "fsdp-grad-op"

    def shard_block(i: int, block: nn.Module) -> None:
        # the last block's parameters are needed again at once by backward
        last = i == n_blocks - 1
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard and not last)

    def shard_root(model: nn.Module) -> nn.Module:
        fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard)
        return model

    return shard_block, shard_root


def wrap_parallel(
    model: nn.Module, mode: str, device: torch.device, distributed: bool
) -> nn.Module:
    """The module to train under ``ddp`` or ``zero1`` (``model`` itself when not distributed).
    The FSDP modes are sharded as the build creates the model (:func:`fsdp_sharder`)."""
    if mode not in PARALLEL_MODES:
        raise ValueError(f"parallel {mode!r} is not one of {', '.join(PARALLEL_MODES)}")
    if not distributed:
        return model
    if mode in FSDP_MODES:
        raise ValueError(f"parallel {mode!r} is sharded by the build (fsdp_sharder), not wrapped")
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


def make_lm_optimizer(
    cfg: Dict[str, Any], model: nn.Module, mode: str, distributed: bool
) -> torch.optim.Optimizer:
    """AdamW with run.json's lr and weight decay; under ``zero1`` a
    ``ZeroRedundancyOptimizer`` around it (each rank steps its shard, then broadcasts)."""
    opt = cfg["optimizer"]
    kwargs: Dict[str, Any] = dict(
        lr=float(opt["lr"]),
        betas=ADAM_BETAS,
        eps=ADAM_EPS,
        weight_decay=float(opt.get("weight_decay") or 0.0),
    )
    if mode == "zero1" and distributed:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(
            model.parameters(), optimizer_class=torch.optim.AdamW, **kwargs
        )
    return torch.optim.AdamW(model.parameters(), **kwargs)


def gradient_sync(model: nn.Module, sync: bool) -> Any:
    """The context of a gradient-accumulation micro-batch: DDP's and ZeRO-1's
    ``no_sync()`` when not syncing (their gradients are whole on every rank anyway). FSDP2
    reduce-scatters every micro-batch into the sharded gradients, as torchtitan does: its
    ``set_requires_gradient_sync(False)`` would keep every unit's *unsharded* float32 gradient
    until the last micro-batch, 4 bytes per parameter on every rank (30 GiB for Llama 3 8B),
    which undoes the sharding it is run for (docs/workloads.md#transformers)."""
    import contextlib

    if sync or hasattr(model, "set_requires_gradient_sync") or not hasattr(model, "no_sync"):
        return contextlib.nullcontext()
    return model.no_sync()
