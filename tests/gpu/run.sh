#!/usr/bin/env bash
# run.sh: `ninja check-gpu`. Runs the device-memory suite (build/zcgputest: device kernels
# against the host reference, collectives on device memory with 1, 2 and 4 ranks through zcrun,
# stream-ordered forms replayed from a CUDA graph, bandwidth and latency) on CUDA. Without a
# usable GPU, or in a build without CUDA, every test reports itself skipped and the run exits 0.
# The same suite runs on the simulated device in `ninja check` (tests/check.sh).
set -u
cd "$(dirname "$0")/../.."
ZC_GPU_PROVIDER=cuda exec build/zcgputest "$@"
