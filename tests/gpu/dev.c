/* dev.c: the suite's device, CUDA or simulated (zg.h). The choice is ZC_GPU_PROVIDER, which
 * main.c settles before any test and the ranks inherit; every helper fails the test on error.
 * CUDA code is compiled in CUDA builds only. Also the suite's test data (zg_fill). */
#include "zg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#include "zg_cuda.h"

#ifdef ZC_HAVE_CUDA
/* tests/gpu/kernels.cu: p[i] += v on s; the launch's own cudaError_t. */
int zg_cuda_add_i32(void *p, size_t n, int32_t v, cudaStream_t s);
#endif

bool zg_sim(void) {
    const char *p = getenv("ZC_GPU_PROVIDER");
    return p && strcmp(p, "sim") == 0;
}

const zc_gpu_ops *zg_ops(void) {
#ifdef ZC_HAVE_CUDA
    if (!zg_sim()) return &zc_gpu_cuda;
#endif
    return &zc_gpu_sim;
}

/* The device this rank uses, made current with its context. */
static void zg_use_device(int count) {
    int dev = (int)(zg_rank() % (uint32_t)count);
    const char *lr = getenv("ZC_LOCAL_RANK");
    if (lr) dev = atoi(lr) % count;
    if (zg_sim()) {
        ZT_CHECK(zc_gpu_sim_set_device(dev) == ZC_OK);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaSetDevice(dev));
    ZG_CUDA(cudaFree(0)); /* the context zcoll's gpu_device -1 looks for */
#endif
}

void zg_need_device(void) {
#ifndef ZC_HAVE_CUDA
    if (!zg_sim())
        zt_skip("this build has no CUDA (ZC_GPU_PROVIDER=sim runs the suite on the simulated "
                "device)");
#endif
    static zc_gpu_probe p;
    ZT_CHECK(zg_ops()->probe(&p) == ZC_OK);
    if (p.unusable) zt_fail(__FILE__, __LINE__, "a usable device", p.why);
    if (p.ndevs == 0) zt_skip(p.why[0] ? p.why : "no device");
    zg_use_device((int)p.ndevs);
}

void zg_need_sim(void) {
    if (!zg_sim()) zt_skip("a property of the simulated GPU (ZC_GPU_PROVIDER=sim)");
}

void zg_run(uint32_t n, const char *name) {
    zg_need_device(); /* skip before starting ranks when there is no GPU */
    int rc = zt_run_ranks(n, name, 240, NULL, NULL, 0);
    if (rc == 77) zt_skip("the ranks found no usable GPU");
    ZT_CHECK(rc == 0);
}

void *zg_dev_alloc(size_t bytes) {
    void *p = NULL;
    if (zg_sim()) {
        p = zc_gpu_sim_alloc(bytes);
        ZT_CHECK(p != NULL);
        return p;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaMalloc(&p, bytes));
#endif
    return p;
}

void zg_register_pair(zc_comm *c, size_t bytes, void **send, void **recv) {
    zc_mem *m;
    *send = zg_dev_alloc(bytes);
    *recv = zg_dev_alloc(bytes);
    ZT_CHECK_COMM(c, zc_mem_register(c, *send, bytes, ZC_MEM_CUDA, &m), ZC_OK);
    ZT_CHECK_COMM(c, zc_mem_register(c, *recv, bytes, ZC_MEM_CUDA, &m), ZC_OK);
}

void zg_dev_free(void *p) {
    if (zg_sim()) {
        zc_gpu_sim_free(p);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaFree(p));
#endif
}

void *zg_managed_alloc(size_t bytes) {
    void *p = NULL;
#ifdef ZC_HAVE_CUDA
    if (!zg_sim()) ZG_CUDA(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal));
#endif
    (void)bytes;
    return p;
}

/* One copy (kind: 0 to the device, 1 from it, 2 within it), returned once it is complete. */
static void zg_copy(void *dst, const void *src, size_t bytes, int kind) {
    if (zg_sim()) {
        memcpy(dst, src, bytes);
        return;
    }
#ifdef ZC_HAVE_CUDA
    static const enum cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                                cudaMemcpyDeviceToDevice};
    ZG_CUDA(cudaMemcpy(dst, src, bytes, kinds[kind]));
    ZG_CUDA(cudaDeviceSynchronize()); /* complete on the device before the caller goes on */
#else
    (void)kind;
#endif
}

void zg_h2d(void *dst, const void *src, size_t bytes) { zg_copy(dst, src, bytes, 0); }
void zg_d2h(void *dst, const void *src, size_t bytes) { zg_copy(dst, src, bytes, 1); }
void zg_d2d(void *dst, const void *src, size_t bytes) { zg_copy(dst, src, bytes, 2); }

void zg_dev_memset(void *p, int v, size_t bytes) {
    if (zg_sim()) {
        memset(p, v, bytes);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaMemset(p, v, bytes));
    ZG_CUDA(cudaDeviceSynchronize()); /* complete on the device before the caller goes on */
#endif
}

void *zg_stream_create(void) {
    if (zg_sim()) {
        zc_gpu_sim_stream *s = malloc(sizeof *s);
        ZT_CHECK(s != NULL);
        zc_gpu_sim_stream_init(s);
        return s;
    }
#ifdef ZC_HAVE_CUDA
    cudaStream_t s;
    ZG_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
#else
    return NULL;
#endif
}

/* The simulated "kernel": its arguments live in a ring until it ran. */
typedef struct zg_add_args {
    int32_t *p;
    size_t n;
    int32_t v;
} zg_add_args;

static void zg_sim_add(void *arg) {
    const zg_add_args *a = arg;
    for (size_t i = 0; i < a->n; i++) a->p[i] += a->v;
}

