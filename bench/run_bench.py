#!/usr/bin/env python3
"""run_bench.py: `ninja bench`: zcoll against Open MPI, MPICH and Gloo on this host.

Owns the comparison: builds the MPI peers (bench/mpi_bench.c with mpicc.openmpi and
mpicc.mpich, into build/bench/), then for every operation and size sweep runs zcoll
(build/zcrun -n N build/zcbench ... --json) and each peer back to back, three repetitions,
rotating the order each repetition, and writes:

  build/bench/report.md      host, peers, one table per operation (medians of the
                             repetitions, ratios zcoll / best peer), the targets
  build/bench/results.jsonl  every JSON line every benchmark printed, unchanged
  build/bench/runs.jsonl     a start record (options, peers), one record per launch (command,
                             status, reason, seconds, stderr tail, its rows) and an end
                             record; `--report-only` rewrites report.md from it

A peer that is not installed, does not build, fails, times out or lacks an operation is
reported as missing with the reason, never skipped silently. Progress goes to stderr.
Standard library only; runs with any Python 3.8+ (ninja uses the one configure.py ran with).
Gloo runs under /usr/bin/python3, where Debian's python3-torch lives.

    python3 bench/run_bench.py [--quick] [--reps N] [--colls a,b] [--peers a,b] [--timeout S]
    ZCBENCH_ARGS=--quick ninja bench      (ninja passes no arguments; this adds them)

The peers are installed by bench/install_peers.sh, never by this script or the tests.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join('build', 'bench')
ZCRUN = os.path.join('build', 'zcrun')
ZCBENCH = os.path.join('build', 'zcbench')
MPI_SRC = os.path.join('bench', 'mpi_bench.c')
MPI_SOURCES = (MPI_SRC, os.path.join('tools', 'bench_report.h'))  # a change to either rebuilds
GLOO_PY = os.path.join('bench', 'gloo_bench.py')
SYSTEM_PYTHON = '/usr/bin/python3'   # Debian's python3-torch is installed for this one
GLOO_UNSUPPORTED = 3                 # gloo_bench.py's exit status for "no such operation"

# zcoll_sym: zcbench --sym, buffers in zcoll's symmetric region (the single-copy path of one
# host), run on the sizes from ZC_SYM_MIN_BYTES (64 KiB) of the operations that have that path.
IMPLS = ('zcoll', 'zcoll_sym', 'openmpi', 'mpich', 'gloo')
PEERS = IMPLS[2:]
COLLS4 = ('allreduce', 'broadcast', 'allgather')   # at 4 ranks unless --colls4 says more
SYM_COLLS = ('allreduce', 'reduce', 'broadcast', 'reduce_scatter', 'allgather', 'gather',
             'scatter', 'alltoall', 'sendrecv')
SYM_MIN = 64 << 10                   # zcoll.h ZC_SYM_MIN_BYTES: below, the slots as zcoll
COLLS = ('allreduce', 'reduce', 'broadcast', 'reduce_scatter', 'allgather', 'gather',
         'scatter', 'alltoall', 'sendrecv', 'barrier')
# The first targets' "at least as fast everywhere, 1.5x from 64 KiB" set.
MOVE_TARGET_COLLS = ('reduce_scatter', 'allgather', 'broadcast', 'alltoall', 'reduce',
                     'gather', 'scatter')
CONTRACT_KEYS = ('impl', 'coll', 'bytes', 'count', 'dtype', 'op', 'root', 'ranks', 'mode',
                 'iters', 'time_us', 'algbw', 'busbw', 'p50_us', 'p99_us', 'p999_us', 'max_us',
                 'wrong', 'allocs')
KIB, MIB = 1 << 10, 1 << 20

# Size sweeps (-b, -e, -f), each one launch. Two sweeps so that the sizes the targets name
# (8 B, 1 MiB, 64 MiB) are measured: 8 64 512 4K 32K 256K | 1M 8M 64M. Fewer sizes at 4
# ranks on 2 cores, where every peer is slow: 8 4K | 1M 64M. Chosen to keep a full run
# near 15 minutes on the 2-core host.
SWEEPS_FULL = ((8, 256 * KIB, 8), (MIB, 64 * MIB, 8))
SWEEPS_FULL_BARRIER = ((8, 4 * KIB, 8),)
SWEEPS_FULL_4RANKS = ((8, 4 * KIB, 512), (MIB, 64 * MIB, 64))
SWEEPS_QUICK = ((8, 8, 2), (MIB, 64 * MIB, 64))      # 8 | 1M 64M


class Section:
    """One block of the report: a rank count, a timing mode, its operations and sweeps."""

    def __init__(self, title, ranks, mode, colls, sweeps, timeout_s, note='', impls=IMPLS):
        self.title, self.ranks, self.mode = title, ranks, mode
        self.colls, self.sweeps, self.timeout_s, self.note = colls, sweeps, timeout_s, note
        self.impls = impls   # the implementations this section runs

    @property
    def key(self):
        return (self.ranks, self.mode)


def plan_sections(args):
    sweeps = SWEEPS_QUICK if args.quick else SWEEPS_FULL
    sweeps_barrier = SWEEPS_QUICK[:1] if args.quick else SWEEPS_FULL_BARRIER
    sweeps4 = SWEEPS_QUICK if args.quick else SWEEPS_FULL_4RANKS
    colls = [c for c in COLLS if c in args.colls]
    four = [c for c in COLLS if c in args.colls and c in getattr(args, 'colls4', COLLS4)]
    t = args.timeout
    persistent = [Section('2 ranks, persistent plans (zc_start)', 2, 'persistent',
                          [c for c in ('allreduce',) if c in args.colls], sweeps_barrier, t,
                          'zcbench --persistent: one plan made before the loop, each '
                          'timed call a zc_start and its wait (zcoll only).',
                          ('zcoll',))] \
        if getattr(args, 'persistent', False) else []
    return persistent + [
        Section('2 ranks, back-to-back calls', 2, 'loop', colls, sweeps, t),
        Section('2 ranks, barrier before each call (one-shot latency)', 2, 'barrier',
                [c for c in ('allreduce',) if c in args.colls], sweeps_barrier, t,
                'Each timed call follows an untimed barrier, so no call overlaps the '
                "previous one's tail."),
        Section('4 ranks on 2 cores (oversubscribed)', 4, 'loop', four, sweeps4,
                args.timeout_oversubscribed,
                'Twice as many ranks as cores: a rank that spins while waiting steals its '
                'peer\'s core. Each launch is capped at %d s; a peer that does not finish in '
                'time is reported as timed out, with the sizes it did finish.'
                % args.timeout_oversubscribed),
    ]


# ---- small helpers -----------------------------------------------------------------------

def log(msg):
    sys.stderr.write(msg + '\n')
    sys.stderr.flush()


def size_text(n):
    for unit, div in (('GiB', 1 << 30), ('MiB', MIB), ('KiB', KIB)):
        if n >= div and n % div == 0:
            return '%d %s' % (n // div, unit)
    return '%d B' % n


def short_size(n):
    for unit, div in (('G', 1 << 30), ('M', MIB), ('K', KIB)):
        if n >= div and n % div == 0:
            return '%d%s' % (n // div, unit)
    return str(n)


def num(v, digits=3):
    """A number in `digits` significant figures, no exponent for everyday magnitudes."""
    if v is None:
        return '-'
    if v == 0:
        return '0'
    a = abs(v)
    if a >= 10 ** digits:
        return '%d' % round(v)
    if a < 1e-3:
        return '%.1e' % v
    return '%.*g' % (digits, v)


def run_quiet(cmd, timeout=30):
    """stdout of a short probe command, or None if it cannot run."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


def tail(text, lines=6):
    rows = [r for r in (text or '').strip().splitlines() if r.strip()]
    return ' | '.join(rows[-lines:])


# ---- the peers ---------------------------------------------------------------------------

