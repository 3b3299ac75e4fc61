"""Straggler injection into PyTorch training steps (docs/stragglers.md), for DDP and for
backup workers: the four kinds of ``common/inject.py`` on a torch model.

- ``sleep``: a forward hook on the model sleeps after the forward pass (interruptible by
  ``stop``, the backup workers' "this step no longer needs the rank");
- ``compute``: a forward hook on the model runs its forward ``round(factor) - 1`` more
  times and adds ``0 x`` their outputs to its output, so the forward and the backward pass
  both do ``round(factor)`` times the work while the values, the gradients and the buffers
  stay the same; on a GPU the device itself is busy that much longer;
- ``data``: :meth:`TorchInjection.before_compute` blocks ``(factor - 1) x 3 x`` the rank's
  last forward time before the step's compute (a slow input pipeline);
- ``cpu-share``: a cgroup CPU quota or :class:`CpuShare` competitors (``cpu_share``).

Standard library and torch only; Python 3.8 syntax.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional

import torch
from torch import nn

from ..common.inject import StepExtras, StragglerInjector, cpu_share, sleep

#: seconds between two checks of ``stop`` while an injected sleep runs
POLL_S = 0.002


class Abandoned(Exception):
    """N other ranks have finished the step: this rank's gradient is not needed."""


class TorchInjection:
    """The injected straggler of one rank on ``model`` (see the module docstring)."""

    def __init__(self, model: nn.Module, injector: StragglerInjector, cuda: bool) -> None:
        self.injector = injector
        self.kind = injector.kind
        self.cuda = cuda
        self.step = -1
        self.t_forward = 0.0
        self.forward_s = 0.0
        self.injected_s: Optional[float] = 0.0
        self.factor = 1.0
        #: with backup workers: whether the step no longer needs this rank
        self.stop: Optional[Callable[[], bool]] = None
        self.cpu = None
        if self.kind == "cpu-share":
            by, threads = injector.cpu_share_by, torch.get_num_threads()
            self.cpu = cpu_share(injector.most(), by, threads, injector.rank)
        #: the summary's cpu_share_by (None: this rank is never slowed by cpu-share)
        self.cpu_share_by = None if self.cpu is None else self.cpu.by
        model.register_forward_pre_hook(self._pre)
        model.register_forward_hook(self._post)
        if self.kind == "compute":
            model.register_forward_hook(self._repeat)

    def begin(self, step: int) -> None:
        self.step = step
        self.factor = self.injector.factor(step)
        self.injected_s = None if self.kind == "cpu-share" else 0.0
        if self.cpu is not None:
            self.cpu.set(self.factor)

    def before_compute(self) -> None:
        """``data``: the slow input pipeline's wait, before the step's compute."""
        if self.kind == "data" and self.factor > 1.0:
            self.injected_s = sleep((self.factor - 1.0) * 3.0 * self.forward_s)

    def _pre(self, module: nn.Module, _inputs: Any) -> None:
        if module.training:
            self.t_forward = time.perf_counter()

    def _post(self, module: nn.Module, _inputs: Any, _output: Any) -> None:
        if not module.training:
            return
        if self.kind in ("sleep", "data") and (self.factor > 1.0 or self.kind == "data"):
            if self.cuda:
                torch.cuda.synchronize()
            forward_s = time.perf_counter() - self.t_forward
            if self.kind == "data" or self.factor <= 1.0:
                self.forward_s = forward_s
                return
            self.injected_s = sleep(self.injector.delay_s(self.step, forward_s), self.stop, POLL_S)
        if self.stop is not None and self.stop():
            raise Abandoned()

    def _repeat(self, module: nn.Module, inputs: Any, output: Any) -> Any:
        """``compute``: the model's forward ``round(factor) - 1`` more times, in the autograd
        graph (so the backward repeats too), its buffers (BatchNorm's running statistics)
        restored afterwards: only the time changes."""
        extra = int(round(self.factor)) - 1
        if not module.training or extra <= 0 or not isinstance(output, torch.Tensor):
            return None
        t0 = time.perf_counter()
        saved = [b.detach().clone() for b in module.buffers()]
        more = [module.forward(*inputs) for _ in range(extra)]
        for b, old in zip(module.buffers(), saved):
            b.data.copy_(old)  # .data: the graph saved them; their values are not used
        self.injected_s = (self.injected_s or 0.0) + 3.0 * (time.perf_counter() - t0)
        return output + 0.0 * torch.stack(more).sum(0)

    def fields(self) -> Dict[str, Any]:
        return {"injected_s": self.injected_s, "slowdown": self.factor}

    def close(self) -> None:
        if self.cpu is not None:
            self.cpu.close()

    def wrap(self, step_fn: Callable[[Any, float], Any]) -> Callable[[Any, float], Any]:
        """``step_fn`` (the DDP step) with the injection fields in its return value."""

        def injected(batch: Any, lr: float) -> Any:
            self.begin(self.step + 1)
            self.before_compute()
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
    injection = make_injection(model, ctx.cfg, ctx.info.rank, device)
    if injection is None:
        return step_fn
    ctx.step_extras = StepExtras(ctx.info.rank, cpu_share_by=injection.cpu_share_by)
    return injection.wrap(step_fn)
