"""Allreduce bandwidth sweep with torch.distributed (gloo, nccl or mpi).

``python -m ddlbench.workloads.comm.allreduce_torch run.json``: for each float32 message
size from ``allreduce.min_bytes`` to ``allreduce.max_bytes`` (powers of two) every rank
runs ``allreduce.warmup`` untimed and ``allreduce.iters`` timed ``dist.all_reduce`` calls
(blocking; on GPU followed by ``torch.cuda.synchronize()``) and logs the median time,
algbw and busbw (see common/allreduce.py). The first warmup call of every size checks
the result (a buffer of ones must sum to the world size).
"""

from __future__ import annotations

from typing import Callable

import torch

from ..common import Context, end_process, run_allreduce_sweep, workload_main
from ..pytorch.torch_main import init_distributed, setup_device
from .allreduce_pairs import run_pairwise


def body(ctx: Context) -> None:
    import torch.distributed as dist

    cfg, info = ctx.cfg, ctx.info
    device, device_name = setup_device(cfg, info)
    backend = init_distributed(cfg, info, device)
    try:
        ctx.write_meta(torch.__version__, device_name, None, backend)
        cuda = device.type == "cuda"

        def make_op(nbytes: int) -> Callable[[], None]:
            buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
            dist.all_reduce(buf)
            if float(buf[0]) != info.world_size or float(buf[-1]) != info.world_size:
                raise RuntimeError(f"allreduce of {nbytes} bytes gave a wrong sum")
            buf.zero_()  # zeros stay finite however many times they are summed

            def op() -> None:
                dist.all_reduce(buf)
                if cuda:
                    torch.cuda.synchronize()

            return op

        if cfg["allreduce"].get("pairwise"):  # per-node and pairwise tests instead
            fields = run_pairwise(ctx, dist, device)
        else:
            fields = run_allreduce_sweep(ctx.logger, cfg, info.world_size, make_op, dist.barrier)
        ctx.finish(fields)
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def main() -> int:
    return workload_main(body)


if __name__ == "__main__":
    end_process(main())