class Peer:
    """One implementation: whether it can run here, why not, and how to launch it."""

    def __init__(self, impl):
        self.impl = impl
        self.ok = False
        self.reason = ''          # why it cannot run at all
        self.version = ''         # the library's own words, from its first run's header
        self.package = ''         # the Debian package version, when dpkg knows it
        self.unsupported = {}     # coll -> reason (an operation the peer lacks)

    def command(self, section, coll, sweep):
        b, e, f = (sym_sweep(sweep) or sweep) if self.impl == 'zcoll_sym' else sweep
        n = str(section.ranks)
        persistent = section.mode == 'persistent'   # zcbench --persistent times loop calls
        args = ['-c', coll, '-b', str(b), '-e', str(e), '-f', str(f), '-d', 'float32',
                '-o', 'sum', '--mode', 'loop' if persistent else section.mode, '--json']
        if persistent:
            args.append('--persistent')
        if self.impl in ('zcoll', 'zcoll_sym'):
            # Pinned as Open MPI is below (a core per rank) where there are enough cores.
            bind = ['--bind-to', 'core'] if section.ranks <= (os.cpu_count() or 1) else []
            return [ZCRUN, '-n', n] + bind + [ZCBENCH] + args + (
                ['--sym'] if self.impl == 'zcoll_sym' else [])
        if self.impl == 'openmpi':
            # ob1 over shared memory (vader) is what Open MPI picks here by itself; naming
            # it skips the probing of UCX/OFI, which costs up to 3 s per launch.
            cmd = ['mpirun.openmpi', '--allow-run-as-root', '--mca', 'pml', 'ob1',
                   '--mca', 'btl', 'self,vader']
            if section.ranks > (os.cpu_count() or 1):
                cmd += ['--oversubscribe', '--bind-to', 'core:overload-allowed']
            else:
                cmd += ['--bind-to', 'core']
            return cmd + ['-np', n, os.path.join(OUT, 'mpi_bench.openmpi')] + args
        if self.impl == 'mpich':
            return ['mpirun.mpich', '-np', n, os.path.join(OUT, 'mpi_bench.mpich')] + args
        return [SYSTEM_PYTHON, GLOO_PY, '-np', n] + args


def dpkg_version(package):
    out = run_quiet(['dpkg-query', '-W', '-f', '${Version}', package])
    return '%s %s' % (package, out.strip()) if out else ''


def build_mpi_peer(peer):
    cc, runner = 'mpicc.' + peer.impl, 'mpirun.' + peer.impl
    pkg = 'openmpi-bin' if peer.impl == 'openmpi' else 'mpich'
    peer.package = dpkg_version(pkg)
    for tool in (cc, runner):
        if not shutil.which(tool):
            peer.reason = ('%s not found (not installed: run bench/install_peers.sh)' % tool)
            return
    exe = os.path.join(OUT, 'mpi_bench.' + peer.impl)
    if os.path.exists(exe) and os.path.getmtime(exe) >= max(os.path.getmtime(f)
                                                             for f in MPI_SOURCES):
        peer.ok = True
        return
    cmd = [cc, '-std=c11', '-O2', '-g', '-Wall', '-Wextra', '-o', exe, MPI_SRC]
    log('building %s: %s' % (exe, ' '.join(cmd)))
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        peer.reason = '%s failed to run: %s' % (cc, e)
        return
    if p.returncode != 0:
        peer.reason = '%s failed (status %d): %s' % (cc, p.returncode, tail(p.stdout, 4))
        return
    peer.ok = True


def probe_gloo(peer):
    peer.package = dpkg_version('python3-torch')
    if not os.path.exists(SYSTEM_PYTHON):
        peer.reason = '%s not found' % SYSTEM_PYTHON
        return
    probe = ('import torch, torch.distributed as d; '
             'print(torch.__version__, d.is_available() and d.is_gloo_available())')
    try:
        p = subprocess.run([SYSTEM_PYTHON, '-c', probe], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        peer.reason = 'probing torch failed: %s' % e
        return
    if p.returncode != 0:
        peer.reason = ('torch is not importable by %s (install python3-torch: '
                       'bench/install_peers.sh): %s' % (SYSTEM_PYTHON, tail(p.stderr, 1)))
        return
    words = p.stdout.split()
    if len(words) < 2 or words[1] != 'True':
        peer.reason = 'torch %s has no gloo backend' % (words[0] if words else '?')
        return
    peer.ok = True


def prepare_peers(args):
    peers = {}
    for impl in IMPLS:
        peer = Peer(impl)
        peers[impl] = peer
        if impl == 'zcoll':
            peer.ok = True
        elif impl == 'zcoll_sym':
            peer.ok = 'zc_sym_alloc' in (run_quiet([ZCBENCH, '--help']) or '')
            peer.reason = '' if peer.ok else 'zcbench has no --sym'
        elif impl not in args.peers:
            peer.reason = 'left out by --peers'
        elif impl == 'gloo':
            probe_gloo(peer)
        else:
            build_mpi_peer(peer)
        if not peer.ok:
            log('%s: missing: %s' % (impl, peer.reason))
    return peers


# ---- running one launch ------------------------------------------------------------------

ROW_PREFIX = re.compile(r'^\[\d+\] ')    # zcrun prefixes each rank's lines with "[i] "
VERSION_LINE = re.compile(r'^# (?:mpi_bench|gloo_bench) \((.*?)\)')


class Launch:
    """One process tree: a sweep of one operation by one implementation."""

    def __init__(self, section, coll, sweep, rep, peer, index, total):
        self.section, self.coll, self.sweep, self.rep = section, coll, sweep, rep
        self.peer, self.index, self.total = peer, index, total
        self.rows, self.status, self.reason, self.seconds, self.rc = [], 'ok', '', 0.0, 0
        self.stderr = ''
        self.cmd = peer.command(section, coll, sweep)

    def label(self):
        b, e, _ = self.sweep
        sizes = '' if self.coll == 'barrier' else ' ' + (
            short_size(b) if b == e else '%s..%s' % (short_size(b), short_size(e)))
        return '[%d/%d] %s%s %s %d ranks %s rep %d' % (
            self.index, self.total, self.coll, sizes, self.peer.impl, self.section.ranks,
            self.section.mode, self.rep + 1)

    def run(self, results_file, current):
        t0 = time.monotonic()
        timeout = self.section.timeout_s
        proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, universal_newlines=True,
                                start_new_session=True, cwd=ROOT)
        current[0] = proc
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            out, err = proc.communicate()
            self.status = 'timeout'
            self.reason = 'timed out after %d s' % timeout
        finally:
            current[0] = None
        self.seconds = time.monotonic() - t0
        self.rc = proc.returncode
        self.stderr = err or ''
        self.parse(out or '', results_file)
        self.classify()

    def parse(self, out, results_file):
        for line in out.splitlines():
            line = ROW_PREFIX.sub('', line, count=1).strip()
            if not line.startswith('{'):
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            results_file.write(line + '\n')
            missing = [k for k in CONTRACT_KEYS if k not in row]
            if missing:
                log('  warning: %s printed a row without %s' % (self.peer.impl,
                                                                ', '.join(missing)))
                continue
            self.rows.append(row)
        results_file.flush()
        for line in self.stderr.splitlines():
            m = VERSION_LINE.match(ROW_PREFIX.sub('', line, count=1))
            if m and not self.peer.version:
                self.peer.version = m.group(1)

    def classify(self):
        if self.status == 'timeout':
            return
        if self.peer.impl == 'gloo' and self.rc == GLOO_UNSUPPORTED:
            self.status = 'unsupported'
            m = re.search(r'gloo_bench: unsupported: (?:%s: )?(.*)' % self.coll, self.stderr)
            self.reason = m.group(1).strip() if m else tail(self.stderr, 1)
            self.peer.unsupported[self.coll] = self.reason
        elif self.rc != 0:
            self.status = 'failed'
            self.reason = 'exit status %d: %s' % (self.rc, tail(self.stderr, 3))
        elif not self.rows:
            self.status = 'failed'
            self.reason = 'no result lines: %s' % tail(self.stderr, 3)

    def record(self):
        return {'section': self.section.title, 'ranks': self.section.ranks,
                'mode': self.section.mode, 'coll': self.coll, 'impl': self.peer.impl,
                'rep': self.rep + 1, 'sweep': list(self.sweep), 'cmd': self.cmd,
                'status': self.status, 'reason': self.reason, 'rc': self.rc,
                'seconds': round(self.seconds, 3), 'stderr_tail': tail(self.stderr, 8),
                'rows': self.rows}

    @classmethod
    def from_record(cls, rec, sections, peers):
        """A launch read back from runs.jsonl (--report-only); None if no section fits."""
        section = next((s for s in sections if s.key == (rec['ranks'], rec['mode'])), None)
        if section is None:
            return None
        la = cls.__new__(cls)
        la.section, la.coll, la.sweep = section, rec['coll'], tuple(rec['sweep'])
        la.rep, la.peer, la.index, la.total = rec['rep'] - 1, peers[rec['impl']], 0, 0
        la.rows, la.status, la.reason = rec['rows'], rec['status'], rec['reason']
        la.seconds, la.rc, la.cmd = rec['seconds'], rec['rc'], rec['cmd']
        la.stderr = rec.get('stderr_tail', '')
        if la.status == 'unsupported':
            la.peer.unsupported[la.coll] = la.reason
        return la


