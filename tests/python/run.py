#!/usr/bin/env python3
"""tests/python/run.py [NAME_PREFIX]: the zcoll_torch suite (backend "zcoll" of torch.distributed).

Jobs of real processes (fork): each rank inits the process group over env:// and runs its job's
cases in turn, reporting each case per rank; a case passes when every rank passed it. Failure
jobs (mismatch, deadline, dead peer) get their own processes, as they end their group. The
seed programs of examples/ run as they are and their printed lines are compared with the
tutorials'. Prints one line per case and a final `N passed, N failed, N skipped`; without torch
everything is one skipped test.
"""

import os
import subprocess
import sys
import tempfile
import time
import traceback

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
sys.path.insert(0, os.path.join(TOP, 'python'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch  # noqa: F401  (is torch there?)
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print('torch not importable by %s: zcoll_torch suite skipped' % sys.executable)
    print('0 passed, 0 failed, 1 skipped')
    sys.exit(0)

import zcoll_torch  # noqa: E402,F401
import cases  # noqa: E402

_port = [29600 + (os.getpid() * 7) % 2000]


def next_port():
    _port[0] += 2
    return _port[0]


def rank_main(rank, size, port, names, timeout_s, queue, env):
    os.environ.update(env)
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = str(port)
    from datetime import timedelta
    try:
        dist.init_process_group('zcoll', rank=rank, world_size=size,
                                timeout=timedelta(seconds=timeout_s))
    except Exception:
        for n in names:
            queue.put((n, rank, False, 'init: ' + traceback.format_exc()))
        queue.close()
        queue.join_thread()
        return
    for n in names:
        def die(n=n):   # a case that plays a dead rank: passes, then ends its process
            queue.put((n, rank, True, ''))
            queue.close()
            queue.join_thread()
            os._exit(0)
        cases.die = die
        try:
            getattr(cases, n)(rank, size)
            queue.put((n, rank, True, ''))
        except Exception:
            queue.put((n, rank, False, traceback.format_exc()))
    queue.close()
    queue.join_thread()   # the reports are written before the process ends
    os._exit(0)


def run_job(size, names, timeout_s=20, wall_s=120, env=None):
    """{case: [(ok, msg) per rank]}; a rank that reported nothing for a case failed it."""
    ctx = mp.get_context('fork')
    q = ctx.Queue()
    port = next_port()
    procs = [ctx.Process(target=rank_main, args=(r, size, port, names, timeout_s, q, env or {}))
             for r in range(size)]
    for p in procs:
        p.start()
    got = {n: {} for n in names}
    deadline = time.time() + wall_s
    want = size * len(names)
    count = 0
    while count < want and time.time() < deadline:
        try:
            n, r, ok, msg = q.get(timeout=0.5)
        except Exception:
            if all(not p.is_alive() for p in procs) and q.empty():
                break
            continue
        got[n][r] = (ok, msg)
        count += 1
    for p in procs:
        p.join(timeout=max(0.1, deadline - time.time()))
        if p.is_alive():
            p.kill()
            p.join()
    return {n: [got[n].get(r, (False, 'rank %d reported nothing (hang or crash)' % r))
                for r in range(size)] for n in names}


class Tally:
    def __init__(self, prefix):
        self.p = self.f = self.s = 0
        self.prefix = prefix

    def wanted(self, name):
        return name.startswith(self.prefix)

    def report(self, name, ok, detail=''):
        if ok:
            self.p += 1
            print('PASS %s' % name)
        else:
            self.f += 1
            print('FAIL %s\n%s' % (name, detail.rstrip()))
        sys.stdout.flush()

    def job(self, size, names, label='', **kw):
        names = [n for n in names if self.wanted(n)]
        if not names:
            return
        t0 = time.time()
        res = run_job(size, names, **kw)
        for n in names:
            bad = [(r, m) for r, (ok, m) in enumerate(res[n]) if not ok]
            self.report('%s (%d ranks%s)' % (n, size, label), not bad,
                        ''.join('  rank %d: %s\n' % (r, m) for r, m in bad[:2]))
        print('  (job of %d cases, %.1f s)' % (len(names), time.time() - t0))


def run_example(tally, name, expected, unexpected=()):
    """Runs examples/NAME.py; every expected text must be printed (any order), none of
    unexpected."""
    if not tally.wanted(name):
        return
    env = dict(os.environ, MASTER_PORT=str(next_port()))
    try:
        out = subprocess.run([sys.executable, os.path.join(TOP, 'examples', name + '.py')],
                             capture_output=True, text=True, timeout=120, env=env)
        text, rc = out.stdout + out.stderr, out.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = str(e.stdout or '') + ' (timed out)', -1
    # Ranks print concurrently, so one rank's line may be cut by another's: look for each
    # expected text anywhere in the output.
    missing = [e for e in expected if e not in text]
    extra = [u for u in unexpected if u in text]
    tally.report(name + '.py', rc == 0 and not missing and not extra,
                 'exit %d; missing %s; unexpected %s\n%s' % (rc, missing, extra, text[-3000:]))


def seed_examples(tally):
    i32 = ', dtype=torch.int32)'
    run_example(tally, 'seed000_reduce_scatter', [
        'Start tensor: tensor([0, 1, 2]' + i32, 'Start tensor: tensor([3, 4, 5]' + i32,
        'Gathered: [tensor([0, 1, 2]' + i32 + ', tensor([3, 4, 5]' + i32 + ']',
        'Reduce Scatter output: tensor([0, 2, 4, 6, 8]' + i32,
        'Reduce Scatter output: tensor([10, 12, 14, 16, 18]' + i32,
        'Reduce Scatter output 2: tensor([ 5,  7,  9, 11, 13]' + i32,
        'Reduce Scatter output 2: tensor([15, 17, 19, 21, 23]' + i32])
    four = '[tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]'
    run_example(tally, 'seed002_collectives',
                ['[%d] say hi!' % r for r in range(4)] + ['[0] data = 4.0'] +
                ['[%d] data = %d.0' % (r, r + 1) for r in range(4)] +
                ['[0] data = ' + four] + ['[%d] data = tensor([0.])' % r for r in range(4)])
    run_example(tally, 'seed003_patterns',
                ['[1] received tensor([42])'] + ['[%d] broadcast tensor([42])' % r for r in range(3)] +
                ['[%d] all_reduce tensor([6])' % r for r in range(3)] +
                ['[%d] bias.grad after averaging tensor([2.])' % r for r in range(3)] +
                ['[%d] avg_loss 1.0' % r for r in range(3)] +
                ['[1] received activations tensor([0., 1., 2., 3.])'])
    run_example(tally, 'seed004_primitives',
                ['Rank %d has data: 1.0' % r for r in range(4)] +
                ['Rank %d final tensor: 10.0' % r for r in range(4)] +
                ['Rank %d received tensor: %d.0' % (r, r + 1) for r in range(4)] +
                ['Rank 0 gathered list: [1.0, 2.0, 3.0, 4.0]'] +
                ['Rank %d async all_reduce result: 6.0' % r for r in range(4)])


def config_layout(tally):
    """zc_config as ctypes sees it has the C compiler's size and offsets."""
    name = 'zc_config layout matches include/zcoll.h'
    if not tally.wanted('config'):
        return
    import ctypes
    from zcoll_torch import _lib
    fields = [f for f, _ in _lib.Config._fields_]
    src = '#include <stddef.h>\n#include <stdio.h>\n#include "zcoll.h"\nint main(void){\n'
    src += 'printf("size %zu\\n", sizeof(zc_config));\n'
    src += ''.join('printf("%s %%zu\\n", offsetof(zc_config, %s));\n' % (f, f) for f in fields)
    src += 'return 0;}\n'
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, 'l.c'), os.path.join(d, 'l')
        with open(c, 'w') as f:
            f.write(src)
        subprocess.run(['cc', '-I', os.path.join(TOP, 'include'), c, '-o', exe], check=True)
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    want = dict(line.split() for line in out.splitlines())
    have = {'size': ctypes.sizeof(_lib.Config)}
    have.update({f: getattr(_lib.Config, f).offset for f in fields})
    bad = {k: (have[k], int(v)) for k, v in want.items() if have[k] != int(v)}
    tally.report(name, not bad, 'ctypes vs C: %s' % bad)


def work_done_only_after_its_results(tally):
    """A Work that wait() and is_completed() see done (they read _done without the lock) has its
    results in place: while another thread (the progress thread) runs its finisher, wait()
    waits for it."""
    name = 'work done only after its finisher copied the results'
    if not tally.wanted('work'):
        return
    import threading
    from zcoll_torch._work import ZcollWork

    class Group:  # what a Work with no requests asks of its group
        _driver = None

        def _retire(self, work):
            pass

        def _kick(self):
            pass

    copied, seen, inside, release = [], [], threading.Event(), threading.Event()

    def finish():
        inside.set()
        release.wait(5)
        copied.append('result')

    w = ZcollWork(Group(), 'all_gather', [], None, finish=finish)

    def progress_thread():
        with w._lock:
            w._step(False, progressed=True)

    mover = threading.Thread(target=progress_thread)
    mover.start()
    inside.wait(5)
    waiter = threading.Thread(target=lambda: (w.wait(), seen.append(list(copied))))
    waiter.start()
    waiter.join(0.3)
    early = list(seen)
    early_done = w.is_completed()
    release.set()
    mover.join(5)
    waiter.join(5)
    ok = early == [] and not early_done and seen == [['result']] and w.is_completed()
    tally.report(name, ok, 'wait() returned %s before the finisher ran; is_completed() said %s; '
                 'after it: %s' % (early, early_done, seen))


def config_from_env_refusal(tally):
    """A ZC_* setting that zcoll refuses raises zcoll's sentence instead of dropping every
    setting; the launcher's variables (MASTER_PORT=65535, whose next port zcoll's own
    rendezvous would take) are torch's business and are not read."""
    name = 'an environment zcoll refuses raises its sentence'
    if not tally.wanted('config'):
        return
    from datetime import timedelta
    from zcoll_torch import _group
    keys = ('MASTER_ADDR', 'MASTER_PORT', 'ZC_SLOTS', 'ZC_TIMEOUT_MS')
    saved = {k: os.environ.get(k) for k in keys}
    said = []
    for key, value, word in (('ZC_SLOTS', '3', 'slots'), ('ZC_TIMEOUT_MS', 'soon', 'ZC_TIMEOUT_MS'),
                             ('MASTER_PORT', '65535', None)):
        for k in keys:
            os.environ.pop(k, None)
        os.environ.update({'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': '29500', key: value})
        try:
            cfg = _group.make_config(0, 2, timedelta(seconds=5), '127.0.0.1:1', bytes(16))
            if word or cfg.nranks != 2:
                said.append('%s=%s: no error' % (key, value))
        except RuntimeError as e:
            if not word or word not in str(e):
                said.append('%s=%s: %s' % (key, value, e))
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    tally.report(name, not said, '; '.join(said))


def main(argv):
    tally = Tally(argv[1] if len(argv) > 1 else '')
    config_layout(tally)
    config_from_env_refusal(tally)
    work_done_only_after_its_results(tally)
    tally.job(2, cases.TWO)
    tally.job(2, cases.NO_THREAD, label=', no progress thread',
              env={'ZCOLL_TORCH_PROGRESS_THREAD': '0'})
    tally.job(3, cases.THREE)
    tally.job(4, cases.FOUR)
    for name, size, timeout_s in cases.FAILURES:
        tally.job(size, [name], timeout_s=timeout_s, wall_s=timeout_s * 6 + 30)
    seed_examples(tally)
    print('%d passed, %d failed, %d skipped' % (tally.p, tally.f, tally.s))
    return 1 if tally.f else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