/* A launch and, after it, the check every PyTorch kernel launch makes: the thread's last error
 * must be cudaSuccess (an error left there by zcoll would fail the caller's launch). */
void zg_add_i32(void *p, size_t n, int32_t v, void *stream) {
    if (zg_sim()) {
        static zg_add_args ring[256];
        static uint32_t next;
        zg_add_args *a = &ring[next++ % 256u];
        *a = (zg_add_args){p, n, v};
        ZT_CHECK(zc_gpu_sim_stream_call(stream, zg_sim_add, a) == ZC_OK);
        int e = zc_gpu_sim_take_error();
        if (e) zt_fail(__FILE__, __LINE__, "the thread's error slot is empty after a launch",
                       zc_gpu_sim_error_name(e));
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA((cudaError_t)zg_cuda_add_i32(p, n, v, (cudaStream_t)stream));
    ZG_CUDA(cudaGetLastError());
#endif
}

bool zg_stream_done(void *stream) {
    if (zg_sim()) return zc_gpu_sim_stream_query(stream) != ZC_IN_PROGRESS;
#ifdef ZC_HAVE_CUDA
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* "not ready" sits in the error slot like an error */
        return false;
    }
    ZG_CUDA(e);
#endif
    return true;
}

void zg_stream_destroy(void *stream) {
    if (zg_sim()) {
        free(stream);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaStreamDestroy((cudaStream_t)stream));
#endif
}

void zg_capture_begin(void *stream, bool global) {
    if (zg_sim()) {
        ZT_CHECK(zc_gpu_sim_capture_begin(stream, global ? ZC_GPU_SIM_CAPTURE_GLOBAL
                                                         : ZC_GPU_SIM_CAPTURE_THREAD_LOCAL) ==
                 ZC_OK);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaStreamBeginCapture((cudaStream_t)stream, global
                                                             ? cudaStreamCaptureModeGlobal
                                                             : cudaStreamCaptureModeThreadLocal));
#endif
}

void *zg_capture_end(void *stream) {
    if (zg_sim()) {
        zc_gpu_sim_graph *g = NULL;
        return zc_gpu_sim_capture_end(stream, &g) == ZC_OK ? g : NULL;
    }
#ifdef ZC_HAVE_CUDA
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &graph);
    if (e == cudaErrorStreamCaptureInvalidated) {
        (void)cudaGetLastError();
        return NULL;
    }
    ZG_CUDA(e);
    ZG_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    ZG_CUDA(cudaGraphDestroy(graph));
    return exec;
#else
    return NULL;
#endif
}

void zg_graph_launch(void *graph, void *stream) {
    if (zg_sim()) {
        ZT_CHECK(zc_gpu_sim_graph_launch(graph, stream) == ZC_OK);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaGraphLaunch((cudaGraphExec_t)graph, (cudaStream_t)stream));
#endif
}

void zg_graph_free(void *graph) {
    if (zg_sim()) {
        zc_gpu_sim_graph_free(graph);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaGraphExecDestroy((cudaGraphExec_t)graph));
#endif
}

/* ---- test data ---- */

/* A float64 of category k (0..63) from random bits b, for an element that rank `rank` of a case
 * holds: see zg_fill. f32: scaled to float32's range. */
static double zg_float(uint64_t b, uint32_t k, uint32_t rank, uint64_t shared, bool f32) {
    double tiny = f32 ? 1.1754943508222875e-38 : 2.2250738585072014e-308; /* smallest normal */
    double sign = (b >> 63) ? -1.0 : 1.0;
    double frac = (double)(b >> 11 & 0xfffffu) / 1048576.0; /* [0, 1) in 20 bits */
    switch (k) {
    case 0: return NAN;
    case 1: return sign * INFINITY;
    case 2: return -0.0;
    case 3: return sign * (f32 ? 3e38 : 1.7e308);               /* overflows when summed */
    case 4: case 5: case 6: case 7: return sign * tiny * frac;  /* subnormal */
    case 8: case 9: case 10: case 11:                           /* near the smallest normal: */
        return sign * tiny * (1.0 + frac);                      /* sums cancel to subnormals */
    default: break;
    }
    if (k < 28) { /* cancellation: neighbouring ranks hold x and -x (nearly) */
        double x = (double)(int64_t)(shared >> 40) / 4096.0;
        return ((rank & 1u) ? -x : x) * (k < 20 ? 1.0 : 1.0 + (double)rank / 1048576.0);
    }
    return (double)((int64_t)b >> 40) / 4096.0; /* signed, moderate, exactly representable */
}

void zg_fill(void *buf, size_t count, zc_dtype dtype, uint64_t seed) {
    zt_rng rng = {seed * 0x100000001b3ull + 7u};
    zt_rng shared = {(seed >> 6) * 0x9e3779b97f4a7c15ull + 11u}; /* the same on every rank */
    uint32_t rank = (uint32_t)(seed & 63u);
    size_t es = zc_dtype_bytes(dtype);
    uint8_t *b = buf;
    for (size_t i = 0; i < count; i++) {
        uint64_t r = zt_rng_next(&rng), s = zt_rng_next(&shared);
        if (dtype == ZC_FLOAT32 || dtype == ZC_FLOAT64) {
            uint32_t k = (uint32_t)(s & 63u); /* a category all ranks share for element i */
            double v = zg_float(r, k, rank, s, dtype == ZC_FLOAT32);
            if (dtype == ZC_FLOAT32) {
                float f = (float)v;
                memcpy(b + i * es, &f, es);
            } else {
                memcpy(b + i * es, &v, es);
            }
        } else {
            memcpy(b + i * es, &r, es); /* every bit pattern: NaNs, infinities, subnormals */
        }
    }
}