def kill_tree(proc):
    """SIGTERM to the launch's process group, SIGKILL a moment later."""
    for sig, pause in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + pause
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)


BLOCKED = ('reduce_scatter', 'allgather', 'gather', 'scatter', 'alltoall')
ESIZE = 4  # float32


def sym_sweep(sweep):
    """The part of sweep from ZC_SYM_MIN_BYTES (zcoll_sym's sizes), or None without one."""
    b, e, f = sweep
    while b < SYM_MIN and b * f <= e:
        b *= f
    return (b, e, f) if b >= SYM_MIN else None


def sweep_has_rows(coll, sweep, ranks):
    """False when every size of the sweep rounds to no element (blocked operations need a
    whole element per rank), so no implementation would print a row."""
    b, e, f = sweep
    largest = b
    while largest * f <= e:
        largest *= f
    return largest >= (ESIZE * ranks if coll in BLOCKED else ESIZE)


def plan_launches(sections, peers, reps):
    """Every launch in order: section, operation, sweep, repetition, implementation (rotated
    one place per repetition so no implementation always runs first)."""
    plan = []
    for s in sections:
        for coll in s.colls:
            sweeps = s.sweeps[:1] if coll == 'barrier' else \
                [w for w in s.sweeps if sweep_has_rows(coll, w, s.ranks)]
            for sweep in sweeps:
                runnable = [i for i in s.impls if peers[i].ok and
                            (i != 'zcoll_sym' or (coll in SYM_COLLS and sym_sweep(sweep)))]
                for rep in range(reps):
                    k = rep % len(runnable)
                    for impl in runnable[k:] + runnable[:k]:
                        plan.append((s, coll, sweep, rep, impl))
    return plan


def run_all(sections, peers, args, results_file, runs_file):
    plan = plan_launches(sections, peers, args.reps)
    log('plan: %d launches (%s)' % (len(plan), ', '.join(i for i in IMPLS if peers[i].ok)))
    launches, current = [], [None]
    try:
        for index, (s, coll, sweep, rep, impl) in enumerate(plan, 1):
            peer = peers[impl]
            launch = Launch(s, coll, sweep, rep, peer, index, len(plan))
            if coll in peer.unsupported:  # known from an earlier launch: do not ask again
                launch.status, launch.reason = 'unsupported', peer.unsupported[coll]
                log('%s ... unsupported: %s' % (launch.label(), launch.reason))
                launch.stderr = ''
                runs_file.write(json.dumps(dict(launch.record(), kind='launch')) + '\n')
                launches.append(launch)
                continue
            sys.stderr.write(launch.label() + ' ... ')
            sys.stderr.flush()
            launch.run(results_file, current)
            if launch.status == 'ok':
                log('%.1f s' % launch.seconds)
            else:
                log('%s (%.1f s): %s' % (launch.status.upper(), launch.seconds, launch.reason))
            runs_file.write(json.dumps(dict(launch.record(), kind='launch')) + '\n')
            runs_file.flush()
            launches.append(launch)
    except KeyboardInterrupt:
        if current[0] is not None:
            kill_tree(current[0])
        log('\ninterrupted: writing the report of what was measured')
        return launches, True
    return launches, False


# ---- aggregation -------------------------------------------------------------------------

class Table:
    """Medians per (section, coll, bytes, impl) over repetitions, and why cells are empty."""

    def __init__(self, launches, reps):
        self.reps = reps    # repetitions asked for; a cell with fewer says so
        self.rows = {}      # (ranks, mode, coll, bytes, impl) -> [row, ...]
        self.problems = {}  # (ranks, mode, coll, impl) -> {reason: [rep, ...]}
        self.syscalls = {}  # count_syscalls()'s result ({} when not measured)
        self.start_pair = {}  # start_pair()'s result ({} when not measured)
        self.by_rep = {}    # (ranks, mode, coll, bytes, impl) -> {rep: row}: the pairs
        for la in launches:
            s = la.section
            for r in la.rows:
                key = (s.ranks, s.mode, la.coll, r['bytes'], la.peer.impl)
                self.rows.setdefault(key, []).append(r)
                self.by_rep.setdefault(key, {})[la.rep] = r
            if la.status != 'ok':
                k = (s.ranks, s.mode, la.coll, la.peer.impl)
                what = '%s: %s' % (la.status, la.reason) if la.status != 'unsupported' \
                    else 'unsupported: %s' % la.reason
                if la.status == 'timeout' and la.rows:
                    what += ' (finished %s)' % ', '.join(size_text(r['bytes'])
                                                        for r in la.rows)
                self.problems.setdefault(k, {}).setdefault(what, []).append(la.rep + 1)

    def sizes(self, ranks, mode, coll, impl=None):
        """Sizes with a row of the operation (of impl, when given)."""
        return sorted({k[3] for k in self.rows if k[:3] == (ranks, mode, coll) and
                       (impl is None or k[4] == impl)})

    def median(self, ranks, mode, coll, nbytes, impl):
        """{metric: median over repetitions, 'reps': k}, or None."""
        rows = self.rows.get((ranks, mode, coll, nbytes, impl))
        if not rows:
            return None
        m = {k: statistics.median(r[k] for r in rows)
             for k in ('time_us', 'busbw', 'algbw', 'p50_us', 'p99_us', 'p999_us')}
        m['reps'] = len(rows)
        allocs = [r['allocs'] for r in rows]
        m['allocs'] = -1 if any(a < 0 for a in allocs) else max(allocs)
        return m

    def paired_ratio(self, ranks, mode, coll, nbytes, metric='time_us', peers=PEERS,
                     zimpl='zcoll'):
        """Median over repetitions of zimpl's `metric` / the lowest peer `metric` of the same
        repetition (the launches of one repetition ran back to back), with the peer that was
        lowest most often; (None, None) without a repetition that has both."""
        zc = self.by_rep.get((ranks, mode, coll, nbytes, zimpl), {})
        ratios, winners = [], []
        for rep, row in zc.items():
            best = min(((self.by_rep.get((ranks, mode, coll, nbytes, i), {}).get(rep), i)
                        for i in peers), key=lambda x: x[0][metric] if x[0] else float('inf'))
            if best[0] and best[0][metric] > 0:
                ratios.append(row[metric] / best[0][metric])
                winners.append(best[1])
        if not ratios:
            return None, None
        return statistics.median(ratios), max(set(winners), key=winners.count)

    def best_peer(self, ranks, mode, coll, nbytes, metric='time_us', peers=PEERS):
        """(impl, medians) of the peer with the lowest median `metric`, or (None, None)."""
        best = (None, None)
        for impl in peers:
            m = self.median(ranks, mode, coll, nbytes, impl)
            if m and (best[1] is None or m[metric] < best[1][metric]):
                best = (impl, m)
        return best


# ---- the report --------------------------------------------------------------------------

def host_facts():
    """What the report says about the host, gathered when the run starts."""
    facts = {'cpu': '?', 'os': '?', 'cpus': os.cpu_count() or 0,
             'usable_cpus': len(os.sched_getaffinity(0)),
             'kernel': '%s %s' % (platform.system(), platform.release())}
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    facts['cpu'] = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open('/etc/os-release') as f:
            for line in f:
                if line.startswith('PRETTY_NAME='):
                    facts['os'] = line.split('=', 1)[1].strip().strip('"')
    except OSError:
        pass
    commit = (run_quiet(['git', '-C', ROOT, 'rev-parse', '--short', 'HEAD']) or '?').strip()
    if run_quiet(['git', '-C', ROOT, 'status', '--porcelain', '--untracked-files=no']):
        commit += ' (with uncommitted changes)'
    facts['commit'] = commit
    facts['cc'] = (run_quiet(['cc', '--version']) or '?').splitlines()[0]
    facts['floor'] = hardware_floor()
    return facts


STARTPAIR_LAUNCHES = 3

# bench/percall.c's collectives (its names) and the report's.
PERCALL_COLLS = (('allreduce', 'allreduce'), ('reduce', 'reduce'), ('broadcast', 'broadcast'),
                 ('reduce_scatter', 'reduce_scatter'), ('allgather', 'allgather'),
                 ('gather', 'gather'), ('scatter', 'scatter'), ('alltoall', 'alltoall'),
                 ('sendrecv', 'sendrecv'), ('barrier', 'barrier'), ('start', 'zc_start'))
