// memops_probe.cu: the stream-ordered calls' mechanism alone, without zcoll, on a real GPU
// (tests/gpu/machine_run.sh builds and runs it; nvcc -o memops_probe memops_probe.cu).
// On a non-blocking stream, as core/stream.c enqueues a call: write START, wait GO >= 2, a
// kernel that reads its argument from pinned host memory, write KD, wait DONE >= 1, write FIN;
// the host thread plays zc_progress: sees START, raises GO, sees KD, raises DONE, sees FIN.
// Each host wait gives up after 2 s and prints the stage reached and the four flags, so a hang
// of the zc_*_stream forms is pinned to one operation; a run that completes prints how many
// microseconds each stage took. Runs once with the flags in cudaHostAlloc(Mapped | Portable)
// memory (what gpu/cuda.c uses), once in cudaMallocHost memory, then three more times in the
// first. The kernel is loaded first (cudaFuncGetAttributes), as gpu/cuda.c loads its own at
// init: with --lazy it is not, and under CUDA's lazy loading its first launch, behind the wait
// for GO, may itself wait for the device to go idle; a 10 s alarm then reports where the host
// thread is stuck and exits 2.
#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef CUresult (*value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct desc { volatile int go; int add; };

__global__ void step(const desc *d, int *out) {
    const volatile desc *v = d;
    if (threadIdx.x == 0 && blockIdx.x == 0) *out += v->add;
}

static double now() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Waits until flags[i] == want (2 s at most); true when seen.
static bool see(volatile unsigned *flags, int i, unsigned want) {
    double t0 = now();
    while (now() - t0 < 2.0)
        if (flags[i] == want) return true;
    return false;
}

static void *entry(const char *sym) {
    void *fn = 0;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion(sym, &fn, 12000, cudaEnableDefault, &q);
    return e == cudaSuccess && q == cudaDriverEntryPointSuccess ? fn : 0;
}

static int run(const char *what, int kind) {
    value32_fn wr = (value32_fn)entry("cuStreamWriteValue32");
    value32_fn wt = (value32_fn)entry("cuStreamWaitValue32");
    enum { START, GO, KD, DONE, FIN, NF };
    unsigned *host = 0;
    void *dev = 0;
    if (kind == 0) cudaHostAlloc((void **)&host, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
    else cudaMallocHost((void **)&host, 4096);
    memset(host, 0, 4096);
    cudaHostGetDevicePointer(&dev, host, 0);
    desc *d = (desc *)(host + 64);
    d->add = 5;
    int *out;
    cudaMalloc(&out, sizeof(int));
    cudaMemset(out, 0, sizeof(int));
    cudaDeviceSynchronize();
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    CUdeviceptr f = (CUdeviceptr)dev;
    CUresult r[6];
    r[0] = wr((CUstream)s, f + 4 * START, 1, 0);
    r[1] = wt((CUstream)s, f + 4 * GO, 2, CU_STREAM_WAIT_VALUE_GEQ);
    step<<<132 * 4, 256, 0, s>>>((desc *)((char *)dev + 256), out);
    cudaError_t le = cudaGetLastError();
    r[2] = wr((CUstream)s, f + 4 * KD, 2, 0);
    r[3] = wt((CUstream)s, f + 4 * DONE, 1, CU_STREAM_WAIT_VALUE_GEQ);
    r[4] = wr((CUstream)s, f + 4 * FIN, 1, 0);
    printf("memops %s: enqueue results %d %d launch %s %d %d %d\n", what, r[0], r[1],
           cudaGetErrorName(le), r[2], r[3], r[4]);
    volatile unsigned *fl = host;
    const char *stage = "done";
    double t0 = now(), t1 = 0, t2 = 0, t3 = 0;
    if (!see(fl, START, 1)) stage = "START never written";
    else {
        t1 = now();
        __atomic_store_n(&host[GO], 2u, __ATOMIC_RELEASE);
        if (!see(fl, KD, 2)) stage = "KD never written after GO";
        else {
            t2 = now();
            __atomic_store_n(&host[DONE], 1u, __ATOMIC_RELEASE);
            if (!see(fl, FIN, 1)) stage = "FIN never written after DONE";
            else t3 = now();
        }
    }
    // FIN in host memory can be seen before the stream counts its last operation as complete:
    // poll the stream (2 s at most) instead of asking once.
    int res = -1;
    cudaError_t q = cudaStreamQuery(s);
    for (double t0 = now(); q == cudaErrorNotReady && now() - t0 < 2.0;) q = cudaStreamQuery(s);
    if (q == cudaErrorNotReady) (void)cudaGetLastError();
    if (q == cudaSuccess) cudaMemcpy(&res, out, sizeof res, cudaMemcpyDeviceToHost);
    printf("memops %s: %s; flags START %u GO %u KD %u DONE %u FIN %u; stream %s; kernel result %d "
           "(want 5)\n", what, stage, fl[START], fl[GO], fl[KD], fl[DONE], fl[FIN],
           cudaGetErrorName(q), res);
    if (t3 > 0)
        printf("memops %s: us from the enqueue to START %.1f, GO to KD (wait + kernel) %.1f, "
               "DONE to FIN %.1f\n", what, (t1 - t0) * 1e6, (t2 - t1) * 1e6, (t3 - t2) * 1e6);
    // Let a stuck stream through so the process can exit.
    for (int i = 0; i < NF; i++) __atomic_store_n(&host[i], 100u, __ATOMIC_RELEASE);
    return strcmp(stage, "done") != 0 || res != 5;
}

static const char *where = "start";

static void stuck(int) {
    char line[160];
    int n = snprintf(line, sizeof line, "memops: stuck for 10 s in %s\n", where);
    (void)!write(1, line, (size_t)n);
    _exit(2);
}

int main(int argc, char **argv) {
    bool lazy = argc > 1 && strcmp(argv[1], "--lazy") == 0;
    signal(SIGALRM, stuck);
    alarm(10);
    if (!lazy) {
        cudaFuncAttributes a;
        cudaError_t e = cudaFuncGetAttributes(&a, step);
        printf("memops: kernel loaded first: %s\n", cudaGetErrorName(e));
    } else {
        printf("memops: kernel left to load at its first launch (--lazy)\n");
    }
    where = "the first run (the launch behind the wait for GO, or a host wait)";
    int bad = run("cudaHostAlloc(Mapped|Portable)", 0);
    where = "the second run";
    bad |= run("cudaMallocHost", 1);
    where = "the repeated runs";
    for (int i = 0; i < 3; i++) bad |= run("cudaHostAlloc(Mapped|Portable)", 0);
    return bad;
}
