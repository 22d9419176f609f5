#!/usr/bin/env python3
"""bench/torch_cuda.py [ITERS]: torch.distributed on CUDA tensors, backend "zcoll" beside "nccl",
2 processes on GPU 0 (or one GPU each where the machine has two). For each backend: all_reduce
(float32, SUM) results checked on 8 B, 64 KiB and 64 MiB, then each size timed (p50 and mean
microseconds per call, each call followed by torch.cuda.synchronize()), then three DDP steps of
a small model on CUDA tensors with the ranks' parameters compared bitwise. A backend that cannot
run here (NCCL refuses two ranks on one GPU) prints the reason in its row. A benchmark, not a
test: prints a Markdown table; exits non-zero when zcoll's results are wrong."""
import os
import statistics
import sys
import time
import traceback

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
sys.path.insert(0, os.path.join(TOP, 'python'))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import zcoll_torch  # noqa: E402,F401

SIZES = [8, 64 << 10, 64 << 20]


def timed(t, iters):
    for _ in range(max(5, iters // 10)):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        dist.all_reduce(t)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6, statistics.mean(times) * 1e6


def ddp_check(rank, size):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)
    for _ in range(3):
        x = torch.randn(32, 64, device='cuda')
        opt.zero_grad()
        ddp(x).square().sum().backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(size)]
    dist.all_gather(everyone, flat)
    return all(torch.equal(everyone[0], e) for e in everyone)


def rank_main(rank, size, backend, port, iters, q):
    try:
        torch.cuda.set_device(rank % torch.cuda.device_count())
        dist.init_process_group(backend, init_method='tcp://127.0.0.1:%d' % port, rank=rank,
                                world_size=size)
        ok = True
        res = {}
        for nbytes in SIZES:
            n = nbytes // 4
            t = torch.arange(n, device='cuda', dtype=torch.float32) % 1000 + rank
            dist.all_reduce(t)
            want = (torch.arange(n, device='cuda', dtype=torch.float32) % 1000) * size + \
                sum(range(size))
            ok = ok and torch.equal(t, want)
            it = iters if nbytes <= (64 << 10) else max(10, iters // 50)
            res[nbytes] = timed(t, it)
        ddp_ok = ddp_check(rank, size)
        dist.destroy_process_group()
        q.put((rank, 'ok', (ok, ddp_ok, res)))
    except Exception as e:  # report, not raise: the other backend's row still runs
        q.put((rank, 'error', '%s: %s' % (type(e).__name__, str(e).splitlines()[0] if str(e)
                                           else '')))
        traceback.print_exc()


def run(backend, iters, port):
    ctx = mp.get_context('spawn')
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, 2, backend, port, iters, q))
             for r in range(2)]
    for p in procs:
        p.start()
    out = {}
    deadline = time.time() + 300
    while len(out) < 2 and time.time() < deadline:
        try:
            r, kind, val = q.get(timeout=5)
            out[r] = (kind, val)
        except Exception:
            if not any(p.is_alive() for p in procs):
                break
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    return out


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print('torch %s, %s, %d GPU(s)' % (torch.__version__, torch.cuda.get_device_name(0),
                                       torch.cuda.device_count()))
    print('| backend | results | DDP params equal | ' +
          ' | '.join('%s p50/mean us' % ('%d B' % s if s < 1024 else '%d KiB' % (s >> 10)
                                          if s < (1 << 20) else '%d MiB' % (s >> 20))
                     for s in SIZES) + ' |')
    print('| --- | --- | --- |' + ' ---: |' * len(SIZES))
    bad = False
    for k, backend in enumerate(['zcoll', 'nccl']):
        out = run(backend, iters, 29600 + 7 * k)
        if 0 in out and out[0][0] == 'ok':
            ok, ddp_ok, res = out[0][1]
            print('| %s | %s | %s | %s |' % (backend, 'correct' if ok else 'WRONG',
                                            'yes' if ddp_ok else 'NO',
                                            ' | '.join('%.1f / %.1f' % res[s] for s in SIZES)))
            bad = bad or (backend == 'zcoll' and not (ok and ddp_ok))
        else:
            why = '; '.join('rank %d: %s' % (r, v[1]) for r, v in sorted(out.items())) or \
                'no rank reported'
            print('| %s | did not run: %s |' % (backend, why))
            bad = bad or backend == 'zcoll'
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
