"""Synchronous SGD with backup workers for PyTorch, and straggler injection into torch steps.

Backup workers (Chen et al. 2016, "Revisiting Distributed Synchronous SGD"): ``N + b``
ranks compute a gradient each step, the first ``N`` to finish are averaged and applied on
every rank, the ``b`` last are dropped. The design and its cost against DDP's allreduce are
in docs/backup-workers.md; in short, per step ``k``:

1. every rank runs forward and backward on its own batch (no DDP: nothing is communicated
   during backward);
2. when done, it takes a ticket from the process group's store, ``store.add("step/k", 1)``:
   an atomic counter, so the tickets ``1..N+b`` give the arrival order and exactly ``N``
   ranks get a ticket ``<= N``. A rank still computing reads the counter now and then (every
   2 ms: during an injected delay and in the gradient hooks of backward) and stops early
   once ``N`` tickets are out: its gradient would be dropped anyway;
3. every rank, kept or dropped, calls one allreduce of ``[gradient x keep / N, one-hot of
   its rank x keep]``: dropped ranks contribute zeros; the sum is the mean of the ``N`` kept
   gradients, and its last ``N + b`` entries tell every rank which ranks were kept;
4. every rank applies the same averaged gradient with its optimizer.

Every rank calls the same collectives in the same order every step, whatever it computed,
so there is no deadlock and no message is left in flight; the store key is tagged with the
step and the allreduce is blocking, so nothing of step ``k`` reaches step ``k + 1``.
The same code runs on gloo and NCCL.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from .common.inject import StragglerInjector, sleep

#: seconds between two reads of the arrival counter by a rank still computing
POLL_S = 0.002


class Abandoned(Exception):
    """N other ranks have finished the step: this rank's gradient is not needed."""


def backup_count(cfg: Dict[str, Any]) -> Optional[int]:
    """``framework_options.backup_workers`` of a run config (None: plain DDP)."""
    value = (cfg.get("framework_options") or {}).get("backup_workers")
    return None if value is None else int(value)


class TorchInjection:
    """Adds the injected delay after the model's forward pass of every training step
    (a forward hook; evaluation passes are left alone)."""

    def __init__(self, model: nn.Module, injector: StragglerInjector, cuda: bool) -> None:
        self.injector = injector
        self.cuda = cuda
        self.step = -1
        self.t_forward = 0.0
        self.injected_s = 0.0
        self.factor = 1.0
        #: with backup workers: whether the step still needs this rank
        self.stop: Optional[Callable[[], bool]] = None
        model.register_forward_pre_hook(self._pre)
        model.register_forward_hook(self._post)

    def begin(self, step: int) -> None:
        self.step, self.injected_s = step, 0.0
        self.factor = self.injector.factor(step)

    def _pre(self, module: nn.Module, _inputs: Any) -> None:
        if module.training:
            self.t_forward = time.perf_counter()

    def _post(self, module: nn.Module, _inputs: Any, _output: Any) -> None:
        if not module.training or self.factor <= 1.0:
            return
        if self.cuda:
            torch.cuda.synchronize()
        forward_s = time.perf_counter() - self.t_forward
        self.injected_s = sleep(self.injector.delay_s(self.step, forward_s), self.stop, POLL_S)
        if self.stop is not None and self.stop():
            raise Abandoned()

    def fields(self) -> Dict[str, Any]:
        return {"injected_s": self.injected_s, "slowdown": self.factor}

    def wrap(self, step_fn: Callable[[Any, float], Any]) -> Callable[[Any, float], Any]:
        """``step_fn`` (the DDP step) with the injection fields in its return value."""

        def injected(batch: Any, lr: float) -> Any:
            self.begin(self.step + 1)
            out = step_fn(batch, lr)
            loss, compute_s, comm_s = out if isinstance(out, tuple) else (out, None, None)
            return loss, compute_s, comm_s, self.fields()

        return injected


def make_injection(
    model: nn.Module, cfg: Dict[str, Any], rank: int, device: torch.device
) -> Optional[TorchInjection]:
    """The run's :class:`TorchInjection` on ``model`` (None when run.json injects nothing)."""
    injector = StragglerInjector.from_config(cfg, rank)
    if injector is None:
        return None
    return TorchInjection(model, injector, device.type == "cuda")


def with_injection(ctx: Any, model: nn.Module, device: torch.device, step_fn: Any) -> Any:
    """The DDP ``step_fn`` with run.json's straggler injection, if any."""
    from .common.inject import StepExtras

    injection = make_injection(model, ctx.cfg, ctx.info.rank, device)
    if injection is None:
        return step_fn
    ctx.step_extras = StepExtras(ctx.info.rank)
    return injection.wrap(step_fn)


