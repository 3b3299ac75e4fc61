"""train.py with its steps marked for ddlbench: three more lines (marked ``# ddlbench``).

Each step is wrapped in ``with step(samples=...)``; ddlbench then writes the rank log from the
marks, and the per-rank analysis (stragglers, hangs, compute vs communication where ``comm()``
is marked) works as for ddlbench's own workloads. Outside ddlbench the marks do nothing.
"""

import time

import torch
import torch.distributed as dist
import torch.nn as nn
from train import build, parse_args, setup, sync

from ddlbench.workloads.steps import step  # ddlbench


def main():
    args = parse_args()
    device, world = setup()
    rank = dist.get_rank() if world > 1 else 0
    torch.manual_seed(1234 + rank)
    model = build(args.width, device, world)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch_size, 64, device=device)
    y = torch.randint(0, 10, (args.batch_size,), device=device)
    t_first = None
    for i in range(args.steps):
        with step(samples=args.batch_size) as s:  # ddlbench
            t0 = time.time()
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            value = loss.item()
            sync(device)
            t1 = time.time()
            s.loss = value  # ddlbench
        if i == args.warmup:
            t_first = t0
    measured = args.steps - args.warmup
    if rank == 0 and t_first is not None:
        rate = measured * args.batch_size * world / (t1 - t_first)
        print(
            f"own throughput: {rate:.1f} samples/s over {measured} measured steps on {world} ranks"
        )
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
