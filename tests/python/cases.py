"""cases.py: the test cases of tests/python/run.py. Each runs on every rank of a job whose
default process group is backend "zcoll"; it raises (assert) on a wrong result."""

import time

import torch
import torch.distributed as dist
import torch.nn as nn

import zcoll_torch

die = None   # set by run.py: report this case passed and end the process (a dead rank)


def _eq(got, want, what):
    assert torch.equal(got, want), '%s: got %s, want %s' % (what, got, want)


def _raises(fn, *words):
    try:
        fn()
    except RuntimeError as e:
        for w in words:
            assert w in str(e), 'error %r does not name %r' % (str(e), w)
        return str(e)
    raise AssertionError('no RuntimeError (wanted one naming %s)' % (words,))


# ---- every collective, 2 ranks ----------------------------------------------------------------

def backend_is_zcoll(rank, size):
    assert dist.get_backend() == 'zcoll', dist.get_backend()
    assert isinstance(dist.distributed_c10d._get_default_group(), zcoll_torch.ProcessGroupZcoll)


def seed001_reduce_scatter_tensor_dim0(rank, size):
    """TransformerEngine's ReduceScatter: reduce_scatter_tensor along dim 0 forward, the
    all-gather (all_gather_into_tensor) backward."""
    x = torch.arange(size * 2 * 3, dtype=torch.float32).reshape(size * 2, 3) * (rank + 1)
    out = torch.empty(2, 3)
    dist.reduce_scatter_tensor(out, x)
    total = sum(r + 1 for r in range(size))
    _eq(out, torch.arange(size * 6, dtype=torch.float32).reshape(size * 2, 3)[
        rank * 2:rank * 2 + 2] * total, 'reduce_scatter_tensor')
    grad = torch.full((2, 3), float(rank))
    full = torch.empty(size * 2, 3)
    dist.all_gather_into_tensor(full, grad)
    _eq(full, torch.cat([torch.full((2, 3), float(r)) for r in range(size)]), 'all_gather_into')
    full2 = torch.empty(size * 2, 3)
    dist._all_gather_base(full2, grad)
    _eq(full2, full, '_all_gather_base')
    out2 = torch.empty(2, 3)
    dist._reduce_scatter_base(out2, x)
    _eq(out2, out, '_reduce_scatter_base')


def every_collective(rank, size):
    t = torch.tensor([rank + 1.0, 10.0 * rank])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    _eq(t, torch.tensor([float(size), 10.0 * (size - 1)]), 'all_reduce MAX')
    b = torch.arange(5) if rank == 1 else torch.zeros(5, dtype=torch.int64)
    dist.broadcast(b, src=1)
    _eq(b, torch.arange(5), 'broadcast from 1')
    r = torch.tensor([2.0 + rank])
    dist.reduce(r, dst=1, op=dist.ReduceOp.PRODUCT)
    if rank == 1:
        _eq(r, torch.tensor([float(torch.arange(2, 2 + size).prod())]), 'reduce PRODUCT at 1')
    g = [torch.zeros(2) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank)), gather_list=g, dst=0)
    if rank == 0:
        for i in range(size):
            _eq(g[i], torch.full((2,), float(i)), 'gather')
    s = torch.zeros(3, dtype=torch.int32)
    sl = [torch.full((3,), i, dtype=torch.int32) for i in range(size)] if rank == size - 1 else None
    dist.scatter(s, scatter_list=sl, src=size - 1)
    _eq(s, torch.full((3,), rank, dtype=torch.int32), 'scatter')
    # non-contiguous tensors (a transposed view) go through a copy and back
    m = torch.ones(3, 4).t()
    dist.all_reduce(m)
    _eq(m, torch.full((4, 3), float(size)), 'all_reduce of a non-contiguous view')
    # dtypes zcoll does not reduce still move (bool, int16, complex as bytes)
    bl = torch.tensor([True, False, True]) if rank == 0 else torch.zeros(3, dtype=torch.bool)
    dist.broadcast(bl, src=0)
    _eq(bl, torch.tensor([True, False, True]), 'broadcast bool')
    h = [torch.zeros(2, dtype=torch.int16) for _ in range(size)]
    dist.all_gather(h, torch.full((2,), rank, dtype=torch.int16))
    for i in range(size):
        _eq(h[i], torch.full((2,), i, dtype=torch.int16), 'all_gather int16')
    dist.barrier()


