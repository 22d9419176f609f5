#!/usr/bin/env bash
# run.sh: `ninja check-gpu`. Runs the device-memory suite (build/zcgputest: device kernels
# against the host reference, collectives on device memory with 1, 2 and 4 ranks through zcrun,
# stream-ordered forms replayed from a CUDA graph, bandwidth and latency). Without a usable GPU
# every test reports itself skipped and the run exits 0; in a build without CUDA (no
# build/zcgputest) the same tests, read from tests/gpu/list.h, are reported skipped.
set -u
cd "$(dirname "$0")/../.."
# build.ninja names build/zcgputest only in a CUDA build (a stale binary from another build is not run).
if grep -q "^build build/zcgputest:" build.ninja 2>/dev/null && [ -x build/zcgputest ]; then
    exec build/zcgputest "$@"
fi
echo "check-gpu: this build has no CUDA (configure.py found no nvcc); the device suite is skipped"
n=0
for t in $(sed -n 's/^ZG_TEST(\([a-z0-9_]*\),.*/\1/p' tests/gpu/list.h); do
    echo "skip $t"
    n=$((n + 1))
done
echo "0 passed, 0 failed, $n skipped"
