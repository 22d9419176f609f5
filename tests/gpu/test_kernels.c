/* test_kernels.c: the provider's device reductions against the host kernels, bitwise, for every
 * dtype x op, 1..64 inputs, vector and scalar paths, in place; and their bandwidth against a
 * device memcpy (CUDA). The simulated device's own promises: work deferred until queried and
 * run in order, the eager and fault knobs, memory kinds, IPC by name, no dma-buf. Drives the
 * provider (provider/gpu.h) directly, no communicator. */
#include "zg.h"

#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "reduce.h"
#include "sim.h"

#include "zg_cuda.h"

#define ZG_MAXC 5003u
#define ZG_MAXN 64u

static uint64_t zg_state[(1u << 16) / 8];

static const zc_gpu_ops *zg_provider(uint32_t events) {
    zg_need_device();
    const zc_gpu_ops *o = zg_ops();
    zc_gpu_geom g = {0, 1, events, 2, 0, -1, 0, 0, 0};
    ZT_CHECK(o->state_bytes(&g) <= sizeof zg_state);
    if (o->init(zg_state, &g) != ZC_OK) zt_fail(__FILE__, __LINE__, "init", o->error_text(zg_state));
    return o;
}

static void zg_wait_event(const zc_gpu_ops *o) {
    zc_status st;
    if (o->event_record(zg_state, 0) != ZC_OK)
        zt_fail(__FILE__, __LINE__, "event_record", o->error_text(zg_state));
    while ((st = o->event_query(zg_state, 0)) == ZC_IN_PROGRESS) {
    }
    if (st != ZC_OK) zt_fail(__FILE__, __LINE__, "event_query", o->error_text(zg_state));
}