def object_collectives(rank, size):
    objs = [None] * size
    dist.all_gather_object(objs, {'rank': rank, 'name': 'r%d' % rank})
    assert objs == [{'rank': r, 'name': 'r%d' % r} for r in range(size)], objs
    lst = [['hello', 7], None] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [['hello', 7], None], lst
    g = [None] * size if rank == 0 else None
    dist.gather_object(('x', rank), g, dst=0)
    if rank == 0:
        assert g == [('x', r) for r in range(size)], g
    out = [None]
    dist.scatter_object_list(out, [r * 11 for r in range(size)] if rank == 0 else None, src=0)
    assert out == [rank * 11], out


def send_recv(rank, size):
    """dist.send/recv, isend/irecv both ways, several in flight, received in call order."""
    if rank == 0:
        dist.send(torch.tensor([42]), dst=1)
        got = torch.zeros(3)
        assert dist.recv(got, src=1) == 1
        _eq(got, torch.tensor([1.0, 2.0, 3.0]), 'recv')
    elif rank == 1:
        d = torch.zeros(1, dtype=torch.int64)
        dist.recv(d, src=0)
        _eq(d, torch.tensor([42]), 'recv 42')
        dist.send(torch.tensor([1.0, 2.0, 3.0]), dst=0)
    peer = 1 - rank if rank < 2 else None
    if peer is not None:
        outs = [torch.full((4,), float(rank * 10 + i)) for i in range(3)]
        ins = [torch.zeros(4) for _ in range(3)]
        works = [dist.isend(o, dst=peer) for o in outs] + [dist.irecv(i, src=peer) for i in ins]
        for w in reversed(works):
            w.wait()
        for i in range(3):
            _eq(ins[i], torch.full((4,), float(peer * 10 + i)), 'irecv %d' % i)
    dist.barrier()


