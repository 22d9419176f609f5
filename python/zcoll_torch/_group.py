"""_group: ProcessGroupZcoll, a torch.distributed process group over one zcoll communicator.

torch calls the group's methods (allreduce, allgather, ...) with lists of tensors and an
options object; each method checks its arguments, starts the zcoll requests and returns a
ZcollWork. Each group is its own zc_comm_init: group rank 0 picks the rendezvous address and a
fresh job secret and publishes both through the store torch hands the creator (the secret is
therefore only as private as that store: anyone who can read the store can join the group).
"""

import collections
import ctypes
import os
import secrets
import socket
import threading
import time
import weakref
from sys import getrefcount as _getrefcount
from datetime import timedelta

import torch
import torch.distributed as dist

from . import _lib, _progress
from ._coalesced import Coalesced
from ._work import ZcollWork

lib = _lib.lib
_byref = ctypes.byref
_allreduce = lib.zc_allreduce
_SUM = dist.ReduceOp.SUM

# torch dtype -> zcoll dtype: the types zcoll reduces. Other types move as bytes (ZC_UINT8) in
# the collectives that do not reduce, and are refused by the ones that do.
DTYPES = {
    torch.int8: _lib.ZC_INT8, torch.uint8: _lib.ZC_UINT8, torch.int32: _lib.ZC_INT32,
    torch.int64: _lib.ZC_INT64, torch.float16: _lib.ZC_FLOAT16,
    torch.bfloat16: _lib.ZC_BFLOAT16, torch.float32: _lib.ZC_FLOAT32,
    torch.float64: _lib.ZC_FLOAT64,
}
OPS = [('SUM', _lib.ZC_SUM), ('PRODUCT', _lib.ZC_PROD), ('MIN', _lib.ZC_MIN),
       ('MAX', _lib.ZC_MAX), ('AVG', _lib.ZC_AVG)]
# Requests one group may have in flight (async calls not yet waited, DDP buckets).
MAX_REQUESTS = 256
# Finished Works a group keeps referenced while the progress thread runs (see _retire).
RECENT = 64


def zc_op(reduce_op):
    """dist.ReduceOp -> zc_op; RuntimeError naming the op for those zcoll lacks."""
    for name, zc in OPS:
        if reduce_op == getattr(dist.ReduceOp, name):
            return zc
    shown = getattr(reduce_op, 'op', reduce_op)
    raise RuntimeError('zcoll: reduce op %s is not supported (zcoll reduces with SUM, PRODUCT, '
                       'MIN, MAX and AVG)' % shown)


def zc_dtype(t, call):
    """The zcoll type of a tensor that is reduced; RuntimeError naming the type if none."""
    dt = DTYPES.get(t.dtype)
    if dt is None:
        raise RuntimeError('zcoll: %s cannot reduce dtype %s (zcoll has int8, uint8, int32, int64, '
                           'float16, bfloat16, float32, float64)' % (call, t.dtype))
    return dt


def moved(t):
    """(count, zcoll dtype) that moves tensor t's bytes unchanged: its own type when zcoll has
    it (so ranks that disagree on the type are told), else bytes."""
    dt = DTYPES.get(t.dtype)
    if dt is None:
        return t.numel() * t.element_size(), _lib.ZC_UINT8
    return t.numel(), dt


def _root_host():
    """IPv4 address this host's group rank 0 listens on: $ZCOLL_TORCH_HOST, else 127.0.0.1 when
    MASTER_ADDR is this host's loopback (or absent), else the address that routes to
    MASTER_ADDR (the interface the other hosts reach this one through)."""
    host = os.environ.get('ZCOLL_TORCH_HOST')
    if host:
        return host
    master = os.environ.get('MASTER_ADDR', '127.0.0.1')
    try:
        ip = socket.gethostbyname(master)
        if ip.startswith('127.'):
            return '127.0.0.1'
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((ip, 9))
            return s.getsockname()[0]
    except OSError:
        return '127.0.0.1'


def _free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# A goodbye barrier waits this long at most for the other ranks (then fini goes on alone).
GOODBYE_S = 10.0


