"""Step marks from PyTorch Lightning's and Hugging Face ``Trainer``'s own loops, built on
:mod:`ddlbench.workloads.steps` (docs/your-own-workload.md#lightning-and-hugging-face)::

    from ddlbench.workloads.steps_callbacks import lightning_callback, hf_callback
    trainer = lightning.Trainer(callbacks=[lightning_callback(samples=batch_size)])
    trainer = transformers.Trainer(..., callbacks=[hf_callback(samples=batch_size)])

Each optimizer step of this rank is one step: Lightning's ``on_train_batch_start`` to
``on_train_batch_end``, the ``Trainer``'s ``on_step_begin`` to ``on_step_end`` (gradient
accumulation included). ``samples`` is this rank's samples per step. Each factory imports its
framework when called, so this module imports nothing beyond the standard library by itself.
Python 3.8 syntax.
"""

from __future__ import annotations

from typing import Any, Optional

from .steps import Step


def _loss(outputs: Any) -> Optional[float]:
    loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
    try:
        return float(loss.detach().item()) if hasattr(loss, "detach") else float(loss)
    except (TypeError, ValueError, RuntimeError):
        return None


def lightning_callback(samples: int) -> Any:
    """A ``lightning.pytorch.Callback`` (or ``pytorch_lightning``'s) marking each batch."""
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback  # type: ignore[no-redef]

    class DDLBenchSteps(Callback):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.current: Optional[Step] = None

        def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, idx: int) -> None:
            self.current = Step(samples).__enter__()

        def on_train_batch_end(
            self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int
        ) -> None:
            if self.current is not None:
                self.current.loss = _loss(outputs)  # .item() also waits for the device
                self.current.__exit__(None, None, None)
                self.current = None

    return DDLBenchSteps()


def hf_callback(samples: int) -> Any:
    """A ``transformers.TrainerCallback`` marking each optimizer step."""
    from transformers import TrainerCallback

    class DDLBenchSteps(TrainerCallback):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.current: Optional[Step] = None

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.current = Step(samples).__enter__()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.current is not None:
                _sync_cuda()
                self.current.__exit__(None, None, None)
                self.current = None

    return DDLBenchSteps()


def _sync_cuda() -> None:
    """Wait for the GPU, so a step ends when its work does (the Trainer reads no loss back)."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except ImportError:
        pass