def async_any_order(rank, size):
    """Async Works: rank 0 waits in call order, the others in reverse; each drives them all."""
    ts = [torch.full((1000 * (i + 1),), float(rank + i)) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    works.append(dist.broadcast(torch.zeros(1) if rank else torch.ones(1), src=0, async_op=True))
    order = works if rank == 0 else list(reversed(works))
    for w in order:
        w.wait()
    for i, t in enumerate(ts):
        _eq(t, torch.full_like(t, float(sum(r + i for r in range(size)))), 'async %d' % i)
    assert all(w.is_completed() for w in works)
    # is_completed polls without blocking; then the future form
    t = torch.ones(8)
    w = dist.all_reduce(t, async_op=True)
    while not w.is_completed():
        pass
    _eq(t, torch.full((8,), float(size)), 'polled')
    fut = dist.all_reduce(torch.ones(2), async_op=True).get_future()
    _eq(fut.wait()[0], torch.full((2,), float(size)), 'future')


def uneven_all_to_all(rank, size):
    """all_to_all_single with uneven splits (rank r sends r+p+1 rows of 2 to rank p), even
    without splits, and all_to_all over lists of unequal tensors."""
    in_splits = [rank + p + 1 for p in range(size)]
    out_splits = [p + rank + 1 for p in range(size)]
    inp = torch.cat([torch.full((in_splits[p], 2), float(rank * 100 + p)) for p in range(size)])
    out = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    want = torch.cat([torch.full((out_splits[p], 2), float(p * 100 + rank)) for p in range(size)])
    _eq(out, want, 'uneven all_to_all_single')
    even_in = torch.arange(size * 3, dtype=torch.int64) + 1000 * rank
    even_out = torch.empty_like(even_in)
    dist.all_to_all_single(even_out, even_in)
    want = torch.cat([torch.arange(3) + rank * 3 + 1000 * p for p in range(size)])
    _eq(even_out, want, 'even all_to_all_single')
    ins = [torch.full((p + 1,), float(rank)) for p in range(size)]
    outs = [torch.empty(rank + 1) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for p in range(size):
        _eq(outs[p], torch.full((rank + 1,), float(p)), 'uneven all_to_all list')
    ins = [torch.full((2,), rank * 10.0 + p) for p in range(size)]
    outs = [torch.empty(2) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for p in range(size):
        _eq(outs[p], torch.full((2,), p * 10.0 + rank), 'even all_to_all list')


DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
OPS = ['SUM', 'PRODUCT', 'MIN', 'MAX', 'AVG']


def _expected(vals, op, dtype):
    """Reduction of per-rank tensors in zcoll's rank tree (with p the largest power of two <= n
    and e = n - p, leaf i is rank 2i (+) rank 2i+1 for i < e and rank i+e after; then pairs,
    level by level, the lower ranks on the left) with zcoll's rules (fp16/bf16 in fp32,
    rounded once; integer AVG truncates the exact sum)."""
    wide = torch.float32 if dtype in (torch.float16, torch.bfloat16) else (
        torch.int64 if not dtype.is_floating_point else dtype)

    def combine(a, b):
        return {'SUM': a + b, 'AVG': a + b, 'PRODUCT': a * b,
                'MIN': torch.minimum(a, b), 'MAX': torch.maximum(a, b)}[op]

    xs = [v.to(wide) for v in vals]
    p = 1
    while p * 2 <= len(xs):
        p *= 2
    e = len(xs) - p
    row = [combine(xs[2 * i], xs[2 * i + 1]) if i < e else xs[i + e] for i in range(p)]
    while len(row) > 1:
        row = [combine(row[2 * j], row[2 * j + 1]) for j in range(len(row) // 2)]
    acc = row[0]
    if op == 'AVG':
        acc = acc / len(vals) if dtype.is_floating_point else torch.div(
            acc, len(vals), rounding_mode='trunc')
    return acc.to(dtype)


def dtype_by_op(rank, size):
    """all_reduce, reduce and reduce_scatter of every dtype zcoll has with every op."""
    def vals_of(r, dtype):
        base = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8][:2 * size], dtype=torch.int64)
        v = (base + r) % 5 + 1
        return v.to(dtype) if dtype is not torch.int8 else (v - 3).to(dtype)
    for dtype in DTYPES:
        for op in OPS:
            vals = [vals_of(r, dtype) for r in range(size)]
            want = _expected(vals, op, dtype)
            t = vals[rank].clone()
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            _eq(t, want, 'all_reduce %s %s' % (dtype, op))
            t = vals[rank].clone()
            dist.reduce(t, dst=size - 1, op=getattr(dist.ReduceOp, op))
            if rank == size - 1:
                _eq(t, want, 'reduce %s %s' % (dtype, op))
            out = torch.empty(2, dtype=dtype)
            dist.reduce_scatter_tensor(out, vals[rank].clone(), op=getattr(dist.ReduceOp, op))
            _eq(out, want[rank * 2:rank * 2 + 2], 'reduce_scatter %s %s' % (dtype, op))


def unsupported_raise(rank, size):
    """What zcoll cannot do raises a RuntimeError naming it; the group stays usable."""
    _raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND),
            'BAND')
    _raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)), 'torch.int16')
    _raises(lambda: dist.send(torch.ones(1), dst=1 - rank % 2, tag=-1), 'tag -1')
    _raises(lambda: dist.send(torch.ones(1), dst=rank), 'not another rank')
    t = torch.ones(3)
    dist.all_reduce(t)
    _eq(t, torch.full((3,), float(size)), 'all_reduce after refused calls')


def _train(rank, size, group, steps=5):
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    ddp = nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(99 + rank)
    for _ in range(steps):
        x, y = torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def ddp_matches_gloo(rank, size):
    """DDP training: parameters bitwise equal on every rank, and to the same run under gloo."""
    zc = _train(rank, size, None)
    every = [torch.empty_like(zc) for _ in range(size)]
    dist.all_gather(every, zc)
    for r in range(size):
        assert torch.equal(every[r], zc), 'rank %d parameters differ from rank %d' % (r, rank)
    gloo = dist.new_group(list(range(size)), backend='gloo')
    ref = _train(rank, size, gloo)
    assert torch.equal(zc, ref), 'zcoll DDP differs from gloo DDP: max |d| %g' % (
        (zc - ref).abs().max().item())


