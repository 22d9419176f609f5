#!/usr/bin/env python3
"""bench/torch_allreduce.py [ITERS]: per-call time of dist.all_reduce (float32, SUM) on 1, 1K and
1M elements with 2 ranks, under backend "zcoll" and under gloo in the same run (the same two
processes, a gloo group beside the zcoll default group), and the same call through raw zcoll
(build/zcbench under build/zcrun). A benchmark, not a test: prints a Markdown table of p50 and
mean microseconds per call."""
import os
import re
import statistics
import subprocess
import sys
import time

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
sys.path.insert(0, os.path.join(TOP, 'python'))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import zcoll_torch  # noqa: E402,F401

SIZES = [1, 1024, 1 << 20]


def timed(t, group, iters):
    for _ in range(max(10, iters // 10)):
        dist.all_reduce(t, group=group)
    dist.barrier()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        dist.all_reduce(t, group=group)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6, statistics.mean(times) * 1e6


def rank_main(rank, size, port, iters, q):
    dist.init_process_group('zcoll', init_method='tcp://127.0.0.1:%d' % port, rank=rank,
                            world_size=size)
    gloo = dist.new_group(list(range(size)), backend='gloo')
    for n in SIZES:
        it = iters if n < (1 << 20) else max(20, iters // 50)
        t = torch.ones(n)
        res = {'zcoll': timed(t, None, it), 'gloo': timed(t, gloo, it)}
        if rank == 0:
            q.put((n, res))
    dist.barrier()


def raw(n):
    out = subprocess.run([os.path.join(TOP, 'build/zcrun'), '-n', '2', os.path.join(
        TOP, 'build/zcbench'), '-c', 'allreduce', '-b', str(4 * n), '-e', str(4 * n), '-d',
        'float32', '--json'], capture_output=True, text=True, timeout=300).stdout
    m = re.search(r'"p50_us":\s*([0-9.]+)', out)
    t = re.search(r'"time_us":\s*([0-9.]+)', out)
    return float(m.group(1)) if m else float('nan'), float(t.group(1)) if t else float('nan')


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ctx = mp.get_context('spawn')
    q = ctx.Queue()
    port = 20000 + os.getpid() % 20000
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, iters, q)) for r in range(2)]
    for p in procs:
        p.start()
    rows = [q.get(timeout=600) for _ in SIZES]
    for p in procs:
        p.join()
    print('| float32 elements | zcoll backend p50 / mean (us) | gloo p50 / mean (us) | '
          'raw zcoll (zcbench) p50 / mean (us) | gloo / zcoll (p50) | layer adds (p50, us) |')
    print('| ---: | ---: | ---: | ---: | ---: | ---: |')
    for n, res in rows:
        z, g, r = res['zcoll'], res['gloo'], raw(n)
        print('| %d | %.1f / %.1f | %.1f / %.1f | %.2f / %.2f | %.1fx | %.1f |'
              % (n, z[0], z[1], g[0], g[1], r[0], r[1], g[0] / z[0], z[0] - r[0]))


if __name__ == '__main__':
    main()