class _Comm:
    """Owns one zc_comm and its arena; close() is its finalizer (runs at exit too).

    goodbye() (the default group's, from dist.destroy_process_group: see __init__.py) is a
    barrier, so that no rank, rank 0 above all (its process holds torch's TCPStore), leaves
    while another still talks to the store. The wait is bounded by GOODBYE_S, so a rank that
    never arrives costs the others that much, not a hang."""

    def __init__(self, cfg):
        size = lib.zc_comm_arena_bytes(_byref(cfg))
        if size == 0:
            raise RuntimeError('zcoll: invalid configuration for rank %d of %d'
                               % (cfg.rank, cfg.nranks))
        self.arena = (ctypes.c_uint64 * ((size + 7) // 8))()   # 8-byte aligned, zeroed
        comm = ctypes.c_void_p()
        st = lib.zc_comm_init(_byref(cfg), self.arena, size, _byref(comm))
        if st != _lib.ZC_OK:
            raise RuntimeError('zcoll: zc_comm_init failed on rank %d of %d: %s: %s'
                               % (cfg.rank, cfg.nranks, _lib.status_name(st),
                                  lib.zc_init_error_text().decode()))
        self.comm = comm.value
        self.use = threading.Lock()   # held by the progress thread while it calls into comm

    def goodbye(self):
        """A barrier, waited GOODBYE_S at most; nothing on a failed or closed communicator."""
        req = _lib.Req()
        if not self.comm or lib.zc_barrier(self.comm, _byref(req)) != _lib.ZC_OK:
            return
        end = time.monotonic() + GOODBYE_S
        while (lib.zc_test(self.comm, _byref(req)) == _lib.ZC_IN_PROGRESS
               and time.monotonic() < end):
            lib.zc_progress(self.comm)

    def close(self):
        with self.use:
            if self.comm:
                lib.zc_comm_fini(self.comm)
                self.comm = None


def make_config(rank, size, timeout, root, secret, threaded=False):
    """zc_config: the environment's tunables (ZC_TIMEOUT_MS, ZC_SLOT_BYTES, ...), then this
    group's rank, size, rendezvous, secret and deadline (torch's timeout); threaded: the
    progress thread calls too (ZC_THREADS_MULTI)."""
    cfg = _lib.Config()
    lib.zc_config_default(_byref(cfg))
    if lib.zc_config_tunables_from_env(_byref(cfg)) != _lib.ZC_OK:  # rank & co. are torch's
        raise RuntimeError('zcoll: the environment holds a setting zcoll refuses: %s'
                           % cfg.error_text.decode())
    cfg.rank, cfg.nranks, cfg.local_rank = rank, size, 0
    cfg.root_addr = root.encode()
    cfg.secret[:] = list(secret)
    cfg.secret_set = True
    ns = int(timeout.total_seconds() * 1e9) if timeout is not None else 0
    cfg.timeout_ns = cfg.init_timeout_ns = max(ns, 0)
    cfg.max_requests = max(cfg.max_requests, MAX_REQUESTS)
    if threaded:
        cfg.threads = _lib.ZC_THREADS_MULTI
    return cfg


def rendezvous(store, rank, size):
    """Group rank 0 publishes "host:port" and a fresh 128-bit secret; the others read them
    (the store's get waits for them, up to the store's timeout)."""
    if rank == 0:
        host = _root_host()
        root = '%s:%d' % (host, _free_port(host))
        secret = secrets.token_bytes(_lib.ZC_SECRET_BYTES)
        store.set('zcoll/root', root)
        store.set('zcoll/secret', secret.hex())
        return root, secret
    root = store.get('zcoll/root').decode()
    return root, bytes.fromhex(store.get('zcoll/secret').decode())


class GroupOptions:
    """ProcessGroupZcoll.options: what gloo's options say (backend, _timeout), and whether the
    progress thread drives the group."""

    def __init__(self, timeout, progress_thread):
        self.backend = 'zcoll'
        self._timeout = timeout
        self.progress_thread = progress_thread

    def __repr__(self):
        return 'zcoll options(timeout=%s, progress_thread=%s)' % (self._timeout,
                                                                  self.progress_thread)


class ProcessGroupZcoll(Coalesced, dist.ProcessGroup):
    """A process group whose every call runs on one zcoll communicator."""

    def __init__(self, store, rank, size, timeout=timedelta(minutes=30)):
        super().__init__(rank, size)
        root, secret = rendezvous(store, rank, size)
        driver = _progress.driver() if _progress.enabled() else None
        cfg = make_config(rank, size, timeout, root, secret, threaded=driver is not None)
        self._owner = _Comm(cfg)
        weakref.finalize(self, self._owner.close)
        self.comm = self._owner.comm
        self._rank, self._size = rank, size
        self._timeout = timeout if timeout is not None else timedelta(minutes=30)
        self._timeout_ms = cfg.timeout_ns // 1000000
        self.failed = None              # the sentence of the failure that ended this group
        self._inflight = {}             # id -> ZcollWork not finished yet
        self._spare = None              # the last finished Work, kept for C++ holders and reuse
        self._cuda = None               # _cuda.Staging once a CUDA tensor was seen
        self._calls = 0                 # calls started: torch's sequence number of the group
        self._coalescing = None         # Works started since _start_coalescing (torch 2.x)
        self._driver = driver           # the progress thread's driver; None: turned off
        self._recent = collections.deque(maxlen=RECENT)   # finished Works kept (see _retire)
        if driver is not None:
            driver.add(self)

    # -- bookkeeping --------------------------------------------------------------------------
    def getBackendName(self):
        return 'zcoll'

    def name(self):
        return 'zcoll'

    def _get_backend_name(self):
        return 'zcoll'

    @property
    def options(self):
        """What ProcessGroupGloo.options shows: the backend and the group's timeout."""
        return GroupOptions(self._timeout, self._driver is not None)

    def _get_sequence_number_for_group(self):
        """Calls started on this group (the same on every rank: zcoll orders calls)."""
        return self._calls

    def _set_sequence_number_for_group(self):
        """Nothing to agree on: every rank counts its calls from 0."""

    def goodbye(self):
        """The default group's bounded barrier before dist.destroy_process_group (__init__.py);
        nothing once the group failed."""
        if self.failed is None:
            self._owner.goodbye()

    def _check(self):
        if self.failed is not None:
            raise RuntimeError('zcoll: this process group failed earlier and can no longer be '
                               'used: ' + self.failed)

    def _fail(self, call, st):
        """Raises RuntimeError with zcoll's sentence (a deadline's says "Timed out", the words
        torch programs look for); when the communicator itself failed (not just this call's
        arguments) the group is marked failed and its Works fail with it."""
        text = lib.zc_comm_error_text(self.comm).decode()
        name = _lib.status_name(st)
        if st == _lib.ZC_TIMED_OUT:
            name = 'Timed out (%s)' % name
        msg = 'zcoll %s failed on rank %d of %d: %s: %s' % (
            call, self._rank, self._size, name, text)
        if lib.zc_progress(self.comm) != _lib.ZC_OK:
            if self.failed is None:
                self.failed = msg
            for w in list(self._inflight.values()):
                w._abandon(self.failed)
            self._inflight.clear()
        raise RuntimeError(msg)

    def _fail_quietly(self, st):
        """The progress thread's _fail: records the failure, raises nothing."""
        try:
            self._fail('progress', st)
        except RuntimeError:
            pass

    def _retire(self, work):
        """A Work finished. C++ holders (DDP's reducer) reach a Work's Python methods only
        while its Python object lives (torch 1.13), and may ask for its future after the
        progress thread finished it: the last RECENT finished Works stay referenced."""
        self._inflight.pop(id(work), None)
        if self._driver is None:
            self._spare = work
        else:
            self._recent.append(work)

    def _kick(self):
        if self._driver is not None:
            self._driver.kick()

    def _start(self, call, fn, *args):
        """Starts one zcoll call; while every request slot is taken, progresses and retries."""
        req = _lib.Req()
        while True:
            st = fn(self.comm, *args, _byref(req))
            if st == _lib.ZC_OK:
                return req
            if st != _lib.ZC_AGAIN:
                self._fail(call, st)
            st = lib.zc_progress(self.comm)
            if st != _lib.ZC_OK:
                self._fail(call, st)

    def _work(self, call, reqs, keep, finish=None, result=None, event=None):
        """The Work of a call whose requests started; the progress thread sees it at once."""
        self._calls += 1
        w = self._spare
        # Reuse the last finished Work when only self._spare (and this frame and getrefcount's
        # argument) refer to it: its caller has dropped it.
        if w is not None and _getrefcount(w) == 3:
            self._spare = None
            w._reset(call, reqs, keep, finish, result, event)
        else:
            w = ZcollWork(self, call, reqs, keep, finish, result, event)
        if self._coalescing is not None:
            self._coalescing.append(w)
        self._inflight[id(w)] = w
        if self._driver is not None and self._driver.idle:
            self._driver.kick()
        return w

    def _device(self, tensors, call):
        """'cpu' or 'cuda' for a call's tensors (one kind per call)."""
        kinds = {t.device.type for t in tensors}
        if kinds <= {'cpu'}:
            return 'cpu'
        if kinds == {'cuda'}:
            return 'cuda'
        raise RuntimeError('zcoll: %s got tensors on %s; zcoll takes CPU tensors, or CUDA '
                           'tensors in CUDA builds' % (call, sorted(kinds)))

    def _staging(self):
        if self._cuda is None:
            from ._cuda import Staging
            self._cuda = Staging(self)
        return self._cuda

    @staticmethod
    def _one(tensors, call):
        if len(tensors) != 1:
            raise RuntimeError('zcoll: %s takes exactly one tensor per process, got %d'
                               % (call, len(tensors)))
        return tensors[0]

    # -- collectives --------------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        # The common case first, with as few Python and pybind steps as possible: one
        # contiguous CPU tensor of a type zcoll reduces, SUM.
        if self.failed is None and len(tensors) == 1:
            t = tensors[0]
            dt = DTYPES.get(t.dtype)
            if dt is not None and not t.is_cuda and not t.is_sparse and t.is_contiguous():
                r = opts.reduceOp if opts is not None else _SUM
                op = _lib.ZC_SUM if r == _SUM else zc_op(r)
                p = t.data_ptr()
                req = _lib.Req()
                if _allreduce(self.comm, p, p, t.numel(), dt, op, _byref(req)) == _lib.ZC_OK:
                    return self._work('all_reduce', [req], tensors, None, tensors)
        self._check()
        t = self._one(tensors, 'all_reduce')
        if t.is_sparse:
            return self._sparse_allreduce(t, opts)
        op = zc_op(opts.reduceOp) if opts is not None else _lib.ZC_SUM
        return self._inplace('all_reduce', t, tensors, lambda p, n, dt: (
            'allreduce', (p, p, n, dt, op)), reduce=True)

    def broadcast(self, tensors, opts):
        self._check()
        t = self._one(tensors, 'broadcast')
        root = opts.rootRank
        return self._inplace('broadcast', t, tensors,
                             lambda p, n, dt: ('broadcast', (p, p, n, dt, root)))

    def reduce(self, tensors, opts):
        self._check()
        t = self._one(tensors, 'reduce')
        op, root = zc_op(opts.reduceOp), opts.rootRank
        return self._inplace('reduce', t, tensors,
                             lambda p, n, dt: ('reduce', (p, p, n, dt, op, root)),
                             reduce=True)

    def _inplace(self, call, t, result, args_of, reduce=False):
        """One in-place call on tensor t (a contiguous copy when t is not contiguous, copied
        back once done). args_of(pointer, count, dtype) gives (collective, its zcoll arguments
        before the request)."""
        if reduce:
            n, dt = t.numel(), zc_dtype(t, call)
        else:
            n, dt = moved(t)
        if self._device([t], call) == 'cuda':
            coll, args = args_of(None, n, dt)
            return self._staging().inplace(call, coll, t, args, result)
        buf = t if t.is_contiguous() else t.contiguous()
        coll, args = args_of(buf.data_ptr(), n, dt)
        req = self._start(call, getattr(lib, 'zc_' + coll), *args)
        finish = None if buf is t else (lambda: t.copy_(buf))
        return self._work(call, [req], [t, buf], finish, result)

    def allgather(self, output_tensors, input_tensors, opts=None):
        self._check()
        t = self._one(input_tensors, 'all_gather')
        outs = self._one(output_tensors, 'all_gather')
        self._same_shape(outs, t, 'all_gather')
        flat = torch.empty(self._size * t.numel(), dtype=t.dtype, device=t.device)
        work = self._allgather_flat('all_gather', flat, t, output_tensors)
        work._add_finish(lambda: self._unflatten(flat, outs))
        return work

    def _allgather_base(self, output, input, opts=None):
        self._check()
        if output.numel() != self._size * input.numel() or output.dtype != input.dtype:
            raise RuntimeError('zcoll: all_gather_into_tensor needs an output of world size x '
                               'input elements (%d x %d) of the input dtype, got %d of %s'
                               % (self._size, input.numel(), output.numel(), output.dtype))
        return self._out_staged('all_gather_into_tensor', output, input,
                                self._allgather_flat, [output])

    def _allgather_flat(self, call, flat, t, result):
        src = t.contiguous()
        n, dt = moved(src)
        if self._device([flat, t], call) == 'cuda':
            return self._staging().run(call, 'allgather', src, flat, (n, dt), result)
        req = self._start(call, lib.zc_allgather, src.data_ptr(), flat.data_ptr(), n, dt)
        return self._work(call, [req], [src, flat], None, result)

    def _out_staged(self, call, output, input, start, result):
        """Runs start(call, flat_output, input, result) on output itself when contiguous, else
        on a contiguous copy that is copied back once done."""
        if output.is_contiguous():
            return start(call, output.view(-1), input, result)
        flat = torch.empty(output.numel(), dtype=output.dtype, device=output.device)
        work = start(call, flat, input, result)
        work._add_finish(lambda: output.copy_(flat.view_as(output)))
        return work

    def gather(self, output_tensors, input_tensors, opts):
        self._check()
        t = self._one(input_tensors, 'gather').contiguous()
        root = opts.rootRank
        n, dt = moved(t)
        flat, outs = None, None
        if self._rank == root:
            outs = self._one(output_tensors, 'gather')
            self._same_shape(outs, t, 'gather')
            flat = torch.empty(self._size * t.numel(), dtype=t.dtype, device=t.device)
        if self._device([t], 'gather') == 'cuda':
            raise RuntimeError('zcoll: gather of CUDA tensors is not wired yet; use all_gather')
        req = self._start('gather', lib.zc_gather, t.data_ptr(),
                          flat.data_ptr() if flat is not None else None, n, dt, root)
        finish = (lambda: self._unflatten(flat, outs)) if outs is not None else None
        return self._work('gather', [req], [t, flat], finish, output_tensors)

    def scatter(self, output_tensors, input_tensors, opts):
        self._check()
        t = self._one(output_tensors, 'scatter')
        root = opts.rootRank
        flat = None
        if self._rank == root:
            ins = self._one(input_tensors, 'scatter')
            self._same_shape(ins, t, 'scatter')
            flat = torch.cat([x.reshape(-1) for x in ins])
        if self._device([t], 'scatter') == 'cuda':
            raise RuntimeError('zcoll: scatter of CUDA tensors is not wired yet')
        buf = t if t.is_contiguous() else torch.empty_like(t, memory_format=torch.contiguous_format)
        n, dt = moved(buf)
        req = self._start('scatter', lib.zc_scatter,
                          flat.data_ptr() if flat is not None else None, buf.data_ptr(), n, dt,
                          root)
        finish = None if buf is t else (lambda: t.copy_(buf))
        return self._work('scatter', [req], [t, buf, flat], finish, output_tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        self._check()
        t = self._one(output_tensors, 'reduce_scatter')
        ins = self._one(input_tensors, 'reduce_scatter')
        self._same_shape(ins, t, 'reduce_scatter')
        flat = torch.cat([x.reshape(-1) for x in ins])
        return self._out_staged('reduce_scatter', t, flat,
                                lambda c, o, i, r: self._rs_flat(c, o, i, r, opts),
                                output_tensors)

    def _reduce_scatter_base(self, output, input, opts):
        self._check()
        if input.numel() != self._size * output.numel() or output.dtype != input.dtype:
            raise RuntimeError('zcoll: reduce_scatter_tensor needs an input of world size x '
                               'output elements (%d x %d) of the output dtype, got %d of %s'
                               % (self._size, output.numel(), input.numel(), input.dtype))
        return self._out_staged('reduce_scatter_tensor', output, input,
                                lambda c, o, i, r: self._rs_flat(c, o, i, r, opts), [output])

    def _rs_flat(self, call, out, inp, result, opts):
        src = inp.contiguous()
        dt, op = zc_dtype(out, call), zc_op(opts.reduceOp)
        if self._device([out, inp], call) == 'cuda':
            return self._staging().run(call, 'reduce_scatter', src, out, (out.numel(), dt, op),
                                       result)
        req = self._start(call, lib.zc_reduce_scatter, src.data_ptr(), out.data_ptr(),
                          out.numel(), dt, op)
        return self._work(call, [req], [src, out], None, result)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        self._check()
        call = 'all_to_all_single'
        if output.dtype != input.dtype:
            raise RuntimeError('zcoll: %s needs one dtype, got %s and %s'
                               % (call, input.dtype, output.dtype))
        n = self._size
        if not output_split_sizes and not input_split_sizes:
            if input.numel() % n or output.numel() != input.numel():
                raise RuntimeError('zcoll: %s without splits needs equal input and output '
                                   'sizes divisible by the world size %d, got %d and %d'
                                   % (call, n, input.numel(), output.numel()))
            if self._device([output, input], call) == 'cuda':
                raise RuntimeError('zcoll: %s of CUDA tensors is not wired yet' % call)
            src = input.contiguous()
            return self._out_staged(call, output, src, lambda c, o, i, r: self._a2a_even(
                c, o, i, r), [output])
        return self._a2a_uneven(call, [output], [input], output_split_sizes,
                                input_split_sizes)

    def _a2a_even(self, call, out, src, result):
        cnt, dt = moved(src)
        req = self._start(call, lib.zc_alltoall, src.data_ptr(), out.data_ptr(),
                          cnt // self._size, dt)
        return self._work(call, [req], [src, out], None, result)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        self._check()
        call = 'all_to_all'
        n = self._size
        if len(output_tensors) != n or len(input_tensors) != n:
            raise RuntimeError('zcoll: %s needs %d input and %d output tensors, got %d and %d'
                               % (call, n, n, len(input_tensors), len(output_tensors)))
        return self._a2a_lists(call, output_tensors, input_tensors)

    def _a2a_lists(self, call, outs, ins):
        """all_to_all over lists: rank p gets ins[p] into its outs[me]; equal sizes go as one
        zc_alltoall, others as one zc_send/zc_recv per peer."""
        sizes = {t.numel() for t in ins} | {t.numel() for t in outs}
        if len(sizes) == 1 and len({t.dtype for t in ins + outs}) == 1:
            if self._device(ins + outs, call) == 'cuda':
                raise RuntimeError('zcoll: %s of CUDA tensors is not wired yet' % call)
            flat_in = torch.cat([t.reshape(-1) for t in ins])
            flat_out = torch.empty_like(flat_in)
            work = self._a2a_even(call, flat_out, flat_in, outs)
            work._add_finish(lambda: self._unflatten(flat_out, outs))
            return work
        return self._a2a_uneven(call, outs, ins, None, None)

    def _a2a_uneven(self, call, outs, ins, out_splits, in_splits):
        """Uneven all_to_all: a byte block to and from each peer by zc_send/zc_recv (posted
        together, peers in a ring order so no pair waits on another), the own block copied."""
        if self._device(outs + ins, call) == 'cuda':
            raise RuntimeError('zcoll: %s of CUDA tensors is not wired yet' % call)
        send_blocks = self._blocks(ins, in_splits, call, 'input')
        recv_bufs, recv_blocks = [], []
        for dst in self._blocks(outs, out_splits, call, 'output'):
            buf = dst if dst.is_contiguous() else torch.empty_like(
                dst, memory_format=torch.contiguous_format)
            recv_bufs.append((dst, buf))
            recv_blocks.append(buf)
        me, n = self._rank, self._size
        send_blocks = [s.contiguous() for s in send_blocks]
        if send_blocks[me].numel() != recv_blocks[me].numel():
            raise RuntimeError('zcoll: %s: this rank sends itself %d elements but expects %d'
                               % (call, send_blocks[me].numel(), recv_blocks[me].numel()))
        recv_blocks[me].copy_(send_blocks[me].view_as(recv_blocks[me]))
        reqs = []
        for k in range(1, n):
            to, frm = (me + k) % n, (me - k) % n
            s, r = send_blocks[to], recv_blocks[frm]
            reqs.append(self._start(call, lib.zc_send, s.data_ptr(),
                                    s.numel() * s.element_size(), _lib.ZC_UINT8, to))
            reqs.append(self._start(call, lib.zc_recv, r.data_ptr(),
                                    r.numel() * r.element_size(), _lib.ZC_UINT8, frm))

        def finish():
            for dst, buf in recv_bufs:
                if buf is not dst:
                    dst.copy_(buf)
        return self._work(call, reqs, [send_blocks, recv_bufs], finish, outs)

    def _blocks(self, tensors, splits, call, what):
        """Per-peer blocks: the list itself, or one tensor cut along dim 0 by splits (even when
        splits is empty)."""
        n = self._size
        if splits is None:
            return list(tensors)
        t = tensors[0]
        rows = t.shape[0] if t.dim() > 0 else t.numel()
        if not splits:
            if rows % n:
                raise RuntimeError('zcoll: %s: %s of %d rows does not split evenly over %d ranks'
                                   % (call, what, rows, n))
            splits = [rows // n] * n
        if len(splits) != n or sum(splits) != rows or min(splits) < 0:
            raise RuntimeError('zcoll: %s: %s split sizes %s do not cut %d rows into %d blocks'
                               % (call, what, list(splits), rows, n))
        flat = t.reshape(rows, -1) if t.dim() > 0 else t.reshape(-1, 1)
        return list(torch.split(flat, list(splits), dim=0))

    # -- point to point -----------------------------------------------------------------------
    def send(self, tensors, dstRank, tag=0):
        self._check()
        t = self._one(tensors, 'send')
        self._peer(dstRank, 'send')
        tag = self._tag(tag, 'send')
        host = t.contiguous() if t.device.type == 'cpu' else t.detach().to('cpu')
        n, dt = moved(host)
        req = self._start('send', lib.zc_send_tagged, host.data_ptr(), n, dt, dstRank, tag)
        return self._work('send', [req], [t, host], None, tensors)

    def recv(self, tensors, srcRank, tag=0):
        self._check()
        self._peer(srcRank, 'recv')
        work = self._recv(tensors, srcRank, tag, 'recv', None)
        work._source = srcRank
        return work

    def recv_anysource(self, tensors, tag=0):
        """A receive of the first message that arrives from any rank (zcoll's ZC_ANY_SOURCE:
        the lowest rank when several are there; call order kept with the other receives); the
        Work's source_rank() names the sender."""
        self._check()
        box = ctypes.c_uint32(_lib.ZC_ANY_SOURCE)
        work = self._recv(tensors, _lib.ZC_ANY_SOURCE, tag, 'recv from any source', box)
        work._source_box = box
        return work

    def _recv(self, tensors, peer, tag, call, box):
        t = self._one(tensors, call)
        tag = self._tag(tag, call)
        buf = t if t.is_contiguous() and t.device.type == 'cpu' else torch.empty(
            t.shape, dtype=t.dtype)
        n, dt = moved(buf)
        req = self._start(call, lib.zc_recv_tagged, buf.data_ptr(), n, dt, peer, tag,
                          _byref(box) if box is not None else None)
        finish = None if buf is t else (lambda: t.copy_(buf))
        return self._work('recv', [req], [t, buf, box], finish, tensors)

    @staticmethod
    def _tag(tag, call):
        """zcoll checks tags: a receive takes its peer's next message in call order, and a tag
        that differs from that message's is a ZC_MISMATCH naming both (never a reordering)."""
        if not 0 <= tag <= 0xffffffff:
            raise RuntimeError('zcoll: %s with tag %d: zcoll tags are 0 to 2^32-1' % (call, tag))
        return tag

    def _peer(self, peer, call):
        if not 0 <= peer < self._size or peer == self._rank:
            raise RuntimeError('zcoll: %s peer %d is not another rank of this group (rank %d '
                               'of %d)' % (call, peer, self._rank, self._size))

    def barrier(self, opts=None):
        self._check()
        req = self._start('barrier', lib.zc_barrier)
        return self._work('barrier', [req], None)

    # -- helpers ------------------------------------------------------------------------------
    def _same_shape(self, tensors, t, call):
        if len(tensors) != self._size:
            raise RuntimeError('zcoll: %s needs a list of %d tensors (the group size), got %d'
                               % (call, self._size, len(tensors)))
        for x in tensors:
            if x.numel() != t.numel() or x.dtype != t.dtype:
                raise RuntimeError('zcoll: %s needs list tensors of %d elements of %s like the '
                                   'tensor, got %d of %s' % (call, t.numel(), t.dtype,
                                                             x.numel(), x.dtype))

    @staticmethod
    def _unflatten(flat, outs):
        n = flat.numel() // len(outs)
        for i, o in enumerate(outs):
            o.copy_(flat[i * n:(i + 1) * n].view(o.shape))
