"""seed003_patterns.py: the guide "Distributed Communication Patterns" (seed 003), its snippets
as one program on backend "zcoll", on its 3 processes (local values 1, 2, 3; sum 6) started by
mp.spawn: send/recv, broadcast, all-reduce, then its practical use cases (data-parallel
gradient averaging, parameter initialization, distributed validation, model-parallel
activations). One change beyond the backend: the guide's receiver allocates torch.empty(1)
(float32) for the sender's torch.tensor([42]) (int64); zcoll, like gloo, refuses a receive of
another type/size, so the receive buffer here is int64. MASTER_PORT may be set from outside.

Run: python3 examples/seed003_patterns.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import zcoll_torch  # noqa: F401  registers backend "zcoll"


def patterns(rank, world_size):
    # Send / Recv
    if rank == 0:
        data = torch.tensor([42])
        dist.send(data, dst=1)
    elif rank == 1:
        data = torch.empty(1, dtype=torch.int64)
        dist.recv(data, src=0)
        print(f"[{rank}] received {data}")
    # Broadcast: all processes run this
    data = torch.tensor([42]) if rank == 0 else torch.empty(1, dtype=torch.int64)
    dist.broadcast(data, src=0)
    print(f"[{rank}] broadcast {data}")
    # All-Reduce: all processes run this
    local_value = rank + 1
    data = torch.tensor([local_value])  # 1, 2, or 3
    dist.all_reduce(data, op=dist.ReduceOp.SUM)
    # Now all processes have data = 6
    print(f"[{rank}] all_reduce {data}")


def use_cases(rank, world_size):
    torch.manual_seed(rank)   # different weights on each rank before the broadcast
    model = nn.Linear(3, 1)
    # Parameter Initialization: ensure all processes start with same model weights
    for param in model.parameters():
        dist.broadcast(param.data, src=0)
    # Data Parallel Training: average gradients across all GPUs
    x = torch.full((2, 3), float(rank + 1))
    model(x).sum().backward()
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= world_size
    print(f"[{rank}] bias.grad after averaging {model.bias.grad}")
    # Distributed Validation: collect validation results from all processes
    validation_loss = 0.5 * (rank + 1)
    local_loss = torch.tensor([validation_loss])
    dist.all_reduce(local_loss, op=dist.ReduceOp.SUM)
    avg_loss = local_loss.item() / world_size
    print(f"[{rank}] avg_loss {avg_loss}")
    # Model Parallel Training: send activations between model parallel ranks
    hidden_size = 4
    if rank == 0:
        hidden = torch.arange(hidden_size, dtype=torch.float32)   # model_part1(input)
        dist.send(hidden, dst=1)
    elif rank == 1:
        hidden = torch.empty(hidden_size)
        dist.recv(hidden, src=0)
        print(f"[{rank}] received activations {hidden}")   # model_part2(hidden)


def main(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "29500")
    dist.init_process_group("zcoll", rank=rank, world_size=world_size)
    patterns(rank, world_size)
    use_cases(rank, world_size)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(3,), nprocs=3)
