#!/usr/bin/env python3
"""configure.py: probe the toolchain and optional dependencies, then write build.ninja.

Owns the build: which sources go where, with which flags. Standard library only. It runs
from the top of the tree (it changes into its own directory) and writes build.ninja there;
everything it builds goes under build/. Probe commands and their output go to
build/config.log. Also hosts the `--check-symbols` subcommand that build.ninja calls.

Sources are found by folder convention at configure time; build.ninja re-runs this script
(same options) when the script or a source folder changes, so a new .c file needs no action.
"""

import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

# --- data: build modes, flags, folders, optional targets --------------------------------

# `opt` goes to every C compile, `sanitize` to compiles and links (never to the freestanding
# check objects), `nvcc` to CUDA compiles.
MODES = {
    'release': {'opt': ['-O2', '-g'], 'sanitize': [], 'nvcc': ['-O2', '-lineinfo']},
    'debug': {'opt': ['-O0', '-g', '-fno-omit-frame-pointer'],
              'sanitize': ['-fsanitize=address,undefined', '-DZC_SANITIZED=1'],
              'nvcc': ['-O0', '-g', '-lineinfo']},
    'tsan': {'opt': ['-O1', '-g', '-fno-omit-frame-pointer'],
             'sanitize': ['-fsanitize=thread', '-DZC_SANITIZED=1'],
             'nvcc': ['-O1', '-g', '-lineinfo']},
    # platform/faults.c in front of posix.c: ZC_PLAT_FAULT fails a chosen platform call.
    'faults': {'opt': ['-O2', '-g', '-DZC_PLAT_FAULTS=1'], 'sanitize': [],
               'nvcc': ['-O2', '-lineinfo']},
}

WARNINGS = ['-Wall', '-Wextra', '-Werror', '-Wshadow', '-Wconversion', '-Wvla',
            '-Wstrict-prototypes', '-Wmissing-prototypes']
BASE_CFLAGS = ['-std=c11'] + WARNINGS + ['-fPIC', '-Iinclude', '-Iplatform']

# Extra flags per source folder, after the common ones. The provider interfaces (wire.h, gpu.h,
# the shared element code elem.h and sentence formatter fmt.h) live in provider/: the core, the
# transports and gpu/ get -Iprovider; only the tests also reach core internals (-Icore); tools
# and examples see only include/. Tests define _GNU_SOURCE empty, like `#define _GNU_SOURCE`
# in a file, so a file that also defines it does not trip -Werror on a redefinition.
FOLDER_CFLAGS = {
    'core': ['-Iprovider'],
    'transport_shm': ['-Iprovider'],
    'transport_ib': ['-Iprovider'],
    'gpu': ['-Iprovider'],
    'tests': ['-Icore', '-Iprovider', '-Igpu', '-D_GNU_SOURCE='],
    'tests/gpu': ['-Icore', '-Iprovider', '-Igpu', '-D_GNU_SOURCE='],
}
# Folders whose C files may include CUDA headers (never core/, platform/ or the transports).
CUDA_HEADER_FOLDERS = ('gpu', 'tools', 'tests', 'tests/gpu', 'examples')

# The CUDA runtime is linked statically and libcuda (the driver) not at all, so programs start
# on machines without an NVIDIA driver; gpu/ reaches driver functions through
# cudaGetDriverEntryPoint. libstdc++ serves the host stubs that nvcc generates.
CUDA_LIBS = ['-lcudart_static', '-ldl', '-lrt', '-lstdc++']

CUDA_ARCHS = ['-gencode', 'arch=compute_80,code=sm_80',
              '-gencode', 'arch=compute_90,code=sm_90',
              '-gencode', 'arch=compute_90,code=compute_90']

# Library folders: (folder, pattern, needs). `needs` names the feature that must be found.
LIB_SOURCES = [
    ('core', '*.c', None),
    ('platform', 'posix.c', None),
    ('platform', 'faults.c', None),
    ('transport_shm', '*.c', None),
    ('transport_ib', '*.c', 'ib'),
    ('gpu', 'sim*.c', None),  # the simulated GPU and cuda.c over it: every build
    ('gpu', '*.c', 'cuda'),
    ('gpu', '*.cu', 'cuda'),
]
# Compiled a second time with -DZC_TEST_HOOKS=1 into build/obj-test and linked into zctest
# ahead of libzcoll.a (so the library's own objects of the same names are never pulled in): the
# hostile-rank hook (proto.h's zc__test_forge) and the stall hook (zc__test_clock) exist in the
# test program only, never in the library (tests/install/run.sh checks the installed one).
TEST_HOOK_SOURCES = ['core/channel.c', 'core/progress.c', 'core/hier.c']
# Compiled in check-freestanding (and the first two checked by check-symbols).
FREE_SOURCES = [('core', '*.c'), ('transport_shm', '*.c'), ('platform', 'freestanding.c')]
SYMBOL_FOLDERS = ('core', 'transport_shm')
# Undefined symbols the core and the transports may use: mem* and our own zc_ names.
ALLOWED_SYMBOLS = {'memcpy', 'memset', 'memmove', 'memcmp'}
# Linker-provided anchors that -fPIC code refers to; they are addresses, not functions.
LINKER_SYMBOLS = {'_GLOBAL_OFFSET_TABLE_'}
ALLOWED_PREFIX = 'zc_'
# transport_ib may also call libibverbs (and read errno after it): check-ib-symbols holds it to
# that, and checks that every verbs symbol libzcoll.so imports binds to an IBVERBS_1.x version
# that the system libibverbs.so.1 defines. Instrumentation of the debug build is allowed.
IB_ALLOWED_PREFIXES = ('ibv_', '_ibv_', 'zc_', '__asan_', '__ubsan_', '__sanitizer_', '__tsan_')
IB_ALLOWED_SYMBOLS = ALLOWED_SYMBOLS | LINKER_SYMBOLS | {'__errno_location', '__stack_chk_fail'}

