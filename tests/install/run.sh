#!/usr/bin/env bash
# tests/install/run.sh: zcoll as outside programs use it. First the build tree, the usual
# first step: build/ must hold the shared library the way an installed tree does (the file
# libzcoll.so.MAJOR.MINOR.0, the link its SONAME names, the link -lzcoll finds); a program
# built with `cc zchello.c -Iinclude -Lbuild -lzcoll -Wl,-rpath,$PWD/build` must load
# build/'s library and run on 2 and 4 ranks under build/zcrun. Then `ninja install` into a
# DESTDIR (tools/install.sh) and, from that tree only: build tests/install/zchello.c with
# `pkg-config --cflags --libs zcoll` (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR point
# pkg-config at the DESTDIR), check its NEEDED entry is the SONAME, run it on 3 ranks under the
# installed zcrun, and, where torch is installed, import the installed zcoll_torch with nothing
# from the source tree on the path and run a 2-rank all_reduce on it; the installed library has
# no test hook. Prints PASS/FAIL lines and `N passed, N failed, N skipped`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
TOP=$PWD
# shellcheck source=tests/suite.sh
source tests/suite.sh

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=/opt/zcoll-test
ROOT=$TMP/dest$PREFIX
MAJOR=$(sed -n 's/^#define ZC_VERSION_MAJOR \([0-9]*\)$/\1/p' include/zcoll.h)
MINOR=$(sed -n 's/^#define ZC_VERSION_MINOR \([0-9]*\)$/\1/p' include/zcoll.h)
REAL=libzcoll.so.$MAJOR.$MINOR.0

# ranks_say_sum N LOG: every rank 0..N-1 printed "zchello rank R of N: sum N(N+1)/2".
ranks_say_sum() {
    local n=$1 log=$2 r
    for ((r = 0; r < n; r++)); do
        grep -q "zchello rank $r of $n: sum $((n * (n + 1) / 2))\$" "$log" || return 1
    done
}

# The build tree: the file, its two links, the SONAME inside.
if [ -f "build/$REAL" ] && [ ! -L "build/$REAL" ] &&
        [ "$(readlink build/libzcoll.so.$MAJOR)" = "$REAL" ] &&
        [ "$(readlink build/libzcoll.so)" = "libzcoll.so.$MAJOR" ] &&
        grep -q "SONAME.*\[libzcoll.so.$MAJOR\]" <<<"$(readelf -d "build/$REAL")"; then
    pass "build/ holds $REAL (SONAME libzcoll.so.$MAJOR) and the links libzcoll.so.$MAJOR, libzcoll.so"
else
    fail "build/ holds the shared library as an installed tree does"; ls -l build/libzcoll.so*
fi
# A program linked against the tree, as a user writes the line; it must load build/'s library.
if cp tests/install/zchello.c "$TMP/app.c" &&
        cc -std=c11 -o "$TMP/app" "$TMP/app.c" -Iinclude -Lbuild -lzcoll -Wl,-rpath,"$PWD/build" &&
        grep -q "NEEDED.*\[libzcoll.so.$MAJOR\]" <<<"$(readelf -d "$TMP/app")" &&
        grep -q "libzcoll.so.$MAJOR => $PWD/build/libzcoll.so.$MAJOR " <<<"$(ldd "$TMP/app")"; then
    pass "a program linked with -Lbuild -lzcoll -Wl,-rpath,build loads build/libzcoll.so.$MAJOR"
else
    fail "a program linked against the build tree"; ldd "$TMP/app"
fi
for n in 2 4; do
    if build/zcrun -n "$n" --timeout 60 "$TMP/app" >"$TMP/tree$n.log" 2>&1 &&
            ranks_say_sum "$n" "$TMP/tree$n.log"; then
        pass "the build-tree program on $n ranks under build/zcrun"
    else
        fail "the build-tree program on $n ranks under build/zcrun"; cat "$TMP/tree$n.log"
    fi
done

