"""_work: the dist.Work that a zcoll process group returns for every call.

A Work holds the zcoll requests of one torch call, the tensors they read and write (alive
until the requests finish) and a finisher (copies out of a flat buffer into a list, back into a
non-contiguous tensor). Whoever holds the Work's lock may move its requests: wait() takes it and
drives zcoll (zc_wait) until the requests finish; the process's progress thread (_progress.py,
unless turned off) takes it without waiting and completes the Work as soon as its requests
finished, which also completes the future get_future() returned. Without the thread the
requests move only inside wait(), is_completed() and get_future(), which then waits at once (C++
callers such as DDP's reducer wait on the future, never on the Work).
"""

import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from . import _lib

_wait, _test, _progress = _lib.lib.zc_wait, _lib.lib.zc_test, _lib.lib.zc_progress
_monotonic = time.monotonic


def timeout_seconds(timeout):
    """Work.wait's timeout as seconds; None for none (torch passes timedelta(0) for none)."""
    if timeout is None:
        return None
    s = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    return s if s > 0 else None


class ZcollWork(dist.Work):
    """One call's requests; done once every request finished and the finisher ran."""

    def __init__(self, group, name, reqs, keep, finish=None, result=None, cuda_event=None):
        super().__init__()
        self._group = group
        self._lock = threading.Lock()
        self._reset(name, reqs, keep, finish, result, cuda_event)

    def _reset(self, name, reqs, keep, finish=None, result=None, cuda_event=None):
        """(Re)fills the Work for a new call: a group without the progress thread reuses a
        finished Work nobody else references any more (constructing the pybind base costs about
        1 us a call)."""
        self.name = name
        self._reqs = reqs            # [_lib.Req], each finished once zc_test/zc_wait said so
        self._open = len(reqs)       # requests not finished yet
        self._keep = keep            # tensors and buffers the requests use
        self._finish = finish        # run once after the last request finished
        self._result = result if result is not None else []
        self._cuda_event = cuda_event  # stream-ordered call: done when the stream passed it
        self._parts = None           # a coalesced Work: the Works it stands for
        self._error = None
        self._done = False
        self._future = None          # get_future()'s, while the Work is not done
        self._source = -1
        self._source_box = None      # a receive from any source: the ctypes word zcoll fills
        self._born = _monotonic()    # when the call started (the progress thread's grace)

    # -- moving the requests (the caller holds self._lock) ------------------------------------
    def _step(self, blocking, progressed=False):
        """Moves the requests forward (blocking: until finished); True once done or failed.
        progressed: zc_progress was just called for this communicator."""
        if self._done:
            return True
        g = self._group
        try:
            if not blocking and not progressed:   # zc_test only reads a request
                st = _progress(g.comm)
                if st != _lib.ZC_OK:
                    g._fail(self.name, st)
            while self._open:
                req = self._reqs[len(self._reqs) - self._open]
                st = _wait(g.comm, req) if blocking else _test(g.comm, req)
                if st == _lib.ZC_IN_PROGRESS:
                    return False
                self._open -= 1
                if st != _lib.ZC_OK:
                    g._fail(self.name, st)
            if self._cuda_event is not None and not self._drive_stream(blocking):
                return False
            if self._parts is not None and not self._step_parts(blocking):
                return False
        except RuntimeError as e:
            self._error = self._error or str(e)
        self._finished()
        return True

    def _step_parts(self, blocking):
        for w in self._parts:
            if blocking:
                w.wait()
            elif not w._lock.acquire(False):
                return False
            else:
                try:
                    if not w._step(False, progressed=True):
                        return False
                finally:
                    w._lock.release()
            if w._error is not None:
                raise RuntimeError(w._error)
        return True

    def _drive_stream(self, blocking):
        """Stream-ordered call: progress zcoll until the stream got past the collective."""
        g = self._group
        while not self._cuda_event.query():
            st = _progress(g.comm)
            if st != _lib.ZC_OK:
                g._fail(self.name, st)
            if not blocking:
                return False
        return True

    def _finished(self):
        """Done (or failed): the finisher, the group's bookkeeping, then _done, then the future.
        _done is set last: wait() and is_completed() read it without the lock, so a Work they
        see done has its results in place (the finisher copies them out)."""
        if self._done:
            return
        if self._error is None and self._finish is not None:
            try:
                self._finish()
            except RuntimeError as e:
                self._error = 'zcoll %s: copying the result out failed: %s' % (self.name, e)
            self._finish = None
        self._keep = None
        self._group._retire(self)
        self._done = True
        fut, self._future = self._future, None
        if fut is not None:
            if self._error is None:
                fut.set_result(self._result)
            else:
                fut.set_exception(RuntimeError(self._error))

    def _add_finish(self, fn):
        """Runs fn once the call finished (now, if it already did), after the finisher."""
        with self._lock:
            if self._done:
                if self._error is None:
                    fn()
                return
            prev = self._finish
            self._finish = fn if prev is None else (lambda: (prev(), fn()))

    def _abandon(self, error):
        """The group failed: this Work failed with it (its requests are not touched)."""
        if self._error is None:
            self._error = error
        fut, self._future = self._future, None
        if fut is not None and not self._done:
            fut.set_exception(RuntimeError(self._error))

    def _raise_if_failed(self):
        if self._error is not None:
            raise RuntimeError(self._error)

    # -- dist.Work ----------------------------------------------------------------------------
    def wait(self, timeout=None):
        """Waits until the call finished; raises its failure. timeout (timedelta or seconds;
        torch's timedelta(0) means none): a RuntimeError saying "Timed out" once it passed, the
        call still in flight (wait again; the group's own deadline still ends it)."""
        if not self._done:
            limit = timeout_seconds(timeout)
            if limit is None:
                with self._lock:
                    self._step(True)
            else:
                self._wait_until(time.monotonic() + limit, limit)
        self._raise_if_failed()
        return True

    def _wait_until(self, end, limit):
        if not self._lock.acquire(timeout=limit):
            self._timed_out(limit)
        try:
            while not self._step(False):
                if time.monotonic() >= end:
                    self._timed_out(limit)
        finally:
            self._lock.release()
        self._group._kick()

    def _timed_out(self, limit):
        g = self._group
        raise RuntimeError('zcoll %s on rank %d of %d: Timed out after %d ms in Work.wait '
                           '(the call is still in flight: wait again, or the group\'s deadline '
                           'of %d ms ends it)' % (self.name, g._rank, g._size, limit * 1000,
                                                  g._timeout_ms))

    def is_completed(self):
        if self._done:
            return True
        if not self._lock.acquire(False):
            return False
        try:
            return self._step(False)
        finally:
            self._lock.release()

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return RuntimeError(self._error) if self._error is not None else None

    def source_rank(self):
        """The peer a receive took its message from (-1 for other calls)."""
        box = self._source_box
        return self._source if box is None else int(box.value)

    def _source_rank(self):
        return self.source_rank()

    def result(self):
        return self._result

    def get_future(self):
        """A future of the result: completed by the progress thread when the call finishes;
        without the thread (or when the call already finished) the Work is completed first."""
        fut = torch.futures.Future()
        if self._group._driver is not None:
            with self._lock:
                if not self._done:
                    if self._future is not None:
                        return self._future
                    self._future = fut
                    return fut
        self.wait()
        fut.set_result(self._result)
        return fut

    def synchronize(self):
        self.wait()