void gpu_reduce_kernels_match_host_bitwise_every_dtype_op(void) {
    static const uint32_t ns[] = {1, 2, 3, 4, 5, 7, 8, 13, ZG_MAXN};
    static const size_t counts[] = {1, 17, ZG_MAXC};
    zg_need_device();
    const zc_gpu_ops *o = zg_provider(1);
    size_t stride = (ZG_MAXC * 8u + 64u + 63u) & ~(size_t)63u; /* every input equally aligned */
    uint8_t *dev = zg_dev_alloc(stride * (ZG_MAXN + 1u)), *host = malloc(stride * (ZG_MAXN + 2u));
    ZT_CHECK(host != NULL);
    unsigned cases = 0;
    for (int dt = 0; dt < ZC_DTYPE_COUNT_; dt++)
        for (int op = 0; op < ZC_OP_COUNT_; op++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
                    for (int mis = 0; mis < 4; mis++) {
                        /* Offsets of the inputs and of dst: aligned (vectors only); one element
                         * and 16 - one element past (a scalar head, then vectors); dst
                         * misaligned otherwise than the inputs (scalar only). */
                        size_t es = zc_dtype_bytes((zc_dtype)dt), count = counts[ci];
                        size_t off = mis == 0 || mis == 3 ? 0 : mis == 1 ? es : 16u - es;
                        size_t doff = mis == 3 ? es : off;
                        uint32_t n = ns[ni];
                        bool in_place = count == 17 && mis != 3;
                        const void *hin[ZG_MAXN], *din[ZG_MAXN];
                        for (uint32_t k = 0; k < n; k++) {
                            uint8_t *h = host + k * stride + off;
                            zg_fill(h, count, (zc_dtype)dt, cases * 131u + k);
                            zg_h2d(dev + k * stride + off, h, count * es);
                            hin[k] = h;
                            din[k] = dev + k * stride + off;
                        }
                        uint8_t *ddst = in_place ? dev + off : dev + ZG_MAXN * stride + doff;
                        uint8_t *want = host + ZG_MAXN * stride, *got = want + stride;
                        zc__reduce(want, hin, n, count, (zc_dtype)dt, (zc_op)op);
                        if (o->reduce(zg_state, ddst, din, n, count, (zc_dtype)dt, (zc_op)op) !=
                            ZC_OK)
                            zt_fail(__FILE__, __LINE__, "reduce", o->error_text(zg_state));
                        zg_wait_event(o);
                        zg_d2h(got, ddst, count * es);
                        for (size_t i = 0; i < count * es; i++) {
                            if (got[i] == want[i]) continue;
                            char d[200];
                            snprintf(d, sizeof d, "%s %s n=%u count=%zu offset=%zu: element %zu "
                                     "differs (byte %zu: device 0x%02x, host 0x%02x)",
                                     zc_dtype_name((zc_dtype)dt), zc_op_name((zc_op)op), n,
                                     count, off, i / es, i % es, got[i], want[i]);
                            zt_fail(__FILE__, __LINE__, "device == host", d);
                        }
                        cases++;
                    }
    printf("    %u cases bitwise equal (12 dtypes x 5 ops x 1..64 inputs, vector, head + vector "
           "and scalar paths, in place)\n", cases);
    o->fini(zg_state);
    zg_dev_free(dev);
    free(host);
}

void gpu_reduce_bandwidth_at_least_80_percent_of_device_memcpy(void) {
#ifdef ZC_HAVE_CUDA
    const size_t bytes = 256u << 20;
    const int iters = 20;
    if (zg_sim()) zt_skip("bandwidth is a GPU's to measure, not the simulated device's");
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
        ZT_CHECK(o->reduce(zg_state, out, srcs, 2, bytes / 4, ZC_FLOAT32, ZC_SUM) == ZC_OK);
    zg_wait_event(o);
    double t0 = zt_now_s();
    for (int i = 0; i < iters; i++)
        ZT_CHECK(o->reduce(zg_state, out, srcs, 2, bytes / 4, ZC_FLOAT32, ZC_SUM) == ZC_OK);
    zg_wait_event(o);
    double t_red = zt_now_s() - t0;
    cudaStream_t s;
    ZG_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ZG_CUDA(cudaMemcpyAsync(out, a, bytes, cudaMemcpyDeviceToDevice, s));
    ZG_CUDA(cudaStreamSynchronize(s));
    t0 = zt_now_s();
    for (int i = 0; i < iters; i++)
        ZG_CUDA(cudaMemcpyAsync(out, a, bytes, cudaMemcpyDeviceToDevice, s));
    ZG_CUDA(cudaStreamSynchronize(s));
    double t_cpy = zt_now_s() - t0;
    /* Bytes through memory: the reduction reads 2 and writes 1, the copy reads 1, writes 1. */
    double bw_red = 3.0 * (double)bytes * iters / t_red / 1e9;
    double bw_cpy = 2.0 * (double)bytes * iters / t_cpy / 1e9;
    printf("    reduce float32 sum, 2 x 256 MiB: %.0f GB/s; device memcpy: %.0f GB/s; %.0f%% "
           "(target >= 80%%)\n", bw_red, bw_cpy, 100.0 * bw_red / bw_cpy);
    ZT_CHECK(bw_red >= 0.8 * bw_cpy);
    o->fini(zg_state);
#else
    zt_skip("bandwidth is a GPU's to measure (this build has no CUDA)");
#endif
}

/* ---- the simulated device ---- */

void gpu_sim_defers_work_until_queried_and_runs_it_in_order(void) {
    zg_need_sim();
    const zc_gpu_ops *o = zg_provider(2);
    int32_t *a = zg_dev_alloc(4096), *b = zg_dev_alloc(4096);
    for (int i = 0; i < 1024; i++) a[i] = i;
    const void *srcs[2] = {a, a};
    ZT_CHECK(o->reduce(zg_state, b, srcs, 2, 1024, ZC_INT32, ZC_SUM) == ZC_OK); /* b = 2a */
    ZT_CHECK(o->copy(zg_state, a, b, 4096) == ZC_OK);                         /* a = b */
    ZT_CHECK(o->event_record(zg_state, 1) == ZC_OK);
    ZT_CHECK(b[5] == 0 && a[5] == 5); /* nothing ran at the calls */
    ZT_CHECK(o->event_query(zg_state, 1) == ZC_IN_PROGRESS); /* runs the reduce only */
    ZT_CHECK(b[5] == 10 && a[5] == 5);
    ZT_CHECK(o->event_query(zg_state, 1) == ZC_IN_PROGRESS); /* the copy */
    ZT_CHECK(a[5] == 10);
    ZT_CHECK(o->event_query(zg_state, 1) == ZC_OK);          /* the event itself */
    ZT_CHECK(o->event_query(zg_state, 0) == ZC_OK);          /* never recorded: complete */
    /* A caller's stream: a flag wait holds back what follows it until the flag is written. */
    zc_gpu_sim_stream s;
    zc_gpu_sim_stream_init(&s);
    uint32_t *flags = o->flags(zg_state);
    ZT_CHECK(o->stream_wait_flag(zg_state, &s, 0, 7) == ZC_OK);
    ZT_CHECK(o->stream_write_flag(zg_state, &s, 1, 9) == ZC_OK);
    ZT_CHECK(zc_gpu_sim_stream_query(&s) == ZC_IN_PROGRESS && flags[1] == 0);
    __atomic_store_n(&flags[0], 7u, __ATOMIC_RELEASE);
    ZT_CHECK(zc_gpu_sim_stream_query(&s) == ZC_OK && flags[1] == 9);
    bool cap = true;
    ZT_CHECK(o->stream_capturing(zg_state, &s, &cap) == ZC_OK && !cap);
    ZT_CHECK(o->stream_capturing(zg_state, a, &cap) == ZC_GPU); /* not a stream */
    ZT_CHECK(strstr(o->error_text(zg_state), "zc_gpu_sim_stream") != NULL);
    o->fini(zg_state);
    zg_dev_free(a);
    zg_dev_free(b);
}

void gpu_sim_eager_knob_runs_work_at_the_call(void) {
    zg_need_sim();
    setenv("ZC_GPU_SIM_EAGER", "1", 1);
    const zc_gpu_ops *o = zg_provider(1);
    int32_t *a = zg_dev_alloc(64), *b = zg_dev_alloc(64);
    a[3] = 21;
    const void *srcs[2] = {a, a};
    ZT_CHECK(o->reduce(zg_state, b, srcs, 2, 16, ZC_INT32, ZC_SUM) == ZC_OK);
    ZT_CHECK(b[3] == 42);
    ZT_CHECK(o->event_record(zg_state, 0) == ZC_OK);
    ZT_CHECK(o->event_query(zg_state, 0) == ZC_OK);
    o->fini(zg_state);
    zg_dev_free(a);
    zg_dev_free(b);
}

void gpu_sim_fault_knob_fails_the_nth_operation_sticky(void) {
    zg_need_sim();
    setenv("ZC_GPU_SIM_FAULT", "2", 1);
    const zc_gpu_ops *o = zg_provider(1);
    uint8_t *a = zg_dev_alloc(64), *b = zg_dev_alloc(64);
    memset(a, 1, 64);
    ZT_CHECK(o->copy(zg_state, b, a, 16) == ZC_OK);        /* operation 1 */
    ZT_CHECK(o->copy(zg_state, b + 16, a, 16) == ZC_OK);   /* operation 2: faults when run */
    ZT_CHECK(o->copy(zg_state, b + 32, a, 16) == ZC_OK);   /* never runs */
    ZT_CHECK(o->event_record(zg_state, 0) == ZC_OK);
    zc_status st;
    while ((st = o->event_query(zg_state, 0)) == ZC_IN_PROGRESS) {
    }
    ZT_CHECK(st == ZC_GPU);
    ZT_CHECK(strstr(o->error_text(zg_state), "operation 2") != NULL);
    ZT_CHECK(b[0] == 1 && b[16] == 0 && b[32] == 0);
    /* Sticky: every later call fails with the same sentence. */
    ZT_CHECK(o->copy(zg_state, b, a, 16) == ZC_GPU);
    ZT_CHECK(o->event_query(zg_state, 0) == ZC_GPU);
    ZT_CHECK(strstr(o->error_text(zg_state), "sticky") != NULL);
    o->fini(zg_state);
    zg_dev_free(a);
    zg_dev_free(b);
}

void gpu_sim_memory_kinds_ipc_and_dmabuf(void) {
    zg_need_sim();
    const zc_gpu_ops *o = zg_provider(1);
    static uint8_t host[4096];
    uint8_t *d = zg_dev_alloc(8192);
    uint32_t kind = 99;
    ZT_CHECK(o->mem_query(zg_state, d + 100, 1000, &kind) == ZC_OK && kind == ZC_GPU_MEM_DEVICE);
    ZT_CHECK(o->mem_query(zg_state, d + 8000, 1000, &kind) == ZC_OK &&
             kind == ZC_GPU_MEM_PARTIAL);
    ZT_CHECK(o->mem_query(zg_state, host, sizeof host, &kind) == ZC_OK &&
             kind == ZC_GPU_MEM_HOST);
    zc_gpu_ipc rec;
    memset(&rec, 0, sizeof rec);
    ZT_CHECK(o->ipc_export(zg_state, d + 256, 512, &rec) == ZC_OK && rec.offset == 256);
    ZT_CHECK(o->ipc_export(zg_state, host, 16, &rec) == ZC_GPU);
    ZT_CHECK(o->ipc_export(zg_state, d + 256, 512, &rec) == ZC_OK);
    void *m = NULL;
    ZT_CHECK(o->ipc_open(zg_state, &rec, &m) == ZC_OK && m != d + 256); /* a second mapping */
    d[256] = 77;
    ZT_CHECK(((uint8_t *)m)[0] == 77); /* of the same memory */
    o->ipc_close(zg_state, &rec, m);
    int32_t fd = -1;
    uint64_t off = 0;
    ZT_CHECK(o->dmabuf_export(zg_state, d, 64, &fd, &off) == ZC_UNSUPPORTED && fd == -1);
    ZT_CHECK(strstr(o->error_text(zg_state), "dma-buf") != NULL);
    o->fini(zg_state);
    zg_dev_free(d);
    ZT_CHECK(o->mem_query(zg_state, d + 100, 1, &kind) == ZC_OK && kind == ZC_GPU_MEM_HOST);
}