# The bare-metal aarch64 image (`ninja check-baremetal`, tests/baremetal/run.sh): the
# freestanding sources, the board (startup, hooks, mem*), the shared test reference and the test
# program, built with a cross compiler, -nostdlib, and booted by QEMU with no firmware or OS.
BAREMETAL_SOURCES = FREE_SOURCES + [('platform/baremetal', '*.c'), ('platform/baremetal', '*.S'),
                                    ('tests', 'ref.c'), ('tests/baremetal', '*.c')]
BAREMETAL_CFLAGS = ['-std=c11'] + WARNINGS + [
    '-O2', '-g', '-ffreestanding', '-nostdinc', '-fno-stack-protector', '-fno-pic',
    '-mcpu=cortex-a53', '-mno-outline-atomics',  # atomics inline, not libgcc's helpers
    '-fno-tree-loop-distribute-patterns',  # mem.c's loops must not become calls to themselves
    '-Iinclude', '-Iplatform', '-Iprovider', '-Icore', '-Iplatform/baremetal', '-Itests']
# libgcc is the only library linked (the compiler's runtime: 128-bit division in tests/ref.c).
BAREMETAL_LDFLAGS = ['-nostdlib', '-static', '-no-pie', '-T', 'platform/baremetal/link.ld',
                     '-Wl,--gc-sections', '-Wl,--build-id=none', '-Wl,--no-warn-rwx-segments']
BAREMETAL_PACKAGES = 'gcc-aarch64-linux-gnu qemu-system-arm'

# Folders whose mtime build.ninja depends on ('.' catches new top-level folders).
WATCHED = ['.', 'core', 'provider', 'platform', 'transport_shm', 'transport_ib', 'gpu', 'tools',
           'tests', 'tests/rxe', 'tests/gpu', 'tests/fuzz', 'examples', 'platform/baremetal',
           'tests/baremetal']

# Targets that run a script, defined only when the script exists: (target, file, command).
SCRIPT_TARGETS = [
    ('demo', 'examples/run_demo.sh', 'bash examples/run_demo.sh'),
    ('bench', 'bench/run_bench.py', '$python bench/run_bench.py'),
    ('test-rxe', 'tests/rxe/run.sh', 'bash tests/rxe/run.sh'),
    ('test-rxe2', 'tests/rxe/hosts.sh', 'bash tests/rxe/hosts.sh'),
    ('check-gpu', 'tests/gpu/run.sh', 'bash tests/gpu/run.sh'),
    ('fuzz', 'tests/fuzz/run.sh', 'bash tests/fuzz/run.sh explore'),
    ('soak', 'tests/soak.sh', 'bash tests/soak.sh'),
]


# --- a small ninja writer ------------------------------------------------------------------

def ninja_escape(path):
    """Escape a path for a build line: '$', ' ' and ':' are special there."""
    return path.replace('$', '$$').replace(' ', '$ ').replace(':', '$:')


class NinjaWriter:
    """Writes ninja syntax: variables, rules, build statements, comments. Paths are lists."""

    def __init__(self):
        self.lines = []

    def comment(self, text):
        self.lines.append('# ' + text)

    def newline(self):
        self.lines.append('')

    def variable(self, name, value, indent=0):
        if isinstance(value, (list, tuple)):
            value = ' '.join(v for v in value if v)
        self.lines.append('  ' * indent + '%s = %s' % (name, value))

    def rule(self, name, command, **attrs):
        self.lines.append('rule ' + name)
        self.variable('command', command, indent=1)
        for key, value in attrs.items():
            self.variable(key, value, indent=1)
        self.newline()

    def build(self, outputs, rule, inputs=(), implicit=(), order_only=(), variables=None):
        line = 'build ' + ' '.join(map(ninja_escape, outputs)) + ': ' + rule
        if inputs:
            line += ' ' + ' '.join(map(ninja_escape, inputs))
        if implicit:
            line += ' | ' + ' '.join(map(ninja_escape, implicit))
        if order_only:
            line += ' || ' + ' '.join(map(ninja_escape, order_only))
        self.lines.append(line)
        for key, value in (variables or {}).items():
            self.variable(key, value, indent=1)

    def default(self, targets):
        self.lines.append('default ' + ' '.join(map(ninja_escape, targets)))

    def text(self):
        return '\n'.join(self.lines) + '\n'


# --- probes --------------------------------------------------------------------------------

def fail(message):
    """The one line a user sees for a missing required dependency."""
    print('configure.py: ' + message, file=sys.stderr)
    sys.exit(1)


class Prober:
    """Runs probe commands in a temporary folder and logs each to build/config.log."""

    def __init__(self, log_path):
        self.log = open(log_path, 'w')
        self.dir = tempfile.mkdtemp(prefix='zcoll-configure-')

    def close(self):
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def run(self, argv):
        """Runs argv; returns (ok, stdout). A missing program counts as a failure."""
        self.log.write('$ %s\n' % shlex.join(argv))
        try:
            proc = subprocess.run(argv, cwd=self.dir, capture_output=True, text=True,
                                  timeout=120)
        except (OSError, subprocess.TimeoutExpired) as err:
            self.log.write('%s\n\n' % err)
            return False, ''
        self.log.write(proc.stdout + proc.stderr + 'exit %d\n\n' % proc.returncode)
        return proc.returncode == 0, proc.stdout


C_PROBE = '#include <stdio.h>\nint main(void) {\n    puts("ok");\n    return 0;\n}\n'
IB_PROBE = '''#include <infiniband/verbs.h>
int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list != NULL)
        ibv_free_device_list(list);
    return n < 0;
}
'''
CU_PROBE = '''__global__ void zc_probe_kernel(float *x) { x[threadIdx.x] += 1.0f; }
extern "C" int zc_probe_launch(float *x) {
    zc_probe_kernel<<<1, 32>>>(x);
    return (int)cudaGetLastError();
}
'''
CU_MAIN = ('int zc_probe_launch(float *x);\n'
           'int main(void) { return zc_probe_launch((float *)0) == 12345; }\n')


