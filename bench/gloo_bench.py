#!/usr/bin/python3
"""gloo_bench.py: the Gloo peer of zcbench, through torch.distributed (backend "gloo").

Owns timing the collectives zcbench times, over the same size sweep, with the same warm-up,
adaptive iteration count, timing modes and output (nccl-tests table, or one JSON object per
size with zcbench's keys and impl "gloo"), so that `ninja bench` can put Gloo beside zcoll.

Runs with Debian's python3-torch, which lives in /usr/bin/python3 (not a pyenv python):

    /usr/bin/python3 bench/gloo_bench.py -np 2 -c allreduce -b 8 -e 64M -f 8 --json

It starts its own ranks: the parent imports torch once and forks -np children, which meet
through a TCP rendezvous on 127.0.0.1 and a free port (Gloo pinned to the loopback interface
with GLOO_SOCKET_IFNAME=lo). Each rank times each call with time.perf_counter_ns; after the
loop the per-iteration maxima over ranks come from an all_reduce(MAX) of the times.

What Gloo cannot do is reported, not faked: each collective is called through the torch API
that fits it, and when Gloo refuses it ("ProcessGroupGloo does not support reduce_scatter" in
torch 1.13) rank 0 prints "gloo_bench: unsupported: COLL: <torch's message>" on stderr, the
other collectives still run, and the exit status is 3; run_bench.py reports it as missing.
Gloo has no avg op either (-o accepts sum prod min max). all_gather goes through the list
form (Gloo lacks all_gather_into_tensor), all_to_all through all_to_all_single (Gloo lacks
the list form), sendrecv through irecv + isend.
"""

import argparse
import os
import re
import socket
import sys
import time
import traceback

EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3

ADAPTIVE_MIN = 10          # adaptive iterations per size, at least
ADAPTIVE_MAX = 100000      # ... and at most
ITERS_MAX = 1000000        # ceiling of -n
WARMUP_DEFAULT = 20        # warm-up iterations up to 1 MiB ...
WARMUP_MIN = 3             # ... fewer above, down to this many
WARMUP_BYTES = 64 << 20    # default warm-up above 1 MiB: about this many bytes
TARGET_NS = 300_000_000    # adaptive: timed work per size (0.3 s)
PROGRESS_NS = 2_000_000_000

# name: (reduces, rooted, blocked, bus factor kind); blocked: bytes is n blocks, one per rank.
COLLS = {
    'allreduce': (True, False, False, 'allreduce'),
    'reduce': (True, True, False, 'one'),
    'broadcast': (False, True, False, 'one'),
    'reduce_scatter': (True, False, True, 'n1n'),
    'allgather': (False, False, True, 'n1n'),
    'gather': (False, True, True, 'n1n'),
    'scatter': (False, True, True, 'n1n'),
    'alltoall': (False, False, True, 'n1n'),
    'sendrecv': (False, False, False, 'one'),
    'barrier': (False, False, False, 'one'),
}
DTYPES = ('float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int32', 'int64')
OPS = ('sum', 'prod', 'min', 'max')  # torch 1.13's gloo has no avg

def bus_factor(coll, n):
    kind = COLLS[coll][3]
    if kind == 'allreduce':
        return 2.0 * (n - 1) / n
    if kind == 'n1n':
        return (n - 1) / n
    return 1.0