def coalesced_forms(rank, size):
    """all_reduce_coalesced and all_gather_coalesced run as ONE zcoll call each (the group's
    call count grows by one), on tensors of several shapes (and dtypes for the gather)."""
    pg = dist.distributed_c10d._get_default_group()
    ts = [torch.full((3,), rank + 1.0), torch.arange(4.0).reshape(2, 2) * rank,
          torch.tensor(2.0 + rank)]
    before = pg._get_sequence_number_for_group()
    dist.all_reduce_coalesced(ts, op=dist.ReduceOp.MAX)
    assert pg._get_sequence_number_for_group() == before + 1, 'all_reduce_coalesced: not one call'
    _eq(ts[0], torch.full((3,), float(size)), 'coalesced MAX 0')
    _eq(ts[1], torch.arange(4.0).reshape(2, 2) * (size - 1), 'coalesced MAX 1')
    _eq(ts[2], torch.tensor(1.0 + size), 'coalesced MAX 2')
    ins = [torch.full((2,), rank + 0.25), torch.empty(0), torch.tensor([[rank + 0.5]])]
    outs = [[torch.empty_like(t) for t in ins] for _ in range(size)]
    before = pg._get_sequence_number_for_group()
    dist.all_gather_coalesced(outs, ins)
    assert pg._get_sequence_number_for_group() == before + 1, 'all_gather_coalesced: not one call'
    for r in range(size):
        _eq(outs[r][0], torch.full((2,), r + 0.25), 'gather_coalesced 0')
        _eq(outs[r][2], torch.tensor([[r + 0.5]]), 'gather_coalesced 2')
    # the group's method moves bytes: dtypes may differ (torch's Python checks refuse that)
    ins = [torch.full((2,), rank, dtype=torch.int16), torch.tensor([[rank + 0.5]],
                                                                   dtype=torch.float64),
           torch.tensor([True, rank == 0])]
    outs = [[torch.empty_like(t) for t in ins] for _ in range(size)]
    pg.allgather_coalesced(outs, ins).wait()
    for r in range(size):
        _eq(outs[r][0], torch.full((2,), r, dtype=torch.int16), 'gather_coalesced int16')
        _eq(outs[r][1], torch.tensor([[r + 0.5]], dtype=torch.float64), 'gather_coalesced f64')
        _eq(outs[r][2], torch.tensor([True, r == 0]), 'gather_coalesced bool')
    # torch 2.x's forms, called on the group as its _coalescing_manager does
    ins = [torch.arange(size * 2.0) + rank, torch.ones(size, dtype=torch.float32) * rank]
    outs = [torch.empty(2), torch.empty(1)]
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    pg.reduce_scatter_tensor_coalesced(outs, ins, opts).wait()
    total = sum(range(size))
    _eq(outs[0], torch.arange(size * 2.0)[rank * 2:rank * 2 + 2] * size + total, 'rs coalesced 0')
    _eq(outs[1], torch.tensor([float(total)]), 'rs coalesced 1')
    ins = [torch.full((2,), float(rank)), torch.tensor([rank * 7], dtype=torch.int64)]
    outs = [torch.empty(size * 2), torch.empty(size, dtype=torch.int64)]
    pg.allgather_into_tensor_coalesced(outs, ins).wait()
    _eq(outs[0], torch.arange(size).repeat_interleave(2).float(), 'ag into coalesced 0')
    _eq(outs[1], torch.arange(size) * 7, 'ag into coalesced 1')
    _raises(lambda: pg.allreduce_coalesced([torch.ones(1), torch.ones(1, dtype=torch.int32)],
                                           dist.AllreduceCoalescedOptions()), 'one dtype')


def sparse_all_reduce(rank, size):
    """A sparse COO all_reduce sums the union of every rank's entries, as gloo does."""
    i = torch.tensor([[rank, 5], [0, rank + 1]])
    v = torch.tensor([[1.0, 2.0], [10.0 * rank, 1.0]])
    t = torch.sparse_coo_tensor(i, v, (size + 6, size + 2, 2))
    dense = sum(torch.sparse_coo_tensor(torch.tensor([[r, 5], [0, r + 1]]),
                                        torch.tensor([[1.0, 2.0], [10.0 * r, 1.0]]),
                                        (size + 6, size + 2, 2)).to_dense() for r in range(size))
    dist.all_reduce(t)
    _eq(t.to_dense(), dense, 'sparse all_reduce')
    _raises(lambda: dist.all_reduce(torch.sparse_coo_tensor(i, v, (size + 6, size + 2, 2)),
                                    op=dist.ReduceOp.MAX), 'SUM only')


def wait_timeout_and_introspection(rank, size):
    """Work.wait(timeout) raises "Timed out" when the call cannot finish in time and the call
    still finishes later; options and get_backend answer as for gloo."""
    from datetime import timedelta
    pg = dist.distributed_c10d._get_default_group()
    assert pg.options.backend == 'zcoll' and pg.options._timeout.total_seconds() > 0
    assert dist.get_backend(pg) == 'zcoll' and pg._get_backend_name() == 'zcoll'
    t = torch.ones(4)
    if rank == 0:
        w = dist.all_reduce(t, async_op=True)
        t0 = time.time()
        e = _raises(lambda: w.wait(timeout=timedelta(milliseconds=200)), 'Timed out')
        took = time.time() - t0
        assert 0.15 < took < 2.0, 'wait(200 ms) took %.2f s' % took
        assert 'still in flight' in e, e
        w.wait(timeout=timedelta(seconds=20))   # the same call finishes once rank 1 joins
    else:
        time.sleep(1.0)
        dist.all_reduce(t)
    _eq(t, torch.full((4,), float(size)), 'all_reduce after a timed-out wait')