def probe_cc(p, cc, mode):
    """The C compiler must compile and link a C11 program with our flags; returns version."""
    src = p.write('cc.c', C_PROBE)
    m = MODES[mode]
    ok, _ = p.run([cc] + BASE_CFLAGS + m['opt'] + m['sanitize'] + [src, '-o', 'cc.out']
                  + m['sanitize'])
    if not ok:
        fail('C compiler %r cannot build a C11 program with the project flags: '
             'apt-get install build-essential (details: build/config.log)' % cc)
    ok, out = p.run([cc, '-dumpfullversion', '-dumpversion'])
    return out.split()[0] if ok and out.split() else '?'


def probe_freestanding_include(p, cc):
    """gcc's own header folder (stddef.h, stdint.h, stdatomic.h ...), or None."""
    for flag, suffix in (('-print-file-name=include', ''), ('-print-resource-dir', 'include')):
        ok, out = p.run([cc, flag])
        path = os.path.normpath(os.path.join(out.strip(), suffix)) if ok else ''
        if path and os.path.isfile(os.path.join(path, 'stddef.h')):
            return path
    return None


def probe_cxx(p, cxx):
    src = p.write('cxx.cc', 'int main() { return 0; }\n')
    ok, _ = p.run([cxx, '-std=c++11', '-fsyntax-only', src])
    return ok


def probe_ib(p, cc, want):
    """True when libibverbs headers and library work; exits if required and missing."""
    if want == 'no':
        return False
    src = p.write('ib.c', IB_PROBE)
    ok, _ = p.run([cc] + BASE_CFLAGS + [src, '-o', 'ib.out', '-libverbs'])
    if ok:
        return True
    if want == 'yes':
        fail('libibverbs headers not found: apt-get install libibverbs-dev rdma-core '
             '(details: build/config.log)')
    print('ib: not found (apt-get install libibverbs-dev), building without')
    return False


def probe_baremetal(p, cross_cc, want):
    """The cross compiler's own header folder when it links a -nostdlib aarch64 program and
    QEMU is there, else False."""
    if want == 'no':
        return False
    src = p.write('bm.c', 'void _start(void);\nvoid _start(void) {\n    for (;;) {\n    }\n}\n')
    ok, _ = p.run([cross_cc, '-ffreestanding', '-nostdlib', '-static', src, '-o', 'bm.out'])
    qemu = shutil.which('qemu-system-aarch64')
    include = probe_freestanding_include(p, cross_cc) if ok else None
    if include and qemu:
        return include
    why = ('%s cannot link a -nostdlib program' % cross_cc) if not include else \
        'qemu-system-aarch64 not found'
    if want == 'yes':
        fail('%s: apt-get install %s (details: build/config.log)' % (why, BAREMETAL_PACKAGES))
    print('baremetal: %s (apt-get install %s), check-baremetal skipped'
          % (why, BAREMETAL_PACKAGES))
    return False


def find_nvcc(want):
    if want not in ('auto', 'yes'):
        return want if os.path.isfile(want) else os.path.join(want, 'bin', 'nvcc')
    if os.access('/usr/local/cuda/bin/nvcc', os.X_OK):
        return '/usr/local/cuda/bin/nvcc'
    return shutil.which('nvcc')


def cuda_lib_dir(root):
    """The folder holding libcudart_static.a, or None (then the default search path)."""
    for d in ('lib64', 'lib', 'targets/x86_64-linux/lib'):
        if os.path.isfile(os.path.join(root, d, 'libcudart_static.a')):
            return os.path.join(root, d)
    return None


def probe_cuda(p, cc, want):
    """Returns None or a dict: nvcc, version, cflags (for C), libs. Exits when required."""
    if want == 'no':
        return None
    nvcc = find_nvcc(want)
    why = 'nvcc not found in ' + ('/usr/local/cuda/bin or PATH' if want in ('auto', 'yes')
                                  else want)
    if nvcc and os.path.isfile(nvcc):
        root = os.path.dirname(os.path.dirname(nvcc))
        libdir = cuda_lib_dir(root)
        libs = (['-L' + libdir] if libdir else []) + CUDA_LIBS
        p.write('k.cu', CU_PROBE)
        p.write('m.c', CU_MAIN)
        ok = (p.run([nvcc, '-c', '-Xcompiler=-fPIC'] + CUDA_ARCHS + ['k.cu', '-o', 'k.o'])[0]
              and p.run([cc, 'm.c', 'k.o', '-o', 'cu.out'] + libs)[0])
        if ok:
            out = p.run([nvcc, '--version'])[1]
            version = out.split('release ')[1].split(',')[0] if 'release ' in out else '?'
            inc = os.path.join(root, 'include')
            return {'nvcc': nvcc, 'version': version, 'libs': libs,
                    'cflags': ['-isystem', inc] if os.path.isdir(inc) else []}
        why = '%s cannot build and link a sm_80/sm_90 kernel' % nvcc
    if want != 'auto':
        fail('%s: apt-get install nvidia-cuda-toolkit, or install CUDA in /usr/local/cuda, '
             'or pass --with-cuda=PATH (details: build/config.log)' % why)
    print('cuda: not found (%s; apt-get install nvidia-cuda-toolkit), building without' % why)
    return None


# --- sources -------------------------------------------------------------------------------

def sources(folder, pattern):
    """Sorted files matching folder/pattern; a missing or empty folder gives []."""
    return sorted(glob.glob(os.path.join(folder, pattern)))


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def obj_path(src, top='build/obj'):
    """core/x.c -> build/obj/core/x.o; gpu/x.cu -> build/obj/gpu/x.cu.o (no clash with x.c)."""
    folder = os.path.dirname(src)
    name = os.path.basename(src) if src.endswith('.cu') else stem(src)
    return '%s/%s/%s.o' % (top, folder, name)


