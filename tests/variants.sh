#!/usr/bin/env bash
# tests/variants.sh NAME "CONFIGURE OPTIONS" [ZCTEST PREFIX ...]: builds the tree again in a
# scratch copy with other configure options (another compiler, a sanitizer) and runs
# build/zctest there (all tests, or those whose names start with a prefix). `ninja check`
# (tests/check.sh) runs it for clang and for ThreadSanitizer when clang is installed. Prints
# zctest's output, then one line `N passed, N failed, N skipped`; exits non-zero on a failure.
# The copy lives in build/variants/NAME (the tree's own build/ stays untouched).
set -uo pipefail
cd "$(dirname "$0")/.."

name=$1
opts=$2
shift 2
dir=build/variants/$name
rm -rf "$dir"
mkdir -p "$dir"
# The sources as they are now (committed or not), without build outputs or git metadata.
tar --exclude=./build --exclude=./.git -cf - . | tar -x -C "$dir"
cd "$dir" || exit 1
# shellcheck disable=SC2086 # the options are words on purpose
if ! ./configure.py $opts --with-cuda=no >configure.log 2>&1 ||
    ! ninja -j2 zctest all-tools >build.log 2>&1; then
    echo "variants: $name ($opts) does not build:"
    tail -30 configure.log build.log
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
echo "variants: $name ($opts) built; running build/zctest $*"
# halt_on_error: a data race fails the test that hit it (TSan would otherwise only print).
TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" build/zctest "$@"