PERCALL_ITERS = (1000, 2000)
PERCALL_TOTAL = re.compile(r'Collected : (\d+)')


def zcoll_libs():
    """The link flags build.ninja gives programs linked with libzcoll.a."""
    with open('build.ninja') as f:
        for line in f:
            if line.startswith('libs = '):
                return shlex.split(line[len('libs = '):].strip())
    return []


def percall_counts():
    """bench/percall.c under callgrind: instructions per 8-byte call of each collective for
    each of the two in-process ranks, the difference of two iteration counts over their
    difference (start-up and warm-up cancel); {'rows': [...]} or {'reason': why not}."""
    if not shutil.which('valgrind'):
        return {'reason': 'valgrind not installed (apt-get install valgrind)'}
    exe = os.path.join(OUT, 'percall')
    cmd = ['cc', '-O2', '-g', '-Iinclude', os.path.join('bench', 'percall.c'),
           os.path.join('build', 'libzcoll.a')] + zcoll_libs() + ['-o', exe]
    if run_quiet(cmd) is None or not os.access(exe, os.X_OK):
        return {'reason': 'bench/percall.c did not build'}
    rows = []
    for name, label in PERCALL_COLLS:
        per_rank = []
        for rank in (0, 1):
            totals = []
            for iters in PERCALL_ITERS:
                out = run_quiet(['valgrind', '--tool=callgrind', '--collect-atstart=no',
                                 '--callgrind-out-file=/dev/null', exe, name, str(iters),
                                 str(rank)], timeout=300) or ''
                m = PERCALL_TOTAL.search(out)
                totals.append(int(m.group(1)) if m else None)
            if None in totals:
                return {'reason': 'percall %s rank %d printed no count' % (name, rank)}
            per_rank.append((totals[1] - totals[0]) // (PERCALL_ITERS[1] - PERCALL_ITERS[0]))
        rows.append({'coll': label, 'rank0': per_rank[0], 'rank1': per_rank[1]})
        log('percall: %s %d / %d instructions per call (rank 0 / rank 1)'
            % (label, per_rank[0], per_rank[1]))
    return {'rows': rows}


def start_pair():
    """bench/startpair.c: zc_start of a plan against the plain 8-byte all_reduce, alternated in
    blocks within each launch (2 ranks, STARTPAIR_LAUNCHES launches); {'ratios': [...], 'rows':
    [...]} or {'reason': why not}."""
    exe = os.path.join(OUT, 'startpair')
    cmd = ['cc', '-O2', '-Iinclude', os.path.join('bench', 'startpair.c'),
           os.path.join('build', 'libzcoll.a')] + zcoll_libs() + ['-o', exe]
    if run_quiet(cmd) is None or not os.access(exe, os.X_OK):
        return {'reason': 'bench/startpair.c did not build'}
    rows = []
    for _ in range(STARTPAIR_LAUNCHES):
        out = run_quiet([ZCRUN, '-n', '2', exe], timeout=120) or ''
        for line in out.splitlines():
            line = line.split('] ', 1)[-1].strip()   # zcrun's "[0] " prefix
            if line.startswith('{'):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    if not rows:
        return {'reason': 'bench/startpair.c printed no result'}
    log('startpair: zc_start / plain all_reduce 8 B: %s' %
        ', '.join('%.3f' % r['start_over_plain'] for r in rows))
    return {'ratios': [r['start_over_plain'] for r in rows], 'rows': rows}


def hardware_floor():
    """bench/cacheline.c's measurement: cache-line one-way latency between two CPUs and
    single-core memcpy bandwidth (the floors under small and large messages)."""
    exe = os.path.join(OUT, 'cacheline')
    src = os.path.join('bench', 'cacheline.c')
    if run_quiet(['cc', '-O2', '-pthread', src, '-o', exe]) is None or not os.access(exe, os.X_OK):
        return {}
    out = run_quiet([exe], timeout=60)
    try:
        return json.loads(out.strip().splitlines()[-1]) if out else {}
    except ValueError:
        return {}


def host_description(host, peers, started, seconds, args, load_start, load_end):
    lines = [
        '- date: %s (UTC), %s in %.0f s%s' % (
            started.strftime('%Y-%m-%d %H:%M'), 'quick run' if args.quick else 'full run',
            seconds, ', %d repetition%s' % (args.reps, 's' if args.reps > 1 else '')),
        '- CPU: %s, %d logical CPUs (usable here: %d)' % (host['cpu'], host['cpus'],
                                                          host['usable_cpus']),
        '- kernel: %s; %s; %s' % (host['kernel'], host['os'], host['cc']),
        '- load average (1 min) at start %s, at end %s%s' % (
            load_start, load_end,
            ': other work was running, expect noise' if load_above(load_start, 0.5) else ''),
        '- zcoll: commit %s, build/zcbench through build/zcrun (zcbench calls from one '
        'thread and says so, cfg->threads serial: no lock per call, the thread level '
        'MPI_Init gives the MPI peers; `--threads multi` measures the locked mode)'
        % host['commit'],
    ]
    fl = host.get('floor') or {}
    if 'one_way_ns_p50' in fl:
        lines.append('- hardware floor (bench/cacheline.c): cache-line one-way latency between '
                     'CPUs %d and %d %.0f ns (median; min %.0f ns), single-core memcpy of '
                     '64 MiB %.1f GB/s' % (fl['cpus'][0], fl['cpus'][1], fl['one_way_ns_p50'],
                                           fl['one_way_ns_min'], fl['memcpy_gbs']))
    for impl in PEERS:
        p = peers[impl]
        words = [w for w in (p.version, p.package) if w]
        state = '; '.join(words) if words else '?'
        if not p.ok:
            state = 'MISSING: %s' % p.reason + ('; ' + '; '.join(words) if words else '')
        lines.append('- %s: %s' % (impl, state))
    return lines


def cell(m):
    if not m:
        return None
    return '%s / %s / %s' % (num(m['p50_us']), num(m['time_us']), num(m['busbw']))


def problem_text(table, ranks, mode, coll, impl):
    probs = table.problems.get((ranks, mode, coll, impl))
    if not probs:
        return None
    return '; '.join('%s (rep %s)' % (why, ','.join(map(str, sorted(set(reps)))))
                     for why, reps in probs.items())


def coll_table(table, peers, section, coll):
    ranks, mode = section.ranks, section.mode
    out = []
    shown = list(section.impls)  # a missing peer keeps its column, with "missing" cells
    head = ['size'] + shown + ['best peer', 'time ratio', 'busbw ratio', 'p50 ratio']
    out.append('| ' + ' | '.join(head) + ' |')
    out.append('|' + '|'.join(['---:'] + [':--'] * len(shown) + [':--'] + ['---:'] * 3) + '|')
    sizes = table.sizes(ranks, mode, coll)
    notes = []
    for impl in shown:
        why = problem_text(table, ranks, mode, coll, impl) if peers[impl].ok else \
            'missing: %s' % peers[impl].reason
        if why:
            notes.append('- %s: %s' % (impl, why))
    for nbytes in sizes:
        row = ['0 (barrier)' if coll == 'barrier' else size_text(nbytes)]
        for impl in shown:
            m = table.median(ranks, mode, coll, nbytes, impl)
            if m:
                c = cell(m)
                if m['reps'] < table.reps:
                    c += ' (%d rep)' % m['reps']
                row.append(c)
            elif coll in peers[impl].unsupported:
                row.append('unsupported')
            elif problem_text(table, ranks, mode, coll, impl):
                row.append('missing (see below)')
            else:
                row.append('missing')
        zc = table.median(ranks, mode, coll, nbytes, 'zcoll')
        best_impl, best = table.best_peer(ranks, mode, coll, nbytes)
        row.append(best_impl or 'none')
        if zc and best:
            row.append('%.2f' % (zc['time_us'] / best['time_us']))
            row.append('%.2f' % (zc['busbw'] / best['busbw']) if best['busbw'] > 0 else '-')
            _, best50 = table.best_peer(ranks, mode, coll, nbytes, 'p50_us')
            row.append('%.2f' % (zc['p50_us'] / best50['p50_us'])
                       if best50['p50_us'] > 0 else '-')
        else:
            row += ['-', '-', '-']
        out.append('| ' + ' | '.join(row) + ' |')
    if not sizes:
        out.append('| (nothing measured) |' + ' |' * (len(head) - 1))
    if notes:
        out.append('')
        out += notes
    return out


def verdict(ok):
    return 'met' if ok else 'NOT MET'


def first_target_lines(table):
    """The first targets (bandwidth and per-size ratios against the best peer), each met / not
    met with its numbers."""
    out = []
    loop2 = (2, 'loop')

    def ar(nbytes):
        return table.median(2, 'loop', 'allreduce', nbytes, 'zcoll')

    # allreduce 8 B latency
    zc = ar(8)
    for metric, name in (('p50_us', 'p50'), ('p999_us', 'p99.9')):
        bi, b = table.best_peer(2, 'loop', 'allreduce', 8, metric)
        if zc and b:
            r = zc[metric] / b[metric]
            out.append('| allreduce 8 B %s <= 0.5x best peer | zcoll %s us, best peer %s %s '
                       'us: %.2fx | %s |' % (name, num(zc[metric]), bi, num(b[metric]), r,
                                             verdict(r <= 0.5)))
        else:
            out.append('| allreduce 8 B %s <= 0.5x best peer | %s | not measured |'
                       % (name, 'no zcoll result' if not zc else 'no peer result'))
    # allreduce bandwidth
    for nbytes, want in ((MIB, 2.0), (64 * MIB, 2.5)):
        zc = ar(nbytes)
        bi, b = table.best_peer(2, 'loop', 'allreduce', nbytes, 'time_us')
        if zc and b:
            r = zc['busbw'] / b['busbw']
            out.append('| allreduce %s busbw >= %.1fx best peer | zcoll %s GB/s, best peer %s '
                       '%s GB/s: %.2fx | %s |' % (size_text(nbytes), want, num(zc['busbw']),
                                                 bi, num(b['busbw']), r, verdict(r >= want)))
        else:
            out.append('| allreduce %s busbw >= %.1fx best peer | %s | not measured |'
                       % (size_text(nbytes), want,
                          'no zcoll result' if not zc else 'no peer result'))
    # the other collectives
    for coll in MOVE_TARGET_COLLS:
        ratios = []
        for nbytes in table.sizes(2, 'loop', coll):
            zc = table.median(2, 'loop', coll, nbytes, 'zcoll')
            bi, b = table.best_peer(2, 'loop', coll, nbytes)
            if zc and b and zc['time_us'] > 0:
                ratios.append((nbytes, b['time_us'] / zc['time_us'], bi))
        if not ratios:
            out.append('| %s: >= 1x everywhere, >= 1.5x from 64 KiB | no zcoll and peer '
                       'result at the same size | not measured |' % coll)
            continue
        small = [x for x in ratios if x[0] < 64 * KIB]
        large = [x for x in ratios if x[0] >= 64 * KIB]
        bad = [x for x in small if x[1] < 1.0] + [x for x in large if x[1] < 1.5]
        parts = []
        if small:
            w = min(small, key=lambda x: x[1])
            parts.append('worst below 64 KiB %.2fx (%s vs %s)' % (w[1], size_text(w[0]), w[2]))
        if large:
            w = min(large, key=lambda x: x[1])
            parts.append('worst from 64 KiB %.2fx (%s vs %s)' % (w[1], size_text(w[0]), w[2]))
        if bad:
            parts.append('short at ' + ', '.join('%s %.2fx' % (short_size(x[0]), x[1])
                                                 for x in bad))
        out.append('| %s: >= 1x everywhere, >= 1.5x from 64 KiB | %s | %s |'
                   % (coll, '; '.join(parts), verdict(not bad)))
    # 4 ranks on 2 cores against Open MPI
    colls4 = sorted({k[2] for k in table.rows if k[:2] == (4, 'loop')},
                    key=COLLS.index)
    for coll in colls4:
        ratios = []
        for nbytes in table.sizes(4, 'loop', coll):
            zc = table.median(4, 'loop', coll, nbytes, 'zcoll')
            om = table.median(4, 'loop', coll, nbytes, 'openmpi')
            if zc and om and om['time_us'] > 0:
                ratios.append((nbytes, zc['time_us'] / om['time_us']))
        if not ratios:
            out.append('| 4 ranks on 2 cores, %s: time <= 1x Open MPI | no zcoll and Open MPI '
                       'result at the same size | not measured |' % coll)
            continue
        w = max(ratios, key=lambda x: x[1])
        bad = [x for x in ratios if x[1] > 1.0]
        out.append('| 4 ranks on 2 cores, %s: time <= 1x Open MPI | worst %.2fx at %s%s | %s |'
                   % (coll, w[1], size_text(w[0]),
                      ('; over at ' + ', '.join('%s %.2fx' % (short_size(x[0]), x[1])
                                                for x in bad)) if bad else '',
                      verdict(not bad)))
    return out


def loop_lines(table):
    """The timed loop's promises: no allocation and no system call per iteration."""
    out = []
    allocs = [r['allocs'] for k, rows in table.rows.items()
              if k[0] == 2 and k[4] == 'zcoll' for r in rows]
    if not allocs:
        out.append('| zero allocations in the timed loop (2 ranks) | no zcoll result | '
                   'not measured |')
    elif any(a < 0 for a in allocs):
        out.append('| zero allocations in the timed loop (2 ranks) | not counted '
                   '(sanitized build?) | not measured |')
    else:
        out.append('| zero allocations in the timed loop (2 ranks) | %d rows, largest count '
                   '%d | %s |' % (len(allocs), max(allocs), verdict(max(allocs) == 0)))
    sc = table.syscalls
    if not sc or not sc.get('rows'):
        why = sc.get('reason', 'not measured') if sc else 'not measured'
        out.append('| zero system calls in the timed loop (2 ranks) | %s | not measured |' % why)
    else:
        # A call per iteration would add (iters[1] - iters[0]) = 2000 calls; outside the loop
        # the count varies by a few (bootstrap socket polls; brk for the longer timing arrays,
        # which zcbench allocates before the loop), hence the margin of 16.
        more = sc['iters'][1] - sc['iters'][0]
        extra = max(r['extra'] for r in sc['rows'])
        out.append('| zero system calls in the timed loop (2 ranks) | strace -f -c on each rank, '
                   '%s vs %s timed iterations: %s; %d more iterations add at most %d calls, '
                   'i.e. none per iteration (set-up outside the loop varies by a few) | %s |'
                   % (sc['iters'][0], sc['iters'][1],
                      '; '.join('%s %s: %d vs %d calls per rank (max), %+d'
                                % (r['coll'], size_text(r['bytes']), r['calls'][0],
                                   r['calls'][1], r['extra']) for r in sc['rows']),
                      more, max(extra, 0), verdict(extra < 16)))
    return out


# ---- the targets -------------------------------------------------------------------------

SMALL_MAX = 16 * KIB                 # "8 B to 16 KiB"
BIG = 64 * MIB
BIG_COLLS = ('allreduce', 'allgather', 'alltoall', 'broadcast')
MPI_PEERS = ('openmpi', 'mpich')     # sendrecv is compared with MPI's only


def coll_peers(coll):
    return MPI_PEERS if coll == 'sendrecv' else PEERS


def ratio_sweep(table, ranks, coll, sizes, peers, zimpl='zcoll'):
    """[(bytes, paired time ratio, peer)] of every size with a zimpl and a peer result."""
    out = []
    for nbytes in sizes:
        r, who = table.paired_ratio(ranks, 'loop', coll, nbytes, 'time_us', peers, zimpl)
        if r is not None:
            out.append((nbytes, r, who))
    return out


def worst_text(ratios, limit):
    w = max(ratios, key=lambda x: x[1])
    over = [x for x in ratios if x[1] > limit]
    text = 'worst %.2fx at %s (vs %s), %d size%s' % (w[1], size_text(w[0]), w[2], len(ratios),
                                                    '' if len(ratios) == 1 else 's')
    if over:
        text += '; over at ' + ', '.join('%s %.2fx' % (short_size(x[0]), x[1]) for x in over)
    return text, not over


def worst_line(head, ratios, limit, missing):
    """A target's line: the worst of ratios [(bytes, ratio, against)] against limit, or
    missing when there is none."""
    if not ratios:
        return '%s | %s | not measured |' % (head, missing)
    text, ok = worst_text(ratios, limit)
    return '%s | %s | %s |' % (head, text, verdict(ok))


def sweep_target_lines(table, ranks, name, limit, colls, size_ok, peers_of, zimpl='zcoll'):
    """One line per collective: zimpl's worst paired time ratio over the sizes size_ok keeps."""
    out = []
    for coll in colls:
        sizes = [b for b in table.sizes(ranks, 'loop', coll) if size_ok(b)]
        ratios = ratio_sweep(table, ranks, coll, sizes, peers_of(coll), zimpl)
        out.append(worst_line('| %s, %s' % (coll, name), ratios, limit,
                              'no zcoll and peer result at the same size'))
    return out


def latency_target_lines(table):
    out = []
    for metric, name in (('p50_us', 'p50'), ('p999_us', 'p99.9')):
        r, who = table.paired_ratio(2, 'loop', 'allreduce', 8, metric)
        zc = table.median(2, 'loop', 'allreduce', 8, 'zcoll')
        head = '| allreduce 8 B %s <= 0.5x the best peer' % name
        if r is None:
            out.append('%s | no zcoll and peer result | not measured |' % head)
            continue
        out.append('%s | zcoll %s us; %.2fx %s | %s |' % (head, num(zc[metric]), r, who,
                                                          verdict(r <= 0.5)))
    return out


SMALL_LAT_MAX = 4096  # the small-message targets' sizes: 8 B to 4 KiB


def small_message_target_lines(table, floor):
    """The small-message targets: the 8-byte all_reduce's p50 against the hardware floor (the
    one-way cache-line latency measured in this run) and its p99.9 against Open MPI's; for every
    collective at 8 B-4 KiB, zcoll's mean within 1.5x its own p50 (no rare stalls) and at most
    0.8x the best peer's mean in every repetition; instructions per call (bench/percall.c)."""
    out = []
    zc = table.median(2, 'loop', 'allreduce', 8, 'zcoll')
    one_way = (floor or {}).get('one_way_ns_p50')
    head = '| allreduce 8 B p50 <= 2x the one-way cache-line latency'
    if zc and one_way:
        r = zc['p50_us'] * 1000.0 / one_way
        out.append('%s | zcoll %s us, floor %.0f ns: %.2fx | %s |'
                   % (head, num(zc['p50_us']), one_way, r, verdict(r <= 2.0)))
    else:
        out.append('%s | %s | not measured |'
                   % (head, 'no zcoll result' if not zc else 'no floor measured'))
    r, who = table.paired_ratio(2, 'loop', 'allreduce', 8, 'p999_us', ('openmpi',))
    head = '| allreduce 8 B p99.9 <= 1.0x Open MPI'
    if r is None:
        out.append('%s | no zcoll and Open MPI result | not measured |' % head)
    else:
        out.append('%s | zcoll %s us: %.2fx | %s |' % (head, num(zc['p999_us']), r,
                                                        verdict(r <= 1.0)))
    for coll in [c for c in COLLS if table.sizes(2, 'loop', c)]:
        sizes = [b for b in table.sizes(2, 'loop', coll, 'zcoll') if b <= SMALL_LAT_MAX]
        tails, worst = [], []
        for nbytes in sizes:
            m = table.median(2, 'loop', coll, nbytes, 'zcoll')
            if m and m['p50_us'] > 0:
                tails.append((nbytes, m['time_us'] / m['p50_us'], 'its p50'))
            ratios = []  # each repetition's zcoll mean / its best peer mean
            for rep, row in table.by_rep.get((2, 'loop', coll, nbytes, 'zcoll'), {}).items():
                peers = [table.by_rep.get((2, 'loop', coll, nbytes, i), {}).get(rep)
                         for i in coll_peers(coll)]
                best = min((p['time_us'] for p in peers if p and p['time_us'] > 0),
                           default=None)
                if best:
                    ratios.append(row['time_us'] / best)
            if ratios:
                worst.append((nbytes, max(ratios), 'the best peer, worst of %d repetitions'
                              % len(ratios)))
        out.append(worst_line('| %s 8 B-4 KiB: mean <= 1.5x its p50' % coll, tails, 1.5,
                              'no zcoll result'))
        out.append(worst_line('| %s 8 B-4 KiB: mean <= 0.8x the best peer\'s, every repetition'
                              % coll, worst, 0.8, 'no zcoll and peer result at the same size'))
    pc = table.percall.get('rows') or []
    head = '| instructions per 8-byte call <= 400 (bench/percall.c, callgrind, per rank)'
    if pc:
        most = max(pc, key=lambda x: max(x['rank0'], x['rank1']))
        text = ', '.join('%s %d / %d' % (x['coll'], x['rank0'], x['rank1']) for x in pc)
        out.append('%s | %s (rank 0 / rank 1); most %d (%s) | %s |'
                   % (head, text, max(most['rank0'], most['rank1']), most['coll'],
                      verdict(max(most['rank0'], most['rank1']) <= 400)))
    else:
        out.append('%s | %s | not measured |'
                   % (head, table.percall.get('reason', 'not run')))
    return out


def persistent_target_line(table):
    """By bench/startpair.c's paired measure when it ran (the two calls alternated within each
    launch), else by the persistent section's launch against the loop section's."""
    head = '| persistent plans (zc_start) at 8 B: no slower than the plain call'
    pair = table.start_pair.get('rows') or []
    if pair:
        r = statistics.median(x['start_over_plain'] for x in pair)
        p50 = lambda k: statistics.median(x[k] for x in pair)
        return ('%s | allreduce 8 B, alternated in one launch (bench/startpair.c, median of %d '
                'launches): zc_start %.0f ns, plain %.0f ns per call: %.2fx (%.0f%% %s) | %s |' % (
                    head, len(pair), p50('start_ns_p50'), p50('plain_ns_p50'), r,
                    abs(1 - r) * 100, 'faster' if r <= 1 else 'slower', verdict(r <= 1.0)))
    pz = table.median(2, 'persistent', 'allreduce', 8, 'zcoll')
    lz = table.median(2, 'loop', 'allreduce', 8, 'zcoll')
    if not pz or not lz:
        return '%s | %s | not measured |' % (head, 'zcbench has no --persistent'
                                              if not pz else 'no plain allreduce 8 B row')
    r = pz['time_us'] / lz['time_us']
    return '%s | allreduce 8 B: persistent %s us, plain %s us: %.2fx (%.0f%% %s) | %s |' % (
        head, num(pz['time_us']), num(lz['time_us']), r, abs(1 - r) * 100,
        'faster' if r <= 1 else 'slower', verdict(r <= 1.0))


def bandwidth_target_lines(table, floor):
    """zcoll with private buffers and with buffers in its symmetric region (zcoll_sym); the
    verdict goes by the faster of the two."""
    out = []
    gbs = floor.get('memcpy_gbs')
    for coll in BIG_COLLS:
        head = '| %s 64 MiB busbw >= 0.6x one core\'s memcpy' % coll
        got = [(i, table.median(2, 'loop', coll, BIG, i)) for i in ('zcoll', 'zcoll_sym')]
        got = [(i, m) for i, m in got if m]
        if not got or not gbs:
            out.append('%s | %s | not measured |' % (
                head, 'no zcoll 64 MiB result' if not got else 'bench/cacheline.c did not run'))
            continue
        best = max(m['busbw'] for _, m in got) / gbs
        out.append('%s | %s of %s GB/s | %s |' % (
            head, '; '.join('%s %s GB/s: %.2fx' % (i, num(m['busbw']), m['busbw'] / gbs)
                            for i, m in got), num(gbs), verdict(best >= 0.6)))
    return out


def target_lines(table, floor):
    """The targets, each met / NOT MET with the ratio this run measured. Time ratios are
    paired: the median over repetitions of zcoll / the best peer of the same repetition."""
    colls2 = [c for c in COLLS if table.sizes(2, 'loop', c)]
    colls4 = [c for c in COLLS if table.sizes(4, 'loop', c)]
    out = latency_target_lines(table)
    out += sweep_target_lines(table, 2, '8 B to 16 KiB: <= 0.8x the best peer', 0.8, colls2,
                              lambda b: b <= SMALL_MAX, coll_peers)
    out += sweep_target_lines(table, 2, 'every size: <= 1.0x the best peer', 1.0, colls2,
                              lambda b: True, coll_peers)
    sym2 = [c for c in colls2 if c in SYM_COLLS and
            any(b >= SYM_MIN for b in table.sizes(2, 'loop', c, 'zcoll_sym'))]
    out += sweep_target_lines(table, 2, 'buffers in the symmetric region (zcoll_sym), every size '
                              'from 64 KiB: <= 1.0x the best peer', 1.0, sym2,
                              lambda b: b >= SYM_MIN, coll_peers, 'zcoll_sym')
    out += small_message_target_lines(table, floor)
    out.append(persistent_target_line(table))
    out += bandwidth_target_lines(table, floor)
    out += sweep_target_lines(table, 4, '4 ranks on 2 cores: <= 1.0x Open MPI', 1.0, colls4,
                              lambda b: True, lambda c: ('openmpi',))
    left = [c for c in COLLS if c not in colls4]
    if left:
        out.append('| the other collectives, 4 ranks on 2 cores: <= 1.0x Open MPI | not run '
                   '(%s; `--colls4 all` runs them) | not measured |' % ', '.join(left))
    return out + loop_lines(table)


STRACE_TOTAL = re.compile(r'^100\.00\s+\S+\s+\S+\s+(\d+)\s+(?:\d+\s+)?total\s*$')


def strace_calls(path):
    """Total system calls of one `strace -c` summary file."""
    with open(path) as f:
        for line in f:
            m = STRACE_TOTAL.match(line.strip())
            if m:
                return int(m.group(1))
    raise ValueError('%s has no total line' % path)


def count_syscalls(iters=(2000, 4000)):
    """System calls of each rank in zcbench's timed loop: every rank runs under `strace -f -c`
    twice, with the same warm-up and different timed iteration counts; the loop's calls are
    the difference (start-up, warm-up and report cost the same both times)."""
    if not shutil.which('strace'):
        return {'reason': 'strace not installed (apt-get install strace)'}
    wrap = os.path.join(OUT, 'strace_rank.sh')
    with open(wrap, 'w') as f:
        f.write('#!/bin/sh\nexec strace -f -c -o "$ZB_STRACE_OUT.$ZC_RANK" "$@"\n')
    os.chmod(wrap, 0o755)
    rows = []
    for coll, nbytes in (('allreduce', 8), ('allreduce', 1 << 20), ('broadcast', 8)):
        calls = []
        for n in iters:
            out = os.path.join(OUT, 'strace.%s.%d.%d' % (coll, nbytes, n))
            cmd = [ZCRUN, '-n', '2', wrap, ZCBENCH, '-c', coll, '-b', str(nbytes), '-e',
                   str(nbytes), '-n', str(n), '-w', '200']
            env = dict(os.environ, ZB_STRACE_OUT=out)
            r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, timeout=120)
            if r.returncode != 0:
                return {'reason': 'zcbench under strace failed: %s' % tail(r.stderr, 2)}
            calls.append(max(strace_calls('%s.%d' % (out, k)) for k in range(2)))
        rows.append({'coll': coll, 'bytes': nbytes, 'calls': calls,
                     'extra': calls[1] - calls[0]})
        log('syscalls: %s %s: %d vs %d per rank' % (coll, size_text(nbytes), calls[0],
                                                    calls[1]))
    return {'iters': list(iters), 'rows': rows}


