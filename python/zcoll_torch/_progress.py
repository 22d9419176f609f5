"""_progress: the one progress thread of this process, which moves every zcoll group's requests
while the program computes, so that an async call (DDP's gradient buckets above all) overlaps
with what runs after it.

libzcoll starts no thread: a request moves only while some call of its communicator waits,
tests or progresses. This package therefore owns one thread per process (started with the first
group, never before) that loops over the Works in flight in every group, calls zc_progress on
their communicators and zc_test on their requests, and completes each Work (its finisher, its
future, its waiters) as soon as its requests finished. With nothing in flight it sleeps on a
condition until the next call; after SPIN_SWEEPS sweeps that finished nothing it sleeps
IDLE_SLEEP_S between sweeps (before that it yields the CPU after each). Communicators are then
made ZC_THREADS_MULTI (zcoll serializes the thread's calls with the caller's by its own lock).

Who touches a Work's requests: whoever holds its lock (ZcollWork._lock). The thread takes it
without waiting and skips a Work someone else holds; a caller's wait() takes it and drives the
requests itself (zc_wait, the GIL released), so a program that waits at once keeps the
single-threaded path's latency. A Work's future is completed by whoever finishes the Work.

ZCOLL_TORCH_PROGRESS_THREAD=0 in the environment (read when each group is made) turns the
thread off for the groups made then: Works then move only inside wait(), is_completed() and get_future() (which waits),
as libzcoll's own calls do.
"""

import atexit
import os
import threading
import time

from . import _lib

_lib_progress = _lib.lib.zc_progress
# Sweeps in a row that finished nothing before the thread sleeps between sweeps (it yields the
# CPU after each before that), and how long it sleeps: a transfer whose peer is still computing
# then costs the computing threads little.
SPIN_SWEEPS = 64
IDLE_SLEEP_S = 50e-6
# How long the thread sleeps when every Work in flight has a waiter (a kick wakes it sooner).
HELD_WAIT_S = 0.002
# The thread leaves a Work alone this long after its call started: a program that waits at
# once drives its own call (zc_wait) without the thread taking the Work's lock or the
# communicator's in between.
GRACE_S = 100e-6


def enabled():
    """Whether groups made now get the progress thread (ZCOLL_TORCH_PROGRESS_THREAD, default
    on)."""
    return os.environ.get('ZCOLL_TORCH_PROGRESS_THREAD', '1').strip().lower() not in (
        '0', 'no', 'off', 'false')


class Driver:
    """The thread and the groups it serves. One per process (a forked child makes its own)."""

    def __init__(self):
        self.pid = os.getpid()
        self.cv = threading.Condition()
        self.groups = []            # live ProcessGroupZcoll objects with this driver
        self.idle = False           # the thread sleeps on cv: kick() must notify
        self.stop = False
        self.thread = None

    def add(self, group):
        with self.cv:
            self.groups.append(group)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name='zcoll-progress',
                                               daemon=True)
                self.thread.start()

    def remove(self, group):
        """Called by the group's close (the thread no longer touches its communicator once this
        returns: close also takes the communicator's use lock)."""
        with self.cv:
            if group in self.groups:
                self.groups.remove(group)

    def kick(self):
        """A Work was started: wake the thread if it sleeps."""
        if self.idle:
            with self.cv:
                self.cv.notify()

    def shutdown(self):
        with self.cv:
            self.stop = True
            self.cv.notify()
        t = self.thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5.0)

    # -- the thread ---------------------------------------------------------------------------
    def _run(self):
        idle = 0
        while True:
            with self.cv:
                while not self.stop and not any(g._inflight for g in self.groups):
                    self.idle = True
                    self.cv.wait()
                self.idle = False
                if self.stop:
                    return
                groups = list(self.groups)
            moved, claimed = False, False
            for g in groups:
                got = self._sweep(g)
                moved |= got is True
                claimed |= got is not None
            idle = 0 if moved else idle + 1
            if not claimed:   # every Work in flight has a waiter driving it: stay out of its way
                with self.cv:
                    self.idle = True
                    self.cv.wait(GRACE_S if any(
                        w._born > time.monotonic() - GRACE_S for g in groups
                        for w in list(g._inflight.values())) else HELD_WAIT_S)
                    self.idle = False
            elif idle >= SPIN_SWEEPS:
                time.sleep(IDLE_SLEEP_S)
            elif idle:
                os.sched_yield()   # lets the computing threads (and the peer rank) run

    @staticmethod
    def _sweep(g):
        """One zc_progress of g's communicator and one test of each Work nobody else holds;
        True when a Work finished, None when every Work in flight is held (a caller's wait()
        drives it: the thread neither progresses nor competes for the communicator's lock) or
        younger than GRACE_S."""
        young = time.monotonic() - GRACE_S
        mine = [w for w in list(g._inflight.values())
                if w._born <= young and w._lock.acquire(False)]
        if not mine:
            return None
        done = False
        try:
            with g._owner.use:
                if not g._owner.comm:
                    return False
                st = _lib_progress(g.comm)
                if st != _lib.ZC_OK:
                    g._fail_quietly(st)
                    return True
                for w in mine:
                    done |= w._step(False, progressed=True)
        finally:
            for w in mine:
                w._lock.release()
        return done


_driver = None


def driver():
    """This process's driver (a new one after a fork: threads do not survive it)."""
    global _driver
    if _driver is None or _driver.pid != os.getpid():
        _driver = Driver()
        atexit.register(_driver.shutdown)
    return _driver
