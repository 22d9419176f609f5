"""seed004_primitives.py: the tutorial on torch.distributed communication primitives (seed 004),
its code with backend "zcoll" on world_size = 4 (the tutorial's "assume world_size = 4"),
started with mp.spawn as its comment suggests: run_broadcast, run_all_reduce, run_scatter,
run_gather and the non-blocking all_reduce. setup() is the tutorial's but for the backend
name; MASTER_PORT may be set from outside (default 12355).

Run: python3 examples/seed004_primitives.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import zcoll_torch  # noqa: F401  registers backend "zcoll"


def setup(rank, world_size):
    os.environ['MASTER_ADDR'] = 'localhost'
    os.environ['MASTER_PORT'] = os.environ.get('MASTER_PORT', '12355')
    # Initialize the process group
    dist.init_process_group("zcoll", rank=rank, world_size=world_size)


def run_broadcast(rank, world_size):
    tensor = torch.zeros(1)
    if rank == 0:
        # Source process creates the data
        tensor += 1
    # Rank 0 broadcasts 'tensor' to all other processes
    dist.broadcast(tensor=tensor, src=0)
    print(f"Rank {rank} has data: {tensor[0]}")


def run_all_reduce(rank, world_size):
    # Each rank creates data based on its rank
    tensor = torch.tensor([rank + 1], dtype=torch.float32)
    print(f"Rank {rank} initial tensor: {tensor[0]}")
    # Perform all-reduce with SUM operation
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    # Result (sum of 1+2+3+4 = 10) is available on all ranks
    print(f"Rank {rank} final tensor: {tensor[0]}")


def run_scatter(rank, world_size):
    my_tensor = torch.zeros(1)
    scatter_list = None
    if rank == 0:
        # Source rank prepares the list of tensors to scatter
        scatter_list = [torch.tensor([i + 1.0]) for i in range(world_size)]
        print(f"Rank 0 scatter list: {[t.item() for t in scatter_list]}")
    # Rank 0 scatters the list. Each rank receives one tensor into my_tensor.
    dist.scatter(tensor=my_tensor, scatter_list=scatter_list, src=0)
    print(f"Rank {rank} received tensor: {my_tensor.item()}")


def run_gather(rank, world_size):
    # Each rank creates its own tensor
    my_tensor = torch.tensor([rank + 1.0])
    gather_list = None
    if rank == 0:
        # Destination rank prepares a list to store gathered tensors
        gather_list = [torch.zeros(1) for _ in range(world_size)]
    # All ranks send their tensor to rank 0
    dist.gather(tensor=my_tensor, gather_list=gather_list, dst=0)
    if rank == 0:
        print(f"Rank 0 gathered list: {[t.item() for t in gather_list]}")
    else:
        print(f"Rank {rank} sent tensor: {my_tensor.item()}")


def run_async_all_reduce(rank, world_size):
    # Example of non-blocking all-reduce
    tensor = torch.ones(1) * rank
    # Initiate non-blocking all-reduce
    work_handle = dist.all_reduce(tensor, op=dist.ReduceOp.SUM, async_op=True)
    # Wait for the all_reduce operation to complete
    work_handle.wait()
    # Now 'tensor' contains the reduced result
    print(f"Rank {rank} async all_reduce result: {tensor[0]}")


def main(rank, world_size):
    setup(rank, world_size)
    for fn in (run_broadcast, run_all_reduce, run_scatter, run_gather, run_async_all_reduce):
        dist.barrier()
        fn(rank, world_size)
        sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(4,), nprocs=4)