def parse_bytes(text):
    """Decimal with an optional K/M/G suffix (powers of 1024) and B, as zcbench's -b/-e."""
    m = re.fullmatch(r'([0-9]+)([kKmMgG]?)[bB]?', text)
    if not m or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError('bad size %s (suffixes K M G)' % text)
    return int(m.group(1)) << {'': 0, 'k': 10, 'm': 20, 'g': 30}[m.group(2).lower()]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog='gloo_bench.py',
        description="zcbench's twin over torch.distributed's gloo backend. Sizes, columns "
                    "and JSON keys are zcbench's (zcbench --help); impl is \"gloo\", allocs "
                    "is -1 (not counted).")
    p.add_argument('-np', dest='ranks', type=int, default=2, help='ranks to start (default 2)')
    p.add_argument('-c', dest='coll', required=True, choices=list(COLLS) + ['all'])
    p.add_argument('-b', dest='min_bytes', type=parse_bytes, default=8)
    p.add_argument('-e', dest='max_bytes', type=parse_bytes, default=64 << 20)
    p.add_argument('-f', dest='factor', type=int, default=2)
    p.add_argument('-d', dest='dtype', default='float32', choices=DTYPES)
    p.add_argument('-o', dest='op', default='sum', choices=OPS)
    p.add_argument('-r', dest='root', type=int, default=0)
    p.add_argument('-w', dest='warmup', type=int, default=-1,
                   help='untimed iterations per size (default 20, fewer above 1 MiB)')
    p.add_argument('-n', dest='iters', type=int, default=None,
                   help='timed iterations per size (default adaptive: ~0.3 s, 10..100000)')
    p.add_argument('--mode', choices=('loop', 'barrier'), default='loop')
    p.add_argument('--check', action='store_true')
    p.add_argument('--json', action='store_true')
    a = p.parse_args(argv)
    if a.ranks < 1:
        p.error('-np %d: at least 1' % a.ranks)
    if a.factor < 2:
        p.error('-f %d: must be 2 or more' % a.factor)
    if a.min_bytes > a.max_bytes:
        p.error('-b is larger than -e')
    if not 0 <= a.root < a.ranks:
        p.error('-r %d: only %d ranks' % (a.root, a.ranks))
    if a.iters is not None and not 1 <= a.iters <= ITERS_MAX:
        p.error('-n %d: 1..%d' % (a.iters, ITERS_MAX))
    a.iters = a.iters or 0  # 0: adaptive
    if a.warmup < -1 or a.warmup > ITERS_MAX:
        p.error('-w %d: 0..%d' % (a.warmup, ITERS_MAX))
    return a


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def percentile_us(sorted_ns, p):
    """Nearest-rank percentile p (0..1) of a sorted list, in µs."""
    k = len(sorted_ns)
    idx = p * k
    i = int(idx)
    if i < idx:
        i += 1
    i = max(i - 1, 0)
    return sorted_ns[min(i, k - 1)] / 1e3


