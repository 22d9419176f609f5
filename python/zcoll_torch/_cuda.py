"""_cuda: CUDA tensors through zcoll's stream-ordered forms (zc_<collective>_stream).

zcoll takes the device the process already uses when the group is made (its CUDA context): a
program calls torch.cuda.set_device (or makes a CUDA tensor) before init_process_group, as the
first CUDA call of a group says when it did not.

PyTorch's caching allocator hands out memory zcoll has not registered (and that may move
between calls), so each group registers two staging buffers once (ZC_MEM_CUDA, collectively: the
first CUDA call is at the same place in every rank's call order) of
$ZCOLL_TORCH_CUDA_STAGING_BYTES bytes each (default 64 MiB). A call copies its input into the
send staging on torch.cuda.current_stream(), enqueues the zcoll collective on that stream,
copies the result out of the receive staging, and records an event; the Work's wait() drives
zc_progress until the stream passed the event (zcoll has no thread of its own).
"""

import ctypes
import os

import torch

from . import _lib

DEFAULT_BYTES = 64 << 20


class Staging:
    def __init__(self, group):
        if _lib.STREAM['allreduce'] is None:
            raise RuntimeError('zcoll: CUDA tensors need a CUDA build of libzcoll (%s has no '
                               'zc_allreduce_stream)' % _lib.lib._name)
        self.group = group
        self.bytes = int(os.environ.get('ZCOLL_TORCH_CUDA_STAGING_BYTES', DEFAULT_BYTES))
        self.send = torch.empty(self.bytes, dtype=torch.uint8, device='cuda')
        self.recv = torch.empty(self.bytes, dtype=torch.uint8, device='cuda')
        torch.cuda.synchronize()
        self.mems = [self._register(self.send), self._register(self.recv)]

    def _register(self, buf):
        mem = ctypes.c_void_p()
        st = _lib.lib.zc_mem_register(self.group.comm, buf.data_ptr(), self.bytes,
                                      _lib.ZC_MEM_CUDA, ctypes.byref(mem))
        if st == _lib.ZC_UNSUPPORTED:
            try:
                self.group._fail('zc_mem_register (CUDA staging)', st)
            except RuntimeError as e:
                raise RuntimeError('%s. With torch: call torch.cuda.set_device(local_rank) (or '
                                   'make a CUDA tensor) before init_process_group, so that the '
                                   'group is made on that device' % e) from None
        if st != _lib.ZC_OK:
            self.group._fail('zc_mem_register (CUDA staging)', st)
        return mem

    def _fits(self, call, nbytes):
        if nbytes > self.bytes:
            raise RuntimeError('zcoll: %s of %d bytes exceeds the CUDA staging buffer (%d bytes; '
                               'set ZCOLL_TORCH_CUDA_STAGING_BYTES)' % (call, nbytes, self.bytes))

    def _enqueue(self, call, coll, args, out_views, result, keep):
        stream = torch.cuda.current_stream()
        fn = _lib.STREAM[coll]
        st = fn(self.group.comm, self.send.data_ptr(), self.recv.data_ptr(), *args,
                ctypes.c_void_p(stream.cuda_stream))
        if st != _lib.ZC_OK:
            self.group._fail(call, st)
        for dst, nbytes in out_views:
            dst.copy_(self.recv[:nbytes])
        event = torch.cuda.Event()
        event.record(stream)
        return self.group._work(call, [], keep, None, result, event)

    def inplace(self, call, coll, t, args, result):
        """broadcast / reduce / all_reduce of t in place; args after (send, recv)."""
        buf = t.contiguous()
        raw = buf.view(-1).view(torch.uint8)
        self._fits(call, raw.numel())
        self.send[:raw.numel()].copy_(raw)
        work = self._enqueue(call, coll, args[2:], [(raw, raw.numel())], result, [t, buf])
        if buf is not t:
            t.copy_(buf)
        return work

    def run(self, call, coll, src, out, args, result):
        """all_gather / reduce_scatter from src into out (both contiguous)."""
        s, o = src.reshape(-1).view(torch.uint8), out.reshape(-1).view(torch.uint8)
        self._fits(call, max(s.numel(), o.numel()))
        self.send[:s.numel()].copy_(s)
        return self._enqueue(call, coll, args, [(o, o.numel())], result, [src, out])