# --- build.ninja ---------------------------------------------------------------------------

def write_rules(n, cfg):
    """Variables and rules. Per-folder flags come in through the build statements."""
    m = MODES[cfg.mode]
    # ZC_HAVE_GPU_SIM: gpu/sim.c (hosted builds; the bare-metal image has no simulated device).
    defines = (['-DZC_HAVE_IB=1'] if cfg.ib else []) + (['-DZC_HAVE_CUDA=1'] if cfg.cuda else [])
    defines += ['-DZC_HAVE_GPU_SIM=1']
    libs = (['-lpthread'] + (['-libverbs'] if cfg.ib else [])
            + (cfg.cuda['libs'] if cfg.cuda else []))
    n.variable('ninja_required_version', '1.7')
    n.variable('builddir', 'build')  # .ninja_log/.ninja_deps there, not in the watched '.'
    n.variable('python', shlex.quote(sys.executable))
    n.variable('cc', shlex.quote(cfg.cc))
    n.variable('cxx', shlex.quote(cfg.cxx))
    n.variable('cflags', BASE_CFLAGS + defines + m['opt'] + m['sanitize'])
    n.variable('ldflags', m['sanitize'])
    n.variable('libs', libs)
    # No sanitizers and no stack protector (a distribution default on some): the check is
    # about what the sources need, not what instrumentation adds.
    n.variable('free_cflags', BASE_CFLAGS + defines + m['opt'] + [
        '-ffreestanding', '-nostdinc', '-fno-stack-protector',
        '-isystem', shlex.quote(cfg.free_include or 'missing')])
    if cfg.cuda:
        n.variable('nvcc', shlex.quote(cfg.cuda['nvcc']))
        n.variable('nvcc_flags', ['-Xcompiler=-fPIC,-Wall,-Wextra,-Werror', '-Werror=all-warnings',
                                  '-Iinclude', '-Iplatform'] + defines + m['nvcc'] + CUDA_ARCHS)
    n.newline()
    dep = {'depfile': '$out.d', 'deps': 'gcc'}
    n.rule('cc', '$cc -MD -MF $out.d $cflags -c $in -o $out', description='CC $out', **dep)
    n.rule('cc_free', '$cc -MD -MF $out.d $free_cflags -c $in -o $out',
           description='CC (freestanding) $out', **dep)
    if cfg.cuda:
        n.rule('nvcc', '$nvcc -MD -MF $out.d $nvcc_flags -c $in -o $out',
               description='NVCC $out', **dep)
    n.rule('ar', 'rm -f $out && ar crs $out $in', description='AR $out')
    n.rule('solink', '$cc -shared -Wl,-z,defs -Wl,-soname,$soname -o $out $in $ldflags $libs',
           description='LINK $out')
    n.rule('link', '$cc -o $out $in $ldflags $libs -lm', description='LINK $out')
    # A relative link ($target, beside $out), replacing whatever $out was.
    n.rule('symlink', 'ln -sfn $target $out', description='LN $out -> $target')
    n.rule('header_c', '$cc -std=c11 -Wall -Wextra -Werror -pedantic -Wshadow -Wconversion '
           '-Wstrict-prototypes -x c -fsyntax-only -include $in /dev/null && touch $out',
           description='CHECK $in as C11')
    n.rule('header_cxx', '$cxx -std=c++11 -Wall -Wextra -Werror -pedantic '
           '-x c++ -fsyntax-only -include $in /dev/null && touch $out',
           description='CHECK $in as C++11')
    n.rule('check_symbols', '$python configure.py --check-symbols $in && touch $out',
           description='CHECK undefined symbols')
    n.rule('check_layers', '$python configure.py --check-layers $in && touch $out',
           description='CHECK the core\'s layer order (core/layers.txt)')
    n.rule('check_ib_symbols', '$python configure.py --check-ib-symbols $in && touch $out',
           description='CHECK libibverbs symbols and versions')
    n.rule('fail', 'echo "$msg" && exit 1', description='FAIL $out')
    n.rule('run', '$cmd', description='RUN $cmd', pool='console')
    n.rule('configure', '$python configure.py $configure_args', generator='1',
           description='CONFIGURE')
    n.newline()


def folder_cflags(folder, cfg, free=False):
    """The per-folder extras: FOLDER_CFLAGS, plus CUDA headers where allowed (not freestanding)."""
    extra = list(FOLDER_CFLAGS.get(folder, []))
    if cfg.cuda and not free and folder in CUDA_HEADER_FOLDERS:
        extra += cfg.cuda['cflags']
    return extra


def compile_all(n, cfg, srcs, free=False):
    """One build statement per source (.c with cc, .cu with nvcc); returns the objects."""
    objs = []
    for src in srcs:
        obj = obj_path(src, 'build/obj-free' if free else 'build/obj')
        rule, var = ('cc_free', 'free_cflags') if free else ('cc', 'cflags')
        extra = folder_cflags(os.path.dirname(src), cfg, free)
        if src.endswith('.cu'):
            # g++ (nvcc's host compiler) predefines _GNU_SOURCE itself.
            rule, var = 'nvcc', 'nvcc_flags'
            extra = [f for f in FOLDER_CFLAGS.get(os.path.dirname(src), [])
                     if not f.startswith('-D_GNU_SOURCE')]
        n.build([obj], rule, [src], variables={var: ['$' + var] + extra} if extra else None)
        objs.append(obj)
    return objs


