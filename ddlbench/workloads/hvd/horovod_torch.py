"""Horovod workload with PyTorch.

``python -m ddlbench.workloads.hvd.horovod_torch run.json`` on every task. With
``framework_options.controller: gloo`` the task maps the Slurm variables to Horovod's
(``horovod_rendezvous.setup_horovod_env``) and meets the other tasks at the rendezvous
server the job script started; with ``mpi`` Horovod takes the ranks from MPI. The model, data,
optimizer, step and evaluation are the pytorch workload's; Horovod averages gradients
in ``hvd.DistributedOptimizer`` and rank 0's initial parameters and optimizer state are
broadcast to all ranks.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Tuple

from ..common import Context, end_process, workload_main
from ..common.lm_common import import_seconds
from ..vocabulary import TRANSFORMER_SHAPES
from .horovod_rendezvous import (
    horovod_backend,
    horovod_compression,
    horovod_session,
    setup_horovod_env,
)


def body(ctx: Context) -> None:
    cfg = ctx.cfg
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is run by the allreduce_horovod workload")
    controller = setup_horovod_env(cfg)
    import horovod.torch as hvd

    from ..pytorch import torch_main  # noqa: F401 - torch and the pytorch workload, before hvd.init()

    startup = import_seconds(ctx)
    t0 = time.time()
    with horovod_session(hvd, ctx.info):
        startup["process_group_s"] = time.time() - t0  # hvd.init(): the rendezvous
        # the model and Horovod's optimizer (its gradient hooks) outlive hvd.shutdown()
        trained = _train(ctx, hvd, controller, startup)  # noqa: F841
        hvd.barrier()


def _train_lm(
    ctx: Context, hvd: Any, controller: str, setup: Tuple[Any, str, Any], startup: Dict[str, Any]
) -> Any:
    """A transformer, trained by ``lm_torch.train_lm`` with Horovod's optimizer; ``startup``:
    the import and ``hvd.init()`` times (``build_shard_s`` is added)."""
    import horovod
    import torch

    from ..pytorch.lm_torch import train_lm

    device, device_name, knobs = setup
    version = f"horovod {horovod.__version__}, torch {torch.__version__}"
    backend = horovod_backend(hvd, device.type == "cuda", controller)
    framework = (version, backend, {"controller": controller})
    return train_lm(ctx, device, device_name, knobs, True, startup, hvd, framework)


def _train(ctx: Context, hvd: Any, controller: str, startup: Dict[str, Any]) -> Tuple[Any, Any]:
    """The pytorch workload's model, data and step with ``hvd.DistributedOptimizer``;
    returns the model and the optimizer."""
    import horovod
    import torch

    from ..pytorch.models_torch import param_count
    from ..pytorch.torch_main import (
        apply_knobs,
        build_rank_model,
        make_data,
        make_evaluate,
        make_optimizer,
        make_step_fn,
        meta_fields,
        model_checksum,
        rank_sum,
        setup_device,
    )

    cfg, info = ctx.cfg, ctx.info
    device, device_name = setup_device(cfg, info)
    knobs = apply_knobs(cfg, device)
    if cfg["model"] in TRANSFORMER_SHAPES:  # a language model: lm_torch, data-parallel
        return _train_lm(ctx, hvd, controller, (device, device_name, knobs), startup), None
    model = build_rank_model(cfg, device, knobs, weights=False)
    ctx.write_meta(
        f"horovod {horovod.__version__}, torch {torch.__version__}",
        device_name,
        param_count(model),
        horovod_backend(hvd, device.type == "cuda", controller),
        controller=controller,
        **meta_fields(cfg, knobs),
    )
    data = make_data(cfg, info, device)
    optimizer = make_optimizer(cfg, model)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=horovod_compression(hvd, cfg),
        op=hvd.Average,
    )
    step_fn = make_step_fn(
        knobs.compiled(model),
        optimizer,
        device,
        knobs.precision,
        data.fixed,
        horovod_optimizer=True,
        channels_last=knobs.channels_last,
    )

    def allreduce_sum(t: torch.Tensor) -> torch.Tensor:
        return hvd.allreduce(t, op=hvd.Sum, name="ddlbench.eval")

    evaluate, sums = make_evaluate(model, device, allreduce_sum), rank_sum(allreduce_sum, device)
    ctx.train(step_fn, data, evaluate, lambda: model_checksum(model), sums)
    return model, optimizer


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    end_process(main())
