"""_coalesced: the calls over many tensors at once (coalesced forms) and sparse all_reduce, as a
mixin of ProcessGroupZcoll.

Each coalesced call packs its tensors into one flat buffer, runs ONE zcoll collective over it
and unpacks once it finished: all_reduce_coalesced (torch 1.13 and 2.x), all_gather_coalesced
(1.13; output_lists[r][i] gets rank r's input i), allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced (2.x's
_coalescing_manager). Collectives that move bytes unchanged pack the tensors' bytes, so the
tensors may differ in type and shape (every rank passing the same list); reductions need one
dtype. Sparse all_reduce (SUM) gathers every rank's indices and values and coalesces their
union, as gloo does.
"""

import torch
import torch.distributed as dist

from . import _lib

lib = _lib.lib


def as_bytes(t):
    """The bytes of tensor t as a flat uint8 tensor (a view when t is contiguous)."""
    c = t if t.is_contiguous() else t.contiguous()
    return c.reshape(-1).view(torch.uint8) if c.numel() else torch.empty(0, dtype=torch.uint8)


def bytes_into(dst, src):
    """Copies the uint8 tensor src into the bytes of tensor dst."""
    if dst.numel() == 0:
        return
    if dst.is_contiguous():
        dst.reshape(-1).view(torch.uint8).copy_(src)
        return
    tmp = torch.empty(dst.shape, dtype=dst.dtype)
    tmp.reshape(-1).view(torch.uint8).copy_(src)
    dst.copy_(tmp)


