#!/usr/bin/env bash
# tests/install/run.sh: `ninja install` into a DESTDIR (tools/install.sh), then, from that tree
# only: build tests/install/zchello.c with `pkg-config --cflags --libs zcoll` (PKG_CONFIG_PATH
# and PKG_CONFIG_SYSROOT_DIR point pkg-config at the DESTDIR), check its NEEDED entry is the
# SONAME, run it on 3 ranks under the installed zcrun, and, where torch is installed, import
# the installed zcoll_torch with nothing from the source tree on the path and run a 2-rank
# all_reduce on it; the installed library has no test hook. Prints PASS/FAIL lines and
# `N passed, N failed, N skipped`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
TOP=$PWD
# shellcheck source=tests/suite.sh
source tests/suite.sh

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=/opt/zcoll-test
ROOT=$TMP/dest$PREFIX

if DESTDIR=$TMP/dest bash tools/install.sh "$PREFIX" >"$TMP/install.log" 2>&1 &&
        [ -L "$ROOT/lib/libzcoll.so" ] && [ -f "$ROOT/lib/libzcoll.so.0.1.0" ] &&
        [ -f "$ROOT/lib/libzcoll.a" ] && [ -x "$ROOT/bin/zcrun" ] &&
        [ -f "$ROOT/lib/python3/dist-packages/zcoll_torch/__init__.py" ]; then
    pass "install into DESTDIR (lib, include, pkgconfig, bin, python)"
else
    fail "install into DESTDIR"; cat "$TMP/install.log"
fi

# The hostile-rank hook of the tests (core/engine.h's zc__test_forge) is in zctest only.
if nm -D "$ROOT/lib/libzcoll.so" >"$TMP/syms" 2>&1 && nm "$ROOT/lib/libzcoll.a" >>"$TMP/syms" \
        2>&1 && grep -q zc_comm_init "$TMP/syms" && ! grep -q test_forge "$TMP/syms"; then
    pass "the installed library has no test hook"
else
    fail "the installed library has no test hook"; grep test_forge "$TMP/syms"
fi

export PKG_CONFIG_PATH=$ROOT/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$TMP/dest
FLAGS=$(pkg-config --cflags --libs zcoll 2>&1)
echo "pkg-config --cflags --libs zcoll: $FLAGS"
# shellcheck disable=SC2086  # the flags are words
if cp tests/install/zchello.c "$TMP/" && (cd "$TMP" && cc -std=c11 -o zchello zchello.c $FLAGS) &&
        readelf -d "$TMP/zchello" | grep -q 'NEEDED.*\[libzcoll.so.0\]'; then
    pass "build a program with pkg-config only; it needs libzcoll.so.0"
else
    fail "build a program with pkg-config only"
fi
if (cd "$TMP" && LD_LIBRARY_PATH=$ROOT/lib "$ROOT/bin/zcrun" -n 3 --timeout 60 ./zchello) \
        >"$TMP/run.log" 2>&1 && [ "$(grep -c 'sum 6$' "$TMP/run.log")" = 3 ]; then
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
