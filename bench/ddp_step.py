#!/usr/bin/env python3
"""bench/ddp_step.py [--ranks 2] [--rounds 5] [--steps 3] [--batch 16] [--size 64]: DDP step
time of a ResNet-18 (11.7 M parameters, written out here: torchvision is not needed) on CPU,
under gloo, zcoll with its progress thread and zcoll without it, in ONE launch: each rank makes
one process group of each kind and the three DDP copies of the model take turns (rounds of
`steps` steps each, the order rotated every round) so that the host's load hits all three alike.
Then the latency of a call waited at once (1-element and 1 MiB all_reduce, p50 of 200) on both
zcoll groups, alternated call by call (--latency-only: that alone). Prints medians; one torch thread per rank.
"""

import argparse
import os
import statistics
import sys
import time

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
sys.path.insert(0, os.path.join(TOP, 'python'))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.skip = None
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.skip is None else self.skip(x)))


def resnet18(classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def rank_main(rank, args, port, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    import zcoll_torch  # noqa: F401
    dist.init_process_group('gloo', rank=rank, world_size=args.ranks)
    os.environ['ZCOLL_TORCH_PROGRESS_THREAD'] = '1'
    threaded = dist.new_group(backend='zcoll')
    os.environ['ZCOLL_TORCH_PROGRESS_THREAD'] = '0'
    plain = dist.new_group(backend='zcoll')
    groups = {'gloo': None, 'zcoll thread': threaded, 'zcoll no thread': plain}
    torch.manual_seed(0)
    base = resnet18()
    models = {}
    for name, g in groups.items():
        m = nn.parallel.DistributedDataParallel(
            _copy(base),
            process_group=g)
        models[name] = (m, torch.optim.SGD(m.parameters(), lr=0.01))
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, 3, args.size, args.size, generator=gen)
    y = torch.randint(0, 1000, (args.batch,), generator=gen)
    times = {k: [] for k in groups}
    names = list(groups)
    for r in range(0 if args.latency_only else args.rounds + 1):     # round 0 warms up
        order = names[r % 3:] + names[:r % 3]
        for name in order:
            m, opt = models[name]
            for _ in range(args.steps):
                dist.barrier()
                t0 = time.perf_counter()
                opt.zero_grad()
                nn.functional.cross_entropy(m(x), y).backward()
                opt.step()
                if r:
                    times[name].append(time.perf_counter() - t0)
    lat = {}
    for n in (1, 262144):      # the two groups alternate call by call (ABAB): one load for both
        t = torch.ones(n)
        samples = {'zcoll thread': [], 'zcoll no thread': []}
        for i in range(args.calls + 20):
            for name in samples:
                t0 = time.perf_counter()
                dist.all_reduce(t, group=groups[name])
                if i >= 20:
                    samples[name].append(time.perf_counter() - t0)
        for name, ss in samples.items():
            lat['%s, %d B' % (name, 4 * n)] = statistics.median(ss)
    out.put((rank, times, lat))
    dist.barrier()
    os._exit(0)


def _copy(base):
    import copy
    return copy.deepcopy(base)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ranks', type=int, default=2)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--steps', type=int, default=3)
    ap.add_argument('--batch', type=int, default=16)
    ap.add_argument('--size', type=int, default=64)
    ap.add_argument('--calls', type=int, default=200)
    ap.add_argument('--latency-only', action='store_true', help='only the calls waited at once')
    args = ap.parse_args()
    ctx = mp.get_context('fork')
    q = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=rank_main, args=(r, args, port, q)) for r in range(args.ranks)]
    for p in procs:
        p.start()
    res = [q.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join()
    rank0 = [r for r in res if r[0] == 0][0]
    print('ResNet-18 (%d M parameters), batch %d of 3x%dx%d per rank, %d ranks, %d steps each'
          % (sum(p.numel() for p in resnet18().parameters()) // 1000000, args.batch, args.size,
             args.size, args.ranks, args.rounds * args.steps))
    for name, ts in rank0[1].items():
        if not ts:
            continue
        print('  DDP step %-16s median %7.1f ms  (min %.1f, max %.1f)'
              % (name, 1e3 * statistics.median(ts), 1e3 * min(ts), 1e3 * max(ts)))
    for name, s in rank0[2].items():
        print('  all_reduce waited at once, %-26s p50 %8.1f us' % (name, 1e6 * s))


if __name__ == '__main__':
    main()
