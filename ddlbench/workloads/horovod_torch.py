"""Horovod workload with PyTorch.

``python -m ddlbench.workloads.horovod_torch run.json`` on every task. With
``framework_options.controller: gloo`` the task maps the Slurm variables to Horovod's
(``horovod_rendezvous.setup_horovod_env``) and meets the other tasks at the rendezvous
server the job script started; with ``mpi`` Horovod takes the ranks from MPI. The model, data,
optimizer, step and evaluation are the pytorch workload's; Horovod averages gradients
in ``hvd.DistributedOptimizer`` and rank 0's initial parameters and optimizer state are
broadcast to all ranks.
"""

from __future__ import annotations

from typing import Tuple

from .common import Context, LRSchedule, run_training, training_flops, workload_main
from .horovod_rendezvous import setup_horovod_env


def body(ctx: Context) -> None:
    cfg, info = ctx.cfg, ctx.info
    opts = cfg.get("framework_options") or {}
    if cfg["mode"] == "allreduce":
        raise ValueError("mode allreduce is run by the allreduce_horovod workload")
    controller = setup_horovod_env(cfg)
    import horovod
    import horovod.torch as hvd
    import torch

    from .models_torch import build_model, param_count
    from .pytorch import (
        apply_knobs,
        evaluate,
        make_data,
        make_optimizer,
        make_step_fn,
        model_checksum,
        setup_device,
    )

    hvd.init()
    try:
        if hvd.rank() != info.rank or hvd.size() != info.world_size:
            raise RuntimeError(
                f"Horovod rank {hvd.rank()}/{hvd.size()} differs from Slurm's "
                f"{info.rank}/{info.world_size}"
            )
        device, device_name = setup_device(cfg, info)
        knobs = apply_knobs(cfg, device)
        model = build_model(
            cfg["model"], int(cfg["num_classes"]), int(cfg["image_size"]), seed=cfg["seed"]
        )
        model = knobs.prepare_model(model.to(device), weights=False)
        backend = "nccl" if device.type == "cuda" and hvd.nccl_built() else controller
        ctx.write_meta(
            f"horovod {horovod.__version__}, torch {torch.__version__}",
            device_name,
            param_count(model),
            backend,
            controller=controller,
            threads=torch.get_num_threads(),
            flops_per_sample=training_flops(cfg),
            **knobs.knobs.meta(),
        )
        data = make_data(cfg, info, device)
        optimizer = make_optimizer(cfg, model)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        compression = hvd.Compression.fp16 if opts.get("fp16_allreduce") else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(
            optimizer,
            named_parameters=model.named_parameters(),
            compression=compression,
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
        schedule = LRSchedule.from_config(cfg, data.steps_per_epoch)

        def allreduce_sum(t: torch.Tensor) -> torch.Tensor:
            return hvd.allreduce(t, op=hvd.Sum, name="ddlbench.eval")

        evaluate_fn = None
        if cfg["mode"] == "convergence":
            if data.val is None:
                raise ValueError("convergence mode needs a validation split")
            val = data.val

            def evaluate_fn(_epoch: int) -> Tuple[float, float, int]:
                return evaluate(model, val, device, allreduce_sum)

        measurement = run_training(
            cfg, ctx.measurement(), step_fn, schedule, data.batches, evaluate_fn
        )
        psum, sha = model_checksum(model)
        ctx.finish(measurement.summary_fields(), psum, sha)
        hvd.barrier()
    finally:
        hvd.shutdown()


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