class Bench:
    """One rank's state: options, buffers for the largest size, the collective's call."""

    def __init__(self, args, rank, n):
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        self.a, self.rank, self.n = args, rank, n
        self.dtype = getattr(torch, args.dtype)
        self.esize = torch.tensor([], dtype=self.dtype).element_size()
        self.op = {'sum': dist.ReduceOp.SUM, 'prod': dist.ReduceOp.PRODUCT,
                   'min': dist.ReduceOp.MIN, 'max': dist.ReduceOp.MAX}[args.op]
        cap = args.max_bytes // self.esize + 1
        # Touch every page now, as zcbench does, so the timed loop sees no first-touch faults.
        self.send_all = torch.zeros(cap, dtype=self.dtype)
        self.recv_all = torch.zeros(cap, dtype=self.dtype)
        self.meta = sys.stderr if args.json else sys.stdout

    # -- geometry and inputs -------------------------------------------------------------------

    def geometry(self, coll, nbytes):
        """(bytes, count, call count) for a row; None when it rounds to no element."""
        blocked = COLLS[coll][2]
        es, n = self.esize, self.n
        count = nbytes // es // n * n if blocked else nbytes // es
        if count == 0:
            return None
        return count * es, count, count // n if blocked else count

    def value_of(self, r, idx):
        """Rank r's inputs for reductions (a tensor of small integers, exact in the dtype)."""
        torch, op = self.torch, self.a.op
        if op == 'sum':
            v = (idx + r) % 3
        elif op == 'prod':
            v = torch.where((idx + r) % self.n == 0, 1 + idx % 3, torch.ones_like(idx))
        else:
            v = (idx + 5 * r) % 7
        return v.to(self.dtype)

    def expected(self, idx):
        acc = self.value_of(0, idx).to(self.torch.float64)
        for r in range(1, self.n):
            v = self.value_of(r, idx).to(self.torch.float64)
            if self.a.op == 'sum':
                acc = acc + v
            elif self.a.op == 'prod':
                acc = acc * v
            elif self.a.op == 'min':
                acc = self.torch.minimum(acc, v)
            else:
                acc = self.torch.maximum(acc, v)
        return acc.to(self.dtype)

    def pattern(self, r, idx):
        """Data-movement inputs: element values naming the source rank and index."""
        return ((idx + 7919 * r) % 127 + 1).to(self.dtype)

    def prepare(self, coll, count, arg):
        """Builds the row's tensors and call; returns (call, reset, result, expected)."""
        torch, dist, a, rank, n = self.torch, self.dist, self.a, self.rank, self.n
        root = a.root
        send = self.send_all[:count]
        recv = self.recv_all[:count]
        idx = torch.arange(count, dtype=torch.int64)
        blocks = list(recv.split(arg)) if COLLS[coll][2] else None
        check = a.check
        expect, result, reset = None, None, None
        if coll == 'allreduce':
            # Gloo reduces in place: the input is restored (untimed) before each checked call.
            src = self.value_of(rank, idx)
            send.copy_(src)
            call = lambda: dist.all_reduce(send, op=self.op)
            reset, result = (lambda: send.copy_(src)), send
            expect = self.expected(idx) if check else None
        elif coll == 'reduce':
            src = self.value_of(rank, idx)
            send.copy_(src)
            call = lambda: dist.reduce(send, dst=root, op=self.op)
            reset = lambda: send.copy_(src)
            if rank == root:
                result, expect = send, (self.expected(idx) if check else None)
        elif coll == 'broadcast':
            buf = send if rank == root else recv
            buf.copy_(self.pattern(root, idx))
            call = lambda: dist.broadcast(buf, src=root)
            if rank != root:
                result, expect = recv, self.pattern(root, idx)
        elif coll == 'reduce_scatter':
            send.copy_(self.value_of(rank, idx))
            parts = list(send.split(arg))
            mine = recv[:arg]
            call = lambda: dist.reduce_scatter(mine, parts, op=self.op)
            result = mine
            expect = self.expected(idx[rank * arg:(rank + 1) * arg]) if check else None
        elif coll == 'allgather':
            mine = send[:arg]
            mine.copy_(self.pattern(rank, idx[:arg]))
            call = lambda: dist.all_gather(blocks, mine)
            result = recv
            expect = torch.cat([self.pattern(r, idx[:arg]) for r in range(n)]) if check else None
        elif coll == 'gather':
            mine = send[:arg]
            mine.copy_(self.pattern(rank, idx[:arg]))
            glist = blocks if rank == root else None
            call = lambda: dist.gather(mine, gather_list=glist, dst=root)
            if rank == root:
                result = recv
                expect = torch.cat([self.pattern(r, idx[:arg]) for r in range(n)]) \
                    if check else None
        elif coll == 'scatter':
            send.copy_(self.pattern(rank, idx))
            slist = list(send.split(arg)) if rank == root else None
            mine = recv[:arg]
            call = lambda: dist.scatter(mine, scatter_list=slist, src=root)
            result, expect = mine, self.pattern(root, idx[rank * arg:(rank + 1) * arg])
        elif coll == 'alltoall':
            send.copy_(self.pattern(rank, idx))
            call = lambda: dist.all_to_all_single(recv, send)
            result = recv
            expect = torch.cat([self.pattern(r, idx[rank * arg:(rank + 1) * arg])
                                for r in range(n)]) if check else None
        elif coll == 'sendrecv':
            peer = rank ^ 1
            send.copy_(self.pattern(rank, idx))
            if peer >= n:
                call = lambda: None
            else:
                def call():
                    rq = dist.irecv(recv, src=peer)
                    sq = dist.isend(send, dst=peer)
                    sq.wait()
                    rq.wait()
                result, expect = recv, self.pattern(peer, idx)
        elif coll == 'barrier':
            call = dist.barrier
        else:
            raise AssertionError(coll)
        if not check:
            expect = None
        return call, reset, result, expect

    # -- timing one size -----------------------------------------------------------------------

    def warmup_iters(self, nbytes):
        if self.a.warmup >= 0:
            return self.a.warmup
        if nbytes <= 1 << 20:
            return WARMUP_DEFAULT
        return max(WARMUP_MIN, min(WARMUP_DEFAULT, WARMUP_BYTES // nbytes))

    def agree_iters(self, spent, timed):
        torch = self.torch
        iters = 0
        if self.rank == 0:
            per = spent // timed
            iters = ADAPTIVE_MAX if per == 0 else TARGET_NS // per
            iters = max(ADAPTIVE_MIN, min(ADAPTIVE_MAX, iters))
        t = torch.tensor([iters], dtype=torch.int64)
        self.dist.broadcast(t, src=0)
        return int(t.item())

    def measure(self, call, reset, result, expect, nbytes):
        a, dist, now = self.a, self.dist, time.perf_counter_ns
        barrier = a.mode == 'barrier'
        warm = self.warmup_iters(nbytes)
        adaptive = a.iters == 0
        if adaptive and warm == 0:
            warm = 1
        spent = timed = 0
        for it in range(warm):
            if barrier:
                dist.barrier()
            t0 = now()
            call()
            dt = now() - t0
            if it > 0 or warm == 1:  # the first call pays for cold pages
                spent += dt
                timed += 1
        iters = self.agree_iters(spent, timed) if adaptive else a.iters
        times = [0] * iters
        wrong = 0
        checking = a.check and expect is not None
        for it in range(iters):
            # Untimed, with --check: restore in-place inputs (Gloo's reduce also overwrites
            # the non-roots' inputs), or poison the output (moved values are 1..127).
            if a.check and reset is not None:
                reset()
            elif checking:
                result.fill_(0)
            if barrier:
                dist.barrier()
            t0 = now()
            call()
            times[it] = now() - t0
            if checking:
                wrong += int((result != expect).sum().item())
        return iters, times, wrong

    def run_size(self, coll, nbytes):
        torch, dist = self.torch, self.dist
        if coll == 'barrier':
            geo = (0, 0, 0)
        else:
            geo = self.geometry(coll, nbytes)
            if geo is None:
                return
        nb, count, arg = geo
        call, reset, result, expect = self.prepare(coll, count, arg)
        t_start = time.perf_counter_ns()
        iters, times, wrong = self.measure(call, reset, result, expect, nb)
        t = torch.tensor(times, dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(w, op=dist.ReduceOp.SUM)
        if self.rank != 0:
            return
        ns = sorted(t.tolist())
        time_us = sum(ns) / len(ns) / 1e3
        algbw = nb / time_us / 1e3 if time_us > 0 else 0.0
        row = {
            'impl': 'gloo', 'coll': coll, 'bytes': nb, 'count': count,
            'dtype': self.a.dtype, 'op': self.a.op if COLLS[coll][0] else 'none',
            'root': self.a.root if COLLS[coll][1] else -1, 'ranks': self.n,
            'mode': self.a.mode, 'iters': iters, 'time_us': time_us, 'algbw': algbw,
            'busbw': algbw * bus_factor(coll, self.n),
            'p50_us': percentile_us(ns, 0.5), 'p99_us': percentile_us(ns, 0.99),
            'p999_us': percentile_us(ns, 0.999), 'max_us': ns[-1] / 1e3,
            'wrong': int(w.item()) if self.a.check else -1, 'allocs': -1,
        }
        self.print_row(row)
        took = time.perf_counter_ns() - t_start
        if took > PROGRESS_NS:
            print('# size %d done: %d iterations in %.1f s' % (nb, iters, took / 1e9),
                  file=sys.stderr, flush=True)

    # -- output --------------------------------------------------------------------------------

    def print_header(self, coll):
        a, f = self.a, self.meta
        red = '/' + a.op if COLLS[coll][0] else ''
        print('# gloo_bench (torch %s, gloo): %s on %d ranks, mode %s, %s%s'
              % (self.torch.__version__, coll, self.n, a.mode, a.dtype, red), file=f)
        it = ('%d per size' % a.iters) if a.iters else \
            'adaptive, ~0.3 s of timed work per size (10..100000)'
        wu = ('warm-up %d' % a.warmup) if a.warmup >= 0 else 'warm-up 20 (fewer above 1 MiB)'
        print('# iterations: %s, %s' % (it, wu), file=f)
        if not a.json:
            print('#%11s %12s %9s %6s %5s %11s %11s %11s %7s %10s %10s %10s %10s'
                  % ('size', 'count', 'type', 'redop', 'root', 'time(us)', 'algbw(GB/s)',
                     'busbw(GB/s)', '#wrong', 'p50(us)', 'p99(us)', 'p99.9(us)', 'max(us)'))
        f.flush()

    def print_row(self, r):
        if self.a.json:
            keys = ('impl', 'coll', 'bytes', 'count', 'dtype', 'op', 'root', 'ranks', 'mode',
                    'iters', 'time_us', 'algbw', 'busbw', 'p50_us', 'p99_us', 'p999_us',
                    'max_us', 'wrong', 'allocs')
            parts = []
            for k in keys:
                v = r[k]
                if isinstance(v, str):
                    parts.append('"%s":"%s"' % (k, v))
                elif isinstance(v, float):
                    parts.append('"%s":%.9g' % (k, v))
                else:
                    parts.append('"%s":%d' % (k, v))
            print('{' + ','.join(parts) + '}', flush=True)
            return
        wrong = 'N/A' if r['wrong'] < 0 else str(r['wrong'])
        print(' %11d %12d %9s %6s %5d %11.2f %11.3f %11.3f %7s %10.2f %10.2f %10.2f %10.2f'
              % (r['bytes'], r['count'], r['dtype'], r['op'], r['root'], r['time_us'],
                 r['algbw'], r['busbw'], wrong, r['p50_us'], r['p99_us'], r['p999_us'],
                 r['max_us']),
              flush=True)

    def run_coll(self, coll):
        if coll == 'sendrecv' and self.n < 2:
            if self.rank == 0:
                print('# sendrecv needs 2 or more ranks: skipped', file=self.meta)
            return
        if self.rank == 0:
            self.print_header(coll)
        if coll == 'barrier':
            self.run_size(coll, 0)
            return
        nbytes = self.a.min_bytes
        while nbytes <= self.a.max_bytes:
            self.run_size(coll, nbytes)
            nbytes *= self.a.factor


def rank_main(args, rank, n, port, colls):
    """One child: joins the group, runs the collectives, leaves. Exit status is the verdict."""
    try:
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        dist.init_process_group('gloo', init_method='tcp://127.0.0.1:%d' % port,
                                rank=rank, world_size=n)
        b = Bench(args, rank, n)
        status = 0
        for coll in colls:
            try:
                b.run_coll(coll)
            except RuntimeError as e:
                # Gloo refuses an operation on every rank alike, before any traffic.
                if 'not support' not in str(e):
                    raise
                if rank == 0:
                    print('gloo_bench: unsupported: %s: torch %s: %s'
                          % (coll, torch.__version__, str(e).splitlines()[0]),
                          file=sys.stderr, flush=True)
                status = EXIT_UNSUPPORTED
        dist.barrier()
        dist.destroy_process_group()
    except Exception:  # a rank's failure: say it and let the parent stop the others
        sys.stderr.write('gloo_bench: rank %d failed:\n%s' % (rank, traceback.format_exc()))
        sys.stderr.flush()
        os._exit(EXIT_FAIL)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main(argv):
    args = parse_args(argv)
    colls = list(COLLS) if args.coll == 'all' else [args.coll]
    try:
        import torch  # noqa: F401  imported once here; the forked ranks inherit it
        import torch.distributed as dist
    except ImportError as e:
        print('gloo_bench: unsupported: torch is not importable in %s (%s); install '
              'python3-torch (bench/install_peers.sh)' % (sys.executable, e), file=sys.stderr)
        return EXIT_UNSUPPORTED
    if not dist.is_available() or not dist.is_gloo_available():
        print('gloo_bench: unsupported: this torch has no gloo backend', file=sys.stderr)
        return EXIT_UNSUPPORTED
    os.environ.setdefault('GLOO_SOCKET_IFNAME', 'lo')
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    import multiprocessing as mp
    ctx = mp.get_context('fork')
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(args, r, args.ranks, port, colls))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    status = 0
    pending = list(procs)
    while pending:  # the first rank to fail stops the rest: a dead peer would hang them
        for p in list(pending):
            p.join(0.05)
            if p.exitcode is None:
                continue
            pending.remove(p)
            if p.exitcode == EXIT_UNSUPPORTED and status == 0:
                status = EXIT_UNSUPPORTED
            elif p.exitcode not in (0, EXIT_UNSUPPORTED) and status != EXIT_FAIL:
                status = EXIT_FAIL
                for q in pending:
                    q.terminate()
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
