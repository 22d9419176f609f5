/* dev.c: the suite's device, CUDA or simulated (zg.h). The choice is ZC_GPU_PROVIDER, which
 * main.c settles before any test and the ranks inherit; every helper fails the test on error.
 * CUDA code is compiled in CUDA builds only. */
#include "zg.h"

#include <stdlib.h>
#include <string.h>

#include "sim.h"

#include "zg_cuda.h"

#ifdef ZC_HAVE_CUDA
/* tests/gpu/kernels.cu: p[i] += v on s; the launch's cudaError_t. */
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

void zg_need_device(void) {
    if (zg_sim()) return;
#ifdef ZC_HAVE_CUDA
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        char why[256];
        snprintf(why, sizeof why, "no usable CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
        zg_skip(why);
    }
    const char *lr = getenv("ZC_LOCAL_RANK");
    int dev = lr ? atoi(lr) % count : 0;
    ZG_CUDA(cudaSetDevice(dev));
    ZG_CUDA(cudaFree(0)); /* the context zcoll's gpu_device -1 looks for */
#else
    zg_skip("this build has no CUDA (ZC_GPU_PROVIDER=sim runs the suite on the simulated "
            "device)");
#endif
}

void *zg_dev_alloc(size_t bytes) {
    void *p = NULL;
    if (zg_sim()) {
        p = zc_gpu_sim_alloc(bytes);
        ZG_CHECK(p != NULL);
        return p;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaMalloc(&p, bytes));
#endif
    return p;
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

void zg_h2d(void *dst, const void *src, size_t bytes) {
    if (zg_sim()) {
        memcpy(dst, src, bytes);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
#endif
}

void zg_d2h(void *dst, const void *src, size_t bytes) {
    if (zg_sim()) {
        memcpy(dst, src, bytes);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
#endif
}

void zg_dev_memset(void *p, int v, size_t bytes) {
    if (zg_sim()) {
        memset(p, v, bytes);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA(cudaMemset(p, v, bytes));
#endif
}

void *zg_stream_create(void) {
    if (zg_sim()) {
        zc_gpu_sim_stream *s = malloc(sizeof *s);
        ZG_CHECK(s != NULL);
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

void zg_add_i32(void *p, size_t n, int32_t v, void *stream) {
    if (zg_sim()) {
        static zg_add_args ring[ZC_GPU_SIM_QUEUE];
        static uint32_t next;
        zg_add_args *a = &ring[next++ % ZC_GPU_SIM_QUEUE];
        *a = (zg_add_args){p, n, v};
        ZG_CHECK(zc_gpu_sim_stream_call(stream, zg_sim_add, a) == ZC_OK);
        return;
    }
#ifdef ZC_HAVE_CUDA
    ZG_CUDA((cudaError_t)zg_cuda_add_i32(p, n, v, (cudaStream_t)stream));
#endif
}

bool zg_stream_done(void *stream) {
    if (zg_sim()) return zc_gpu_sim_stream_query(stream) == ZC_OK;
#ifdef ZC_HAVE_CUDA
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaErrorNotReady) return false;
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