def write_report(path, host, sections, table, peers, launches, args, started, seconds,
                 interrupted, load_start, load_end):
    L = ['# zcoll against Open MPI, MPICH and Gloo', '']
    if interrupted:
        L += ['**Interrupted: this report covers only what was measured before the stop.**', '']
    L += ['Written by `ninja bench` (bench/run_bench.py). Each cell is the median over the '
          'repetitions of `p50 / mean / busbw`: p50 and mean in µs of the per-iteration '
          'slowest rank, busbw in GB/s (1e9 B/s) with nccl-tests\' bus factors. `time ratio` '
          '= zcoll mean / best peer mean (below 1: zcoll faster); `busbw ratio` = zcoll busbw '
          '/ best peer busbw (above 1: zcoll faster); `p50 ratio` = zcoll p50 / the lowest peer '
          'p50 (less sensitive to scheduling stalls than the mean). The best peer is the one '
          'with the lowest median mean time at that size; the latency targets compare with '
          'the lowest peer value of the same percentile. float32, sum, root 0; sizes are '
          'nccl-tests\' (total buffer per rank).', '', '## Host', '']
    L += host_description(host, peers, started, seconds, args, load_start, load_end)
    L += ['', '## How it was run', '',
          'Per operation and size sweep, each implementation runs one process launch that '
          'sweeps the sizes (`-b -e -f`), back to back with the others; %d repetition(s), the '
          'order rotated by one place each repetition. Iterations per size are adaptive '
          '(about 0.3 s of timed work, 10 to 100000, after a warm-up), so every '
          'implementation gets the same time budget. Commands (first sweep shown):'
          % args.reps, '']
    s0 = sections[0]
    for impl in IMPLS:
        if peers[impl].ok and (impl != 'zcoll_sym' or sym_sweep(s0.sweeps[0])):
            L.append('    ' + ' '.join(shlex.quote(w) for w in
                                       peers[impl].command(s0, 'allreduce', s0.sweeps[0])))
    L += ['', 'Open MPI is pinned to ob1 over shared memory (`--mca pml ob1 --mca btl '
          'self,vader`), the path it selects by itself on this host, named to skip its '
          'UCX/OFI probing at start-up; with more ranks than cores it runs with '
          '`--oversubscribe --bind-to core:overload-allowed`, else `--bind-to core`, and '
          'zcoll then runs under `zcrun --bind-to core` alike. MPICH (ch4:ucx) and Gloo run '
          'with their defaults; Gloo uses the loopback interface (GLOO_SOCKET_IFNAME=lo) and '
          'one torch thread per rank.', '']
    missing = [(i, peers[i].reason) for i in PEERS if not peers[i].ok]
    unsup = [(i, c, why) for i in PEERS for c, why in peers[i].unsupported.items()]
    if missing or unsup:
        L += ['## Missing peers and operations', '']
        L += ['- %s: %s' % (i, why) for i, why in missing]
        L += ['- %s %s: %s' % (i, c, why) for i, c, why in unsup]
        L.append('')
    L += ['## Targets', '',
          'Time ratios are paired: the median over the repetitions of zcoll\'s mean time / the '
          'lowest peer mean of the same repetition (launched back to back); below 1: zcoll '
          'faster. sendrecv is compared with the MPIs only. Charts: [below](#charts).',
          '', '| target | measured | verdict |', '|:--|:--|:--|']
    L += target_lines(table, host.get('floor') or {})
    L.append('')
    L += ['## The first targets', '', '| target | measured | verdict |', '|:--|:--|:--|']
    L += first_target_lines(table)
    L.append('')
    for s in sections:
        if not s.colls:
            continue
        L += ['## %s' % s.title, '']
        if s.note:
            L += [s.note, '']
        for coll in s.colls:
            L += ['### %s' % coll, '']
            L += coll_table(table, peers, s, coll)
            L.append('')
    L += ['## Charts', '']
    L += chart_lines(draw_charts(table, sections, host.get('floor') or {}))
    L.append('')
    failed = [la for la in launches if la.status in ('failed', 'timeout')]
    if failed:
        L += ['## Launches that failed or timed out', '']
        for la in failed:
            L.append('- %s: %s: `%s`' % (la.label().split('] ', 1)[1], la.status + ': ' +
                                         la.reason, ' '.join(la.cmd)))
        L.append('')
    L += ['Raw rows: `build/bench/results.jsonl`; every launch: `build/bench/runs.jsonl`.', '']
    with open(path, 'w') as f:
        f.write('\n'.join(L))


