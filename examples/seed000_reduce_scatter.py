"""seed000_reduce_scatter.py: the forum thread "How does reduce_scatter work?" (seed 000), its toy
program as posted, on backend "zcoll" with CPU tensors (the thread uses cuda:{rank}; zcoll's
Python backend is verified on CPU here). The thread elides the init: this file adds
init_process_group("zcoll") from MASTER_ADDR/MASTER_PORT (env://) and starts its 2 ranks itself
when run with no argument (as `python seed000_reduce_scatter.py 0` and `... 1` would).

Run: python3 examples/seed000_reduce_scatter.py
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
import torch as th
import torch.distributed as dist
import zcoll_torch  # noqa: F401  registers backend "zcoll"

if __name__ == "__main__":
	if len(sys.argv) == 1:  # launcher: the thread's two ranks, one process each
		os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
		os.environ.setdefault("MASTER_PORT", "29500")
		procs = [subprocess.Popen([sys.executable, __file__, str(r)]) for r in range(2)]
		sys.exit(max(p.wait() for p in procs))
	argparse = argparse.ArgumentParser()
	argparse.add_argument("rank", type=int)
	args = argparse.parse_args()
	dist.init_process_group("zcoll", init_method="env://", rank=args.rank, world_size=2)

		# Testing on 2 GPUs

	rank = dist.get_rank()
	assert rank == args.rank

	device = th.device("cpu")

	# For NCCL, the tensors must be on different GPUs
	tensor_len = 3
	vals = [(rank * tensor_len) + i for i in range(tensor_len)]
	tensor = th.IntTensor(vals).to(device=device)
	# tensor = th.full((3,), rank).to(device=device)
	print(f"Rank: {rank}")
	print(f"Start tensor: {tensor}")
	output = list(th.empty_like(tensor) for _ in range(dist.get_world_size()))
	# print(f"All-gather list: {output}")
	dist.all_gather(output, tensor)

	print(f"Gathered: {output}")
	# catted =
	scatter_size = 5
	aggregate = th.IntTensor(list(range(dist.get_world_size() * scatter_size))).to(device=device)
	input_list = list(aggregate.chunk(dist.get_world_size()))
	print(f"Input list: {input_list}")
	rscatter_input = th.empty_like(input_list[dist.get_rank()])
	dist.reduce_scatter(rscatter_input, input_list)
	print(f"Reduce Scatter output: {rscatter_input}")

	aggregate = th.IntTensor([dist.get_rank() * scatter_size + i for i in range(dist.get_world_size() * scatter_size)]).to(device=device)
	input_list = list(aggregate.chunk(dist.get_world_size()))
	print(f"Input list 2: {input_list}")
	rscatter_input = th.empty_like(input_list[dist.get_rank()])
	dist.reduce_scatter(rscatter_input, input_list)
	print(f"Reduce Scatter output 2: {rscatter_input}")
	dist.destroy_process_group()