class Coalesced:
    """Methods of ProcessGroupZcoll (self: the group)."""

    def _cpu_only(self, tensors, call):
        if self._device(tensors, call) != 'cpu':
            raise RuntimeError('zcoll: %s takes CPU tensors (CUDA tensors are not wired for it '
                               'yet)' % call)

    def _one_dtype(self, tensors, call):
        kinds = {t.dtype for t in tensors}
        if len(kinds) != 1:
            raise RuntimeError('zcoll: %s reduces tensors of one dtype, got %s'
                               % (call, sorted(str(k) for k in kinds)))

    # -- all_reduce ---------------------------------------------------------------------------
    def allreduce_coalesced(self, tensors, opts=None):
        """One zc_allreduce over the tensors packed end to end."""
        from ._group import zc_dtype, zc_op
        self._check()
        call = 'all_reduce_coalesced'
        if not tensors:
            return self._work(call, [], None, None, tensors)
        self._one_dtype(tensors, call)
        self._cpu_only(tensors, call)
        dt = zc_dtype(tensors[0], call)
        op = zc_op(opts.reduceOp) if opts is not None else _lib.ZC_SUM
        flat = torch.cat([t.reshape(-1) for t in tensors])
        req = self._start(call, lib.zc_allreduce, flat.data_ptr(), flat.data_ptr(),
                          flat.numel(), dt, op)

        def finish():
            at = 0
            for t in tensors:
                t.copy_(flat[at:at + t.numel()].view(t.shape))
                at += t.numel()
        return self._work(call, [req], [flat], finish, tensors)

    # -- all_gather ---------------------------------------------------------------------------
    def _gather_bytes(self, call, inputs, place):
        """One zc_allgather of the inputs' bytes packed end to end; once done, place(rank,
        input index, that rank's bytes of the input) for every rank and input."""
        self._cpu_only(list(inputs), call)
        parts = [as_bytes(t) for t in inputs]
        sizes = [p.numel() for p in parts]
        flat_in = torch.cat(parts) if parts else torch.empty(0, dtype=torch.uint8)
        per = flat_in.numel()
        flat_out = torch.empty(per * self._size, dtype=torch.uint8)
        req = self._start(call, lib.zc_allgather, flat_in.data_ptr(), flat_out.data_ptr(), per,
                          _lib.ZC_UINT8)

        def finish():
            for r in range(self._size):
                at = r * per
                for i, n in enumerate(sizes):
                    place(r, i, flat_out[at:at + n])
                    at += n
        return req, [flat_in, flat_out], finish

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """output_lists[r][i] gets rank r's input_list[i]: one zc_allgather of all inputs."""
        self._check()
        call = 'all_gather_coalesced'
        if len(output_lists) != self._size:
            raise RuntimeError('zcoll: %s needs one output list per rank (%d), got %d'
                               % (call, self._size, len(output_lists)))
        for outs in output_lists:
            if len(outs) != len(input_list) or any(
                    o.numel() != t.numel() or o.dtype != t.dtype
                    for o, t in zip(outs, input_list)):
                raise RuntimeError('zcoll: %s needs each rank\'s output list to match the '
                                   'input list tensor for tensor (count and dtype)' % call)
        req, keep, finish = self._gather_bytes(
            call, input_list, lambda r, i, b: bytes_into(output_lists[r][i], b))
        return self._work(call, [req], keep, finish, output_lists)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        """torch 2.x: outputs[i] (world size x inputs[i]) gets every rank's inputs[i] in rank
        order; one zc_allgather of all inputs."""
        self._check()
        call = 'allgather_into_tensor_coalesced'
        if len(outputs) != len(inputs):
            raise RuntimeError('zcoll: %s needs as many outputs as inputs, got %d and %d'
                               % (call, len(outputs), len(inputs)))
        for o, t in zip(outputs, inputs):
            if o.numel() != self._size * t.numel() or o.dtype != t.dtype:
                raise RuntimeError('zcoll: %s needs each output of world size x input elements '
                                   '(%d x %d) of the input dtype, got %d of %s'
                                   % (call, self._size, t.numel(), o.numel(), o.dtype))
        staged = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype)
                  for o in outputs]
        views = [as_bytes(s) for s in staged]
        nbytes = [as_bytes(t).numel() for t in inputs]

        def place(r, i, b):
            views[i][r * nbytes[i]:(r + 1) * nbytes[i]].copy_(b)
        req, keep, finish = self._gather_bytes(call, inputs, place)

        def done():
            finish()
            for o, s in zip(outputs, staged):
                if s is not o:
                    o.copy_(s)
        return self._work(call, [req], keep + [staged], done, outputs)

    # -- reduce_scatter -----------------------------------------------------------------------
    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        """torch 2.x: outputs[i] gets block `rank` of the reduction of inputs[i]; the inputs are
        packed rank block by rank block, so one zc_reduce_scatter does them all."""
        from ._group import zc_dtype, zc_op
        self._check()
        call = 'reduce_scatter_tensor_coalesced'
        if len(outputs) != len(inputs) or not outputs:
            raise RuntimeError('zcoll: %s needs as many outputs as inputs (at least one), got '
                               '%d and %d' % (call, len(outputs), len(inputs)))
        self._one_dtype(outputs + inputs, call)
        self._cpu_only(outputs + inputs, call)
        for o, t in zip(outputs, inputs):
            if t.numel() != self._size * o.numel():
                raise RuntimeError('zcoll: %s needs each input of world size x output elements '
                                   '(%d x %d), got %d' % (call, self._size, o.numel(), t.numel()))
        dt = zc_dtype(outputs[0], call)
        op = zc_op(opts.reduceOp) if opts is not None else _lib.ZC_SUM
        flats = [t.reshape(-1) for t in inputs]
        ns = [o.numel() for o in outputs]
        flat_in = torch.cat([f[r * n:(r + 1) * n] for r in range(self._size)
                             for f, n in zip(flats, ns)])
        flat_out = torch.empty(sum(ns), dtype=outputs[0].dtype)
        req = self._start(call, lib.zc_reduce_scatter, flat_in.data_ptr(), flat_out.data_ptr(),
                          flat_out.numel(), dt, op)

        def finish():
            at = 0
            for o, n in zip(outputs, ns):
                o.copy_(flat_out[at:at + n].view(o.shape))
                at += n
        return self._work(call, [req], [flat_in, flat_out], finish, outputs)

    # -- torch 2.x's old-style coalescing -----------------------------------------------------
    def _start_coalescing(self, device=None):
        """torch 2.x (_coalescing_manager with a device): the calls until _end_coalescing run as
        they come (each is already asynchronous); _end_coalescing returns one Work for them.
        torch 1.13 (batch_isend_irecv) calls it without a device and collects the Works
        itself."""
        self._coalescing = []

    def _end_coalescing(self, arg=None):
        works, self._coalescing = self._coalescing or [], None
        if isinstance(arg, list):    # torch 1.13: the caller keeps the list of Works
            return None
        w = self._work('coalesced', [], None, None, [])
        w._parts = works
        return w

    # -- sparse -------------------------------------------------------------------------------
    def _sparse_allreduce(self, t, opts):
        """SUM of a sparse COO tensor over the group, as gloo does: every rank's nnz, then its
        indices and values (padded to the largest nnz) gathered, the union coalesced and copied
        into t. Runs to the end before returning (three gathers in a row)."""
        call = 'all_reduce (sparse)'
        if opts is not None and opts.reduceOp != dist.ReduceOp.SUM:
            raise RuntimeError('zcoll: %s reduces with SUM only (as gloo), got %s'
                               % (call, getattr(opts.reduceOp, 'op', opts.reduceOp)))
        if t.layout != torch.sparse_coo:
            raise RuntimeError('zcoll: %s takes sparse COO tensors, got layout %s'
                               % (call, t.layout))
        self._cpu_only([t], call)
        src = t.coalesce()
        idx, val = src.indices().contiguous(), src.values().contiguous()
        nnz = torch.tensor([idx.shape[1]], dtype=torch.int64)
        counts = self._gather_now(call, nnz).view(-1)
        top = int(counts.max())
        pad_i = torch.zeros(idx.shape[0], top, dtype=idx.dtype)
        pad_i[:, :idx.shape[1]] = idx
        pad_v = torch.zeros((top,) + tuple(val.shape[1:]), dtype=val.dtype)
        pad_v[:val.shape[0]] = val
        all_i = self._gather_now(call, pad_i).view(self._size, idx.shape[0], top)
        all_v = self._gather_now(call, pad_v).view((self._size, top) + tuple(val.shape[1:]))
        keep_i = torch.cat([all_i[r, :, :int(counts[r])] for r in range(self._size)], dim=1)
        keep_v = torch.cat([all_v[r, :int(counts[r])] for r in range(self._size)])
        out = torch.sparse_coo_tensor(keep_i, keep_v, t.shape).coalesce()
        t.copy_(out)
        return self._work(call, [], None, None, [t])

    def _gather_now(self, call, t):
        """zc_allgather of t's bytes, waited here; a flat tensor of t's dtype, rank by rank."""
        from ._group import moved
        out = torch.empty((self._size,) + tuple(t.shape), dtype=t.dtype)
        n, dt = moved(t)
        work = self._work(call, [self._start(call, lib.zc_allgather, t.data_ptr(),
                                             out.data_ptr(), n, dt)], [t, out])
        work.wait()
        return out