# ---- charts ------------------------------------------------------------------------------

CHARTS_PY = os.path.join('bench', 'charts.py')
NO_MATPLOTLIB = 3                    # charts.py's exit status when matplotlib is missing


def chart_data(table, sections, floor):
    """Every picture charts.py draws: one per section and operation, each implementation's
    median latency and bus bandwidth against size."""
    charts = []
    for s in sections:
        for coll in s.colls:
            series = {}
            for impl in IMPLS:
                pts = []
                for nbytes in table.sizes(s.ranks, s.mode, coll):
                    m = table.median(s.ranks, s.mode, coll, nbytes, impl)
                    if m:
                        pts.append([nbytes, m['time_us'], m['busbw']])
                if pts:
                    series[impl] = pts
            if 'zcoll' not in series or coll == 'barrier':
                continue
            charts.append({'file': 'chart_%s_%dranks_%s.png' % (coll, s.ranks, s.mode),
                           'title': '%s, %s' % (coll, s.title), 'series': series,
                           'memcpy_gbs': floor.get('memcpy_gbs')})
    return charts


def draw_charts(table, sections, floor):
    """Draws the charts into build/bench/ (old ones removed first); returns (charts drawn,
    why none were). Tries this Python, then Debian's, where python3-matplotlib lives."""
    for name in os.listdir(OUT):
        if name.startswith('chart_') and name.endswith('.png'):
            os.remove(os.path.join(OUT, name))
    charts = chart_data(table, sections, floor)
    if not charts:
        return [], 'nothing measured to draw'
    data = os.path.join(OUT, 'charts.json')
    with open(data, 'w') as f:
        json.dump(charts, f)
    why = 'matplotlib is not installed (Debian: python3-matplotlib, bench/install_peers.sh)'
    for py in dict.fromkeys((sys.executable, SYSTEM_PYTHON)):
        if not os.access(py, os.X_OK):
            continue
        try:
            p = subprocess.run([py, CHARTS_PY, data, OUT], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            why = 'charts.py failed to run: %s' % e
            continue
        if p.returncode == 0:
            return charts, ''
        if p.returncode != NO_MATPLOTLIB:
            why = 'charts.py failed (status %d): %s' % (p.returncode, tail(p.stdout, 2))
    log('charts not drawn: %s' % why)
    return [], why


def chart_lines(drawn):
    charts, why = drawn
    if not charts:
        return ['No charts in this report: %s. The tables above have every number.' % why]
    out = ['Latency (mean µs, log scale) and bus bandwidth (GB/s) against size, zcoll beside '
           'each peer, medians over the repetitions; the dashed line is one core\'s memcpy '
           'bandwidth (bench/cacheline.c). `python3 bench/run_bench.py --report-only` redraws '
           'them from runs.jsonl.', '']
    for c in charts:
        out += ['### %s' % c['title'], '', '![%s](%s)' % (c['title'], c['file']), '']
    return out


# ---- main --------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--quick', action='store_true',
                   help='one repetition, sizes 8 B, 1 MiB and 64 MiB only (a few minutes)')
    p.add_argument('--reps', type=int, default=None, help='repetitions (default 3; 1 quick)')
    p.add_argument('--colls', default=','.join(COLLS), help='operations, comma-separated')
    p.add_argument('--peers', default=','.join(PEERS), help='peers, comma-separated')
    p.add_argument('--timeout', type=int, default=240,
                   help='seconds one launch may run at 2 ranks (default 240)')
    p.add_argument('--colls4', default=','.join(COLLS4),
                   help='operations at 4 ranks on 2 cores (default %s; "all" for every one, '
                   'about 3x that section\'s time)' % ','.join(COLLS4))
    p.add_argument('--timeout-oversubscribed', type=int, default=60,
                   help='seconds one launch may run at 4 ranks on 2 cores (default 60)')
    p.add_argument('--report-only', action='store_true',
                   help='rewrite build/bench/report.md from build/bench/runs.jsonl; run nothing')
    a = p.parse_args(argv)
    a.colls = [c.strip() for c in a.colls.split(',') if c.strip()]
    a.peers = [c.strip() for c in a.peers.split(',') if c.strip()]
    a.colls4 = list(COLLS) if a.colls4 == 'all' else \
        [c.strip() for c in a.colls4.split(',') if c.strip()]
    for c in a.colls4:
        if c not in COLLS:
            p.error('--colls4: %s is not one of %s' % (c, ' '.join(COLLS)))
    for c in a.colls:
        if c not in COLLS:
            p.error('--colls: %s is not one of %s' % (c, ' '.join(COLLS)))
    for c in a.peers:
        if c not in PEERS:
            p.error('--peers: %s is not one of %s' % (c, ' '.join(PEERS)))
    if a.reps is None:
        a.reps = 1 if a.quick else 3
    if a.reps < 1:
        p.error('--reps: at least 1')
    return a


