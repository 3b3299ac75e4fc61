"""Allreduce bandwidth sweep with Horovod (``hvd.allreduce`` on torch tensors).

Same sweep and records as ``allreduce_torch`` (see common/allreduce.py); Horovod's
controller (``framework_options.controller``: gloo or mpi) and, on GPU, NCCL do the work.
Each timed call is a blocking ``hvd.allreduce`` with ``op=hvd.Sum`` (followed by
``torch.cuda.synchronize()`` on GPU).
"""

from __future__ import annotations

from typing import Callable

from ..common import Context, run_allreduce_sweep, workload_main
from ..hvd.horovod_rendezvous import horovod_backend, setup_horovod_env


def body(ctx: Context) -> None:
    cfg, info = ctx.cfg, ctx.info
    controller = setup_horovod_env(cfg)
    import horovod
    import horovod.torch as hvd
    import torch

    from ..pytorch.torch_main import setup_device

    hvd.init()
    try:
        device, device_name = setup_device(cfg, info)
        cuda = device.type == "cuda"
        ctx.write_meta(
            f"horovod {horovod.__version__}, torch {torch.__version__}",
            device_name,
            None,
            horovod_backend(hvd, cuda, controller),
            controller=controller,
        )

        def make_op(nbytes: int) -> Callable[[], None]:
            buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
            name = f"ddlbench.allreduce.{nbytes}"
            out = hvd.allreduce(buf, op=hvd.Sum, name=name)
            if float(out[0]) != hvd.size() or float(out[-1]) != hvd.size():
                raise RuntimeError(f"allreduce of {nbytes} bytes gave a wrong sum")
            buf.zero_()

            def op() -> None:
                hvd.allreduce_(buf, op=hvd.Sum, name=name)
                if cuda:
                    torch.cuda.synchronize()

            return op

        fields = run_allreduce_sweep(ctx.logger, cfg, hvd.size(), make_op, hvd.barrier)
        ctx.finish(fields)
        hvd.barrier()
    finally:
        hvd.shutdown()


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
