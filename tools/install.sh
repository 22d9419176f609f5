#!/usr/bin/env bash
# tools/install.sh PREFIX: installs the built tree (`ninja install` runs it with configure.py's
# --prefix) under $DESTDIR$PREFIX:
#   lib/libzcoll.so.MAJOR.MINOR.0 (SONAME libzcoll.so.MAJOR) with the links libzcoll.so.MAJOR and
#   libzcoll.so, lib/libzcoll.a, include/zcoll.h, lib/pkgconfig/zcoll.pc, bin/zcrun and
#   bin/zcbench, and the Python package zcoll_torch in lib/python3/dist-packages (the folder
#   Debian's python3 searches under /usr/local; elsewhere add it to PYTHONPATH).
# zcoll.pc names PREFIX (not DESTDIR): pkg-config finds a DESTDIR tree with PKG_CONFIG_PATH and
# PKG_CONFIG_SYSROOT_DIR=$DESTDIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PREFIX=${1:?usage: tools/install.sh PREFIX}
ROOT=${DESTDIR:-}$PREFIX
MAJOR=$(sed -n 's/^#define ZC_VERSION_MAJOR \([0-9]*\)$/\1/p' include/zcoll.h)
MINOR=$(sed -n 's/^#define ZC_VERSION_MINOR \([0-9]*\)$/\1/p' include/zcoll.h)
REAL=libzcoll.so.$MAJOR.$MINOR.0
for f in "build/$REAL" build/libzcoll.a build/zcrun build/zcbench; do
    [ -e "$f" ] || { echo "install.sh: $f is missing; run ninja first" >&2; exit 1; }
done

install -d "$ROOT/lib/pkgconfig" "$ROOT/include" "$ROOT/bin" \
    "$ROOT/lib/python3/dist-packages/zcoll_torch"
# The file and its two links, as build/ holds them (configure.py writes the same three).
install -m 755 "build/$REAL" "$ROOT/lib/$REAL"
ln -sfn "$REAL" "$ROOT/lib/libzcoll.so.$MAJOR"
ln -sfn "libzcoll.so.$MAJOR" "$ROOT/lib/libzcoll.so"
install -m 644 build/libzcoll.a "$ROOT/lib/libzcoll.a"
install -m 644 include/zcoll.h "$ROOT/include/zcoll.h"
install -m 755 build/zcrun build/zcbench "$ROOT/bin/"
install -m 644 python/zcoll_torch/*.py "$ROOT/lib/python3/dist-packages/zcoll_torch/"

# Libraries the static archive needs besides itself (the shared one records its own).
PRIVATE="-lpthread"
if nm -u build/libzcoll.a 2>/dev/null | grep -q ' ibv_'; then PRIVATE="$PRIVATE -libverbs"; fi
if nm -A build/libzcoll.a 2>/dev/null | grep -q ' cudaGetDriverEntryPoint'; then
    PRIVATE="$PRIVATE -lcudart_static -ldl -lrt -lstdc++"
fi
cat > "$ROOT/lib/pkgconfig/zcoll.pc" <<PC
prefix=$PREFIX
exec_prefix=\${prefix}
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: zcoll
Description: Fixed-memory collective communication (the torch.distributed set) over shared memory and RDMA
Version: $MAJOR.$MINOR.0
Libs: -L\${libdir} -lzcoll
Libs.private: $PRIVATE
Cflags: -I\${includedir}
PC
echo "installed zcoll $MAJOR.$MINOR.0 under $ROOT"