def version():
    """ZC_VERSION_MAJOR and ZC_VERSION_MINOR of include/zcoll.h: the shared library is the file
    libzcoll.so.MAJOR.MINOR.0 with SONAME libzcoll.so.MAJOR."""
    found = {}
    with open('include/zcoll.h') as f:
        for line in f:
            words = line.split()
            if len(words) == 3 and words[0] == '#define' and words[1] in (
                    'ZC_VERSION_MAJOR', 'ZC_VERSION_MINOR'):
                found[words[1]] = words[2]
    if len(found) != 2:
        fail('include/zcoll.h has no ZC_VERSION_MAJOR or no ZC_VERSION_MINOR')
    return found['ZC_VERSION_MAJOR'], found['ZC_VERSION_MINOR']


def write_library(n, cfg):
    enabled = {'ib': cfg.ib, 'cuda': cfg.cuda}
    objs, seen = [], set()
    for folder, pattern, needs in LIB_SOURCES:
        if needs is None or enabled[needs]:
            srcs = [f for f in sources(folder, pattern) if f not in seen]
            seen.update(srcs)
            objs += compile_all(n, cfg, srcs)
    n.build(['build/libzcoll.a'], 'ar', objs)
    # The shared library as an installed tree holds it (tools/install.sh makes the same three):
    # the file libzcoll.so.MAJOR.MINOR.0, the link its SONAME names (what a program linked
    # against build/ loads at run time) and the link -lzcoll finds.
    major, minor = version()
    real, soname = 'libzcoll.so.%s.%s.0' % (major, minor), 'libzcoll.so.%s' % major
    n.build(['build/' + real], 'solink', objs, variables={'soname': soname})
    n.build(['build/' + soname], 'symlink', ['build/' + real], variables={'target': real})
    n.build(['build/libzcoll.so'], 'symlink', ['build/' + soname], variables={'target': soname})
    n.build(['lib'], 'phony', ['build/libzcoll.a', 'build/libzcoll.so'])
    n.newline()


def write_programs(n, cfg):
    """tools/x.c -> build/x; tests/*.c -> build/zctest; examples/x.c -> build/examples/x."""
    tools = []
    for src in sources('tools', '*.c'):
        tools.append('build/' + stem(src))
        n.build([tools[-1]], 'link', compile_all(n, cfg, [src]) + ['build/libzcoll.a'])
    tests = compile_all(n, cfg, sources('tests', '*.c'))
    hooks = []
    for src in TEST_HOOK_SOURCES:
        hooks.append(obj_path(src, 'build/obj-test'))
        n.build([hooks[-1]], 'cc', [src], variables={
            'cflags': ['$cflags'] + folder_cflags(os.path.dirname(src), cfg)
            + ['-DZC_TEST_HOOKS=1']})
    n.build(['build/zctest'], 'link', tests + hooks + ['build/libzcoll.a'])
    examples = []
    for src in sources('examples', '*.c'):
        examples.append('build/examples/' + stem(src))
        n.build([examples[-1]], 'link', compile_all(n, cfg, [src]) + ['build/libzcoll.a'])
    # tests/gpu: the device-memory suite, every build (on the simulated device in `ninja check`,
    # on CUDA in `ninja check-gpu`); its .cu files only with CUDA. It shares zctest's runner
    # (tests/harness.c) and reference (tests/ref.c).
    gpu_tests = ['build/zcgputest']
    objs = compile_all(n, cfg, sources('tests/gpu', '*.c')
                       + (sources('tests/gpu', '*.cu') if cfg.cuda else []))
    objs += [obj_path('tests/harness.c'), obj_path('tests/ref.c')]
    n.build(gpu_tests, 'link', objs + ['build/libzcoll.a'])
    n.build(['all-tools'], 'phony', tools)
    n.build(['all-examples'], 'phony', examples)
    n.build(['zctest'], 'phony', ['build/zctest'])
    for tool in tools:  # `ninja zcrun`: short names for zc* tools no file or folder has
        name = os.path.basename(tool)
        if name.startswith('zc') and name != 'zctest' and not os.path.exists(name):
            n.build([name], 'phony', [tool])
    n.build(['all'], 'phony', ['lib', 'all-tools', 'zctest', 'all-examples'] + gpu_tests)
    n.newline()


