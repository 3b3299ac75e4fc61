"""An ordinary PyTorch DDP training script: it knows nothing of ddlbench.

It trains a small MLP on random data, sets up its process group from the standard variables
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; torchrun and ddlbench both set them),
prints one line per step with that step's time and loss, and at the end the throughput it
computed from its own timings:

    step 7 loss 2.3012 time 0.01234 s
    own throughput: 5123.4 samples/s over 20 measured steps on 2 ranks

Run it alone (``python train.py``), with torchrun, or under ddlbench (examples/own-pytorch/).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=32, help="per-rank batch size")
    p.add_argument("--steps", type=int, default=30, help="training steps")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the throughput")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--width", type=int, default=1024, help="hidden units of the MLP's layers")
    return p.parse_args()


def setup():
    """The process group from the environment; one process when nothing is set."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device, world


def build(width, device, world):
    layers = [nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10)).to(device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    return model


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
        t0 = time.time()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        value = loss.item()  # reading the loss back waits for the device
        sync(device)
        t1 = time.time()
        if i == args.warmup:
            t_first = t0
        print(f"step {i} loss {value:.4f} time {t1 - t0:.6f} s", flush=True)
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