class BackupSync:
    """One training step with backup workers (see the module docstring)."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        device: torch.device,
        rank: int,
        world: int,
        backups: int,
    ) -> None:
        import torch.distributed as dist

        self.model, self.optimizer, self.device = model, optimizer, device
        self.rank, self.world, self.backups = rank, world, backups
        self.needed = world - backups
        self.cuda = device.type == "cuda"
        self.store = dist.PrefixStore("ddlbench-backup", dist.distributed_c10d._get_default_store())
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.crit = nn.CrossEntropyLoss()
        self.step = -1
        self.next_poll = 0.0
        self.injection: Optional[TorchInjection] = None
        if backups > 0:
            for p in self.params:
                p.register_hook(self._grad_hook)

    def _key(self, step: int) -> str:
        return f"step/{step}"

    def enough_ready(self) -> bool:
        """Whether ``N`` ranks have finished this step (read at most every ``POLL_S``)."""
        if self.backups == 0:
            return False
        now = time.perf_counter()
        if now < self.next_poll:
            return False
        self.next_poll = now + POLL_S
        return self.store.add(self._key(self.step), 0) >= self.needed

    def _grad_hook(self, grad: torch.Tensor) -> torch.Tensor:
        if self.enough_ready():
            raise Abandoned()
        return grad

    def _compute(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[Optional[float], bool]:
        """Forward and backward; returns the loss tensor's value and whether it finished."""
        loss = None
        try:
            out = self.crit(self.model(x), y)
            loss = out.detach()
            out.backward()
        except Abandoned:
            return (None if loss is None else float(loss.item())), False
        except RuntimeError as exc:  # autograd wraps a hook's exception in some versions
            if "Abandoned" not in repr(exc):
                raise
            return (None if loss is None else float(loss.item())), False
        if self.cuda:
            torch.cuda.synchronize()
        return float(loss.item()), True

    def _exchange(self, kept: bool) -> List[int]:
        """The masked allreduce; sets every parameter's gradient to the kept ranks' mean
        and returns the dropped ranks."""
        grads = [
            (p.grad if p.grad is not None and kept else torch.zeros_like(p)).reshape(-1)
            for p in self.params
        ]
        flag = torch.zeros(self.world, dtype=grads[0].dtype, device=self.device)
        flag[self.rank] = 1.0 if kept else 0.0
        buf = torch.cat(grads + [flag])
        if kept:
            buf[: -self.world].div_(self.needed)
        torch.distributed.all_reduce(buf)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = buf[offset : offset + n].view_as(p).clone()
            offset += n
        mask = buf[-self.world :].tolist()
        return [r for r in range(self.world) if mask[r] < 0.5]

    def __call__(self, batch: Any, lr: float) -> Tuple[Any, float, float, Dict[str, Any]]:
        x, y = batch
        t0 = time.perf_counter()
        self.step += 1
        self.next_poll = 0.0
        if self.injection is not None:
            self.injection.begin(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        loss, finished = self._compute(x, y)
        t_ready = time.perf_counter()
        ticket = int(self.store.add(self._key(self.step), 1))
        if self.rank == 0 and self.step > 0:  # every rank is past the previous step's key
            self.store.delete_key(self._key(self.step - 1))
        dropped = self._exchange(finished and ticket <= self.needed)
        self.optimizer.step()
        if self.cuda:
            torch.cuda.synchronize()
        t_end = time.perf_counter()
        extra: Dict[str, Any] = {"arrival": ticket, "dropped": dropped}
        if self.injection is not None:
            extra.update(self.injection.fields())
        return loss, t_ready - t0, t_end - t_ready, extra


def train_with_backups(
    ctx: Any, device: torch.device, device_name: str, knobs: Any, backend: str, w: Any
) -> nn.Module:
    """The pytorch workload's training with ``backup_workers`` (no DDP): model, meta
    record, data, :class:`BackupSync` step, training; returns the model. ``w`` is the
    pytorch workload module, whose helpers build the model, optimizer, evaluation and meta
    record exactly as for DDP (passed in, so that this module does not import it back)."""
    import torch.distributed as dist

    from .common.inject import StepExtras
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
    sync = BackupSync(
        model, make_optimizer(cfg, model), device, info.rank, info.world_size, backups
    )
    sync.injection = make_injection(model, cfg, info.rank, device)
    if sync.injection is not None:
        sync.injection.stop = sync.enough_ready
    ctx.step_extras = StepExtras(info.rank, backups)
    fixed = data.fixed

    def step_fn(batch: Any, lr: float) -> Any:
        return sync(knobs.prepare_batch(fixed if batch is None else batch), lr)

    def allreduce_sum(t: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(t)
        return t

    evaluate, sums = make_evaluate(model, device, allreduce_sum), w.rank_sum(allreduce_sum, device)
    ctx.train(step_fn, data, evaluate, lambda: model_checksum(model), sums)
    return model