def write_checks(n, cfg):
    """check-headers, check-freestanding, check-symbols, check, test and script targets."""
    n.build(['build/check/header-c.stamp'], 'header_c', ['include/zcoll.h'])
    if cfg.cxx_ok:
        n.build(['build/check/header-cxx.stamp'], 'header_cxx', ['include/zcoll.h'])
    else:
        n.build(['build/check/header-cxx.stamp'], 'fail', variables={
            'msg': 'C++ compiler %s not found: apt-get install g++' % cfg.cxx})
    n.build(['check-headers'], 'phony',
            ['build/check/header-c.stamp', 'build/check/header-cxx.stamp'])
    free_srcs = [s for folder, pat in FREE_SOURCES for s in sources(folder, pat)]
    if cfg.free_include:
        free_objs = compile_all(n, cfg, free_srcs, free=True)
    else:
        free_objs = ['build/obj-free/missing-include']
        n.build(free_objs, 'fail', variables={
            'msg': 'compiler %s has no freestanding include folder' % cfg.cc})
    n.build(['check-freestanding'], 'phony', free_objs)
    checked = [o for o in free_objs if o.split('/')[2] in SYMBOL_FOLDERS]
    n.build(['build/check/symbols.stamp'], 'check_symbols', checked,
            implicit=['configure.py'])
    n.build(['check-symbols'], 'phony', ['build/check/symbols.stamp'])
    core_objs = [o for o in free_objs if o.split('/')[2] == 'core']
    n.build(['build/check/layers.stamp'], 'check_layers', core_objs,
            implicit=['configure.py', 'core/layers.txt'])
    n.build(['check-layers'], 'phony', ['build/check/layers.stamp'])
    checks = ['check-headers', 'check-freestanding', 'check-symbols', 'check-layers']
    if cfg.ib:  # the shared library first: its imports are what the check reads
        ib_objs = [obj_path(s) for s in sources('transport_ib', '*.c')]
        n.build(['build/check/ib-symbols.stamp'], 'check_ib_symbols',
                ['build/libzcoll.so'] + ib_objs, implicit=['configure.py'])
        n.build(['check-ib-symbols'], 'phony', ['build/check/ib-symbols.stamp'])
        checks.append('check-ib-symbols')
    n.build(['FORCE'], 'phony')  # always dirty: the `run` targets below always run
    n.build(['test'], 'run', implicit=['FORCE', 'all'], variables={'cmd': 'build/zctest'})
    # Overlay mode at 512 and 4,096 in-process ranks (tests/test_scale.c) and a job of 1,100
    # processes (tests/test_mp.c); `ninja check` runs them at 1,024 and 128 as part of zctest.
    n.build(['check-scale'], 'run', implicit=['FORCE', 'all'],
            variables={'cmd': 'ZC_SCALE_RANKS=512,4096 ZC_SCALE_PROCS=1100 build/zctest scale_'})
    # The static checks first, then every test (zctest, and the soft-RoCE guest suite when
    # transport_ib is built) with one combined summary line: README's and CI's test command.
    if cfg.baremetal:  # the image and its symbol check; check.sh boots it
        checks.append('build/check/baremetal-symbols.stamp')
    n.build(['check'], 'run', implicit=['FORCE', 'all'] + checks,
            variables={'cmd': 'bash tests/check.sh' + (' --ib' if cfg.ib else '')
                       + (' --baremetal' if cfg.baremetal else '')})
    # `ninja install` (DESTDIR from the environment): tools/install.sh with --prefix.
    n.build(['install'], 'run', implicit=['FORCE', 'all'],
            variables={'cmd': 'bash tools/install.sh ' + shlex.quote(cfg.prefix)})
    for target, path, cmd in SCRIPT_TARGETS:
        if os.path.isfile(path):
            n.build([target], 'run', implicit=['FORCE', 'all'], variables={'cmd': cmd})
    n.newline()


def write_baremetal(n, cfg):
    """build/baremetal/zcoll.elf from BAREMETAL_SOURCES; check-baremetal checks its symbols,
    then boots it (tests/baremetal/run.sh). Without the cross tools the target says what to
    install."""
    if not cfg.baremetal:
        n.build(['check-baremetal'], 'fail', variables={
            'msg': 'check-baremetal needs aarch64-linux-gnu-gcc and qemu-system-aarch64: '
                   'apt-get install %s, then ./configure.py' % BAREMETAL_PACKAGES})
        n.newline()
        return
    n.variable('bm_cc', shlex.quote(cfg.cross_cc))
    n.variable('bm_cflags', BAREMETAL_CFLAGS + ['-isystem', shlex.quote(cfg.baremetal)])
    n.variable('bm_ldflags', BAREMETAL_LDFLAGS)
    n.rule('bm_cc', '$bm_cc -MD -MF $out.d $bm_cflags -c $in -o $out',
           description='CC (bare-metal) $out', depfile='$out.d', deps='gcc')
    n.rule('bm_link', '$bm_cc $bm_ldflags -o $out $in -lgcc', description='LINK $out')
    n.variable('bm_nm', shlex.quote(cfg.cross_cc[:-len('gcc')] + 'nm'
                                    if cfg.cross_cc.endswith('gcc') else 'nm'))
    n.rule('bm_symbols', 'NM=$bm_nm BM_CC=$bm_cc $python configure.py '
           '--check-baremetal-symbols $in && touch $out',
           description='CHECK bare-metal image symbols')
    srcs = [s for folder, pat in BAREMETAL_SOURCES for s in sources(folder, pat)]
    objs = [obj_path(s, 'build/baremetal/obj') for s in srcs]
    for src, obj in zip(srcs, objs):
        n.build([obj], 'bm_cc', [src])
    image = 'build/baremetal/zcoll.elf'
    n.build([image], 'bm_link', objs, implicit=['platform/baremetal/link.ld'])
    n.build(['build/check/baremetal-symbols.stamp'], 'bm_symbols', [image] + objs,
            implicit=['configure.py'])
    n.build(['check-baremetal'], 'run', implicit=['FORCE', 'build/check/baremetal-symbols.stamp'],
            variables={'cmd': 'bash tests/baremetal/run.sh'})
    n.newline()


def write_regenerate(n, cfg):
    watched = [d for d in WATCHED if os.path.isdir(d)]
    n.variable('configure_args', cfg.configure_args)
    n.build(['build.ninja'], 'configure', implicit=['configure.py'] + watched)
    n.default(['all'])


def write_ninja(cfg):
    n = NinjaWriter()
    n.comment('Generated by configure.py %s; do not edit, re-run configure.py.'
              % cfg.configure_args)
    n.newline()
    write_rules(n, cfg)
    write_library(n, cfg)
    write_programs(n, cfg)
    write_checks(n, cfg)
    write_baremetal(n, cfg)
    write_regenerate(n, cfg)
    # Written in place (no rename): a rename would touch '.', which build.ninja depends on.
    with open('build.ninja', 'w') as f:
        f.write(n.text())


# --- check-symbols -------------------------------------------------------------------------

def check_symbols(objects):
    """Fails listing every undefined symbol outside mem* and zc_*, per object."""
    nm = os.environ.get('NM', 'nm')
    bad = 0
    for obj in objects:
        out = subprocess.run([nm, '-u', '-P', obj], capture_output=True, text=True, check=True)
        names = [line.split()[0] for line in out.stdout.splitlines() if line.split()]
        wrong = [s for s in names if s not in ALLOWED_SYMBOLS | LINKER_SYMBOLS
                 and not s.startswith(ALLOWED_PREFIX)]
        if wrong:
            print('check-symbols: %s uses %s' % (obj, ' '.join(sorted(wrong))))
            bad += 1
    if bad:
        print('check-symbols: %d object(s) need symbols beyond %s and %s*: the core and the '
              'transports reach the OS only through platform/' %
              (bad, ' '.join(sorted(ALLOWED_SYMBOLS)), ALLOWED_PREFIX))
        return 1
    return 0


