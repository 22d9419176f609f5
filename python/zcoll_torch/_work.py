"""_work: the dist.Work that a zcoll process group returns for every call.

A Work holds the zcoll requests of one torch call, the tensors they read and write (alive
until the requests finish) and a finisher (copies out of a flat buffer into a list, back into a
non-contiguous tensor). wait() drives zcoll's progress engine (zc_wait) until its requests
finish; zcoll starts no thread, so a request moves only while some call of its group waits,
tests or progresses. get_future() completes the Work first and returns a finished future: C++
callers (DDP's reducer) wait on that future, never on the Work, and nothing else would drive
the progress for them.
"""

import torch
import torch.distributed as dist

from . import _lib


class ZcollWork(dist.Work):
    """One call's requests; done once every request finished and the finisher ran."""

    def __init__(self, group, name, reqs, keep, finish=None, result=None, cuda_event=None):
        super().__init__()
        self._group = group
        self._reset(name, reqs, keep, finish, result, cuda_event)

    def _reset(self, name, reqs, keep, finish=None, result=None, cuda_event=None):
        """(Re)fills the Work for a new call: the group reuses a finished Work nobody else
        references any more (constructing the pybind base costs about 1 us a call)."""
        self.name = name
        self._reqs = reqs            # [_lib.Req], each finished once zc_test/zc_wait said so
        self._open = len(reqs)       # requests not finished yet
        self._keep = keep            # tensors and buffers the requests use
        self._finish = finish        # run once after the last request finished
        self._result = result if result is not None else []
        self._cuda_event = cuda_event  # stream-ordered call: done when the stream passed it
        self._error = None
        self._done = False
        self._source = -1

    # -- driven by the group ------------------------------------------------------------------
    def _complete(self, blocking):
        """Moves the requests forward (blocking: until finished); True once done or failed."""
        if self._done:
            return True
        g = self._group
        if not blocking:   # zc_test only reads a request: move them all first
            st = _lib.lib.zc_progress(g.comm)
            if st != _lib.ZC_OK:
                g._fail(self.name, st)
        while self._open:
            req = self._reqs[len(self._reqs) - self._open]
            st = _lib.lib.zc_wait(g.comm, req) if blocking else _lib.lib.zc_test(g.comm, req)
            if st == _lib.ZC_IN_PROGRESS:
                return False
            self._open -= 1
            if st != _lib.ZC_OK:
                g._fail(self.name, st)
        if self._cuda_event is not None and not self._drive_stream(blocking):
            return False
        self._done = True
        g._retire(self)
        if self._finish is not None:
            self._finish()
        self._keep = None
        return True

    def _drive_stream(self, blocking):
        """Stream-ordered call: progress zcoll until the stream got past the collective."""
        g = self._group
        while not self._cuda_event.query():
            st = _lib.lib.zc_progress(g.comm)
            if st != _lib.ZC_OK:
                g._fail(self.name, st)
            if not blocking:
                return False
        return True

    def _raise_if_failed(self):
        if self._error is not None:
            raise RuntimeError(self._error)

    # -- dist.Work ----------------------------------------------------------------------------
    def wait(self, timeout=None):
        if self._done:
            return True
        self._raise_if_failed()
        try:
            self._complete(True)
        except RuntimeError as e:
            self._error = str(e)
            raise
        return True

    def is_completed(self):
        if self._error is not None:
            return True
        try:
            return self._complete(False)
        except RuntimeError as e:
            self._error = str(e)
            return True

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return RuntimeError(self._error) if self._error is not None else None

    def source_rank(self):
        return self._source

    def result(self):
        return self._result

    def get_future(self):
        """A finished future holding the result (the Work is completed first; see above)."""
        fut = torch.futures.Future()
        self.wait()
        fut.set_result(self._result)
        return fut

    def synchronize(self):
        self.wait()
