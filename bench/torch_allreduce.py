#!/usr/bin/env python3
"""bench/torch_allreduce.py [ITERS]: per-call time of dist.all_reduce (float32, SUM) on 1, 1K and
1M elements with 2 ranks, under backend "zcoll" and under gloo in the same run (the same two
processes, a gloo group beside the zcoll default group), the same call through ctypes on the
group's communicator, and raw zcoll in C (build/zcbench under build/zcrun). A benchmark, not a
test: prints a Markdown table of p50 microseconds per call."""
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


def timed_raw(t, pg, iters):
    """zc_allreduce + zc_wait through ctypes on the group's own communicator."""
    import ctypes
    from zcoll_torch import _lib
    req, p, n, comm = _lib.Req(), t.data_ptr(), t.numel(), pg.comm
    ar, wait, ref = _lib.lib.zc_allreduce, _lib.lib.zc_wait, ctypes.byref(req)
    times = []
    for i in range(iters + max(10, iters // 10)):
        t0 = time.perf_counter()
        ar(comm, p, p, n, _lib.ZC_FLOAT32, _lib.ZC_SUM, ref)
        wait(comm, ref)
        times.append(time.perf_counter() - t0)
    times = times[-iters:]
    return statistics.median(times) * 1e6, statistics.mean(times) * 1e6


def rank_main(rank, size, port, iters, q):
    dist.init_process_group('zcoll', init_method='tcp://127.0.0.1:%d' % port, rank=rank,
                            world_size=size)
    gloo = dist.new_group(list(range(size)), backend='gloo')
    for n in SIZES:
        it = iters if n < (1 << 20) else max(20, iters // 50)
        t = torch.ones(n)
        res = {'zcoll': timed(t, None, it), 'gloo': timed(t, gloo, it),
               'ctypes': timed_raw(t, dist.distributed_c10d._get_default_group(), it)}
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


def layer_cpu_cost(iters=20000):
    """CPU time per call (best of 7, process_time: not inflated by other processes' load) on a
    1-rank zcoll group in this process: dist.all_reduce, the group's allreduce().wait(), and
    zc_allreduce + zc_wait through ctypes. Subtracting the last from the first is the Python
    layers' own cost."""
    import ctypes
    from zcoll_torch import _lib
    dist.init_process_group('zcoll', init_method='tcp://127.0.0.1:%d' % (
        21000 + os.getpid() % 20000), rank=0, world_size=1)
    pg = dist.distributed_c10d._get_default_group()
    t = torch.ones(1)
    req, p, comm = _lib.Req(), t.data_ptr(), pg.comm
    ar, wait, ref = _lib.lib.zc_allreduce, _lib.lib.zc_wait, ctypes.byref(req)

    def raw():
        ar(comm, p, p, 1, _lib.ZC_FLOAT32, _lib.ZC_SUM, ref)
        wait(comm, ref)

    def best(f):
        out = 1e9
        for _ in range(7):
            t0 = time.process_time()
            for _ in range(iters):
                f()
            out = min(out, (time.process_time() - t0) / iters)
        return out * 1e6
    res = (best(lambda: dist.all_reduce(t)), best(lambda: pg.allreduce([t]).wait()), best(raw))
    dist.destroy_process_group()
    return res


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
    print('| float32 elements | dist.all_reduce, zcoll | dist.all_reduce, gloo | gloo / zcoll | '
          'zc_allreduce+zc_wait via ctypes | zcbench (C) | layer over zcbench |')
    print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for n, res in rows:
        z, g, c, r = res['zcoll'], res['gloo'], res['ctypes'], raw(n)
        print('| %d | %.1f | %.1f | %.1fx | %.1f | %.2f | %.1f |'
              % (n, z[0], g[0], g[0] / z[0], c[0], r[0], z[0] - r[0]))
    print('(p50 microseconds per call, 2 ranks on this host)')
    d, g, r = layer_cpu_cost()
    print()
    print('CPU time per 1-element call on a 1-rank group: dist.all_reduce %.2f us, '
          'ProcessGroupZcoll.allreduce().wait() %.2f us, zc_allreduce+zc_wait via ctypes %.2f us'
          % (d, g, r))


if __name__ == '__main__':
    main()