def loadavg():
    try:
        with open('/proc/loadavg') as f:
            return f.read().split()[0]
    except OSError:
        return '?'


def load_above(text, limit):
    try:
        return float(text) > limit
    except ValueError:
        return False


def peers_state(peers):
    return {i: {'ok': p.ok, 'reason': p.reason, 'version': p.version, 'package': p.package}
            for i, p in peers.items()}


def read_runs(path):
    """(start record, launch records, end record or None) from a runs.jsonl."""
    start, recs, end = None, [], None
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            kind = rec.get('kind')
            if kind == 'start':
                start = rec
            elif kind == 'end':
                end = rec
            elif kind == 'launch':
                recs.append(rec)
    if start is None:
        raise ValueError('%s has no start record' % path)
    return start, recs, end


def report_only(runs_path):
    """Rewrites report.md from a runs.jsonl, without running anything."""
    start, recs, end = read_runs(runs_path)
    args = argparse.Namespace(**start['args'])
    peers = {}
    state = (end or start)['peers']
    for impl in IMPLS:
        p = Peer(impl)
        p.__dict__.update(state.get(impl, {'ok': False, 'reason': 'not in the run'}))
        peers[impl] = p
    sections = plan_sections(args)
    launches = [la for la in (Launch.from_record(r, sections, peers) for r in recs) if la]
    started = datetime.datetime.fromisoformat(start['started'])
    seconds = end['seconds'] if end else 0.0
    interrupted = end is None or end.get('interrupted', False)
    report = os.path.join(OUT, 'report.md')
    host = start.get('host') or host_facts()
    table = Table(launches, args.reps)
    table.syscalls = (end or {}).get('syscalls', {})
    table.start_pair = (end or {}).get('start_pair', {})
    table.percall = (end or {}).get('percall', {'reason': 'not in the run'})
    write_report(report, host, sections, table, peers,
                 launches, args, started, seconds, interrupted, start['load_start'],
                 end['load_end'] if end else '?')
    log('wrote %s from %s (%d launches)' % (report, runs_path, len(launches)))
    return 0