def check_layers(objects):
    """Fails when a core object uses a symbol that a core file above it in core/layers.txt
    defines (files on one line may use each other's), or when a core file has no line."""
    nm = os.environ.get('NM', 'nm')
    level, bad = {}, []
    with open('core/layers.txt') as f:
        for line in f:
            if line.strip() and not line.startswith('#'):
                for name in line.split():
                    level[name] = len(set(level.values()))
    owner, uses = {}, {}
    for obj in objects:
        src = os.path.basename(obj)[:-2] + '.c'
        if src not in level:
            bad.append('core/%s has no line in core/layers.txt' % src)
            continue
        out = subprocess.run([nm, '-P', obj], capture_output=True, text=True, check=True).stdout
        uses[src] = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            if parts[1] == 'U':
                uses[src].add(parts[0])
            elif parts[1] in ('T', 'D', 'R', 'B', 'C', 'V', 'W'):
                owner[parts[0]] = src
    for src in sorted(uses):
        for sym in sorted(uses[src]):
            dst = owner.get(sym)
            if dst and level[dst] < level[src]:
                bad.append('core/%s uses %s, which core/%s defines above it' % (src, sym, dst))
    for line in bad:
        print('check-layers: %s' % line)
    if bad:
        print('check-layers: %d use(s) against the order of core/layers.txt: a file calls only '
              'files on its line or below (move the code down, or the file)' % len(bad))
        return 1
    return 0


def check_baremetal_symbols(files):
    """check-baremetal: files = the image, then its objects. Every symbol the image defines
    comes from one of those objects or from libgcc (the compiler's runtime), none is left
    undefined, and none is a C library's: the proof that no libc went in."""
    nm = os.environ.get('NM', 'nm')
    image, objects = files[0], files[1:]

    def names(args):
        out = subprocess.run([nm] + args, capture_output=True, text=True, check=True).stdout
        return {line.split()[0] for line in out.splitlines()
                if line.split() and not line.startswith(('$', '.'))}

    ours = names(['--defined-only', '-P'] + objects)
    image_syms = names(['--defined-only', '-P', image])
    undefined = names(['-u', '-P', image])
    cc = os.environ.get('BM_CC', 'aarch64-linux-gnu-gcc')
    libgcc = subprocess.run([cc, '-print-libgcc-file-name'], capture_output=True,
                            text=True).stdout.strip()
    runtime = names(['--defined-only', '-P', libgcc]) if os.path.isfile(libgcc) else set()
    linker = {s for s in image_syms if s.startswith('__') and s.endswith(('_start', '_end',
                                                                          '_top'))}
    foreign = image_syms - ours - linker
    not_runtime = foreign - runtime
    bad = []
    if undefined:
        bad.append('undefined in the image: ' + ' '.join(sorted(undefined)))
    if not_runtime:
        bad.append('defined by neither zcoll nor libgcc (%s): %s'
                   % (libgcc or 'not found', ' '.join(sorted(not_runtime))))
    for line in bad:
        print('check-baremetal-symbols: ' + line)
    if not bad:
        print('check-baremetal-symbols: %d symbols, all from zcoll\'s objects but %d from '
              'libgcc: %s' % (len(image_syms), len(foreign), ' '.join(sorted(foreign))))
    return 1 if bad else 0


