#!/usr/bin/env bash
# machine_run.sh DIR: everything a machine with an NVIDIA GPU must show, in one bounded run, each
# step's output in DIR/<step>.log and a one-line verdict per step in DIR/summary.txt (also on
# stdout). Steps, in order: the driver and toolkit versions; a build of the tree with CUDA;
# the runtime's last-error rule after a not-ready event query; the stream-ordered calls'
# flag protocol alone (tests/gpu/standalone/memops_probe.cu), with its kernel loaded first and
# left to lazy loading; zcprobe; the device suite
# (`ninja check-gpu`); the stream forms and the capture test with CUDA_DEVICE_MAX_CONNECTIONS=1;
# compute-sanitizer memcheck, racecheck and synccheck on the kernels and one rank's collectives;
# a latency and bandwidth sweep of all_reduce on device buffers (2 ranks) and torch.distributed
# on CUDA tensors, zcoll beside nccl (bench/torch_cuda.py), both under MPS; the tutorial
# programs on torch.
# Each step has its own time limit (seconds, below), cut to what is left of the whole run's
# ZG_RUN_BUDGET seconds (default 900); a step with under 10 s left is skipped. Every log is also
# appended to DIR/all.log as it is written.
set -u
cd "$(dirname "$0")/../.."
out=${1:?usage: tests/gpu/machine_run.sh DIR}
mkdir -p "$out"
budget=${ZG_RUN_BUDGET:-900}
summary="$out/summary.txt"
: >"$summary"
: >"$out/all.log"

step() {  # step NAME LIMIT_S COMMAND...: runs it under timeout, logs, one verdict line
    local name=$1 limit=$2; shift 2
    local left=$(( budget - SECONDS - 5 ))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 10 ]; then
        echo "$name: skipped, the run's budget is spent" | tee -a "$summary"
        return
    fi
    local t0=$SECONDS
    timeout -k 5 "$limit" bash -c "$*" >"$out/$name.log" 2>&1
    local rc=$?
    local verdict=ok
    [ $rc -ne 0 ] && verdict="FAILED rc=$rc"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict="TIMED OUT after ${limit}s"
    printf '%-14s %-22s %4ds  %s\n' "$name" "$verdict" $(( SECONDS - t0 )) \
        "$(grep -E 'passed|failed|ERROR SUMMARY|^\| |lasterror|^memops' "$out/$name.log" | tail -1)" \
        | tee -a "$summary"
    { echo "=== $name ($*)"; cat "$out/$name.log"; } >>"$out/all.log"
}

step versions 30 'nvidia-smi; nvidia-smi -q | grep -iE "driver version|cuda version|product name|persistence|addressing|p2p" ; nvcc --version; python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())"; cc --version | head -1; which ninja compute-sanitizer'

step build 180 './configure.py --with-ib=no --with-baremetal=no && ninja -j16'
[ -x build/zcgputest ] || { echo "build failed: see $out/build.log"; exit 1; }

# The runtime keeps the last error per host thread: does a not-ready event query leave
# cudaErrorNotReady there for the next cudaGetLastError() (and so for the next launch's check)?
cat >"$out/lasterror.cu" <<'EOF'
#include <cstdio>
#include <cuda_runtime.h>
__global__ void spin(long long n) { long long t = clock64(); while (clock64() - t < n) {} }
int main() {
    cudaEvent_t e; cudaEventCreate(&e);
    spin<<<1, 1>>>(2000000000LL); cudaEventRecord(e);
    cudaError_t q = cudaEventQuery(e);
    cudaError_t peek = cudaPeekAtLastError(), last = cudaGetLastError(), again = cudaGetLastError();
    printf("lasterror: query %s, then peek %s, get %s, get again %s\n", cudaGetErrorName(q),
           cudaGetErrorName(peek), cudaGetErrorName(last), cudaGetErrorName(again));
    spin<<<1, 1>>>(1); printf("lasterror: launch after the poll: %s\n",
                              cudaGetErrorName(cudaGetLastError()));
    cudaDeviceSynchronize(); return 0;
}
EOF
step lasterror 60 "nvcc -arch=native -o $out/lasterror $out/lasterror.cu && $out/lasterror"

step memops 30 "nvcc -arch=native -o $out/memops_probe tests/gpu/standalone/memops_probe.cu && $out/memops_probe"
# The same without loading the kernel first: exit 2 (stuck in the launch) shows the lazy-loading
# wait that gpu/cuda.c's load at init avoids; the verdict line says which.
step memops_lazy 30 "$out/memops_probe --lazy; echo memops_lazy: exit \$?; true"
# A device test stalled past ZG_WATCHDOG_S seconds prints its backtrace and the communicator's
# stream slots (tests/gpu/watch.c) and exits 124.
export ZG_WATCHDOG_S=${ZG_WATCHDOG_S:-90}
step zcprobe 30 'ZC_GPU_PROVIDER=cuda build/zcprobe; nvidia-smi topo -m'
step check_gpu 150 'ninja check-gpu'
step one_queue 120 'CUDA_DEVICE_MAX_CONNECTIONS=1 ZC_GPU_PROVIDER=cuda build/zcgputest gpu_stream_forms_in_order_on_a_stream_100_rounds_2_ranks gpu_stream_forms_share_one_hardware_queue_2_ranks gpu_progress_during_another_threads_global_capture_keeps_it_2_ranks gpu_fini_refuses_while_a_stream_holds_a_call_and_releases_after_abort'
# Two ranks on one GPU time-slice it without MPS (every wait a context switch, about 290 us):
# the timed steps run under MPS where the machine has it.
export CUDA_MPS_PIPE_DIRECTORY=/tmp/zg_mps CUDA_MPS_LOG_DIRECTORY=/tmp/zg_mps_log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
step mps_on 10 'nvidia-cuda-mps-control -d && echo "MPS started"'
step sweep 120 'ZC_GPU_PROVIDER=cuda build/zcrun -n 2 build/zcgputest --rank zg_rank_sweep'
step torch_cuda 150 'PYTHONUNBUFFERED=1 python3 bench/torch_cuda.py 300'
step mps_off 10 'echo quit | nvidia-cuda-mps-control'
step seeds 120 'for s in examples/seed00*.py; do echo "== $s"; MASTER_PORT=29711 timeout 60 python3 $s || exit 1; done'
for tool in memcheck racecheck synccheck; do
    step "san_$tool" 90 "ZC_GPU_PROVIDER=cuda compute-sanitizer --tool $tool --target-processes all --error-exitcode 3 build/zcgputest gpu_reduce_kernels_match_host_bitwise_every_dtype_op gpu_collectives_match_host_reference_1_rank"
done
step contexts 30 'nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv'
cat "$summary"
