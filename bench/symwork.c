/* symwork.c: the work of one large collective, without scheduling noise: 2 ranks in one
 * process (zc_comm_init_inproc), one thread driving both, so a call's time is the CPU work of
 * both ranks together (every copy and reduction, no waiting). Each collective runs with private
 * buffers (through the slot rings) and with buffers from the symmetric region (zc_sym_alloc:
 * the single-copy path), min of REPS calls after a warm-up, beside a plain memcpy of the same
 * size in the same process. On a shared host, where 2-process wall-clock numbers swing with
 * other load, this ratio is the stable one.
 *   cc -O2 -g -Iinclude bench/symwork.c build/libzcoll.a -lpthread -libverbs -o build/symwork
 *   build/symwork [MIB]        (default 64)
 * Link the CUDA runtime too (as bench/percall.c says) when the library was built with CUDA. */
#define _POSIX_C_SOURCE 200809L
#include "zcoll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 7

static const char *const colls[] = {"allreduce", "reduce", "broadcast", "reduce_scatter",
                                    "allgather", "gather", "scatter", "alltoall"};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Issues collective k of `bytes` (nccl-tests' size: the largest buffer) on rank r. */
static zc_status issue(zc_comm *c, int k, uint32_t r, float *send, float *recv, size_t bytes,
                       zc_req *q) {
    size_t n = bytes / 4, blk = n / 2;
    switch (k) {
    case 0: return zc_allreduce(c, send, recv, n, ZC_FLOAT32, ZC_SUM, q);
    case 1: return zc_reduce(c, send, recv, n, ZC_FLOAT32, ZC_SUM, 0, q);
    case 2: return zc_broadcast(c, send, r == 0 ? send : recv, n, ZC_FLOAT32, 0, q);
    case 3: return zc_reduce_scatter(c, send, recv, blk, ZC_FLOAT32, ZC_SUM, q);
    case 4: return zc_allgather(c, send, recv, blk, ZC_FLOAT32, q);
    case 5: return zc_gather(c, send, recv, blk, ZC_FLOAT32, 0, q);
    case 6: return zc_scatter(c, send, recv, blk, ZC_FLOAT32, 0, q);
    default: return zc_alltoall(c, send, recv, blk, ZC_FLOAT32, q);
    }
}

/* Min ms of one call of collective k on both ranks. */
static double time_coll(zc_comm **c, int k, float **send, float **recv, size_t bytes) {
    double best = 1e30;
    for (int i = 0; i < REPS + 2; i++) {
        zc_req q[2];
        double t0 = now_ms();
        for (uint32_t r = 0; r < 2; r++)
            if (issue(c[r], k, r, send[r], recv[r], bytes, &q[r]) != ZC_OK) return -1;
        for (uint32_t r = 0; r < 2; r++)
            if (zc_wait(c[r], &q[r]) != ZC_OK) return -1;
        double t = now_ms() - t0;
        if (i >= 2 && t < best) best = t;
    }
    return best;
}

static double time_memcpy(void *dst, const void *src, size_t bytes) {
    double best = 1e30;
    for (int i = 0; i < REPS + 2; i++) {
        double t0 = now_ms();
        memcpy(dst, src, bytes);
        __asm__ volatile("" ::: "memory");
        double t = now_ms() - t0;
        if (i >= 2 && t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    size_t bytes = (size_t)(argc > 1 ? atoi(argv[1]) : 64) << 20;
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.nranks = 2;
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.sym_bytes = 2 * bytes + 4096;
    size_t ab = (zc_comm_arena_bytes(&cfg) + 63u) / 64u * 64u;
    void *arenas[2] = {aligned_alloc(64, ab), aligned_alloc(64, ab)};
    zc_comm *c[2];
    if (!arenas[0] || !arenas[1] || zc_comm_init_inproc(&cfg, arenas, ab, c) != ZC_OK) {
        fprintf(stderr, "symwork: init failed: %s\n", zc_init_error_text());
        return 1;
    }
    float *priv_s[2], *priv_r[2], *sym_s[2], *sym_r[2];
    for (uint32_t r = 0; r < 2; r++) {
        priv_s[r] = aligned_alloc(64, bytes);
        priv_r[r] = aligned_alloc(64, bytes);
        if (!priv_s[r] || !priv_r[r] || zc_sym_alloc(c[r], bytes, (void **)&sym_s[r]) ||
            zc_sym_alloc(c[r], bytes, (void **)&sym_r[r]))
            return 1;
        memset(priv_s[r], 1, bytes), memset(priv_r[r], 0, bytes);
        memset(sym_s[r], 1, bytes), memset(sym_r[r], 0, bytes);
    }
    double mc = time_memcpy(priv_r[0], priv_s[0], bytes);
    printf("# 2 in-process ranks, one thread, %zu MiB, min of %d: ms per call (both ranks' "
           "work)\n# memcpy of %zu MiB: %.2f ms (%.1f GB/s)\n", bytes >> 20, REPS, bytes >> 20,
           mc, (double)bytes / mc / 1e6);
    printf("%-15s %9s %9s %7s %14s %14s\n", "collective", "slots ms", "sym ms", "ratio",
           "slots/memcpy", "sym/memcpy");
    for (int k = 0; k < 8; k++) {
        double a = time_coll(c, k, priv_s, priv_r, bytes), b = time_coll(c, k, sym_s, sym_r,
                                                                           bytes);
        if (a < 0 || b < 0) {
            fprintf(stderr, "symwork: %s failed: %s\n", colls[k], zc_comm_error_text(c[0]));
            return 1;
        }
        printf("%-15s %9.2f %9.2f %7.2f %14.2f %14.2f\n", colls[k], a, b, b / a, a / mc, b / mc);
    }
    for (uint32_t r = 0; r < 2; r++) zc_comm_fini(c[r]);
    return 0;
}
