"""job.py: the Python side of tests/launchers/run.sh. Started by a launcher (torchrun, mpirun,
srun); reads rank and size from that launcher's environment, inits backend "zcoll" through a
TCP store on $ZCT_STORE_PORT (torchrun: env://, its own store), all_reduces rank+1 and checks
the sum."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'python'))
import torch
import torch.distributed as dist
import zcoll_torch  # noqa: F401


def rank_size():
    for r, n in (('RANK', 'WORLD_SIZE'), ('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE'),
                 ('SLURM_PROCID', 'SLURM_NTASKS')):
        if r in os.environ:
            return int(os.environ[r]), int(os.environ[n]), r
    raise SystemExit('job.py: no launcher environment')


rank, size, via = rank_size()
if via == 'RANK':
    dist.init_process_group('zcoll')   # env:// from torchrun's MASTER_ADDR/MASTER_PORT
else:
    dist.init_process_group('zcoll', init_method='tcp://127.0.0.1:%s' % os.environ['ZCT_STORE_PORT'],
                            rank=rank, world_size=size)
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
ok = t.item() == size * (size + 1) / 2
print('zcoll_torch rank %d of %d (%s): sum %g' % (rank, size, via, t.item()), flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