def any_source_and_tags(rank, size):
    """recv / irecv without src take every peer's message once and say who sent it; tags that
    agree in call order pass."""
    if rank == 0:
        seen = []
        for i in range(size - 1):
            t = torch.zeros(3, dtype=torch.int64)
            src = dist.recv(t, tag=5) if i % 2 == 0 else None
            if src is None:
                w = dist.irecv(t, tag=5)
                w.wait()
                src = w._source_rank()
            _eq(t, torch.full((3,), src * 7, dtype=torch.int64), 'from any source')
            seen.append(src)
        assert sorted(seen) == list(range(1, size)), seen
    else:
        dist.send(torch.full((3,), rank * 7, dtype=torch.int64), dst=0, tag=5)
    # A receive from any source takes the first message whatever its tag (tags are checked, not
    # matched): the ring below must not start before rank 0 took every tag-5 message.
    dist.barrier()
    peer = (rank + 1) % size
    prev = (rank - 1) % size
    for tag in (1, 2, 3):
        w = dist.isend(torch.tensor([rank * 10 + tag]), dst=peer, tag=tag)
        got = torch.zeros(1, dtype=torch.int64)
        dist.recv(got, src=prev, tag=tag)
        w.wait()
        _eq(got, torch.tensor([prev * 10 + tag]), 'tag %d' % tag)
    dist.barrier()


def progress_thread_completes_futures(rank, size):
    """With the progress thread (the default), an async call's future completes while the
    program does something else and never calls zcoll; with ZCOLL_TORCH_PROGRESS_THREAD=0,
    get_future() completes the call before it returns."""
    import os
    pg = dist.distributed_c10d._get_default_group()
    threaded = os.environ.get('ZCOLL_TORCH_PROGRESS_THREAD', '1') != '0'
    assert pg.options.progress_thread == threaded
    t = torch.full((1000,), float(rank))
    if rank == 0:
        fut = dist.all_reduce(t, async_op=True).get_future()
        if threaded:
            assert not fut.done(), 'done before the peer joined'
            end = time.time() + 10
            while not fut.done() and time.time() < end:
                time.sleep(0.01)   # no zcoll call here: only the thread can finish it
        assert fut.done(), 'the future did not complete'
        _eq(fut.value()[0], torch.full((1000,), float(sum(range(size)))), 'future value')
    else:
        time.sleep(0.5)
        dist.all_reduce(t)
    dist.barrier()


# ---- 3 ranks -----------------------------------------------------------------------------------

def subset_group(rank, size):
    """new_group of ranks [1, 2] is its own zcoll communicator; rank 0 is not in it."""
    g = dist.new_group([1, 2])
    if rank == 0:
        assert g == dist.GroupMember.NON_GROUP_MEMBER
    else:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=g)
        _eq(t, torch.tensor([3.0]), 'subset all_reduce')
        out = [torch.zeros(1) for _ in range(2)]
        dist.all_gather(out, torch.tensor([rank * 1.0]), group=g)
        _eq(torch.cat(out), torch.tensor([1.0, 2.0]), 'subset all_gather')
        b = torch.tensor([7.0]) if rank == 2 else torch.zeros(1)
        dist.broadcast(b, src=2, group=g)   # src is a global rank
        _eq(b, torch.tensor([7.0]), 'subset broadcast from global rank 2')
    t = torch.ones(1)
    dist.all_reduce(t)
    _eq(t, torch.tensor([3.0]), 'world all_reduce after the subset group')


def seed003_patterns(rank, size):
    """The guide's patterns on its 3 ranks: values 1, 2, 3; sum 6; destination sees [1, 2, 3]."""
    data = torch.tensor([42]) if rank == 0 else torch.empty(1, dtype=torch.int64)
    dist.broadcast(data, src=0)
    _eq(data, torch.tensor([42]), 'broadcast 42')
    data = torch.tensor([float(rank + 1)])
    dist.all_reduce(data, op=dist.ReduceOp.SUM)
    _eq(data, torch.tensor([6.0]), 'all_reduce 6')
    g = [torch.empty(1) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.tensor([float(rank + 1)]), gather_list=g, dst=0)
    if rank == 0:
        _eq(torch.cat(g), torch.tensor([1.0, 2.0, 3.0]), 'gather [1, 2, 3]')
    loss = torch.tensor([0.5 * (rank + 1)])
    dist.all_reduce(loss, op=dist.ReduceOp.SUM)
    assert loss.item() / size == 1.0