def main(argv):
    os.chdir(ROOT)
    args = parse_args(shlex.split(os.environ.get('ZCBENCH_ARGS', '')) + argv)
    runs_path = os.path.join(OUT, 'runs.jsonl')
    if args.report_only:
        if not os.path.exists(runs_path):
            log('%s not found: nothing to report on' % runs_path)
            return 1
        return report_only(runs_path)
    for path in (ZCBENCH, ZCRUN):
        if not os.access(path, os.X_OK):
            log('%s not found: run ninja first' % path)
            return 1
    os.makedirs(OUT, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = loadavg()
    if load_above(load_start, 0.5):
        log('load average %s: other work is running on this host; expect noisy results'
            % load_start)
    t0 = time.monotonic()
    host = host_facts()
    peers = prepare_peers(args)
    args.persistent = 'persistent' in (run_quiet([ZCBENCH, '--help']) or '')
    sections = plan_sections(args)
    saved_args = {k: v for k, v in vars(args).items() if k != 'report_only'}
    with open(os.path.join(OUT, 'results.jsonl'), 'w') as results_file, \
            open(runs_path, 'w') as runs_file:
        runs_file.write(json.dumps({'kind': 'start', 'started': started.isoformat(),
                                    'load_start': load_start, 'args': saved_args,
                                    'host': host,
                                    'peers': peers_state(peers)}) + '\n')
        launches, interrupted = run_all(sections, peers, args, results_file, runs_file)
        syscalls = {} if interrupted else count_syscalls()
        pair = {} if interrupted else start_pair()
        percall = {'reason': 'interrupted'} if interrupted else percall_counts()
        seconds = time.monotonic() - t0
        load_end = loadavg()
        runs_file.write(json.dumps({'kind': 'end', 'seconds': round(seconds, 1),
                                    'load_end': load_end, 'interrupted': interrupted,
                                    'syscalls': syscalls, 'start_pair': pair,
                                    'percall': percall,
                                    'peers': peers_state(peers)}) + '\n')
    report = os.path.join(OUT, 'report.md')
    table = Table(launches, args.reps)
    table.syscalls = syscalls
    table.start_pair = pair
    table.percall = percall
    write_report(report, host, sections, table, peers, launches, args,
                 started, seconds, interrupted, load_start, load_end)
    log('wrote %s (%.0f s)' % (report, seconds))
    if interrupted:
        return 130
    zc_bad = [la for la in launches if la.peer.impl in ('zcoll', 'zcoll_sym') and
              la.status != 'ok']
    if zc_bad:
        log('zcoll failed in %d launch(es): see the report' % len(zc_bad))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