def ib_library(shared):
    """The libibverbs.so.1 that shared loads (ldd), else the compiler's; None if neither."""
    out = subprocess.run(['ldd', shared], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith('libibverbs.so') and len(parts) > 2:
            return parts[2]
    cc = os.environ.get('CC') or 'cc'
    path = subprocess.run([cc, '-print-file-name=libibverbs.so.1'], capture_output=True,
                          text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def dynamic_symbols(path):
    """objdump -T of path as (name, version, defined) triples."""
    objdump = os.environ.get('OBJDUMP', 'objdump')
    out = subprocess.run([objdump, '-T', path], capture_output=True, text=True, check=True)
    syms = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) < 4 or ('*UND*' not in parts and '.text' not in parts):
            continue
        name, version = parts[-1], parts[-2].strip('()')
        syms.append((name, version, '*UND*' not in parts))
    return syms


def check_ib_symbols(files):
    """check-ib-symbols: files = libzcoll.so then transport_ib's objects."""
    shared, objects = files[0], files[1:]
    nm = os.environ.get('NM', 'nm')
    bad = []
    for obj in objects:
        out = subprocess.run([nm, '-u', '-P', obj], capture_output=True, text=True, check=True)
        names = [line.split()[0] for line in out.stdout.splitlines() if line.split()]
        wrong = [s for s in names if s not in IB_ALLOWED_SYMBOLS
                 and not s.startswith(IB_ALLOWED_PREFIXES)]
        if wrong:
            bad.append('%s uses %s: transport_ib reaches the OS only through platform/ and '
                       'libibverbs' % (obj, ' '.join(sorted(wrong))))
    imports = [(n, v) for n, v, d in dynamic_symbols(shared) if not d and
               (n.startswith('ibv_') or n.startswith('_ibv_'))]
    lib = ib_library(shared)
    have = {(n, v) for n, v, d in dynamic_symbols(lib) if d} if lib else set()
    if not imports:
        bad.append('%s imports no ibv_* symbol: transport_ib is not in it' % shared)
    if not lib:
        bad.append('no libibverbs.so.1 found (ldd %s)' % shared)
    for name, version in imports:
        if not version.startswith('IBVERBS_1.'):
            bad.append('%s imports %s without an IBVERBS_1.x version (%s)' % (shared, name,
                                                                              version))
        elif lib and (name, version) not in have:
            bad.append('%s imports %s@%s, which %s does not define' % (shared, name, version,
                                                                     lib))
    for line in bad:
        print('check-ib-symbols: ' + line)
    if not bad:
        print('check-ib-symbols: %d verbs imports, all versioned and in %s: %s' % (
            len(imports), lib, ' '.join('%s@%s' % i for i in sorted(imports))))
    return 1 if bad else 0


# --- main ----------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog='configure.py',
        description='Probe the toolchain and write build.ninja. Run from the top of the '
        'tree, then `ninja` (library, tools, tests, examples), `ninja demo` (the examples and a '
        'checked zcbench sweep), `ninja test` (build, then run build/zctest), `ninja check` '
        '(the static checks, then every suite through tests/check.sh with one combined summary '
        'line); also bench, install, test-rxe, check-gpu, check-baremetal, fuzz, soak. Every '
        'target: docs/testing.md. Probe details go to build/config.log.')
    ap.add_argument('--mode', choices=sorted(MODES), default='release',
                    help='release: -O2 -g; debug: -O0 -g with ASan and UBSan; tsan: -O1 -g with '
                         'ThreadSanitizer; faults: release with platform/faults.c, which '
                         'fails the platform call that ZC_PLAT_FAULT names (default release)')
    ap.add_argument('--with-cuda', default='auto', metavar='auto|yes|no|PATH',
                    help='build gpu/ with nvcc; auto looks for /usr/local/cuda/bin/nvcc then '
                    'nvcc on PATH and builds without CUDA when absent; PATH is a CUDA root '
                    'or an nvcc (default auto)')
    ap.add_argument('--with-ib', choices=['auto', 'yes', 'no'], default='auto',
                    help='build transport_ib/ against libibverbs (default auto)')
    ap.add_argument('--prefix', default='/usr/local',
                    help='where `ninja install` puts lib/, include/, bin/ and the Python '
                    'package (default /usr/local; DESTDIR is honoured)')
    ap.add_argument('--cc', default=os.environ.get('CC') or 'cc',
                    help='C compiler (default $CC or cc)')
    ap.add_argument('--cxx', default=os.environ.get('CXX') or 'c++',
                    help='C++ compiler, used only by check-headers (default $CXX or c++)')
    ap.add_argument('--with-baremetal', choices=['auto', 'yes', 'no'], default='auto',
                    help='build the bare-metal aarch64 image and boot it in `ninja check` '
                    '(needs %s; default auto)' % BAREMETAL_PACKAGES)
    ap.add_argument('--cross-cc', default='aarch64-linux-gnu-gcc',
                    help='aarch64 compiler for the bare-metal image (default '
                    'aarch64-linux-gnu-gcc)')
    ap.add_argument('--check-baremetal-symbols', nargs='+', metavar='FILE',
                    help='internal, run by `ninja check-baremetal`: the image, then its objects')
    ap.add_argument('--check-ib-symbols', nargs='+', metavar='FILE',
                    help='internal, run by `ninja check-ib-symbols`: libzcoll.so, then '
                    'transport_ib objects (see check_ib_symbols)')
    ap.add_argument('--check-layers', nargs='+', metavar='OBJ',
                    help='internal, run by `ninja check-layers`: fail if a core object uses a '
                    'symbol defined by a core file above it in core/layers.txt')
    ap.add_argument('--check-symbols', nargs='*', metavar='OBJ',
                    help='internal, run by `ninja check-symbols`: fail if an object has '
                    'undefined symbols other than memcpy memset memmove memcmp and zc_*')
    return ap.parse_args(argv)


def main(argv):
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    args = parse_args(argv)
    if args.check_symbols is not None:
        return check_symbols(args.check_symbols)
    if args.check_layers is not None:
        return check_layers(args.check_layers)
    if args.check_ib_symbols is not None:
        return check_ib_symbols(args.check_ib_symbols)
    if args.check_baremetal_symbols is not None:
        return check_baremetal_symbols(args.check_baremetal_symbols)
    os.makedirs('build', exist_ok=True)
    p = Prober('build/config.log')
    try:
        cfg = args
        cfg.cc_version = probe_cc(p, cfg.cc, cfg.mode)
        cfg.free_include = probe_freestanding_include(p, cfg.cc)
        cfg.cxx_ok = probe_cxx(p, cfg.cxx)
        cfg.ib = probe_ib(p, cfg.cc, cfg.with_ib)
        cfg.cuda = probe_cuda(p, cfg.cc, cfg.with_cuda)
        cfg.baremetal = probe_baremetal(p, cfg.cross_cc, cfg.with_baremetal)
    finally:
        p.close()
    cfg.configure_args = shlex.join(['--mode', cfg.mode, '--with-cuda', cfg.with_cuda,
                                     '--with-ib', cfg.with_ib, '--prefix', cfg.prefix,
                                     '--cc', cfg.cc, '--cxx', cfg.cxx,
                                     '--with-baremetal', cfg.with_baremetal,
                                     '--cross-cc', cfg.cross_cc])
    if not cfg.cxx_ok:
        print('c++: %s not found (apt-get install g++), check-headers will fail' % cfg.cxx)
    if not cfg.free_include:
        print('freestanding: no compiler include folder, check-freestanding will fail')
    write_ninja(cfg)
    cuda = 'yes (%s, release %s)' % (cfg.cuda['nvcc'], cfg.cuda['version']) if cfg.cuda else 'no'
    print('mode: %s\ncc:   %s (%s)\ncuda: %s\nib:   %s\nbaremetal: %s\nwrote build.ninja'
          % (cfg.mode, cfg.cc, cfg.cc_version, cuda, 'yes (libibverbs)' if cfg.ib else 'no',
             'yes (%s, qemu-system-aarch64)' % cfg.cross_cc if cfg.baremetal else 'no'))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