# ---- 4 ranks -----------------------------------------------------------------------------------

def four_ranks_groups(rank, size):
    """Two disjoint groups at once, each its own communicator; AVG over the world."""
    even, odd = dist.new_group([0, 2]), dist.new_group([1, 3])
    mine = even if rank % 2 == 0 else odd
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    _eq(t, torch.tensor([2.0 if rank % 2 == 0 else 4.0]), 'pair all_reduce')
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    _eq(t, torch.tensor([1.5]), 'AVG')


# ---- failures: each its own job ----------------------------------------------------------------

def fail_mismatch(rank, size):
    """Ranks call different collectives: ZC_MISMATCH on every rank, then the group is failed."""
    t = torch.ones(4)
    if rank == 0:
        e = _raises(lambda: dist.all_reduce(t), 'ZC_MISMATCH')
    else:
        e = _raises(lambda: dist.broadcast(t, src=0), 'ZC_MISMATCH')
    assert 'zcoll' in e
    _raises(lambda: dist.all_reduce(t), 'failed earlier')


def fail_tag_mismatch(rank, size):
    """Tags that disagree in call order are a ZC_MISMATCH naming both, never a reordering."""
    if rank == 0:
        def sends():   # rank 1's report ends the group at the second send or at the barrier
            dist.send(torch.ones(2), dst=1, tag=4)
            dist.send(torch.ones(2), dst=1, tag=8)
            dist.barrier()
        _raises(sends, 'ZC_MISMATCH')
    else:
        e = _raises(lambda: dist.recv(torch.zeros(2), src=0, tag=8), 'ZC_MISMATCH')
        assert 'tag 8' in e and 'tag 4' in e, e


def fail_deadline(rank, size):
    """Rank 1 skips an all_reduce: rank 0 raises ZC_TIMED_OUT (with the words " Timed out "
    torch programs look for) within the init timeout (3 s);
    rank 1's next call then raises too."""
    t0 = time.time()
    if rank == 0:
        _raises(lambda: dist.all_reduce(torch.ones(2)), 'ZC_TIMED_OUT', ' Timed out ')
        took = time.time() - t0
        assert took < 3.0 + 3.0, 'took %.1f s for a 3 s deadline' % took
    else:
        time.sleep(9.0)   # well past rank 0's deadline, even when rank 0 starts late
        _raises(lambda: dist.barrier(), 'zcoll')
    _raises(lambda: dist.all_reduce(torch.ones(2)), 'failed earlier')


def fail_dead_peer(rank, size):
    """Rank 1 dies: rank 0's all_reduce raises (peer lost or deadline) within the timeout."""
    if rank == 1:
        die()
    t0 = time.time()
    _raises(lambda: dist.all_reduce(torch.ones(2)), 'zcoll all_reduce failed on rank 0')
    took = time.time() - t0
    assert took < 3.0 + 3.0, 'took %.1f s' % took


TWO = ['backend_is_zcoll', 'seed001_reduce_scatter_tensor_dim0', 'every_collective',
       'object_collectives', 'send_recv', 'async_any_order', 'uneven_all_to_all',
       'dtype_by_op', 'unsupported_raise', 'ddp_matches_gloo', 'coalesced_forms',
       'sparse_all_reduce', 'wait_timeout_and_introspection',
       'progress_thread_completes_futures', 'any_source_and_tags']
# Run again with ZCOLL_TORCH_PROGRESS_THREAD=0 (Works then move only when waited).
NO_THREAD = ['progress_thread_completes_futures', 'async_any_order', 'ddp_matches_gloo',
             'coalesced_forms', 'wait_timeout_and_introspection', 'send_recv']
THREE = ['subset_group', 'seed003_patterns', 'uneven_all_to_all', 'every_collective',
         'async_any_order', 'coalesced_forms', 'sparse_all_reduce', 'any_source_and_tags']
FOUR = ['four_ranks_groups', 'uneven_all_to_all', 'dtype_by_op']
# (case, ranks, timeout in seconds given to init_process_group)
FAILURES = [('fail_mismatch', 2, 10), ('fail_tag_mismatch', 2, 10), ('fail_deadline', 2, 3), ('fail_dead_peer', 2, 3)]
