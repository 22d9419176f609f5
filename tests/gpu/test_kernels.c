/* test_kernels.c: the provider's device reductions against the host kernels, bitwise, for every
 * dtype x op, 1..64 inputs, vector and scalar paths, in place; and their bandwidth against a
 * device memcpy. Drives core/gpu.h's zc_gpu_cuda directly (no communicator). */
#include "zg.h"

#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "reduce.h"

#define ZG_MAXC 5003u
#define ZG_MAXN 64u

static uint64_t zg_state[(1u << 16) / 8];

static const zc_gpu_ops *zg_provider(uint32_t events) {
    const zc_gpu_ops *o = &zc_gpu_cuda;
    zc_gpu_geom g = {0, 1, events, 2, 0, -1, 0};
    ZG_CHECK(o->state_bytes(&g) <= sizeof zg_state);
    if (o->init(zg_state, &g) != ZC_OK) zg_fail(__FILE__, __LINE__, "init", o->error_text(zg_state));
    return o;
}

static void zg_wait_event(const zc_gpu_ops *o) {
    zc_status st;
    if (o->event_record(zg_state, 0) != ZC_OK)
        zg_fail(__FILE__, __LINE__, "event_record", o->error_text(zg_state));
    while ((st = o->event_query(zg_state, 0)) == ZC_IN_PROGRESS) {
    }
    if (st != ZC_OK) zg_fail(__FILE__, __LINE__, "event_query", o->error_text(zg_state));
}

void gpu_reduce_kernels_match_host_bitwise_every_dtype_op(void) {
    static const uint32_t ns[] = {1, 2, 3, 5, 8, ZG_MAXN};
    static const size_t counts[] = {1, 17, ZG_MAXC};
    zg_need_device();
    const zc_gpu_ops *o = zg_provider(1);
    size_t stride = ZG_MAXC * 8u + 64u;
    uint8_t *dev = NULL, *host = malloc(stride * (ZG_MAXN + 2u));
    ZG_CHECK(host != NULL);
    ZG_CUDA(cudaMalloc((void **)&dev, stride * (ZG_MAXN + 1u)));
    unsigned cases = 0;
    for (int dt = 0; dt < ZC_DTYPE_COUNT_; dt++)
        for (int op = 0; op < ZC_OP_COUNT_; op++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
                    for (int mis = 0; mis < 2; mis++) {
                        size_t es = zc_dtype_bytes((zc_dtype)dt), count = counts[ci];
                        size_t off = mis ? es : 0; /* misaligned: the scalar path */
                        uint32_t n = ns[ni];
                        bool in_place = count == 17;
                        const void *hin[ZG_MAXN], *din[ZG_MAXN];
                        for (uint32_t k = 0; k < n; k++) {
                            uint8_t *h = host + k * stride + off;
                            zg_fill(h, count, (zc_dtype)dt, cases * 131u + k);
                            ZG_CUDA(cudaMemcpy(dev + k * stride + off, h, count * es,
                                               cudaMemcpyHostToDevice));
                            hin[k] = h;
                            din[k] = dev + k * stride + off;
                        }
                        uint8_t *ddst = in_place ? dev + off : dev + ZG_MAXN * stride + off;
                        uint8_t *want = host + ZG_MAXN * stride, *got = want + stride;
                        zc__reduce(want, hin, n, count, (zc_dtype)dt, (zc_op)op);
                        if (o->reduce(zg_state, ddst, din, n, count, (zc_dtype)dt, (zc_op)op) !=
                            ZC_OK)
                            zg_fail(__FILE__, __LINE__, "reduce", o->error_text(zg_state));
                        zg_wait_event(o);
                        ZG_CUDA(cudaMemcpy(got, ddst, count * es, cudaMemcpyDeviceToHost));
                        for (size_t i = 0; i < count * es; i++) {
                            if (got[i] == want[i]) continue;
                            char d[200];
                            snprintf(d, sizeof d, "%s %s n=%u count=%zu offset=%zu: element %zu "
                                     "differs (byte %zu: device 0x%02x, host 0x%02x)",
                                     zc_dtype_name((zc_dtype)dt), zc_op_name((zc_op)op), n,
                                     count, off, i / es, i % es, got[i], want[i]);
                            zg_fail(__FILE__, __LINE__, "device == host", d);
                        }
                        cases++;
                    }
    printf("    %u cases bitwise equal (12 dtypes x 5 ops x 1..64 inputs, vector and scalar "
           "paths, in place)\n", cases);
    o->fini(zg_state);
    ZG_CUDA(cudaFree(dev));
    free(host);
}

void gpu_reduce_bandwidth_at_least_80_percent_of_device_memcpy(void) {
    const size_t bytes = 256u << 20;
    const int iters = 20;
    zg_need_device();
    const zc_gpu_ops *o = zg_provider(1);
    uint8_t *a = NULL, *b = NULL, *out = NULL;
    ZG_CUDA(cudaMalloc((void **)&a, bytes));
    ZG_CUDA(cudaMalloc((void **)&b, bytes));
    ZG_CUDA(cudaMalloc((void **)&out, bytes));
    ZG_CUDA(cudaMemset(a, 0, bytes));
    ZG_CUDA(cudaMemset(b, 0, bytes));
    const void *srcs[2] = {a, b};
    for (int w = 0; w < 3; w++)
        ZG_CHECK(o->reduce(zg_state, out, srcs, 2, bytes / 4, ZC_FLOAT32, ZC_SUM) == ZC_OK);
    zg_wait_event(o);
    double t0 = zg_now_s();
    for (int i = 0; i < iters; i++)
        ZG_CHECK(o->reduce(zg_state, out, srcs, 2, bytes / 4, ZC_FLOAT32, ZC_SUM) == ZC_OK);
    zg_wait_event(o);
    double t_red = zg_now_s() - t0;
    cudaStream_t s;
    ZG_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ZG_CUDA(cudaMemcpyAsync(out, a, bytes, cudaMemcpyDeviceToDevice, s));
    ZG_CUDA(cudaStreamSynchronize(s));
    t0 = zg_now_s();
    for (int i = 0; i < iters; i++)
        ZG_CUDA(cudaMemcpyAsync(out, a, bytes, cudaMemcpyDeviceToDevice, s));
    ZG_CUDA(cudaStreamSynchronize(s));
    double t_cpy = zg_now_s() - t0;
    /* Bytes through memory: the reduction reads 2 and writes 1, the copy reads 1, writes 1. */
    double bw_red = 3.0 * (double)bytes * iters / t_red / 1e9;
    double bw_cpy = 2.0 * (double)bytes * iters / t_cpy / 1e9;
    printf("    reduce float32 sum, 2 x 256 MiB: %.0f GB/s; device memcpy: %.0f GB/s; %.0f%% "
           "(target >= 80%%)\n", bw_red, bw_cpy, 100.0 * bw_red / bw_cpy);
    ZG_CHECK(bw_red >= 0.8 * bw_cpy);
    o->fini(zg_state);
}
