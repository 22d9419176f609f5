#!/usr/bin/env bash
# run.sh: `ninja check-gpu`. Runs the device-memory suite (build/zcgputest: device kernels
# against the host reference, collectives on device memory with 1, 2 and 4 ranks through zcrun,
# stream-ordered forms replayed from CUDA graphs, the CUDA rules of tests/gpu/test_rules.c,
# bandwidth and latency) on CUDA. The same suite runs on the simulated GPU in `ninja check`
# (tests/check.sh).
# On a machine with a GPU (nvidia-smi lists one, or /dev/nvidia0 exists; ZG_ASSUME_GPU=1
# pretends so) the GPU must be usable: when CUDA cannot use it (no CUDA in this build, no
# driver loaded, a driver older than the runtime) the run fails at once, printing zcprobe's
# report with the driver and runtime versions, instead of skipping every test. Without a GPU
# every test reports itself skipped and the run exits 0. ZG_PREFLIGHT_ONLY=1 stops after that
# check.
set -u
cd "$(dirname "$0")/../.."

gpu_present() {
    [ "${ZG_ASSUME_GPU:-0}" = 1 ] && return 0
    [ -e /dev/nvidia0 ] && return 0
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && return 0
    return 1
}

if gpu_present && ! ZC_GPU_PROVIDER=cuda build/zcprobe --require-gpu; then
    echo "check-gpu: this machine has a GPU but CUDA cannot use it (the report above says why);" \
        "failing instead of skipping every test" >&2
    exit 1
fi
[ "${ZG_PREFLIGHT_ONLY:-0}" = 1 ] && exit 0
ZC_GPU_PROVIDER=cuda exec build/zcgputest "$@"