if DESTDIR=$TMP/dest bash tools/install.sh "$PREFIX" >"$TMP/install.log" 2>&1 &&
        [ "$(readlink "$ROOT/lib/libzcoll.so")" = "libzcoll.so.$MAJOR" ] &&
        [ "$(readlink "$ROOT/lib/libzcoll.so.$MAJOR")" = "$REAL" ] && [ -f "$ROOT/lib/$REAL" ] &&
        [ -f "$ROOT/lib/libzcoll.a" ] && [ -x "$ROOT/bin/zcrun" ] &&
        [ -f "$ROOT/lib/python3/dist-packages/zcoll_torch/__init__.py" ]; then
    pass "install into DESTDIR (lib, include, pkgconfig, bin, python)"
else
    fail "install into DESTDIR"; cat "$TMP/install.log"
fi

# The test hooks (core/proto.h's zc__test_forge, zc__test_clock) are in zctest only.
if nm -D "$ROOT/lib/libzcoll.so" >"$TMP/syms" 2>&1 && nm "$ROOT/lib/libzcoll.a" >>"$TMP/syms" \
        2>&1 && grep -q zc_comm_init "$TMP/syms" && ! grep -qE "zc__test_(forge|clock)" "$TMP/syms"; then
    pass "the installed library has no test hook"
else
    fail "the installed library has no test hook"; grep -E "zc__test_(forge|clock)" "$TMP/syms"
fi

export PKG_CONFIG_PATH=$ROOT/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$TMP/dest
FLAGS=$(pkg-config --cflags --libs zcoll 2>&1)
echo "pkg-config --cflags --libs zcoll: $FLAGS"
# shellcheck disable=SC2086  # the flags are words
if cp tests/install/zchello.c "$TMP/" && (cd "$TMP" && cc -std=c11 -o zchello zchello.c $FLAGS) &&
        grep -q 'NEEDED.*\[libzcoll.so.0\]' <<<"$(readelf -d "$TMP/zchello")"; then
    pass "build a program with pkg-config only; it needs libzcoll.so.0"
else
    fail "build a program with pkg-config only"
fi
if (cd "$TMP" && LD_LIBRARY_PATH=$ROOT/lib "$ROOT/bin/zcrun" -n 3 --timeout 60 ./zchello) \
        >"$TMP/run.log" 2>&1 && ranks_say_sum 3 "$TMP/run.log"; then
    pass "installed program on 3 ranks under the installed zcrun"
else
    fail "installed program under zcrun"; cat "$TMP/run.log"
fi

PY=""
for py in python3 /usr/bin/python3; do
    if "$py" -c 'import torch' 2>/dev/null; then PY=$py; break; fi
done
if [ -z "$PY" ]; then
    skip "installed zcoll_torch (no python3 with torch)"
else
    cat > "$TMP/use.py" <<'PY'
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
import zcoll_torch
assert not any(p.startswith(os.environ['TOP']) for p in sys.path if p), sys.path
assert zcoll_torch.__file__.startswith(os.environ['ROOT']), zcoll_torch.__file__
assert zcoll_torch.library_path().startswith(os.environ['ROOT']), zcoll_torch.library_path()
def run(rank, size):
    dist.init_process_group('zcoll', init_method='tcp://127.0.0.1:%s' % os.environ['PORT'],
                            rank=rank, world_size=size)
    t = torch.tensor([rank + 1.0]); dist.all_reduce(t); assert t.item() == 3.0, t
    print('installed zcoll_torch rank %d: %s from %s' % (rank, t.item(), zcoll_torch.library_path()))
if __name__ == '__main__':
    mp.spawn(run, args=(2,), nprocs=2)
PY
    if (cd "$TMP" && env -u PYTHONPATH -u ZCOLL_LIBRARY TOP="$TOP" ROOT="$ROOT" \
            PORT=$((20000 + RANDOM % 10000)) \
            PYTHONPATH="$ROOT/lib/python3/dist-packages" "$PY" -s use.py) >"$TMP/py.log" 2>&1; then
        cat "$TMP/py.log"; pass "installed zcoll_torch, nothing from the source tree"
    else
        fail "installed zcoll_torch"; cat "$TMP/py.log"
    fi
fi
summary
