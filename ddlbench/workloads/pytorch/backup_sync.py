"""Synchronous SGD with backup workers for PyTorch.

Backup workers (Chen et al. 2016, "Revisiting Distributed Synchronous SGD"): ``N + b``
ranks compute a gradient each step, the first ``N`` to finish are averaged and applied on
every rank, the ``b`` last are dropped. The design, and the argument why it cannot deadlock
or mix steps, are in docs/backup-workers.md; in short, per step ``k``:

1. the training thread of every rank runs forward and backward on its own batch (no DDP:
   nothing is communicated during backward), unless the step was already decided without
   it (then it skips the step's input and compute);
2. when done, it takes a ticket from the process group's store; the ``N``-th sets
   ``full/k`` (``backup_exchange.Exchange.claim``);
3. the watcher thread of every rank (``backup_exchange``) waits for ``full/k`` and joins the
   step's one allreduce at once, with the gradient (kept) or zeros (dropped), while a slow
   training thread may still be computing; checks between layers and in the gradient hooks
   abandon that work (a local flag: no store round trip);
4. the training thread applies the averaged gradient (and the buffers of the lowest kept
   rank) before it starts step ``k + 1``: abandoned work never reaches the next step.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn

from .backup_exchange import Exchange, Result
from .inject_torch import Abandoned, TorchInjection, make_injection


def backup_count(cfg: Dict[str, Any]) -> Optional[int]:
    """``framework_options.backup_workers`` of a run config (None: plain DDP)."""
    value = (cfg.get("framework_options") or {}).get("backup_workers")
    return None if value is None else int(value)


def own_store(prefix: str) -> Any:
    """A new client of the process group's TCP store (one per thread: a client's ``wait``
    holds its connection), under ``prefix``."""
    import torch.distributed as dist

    base = dist.distributed_c10d._get_default_store()
    while hasattr(base, "underlying_store"):
        base = base.underlying_store
    client = dist.TCPStore(
        base.host, base.port, is_master=False, timeout=base.timeout, wait_for_workers=False
    )
    return dist.PrefixStore(prefix, client)


class BackupSync:
    """The training thread's side of a step with backup workers (module docstring)."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        device: torch.device,
        rank: int,
        world: int,
        backups: int,
    ) -> None:
        self.model, self.optimizer, self.device = model, optimizer, device
        self.rank, self.world, self.backups = rank, world, backups
        self.needed = world - backups
        self.cuda = device.type == "cuda"
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = [b for b in model.buffers()]
        self.crit = nn.CrossEntropyLoss()
        self.step = -1
        self.injection: Optional[TorchInjection] = None
        self.digest = os.environ.get("DDLBENCH_STATE_DIGEST") == "1"
        sizes = (
            sum(p.numel() for p in self.params),
            sum(b.numel() for b in self.buffers),
            self.params[0].dtype,
        )
        stores = [own_store("ddlbench-backup") for _ in range(3)]
        self.exchange = Exchange(stores, rank, world, self.needed, device, sizes).start()
        if backups > 0:
            for p in self.params:
                p.register_hook(self._grad_hook)
            for module in model.modules():
                if not any(True for _ in module.children()):
                    module.register_forward_pre_hook(self._layer_hook)

    def abandoned(self) -> bool:
        """Whether the current step was decided without this rank."""
        return self.exchange.is_decided(self.step)

    def _grad_hook(self, grad: torch.Tensor) -> torch.Tensor:
        if self.abandoned():
            raise Abandoned()
        return grad

    def _layer_hook(self, module: nn.Module, _inputs: Any) -> None:
        if module.training and self.abandoned():
            raise Abandoned()

    def _compute(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[Optional[float], bool]:
        """Forward and backward; returns the loss's value and whether it finished."""
        loss = None
        try:
            if self.injection is not None:
                self.injection.before_compute()
            out = self.crit(self.model(x), y)
            loss = out.detach()
            out.backward()
        except Abandoned:
            return (None if loss is None else float(loss.item())), False
        except RuntimeError as exc:  # autograd wraps a hook's exception in some versions
            if "Abandoned" not in repr(exc):
                raise
            return (None if loss is None else float(loss.item())), False
        return float(loss.item()), True

    def _payload(self) -> Any:
        """This rank's finished gradient (divided by N), flat buffers, and a CUDA event."""
        grads = [
            (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params
        ]
        flat = torch.cat(grads).div_(self.needed)
        bufs = None
        if self.buffers:
            bufs = torch.cat([b.detach().reshape(-1).to(torch.float64) for b in self.buffers])
        event = None
        if self.cuda:
            event = torch.cuda.Event()
            event.record()
        return flat, bufs, event

    def _apply(self, result: Result) -> None:
        """Set every gradient to the kept ranks' mean and the buffers to the lowest kept
        rank's (discarding whatever this rank computed), then step the optimizer."""
        if self.cuda:
            result.grad.record_stream(torch.cuda.current_stream())
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = result.grad[offset : offset + n].view_as(p).clone()
            offset += n
        if result.buffers is not None:
            offset = 0
            with torch.no_grad():
                for b in self.buffers:
                    n = b.numel()
                    b.copy_(result.buffers[offset : offset + n].view_as(b).to(b.dtype))
                    offset += n
        self.optimizer.step()

    def __call__(self, batch: Any, lr: float) -> Tuple[Any, float, float, Dict[str, Any]]:
        x, y = batch
        t0 = time.perf_counter()
        self.step += 1
        if self.injection is not None:
            self.injection.begin(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        loss, ticket = None, None
        if not self.abandoned():
            loss, finished = self._compute(x, y)
            if finished:
                ticket = self.exchange.claim(self.step, self._payload())
        t_ready = time.perf_counter()
        result = self.exchange.result(self.step)
        self._apply(result)
        if self.cuda:
            torch.cuda.synchronize()
        t_end = time.perf_counter()
        extra: Dict[str, Any] = {"arrival": ticket, "dropped": result.dropped}
        if self.injection is not None:
            extra.update(self.injection.fields())
        if self.digest:
            extra["state_sha256"] = self.state_digest()
        return loss, t_ready - t0, t_end - t_ready, extra

    def state_digest(self) -> str:
        """sha256 of the parameters and buffers (with ``DDLBENCH_STATE_DIGEST=1``: every step
        record carries it, so a test can check every rank holds the same state)."""
        h = hashlib.sha256()
        for t in self.params + self.buffers:
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()

    def close(self) -> None:
        """After the last step: end the watcher threads."""
        self.exchange.close(self.step)
        if self.injection is not None:
            self.injection.close()


def make_sync(
    ctx: Any, model: nn.Module, optimizer: Any, device: torch.device, backups: int
) -> BackupSync:
    """The run's :class:`BackupSync` with its straggler injection, and the step extras."""
    from ..common.inject import StepExtras

    cfg, info = ctx.cfg, ctx.info
    sync = BackupSync(model, optimizer, device, info.rank, info.world_size, backups)
    sync.injection = make_injection(model, cfg, info.rank, device)
    if sync.injection is not None and backups > 0:
        sync.injection.stop = sync.abandoned
    by = None if sync.injection is None else sync.injection.cpu_share_by
    ctx.step_extras = StepExtras(info.rank, backups, int(cfg["batch_size"]), by)
    return sync


def train_with_backups(
    ctx: Any, device: torch.device, device_name: str, knobs: Any, backend: str, w: Any
) -> nn.Module:
    """The pytorch workload's training with ``backup_workers`` (no DDP): model, meta
    record, data, :class:`BackupSync` step, training; returns the model. ``w`` is the
    pytorch workload module, whose helpers build the model, optimizer, evaluation and meta
    record exactly as for DDP (passed in, so that this module does not import it back)."""
    import torch.distributed as dist

    from .data_torch import make_data

    build_rank_model, make_evaluate, make_optimizer = (
        w.build_rank_model,
        w.make_evaluate,
        w.make_optimizer,
    )
    meta_fields, model_checksum = w.meta_fields, w.model_checksum

    cfg, info = ctx.cfg, ctx.info
    if knobs.precision in ("amp", "bf16"):
        raise ValueError("backup_workers runs in fp32 or tf32 only (no autocast yet)")
    backups = int(backup_count(cfg) or 0)
    if knobs.compile_mode is not None:
        knobs.knobs.compile = "eager"
        knobs.knobs.fallback("compile: the backup-worker step is not compiled; it ran eager")
    model = build_rank_model(cfg, device, knobs)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    ctx.write_meta(
        torch.__version__,
        device_name,
        n_params,
        backend,
        ddp=False,
        backup_workers=backups,
        **meta_fields(cfg, knobs),
    )
    data = make_data(cfg, info, device)
    sync = make_sync(ctx, model, make_optimizer(cfg, model), device, backups)
    fixed = data.fixed

    def step_fn(batch: Any, lr: float) -> Any:
        return sync(knobs.prepare_batch(fixed if batch is None else batch), lr)

    def allreduce_sum(t: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(t)
        return t

    def checksum() -> Any:
        sync.close()  # every step is done: the watcher threads end before any other call
        return model_checksum(model)

    # the measured window's agreement (``sums``) and the evaluation run on this thread between
    # two steps, when every watcher has finished the step before and none can start the next
    evaluate, sums = make_evaluate(model, device, allreduce_sum), w.rank_sum(allreduce_sum, device)
    try:
        ctx.train(step_fn, data, evaluate, checksum, sums)
    finally:
        if sync.injection is not None:
            sync.injection.close()
    return model
