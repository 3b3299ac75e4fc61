"""An ordinary Horovod (PyTorch) training script: it knows nothing of ddlbench.

``hvd.init()`` joins whatever the launcher set up (horovodrun, or ddlbench's Gloo rendezvous);
every rank prints one line per step with its time and loss, and rank 0 prints the throughput
it computed from its own timings at the end:

    step 7 loss 2.3012 time 0.01234 s
    own throughput: 5123.4 samples/s over 20 measured steps on 2 ranks
"""

import argparse
import time

import horovod.torch as hvd
import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=32, help="per-rank batch size")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05)
    args = p.parse_args()
    hvd.init()
    torch.manual_seed(1234 + hvd.rank())
    model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch_size, 64)
    y = torch.randint(0, 10, (args.batch_size,))
    t_first = None
    for i in range(args.steps):
        t0 = time.time()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        value = loss.item()
        t1 = time.time()
        if i == args.warmup:
            t_first = t0
        print(f"step {i} loss {value:.4f} time {t1 - t0:.6f} s", flush=True)
    measured = args.steps - args.warmup
    if hvd.rank() == 0 and t_first is not None:
        rate = measured * args.batch_size * hvd.size() / (t1 - t_first)
        print(f"own throughput: {rate:.1f} samples/s over {measured} measured steps on "
              f"{hvd.size()} ranks")  # fmt: skip


if __name__ == "__main__":
    main()
