/* startpair.c: a persistent plan's zc_start against the plain call, paired in one launch. Every
 * rank runs REPS blocks of ITERS back-to-back 8-byte float32 all_reduce calls, the blocks
 * alternating plain calls (zc_allreduce + zc_wait) and starts of one plan made before them
 * (zc_start + zc_wait) in ABBA order, so both see the same host state; rank 0 prints one JSON
 * line with the median and minimum ns per call of each and the ratio of the medians. Separate
 * launches (zcbench with and without --persistent) differ by more than the effect on a shared
 * host; this is the measure `ninja bench` quotes for the persistent target. Build and run:
^ *   cc -O2 -Iinclude bench/startpair.c build/libzcoll.a $(libs of build.ninja) -o build/startpair
 *   build/zcrun -n 2 build/startpair [ITERS [REPS]]          (default 20000 and 40)
 * The configuration comes from ZC_* as for every program (zcbench's default: ZC_THREADS=serial). */
#define _POSIX_C_SOURCE 200809L
#include "zcoll.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SP_MAX_REPS 1000

static uint64_t sp_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int sp_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int sp_fail(zc_comm *c, const char *what) {
    fprintf(stderr, "startpair: %s: %s\n", what, c ? zc_comm_error_text(c) : zc_init_error_text());
    return 1;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 20000;
    long reps = argc > 2 ? atol(argv[2]) : 40;
    if (iters < 1 || reps < 2 || reps > SP_MAX_REPS || reps % 2) {
        fprintf(stderr, "usage: startpair [ITERS >= 1 [REPS, even, 2..%d]]\n", SP_MAX_REPS);
        return 2;
    }
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.threads = ZC_THREADS_SERIAL; /* as zcbench, unless ZC_THREADS says otherwise */
    if (zc_config_from_env(&cfg) != ZC_OK) {
        fprintf(stderr, "startpair: %s\n", cfg.error_text);
        return 1;
    }
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arena = bytes ? aligned_alloc(4096, (bytes + 4095) / 4096 * 4096) : NULL;
    zc_comm *c = NULL;
    if (!arena || zc_comm_init(&cfg, arena, bytes, &c) != ZC_OK) return sp_fail(NULL, "init");
    float in[2] = {1, 2}, out[2];
    zc_req q;
    zc_plan plan;
    if (zc_allreduce_init(c, in, out, 2, ZC_FLOAT32, ZC_SUM, &plan) != ZC_OK)
        return sp_fail(c, "zc_allreduce_init");
    static double t[2][SP_MAX_REPS / 2];
    long n[2] = {0, 0};
    for (long r = 0; r < reps; r++) {
        int start = (int)((r + r / 2) % 2); /* plain, start, start, plain, ... */
        if (zc_barrier(c, &q) != ZC_OK || zc_wait(c, &q) != ZC_OK) return sp_fail(c, "barrier");
        uint64_t t0 = sp_now_ns();
        for (long i = 0; i < iters; i++) {
            zc_status st = start ? zc_start(c, &plan, &q)
                                 : zc_allreduce(c, in, out, 2, ZC_FLOAT32, ZC_SUM, &q);
            if (st != ZC_OK || zc_wait(c, &q) != ZC_OK) return sp_fail(c, "all_reduce");
        }
        t[start][n[start]++] = (double)(sp_now_ns() - t0) / (double)iters;
    }
    for (int m = 0; m < 2; m++) qsort(t[m], (size_t)n[m], sizeof(double), sp_cmp);
    double plain = t[0][n[0] / 2], started = t[1][n[1] / 2];
    if (zc_comm_rank(c) == 0)
        printf("{\"ranks\": %u, \"iters\": %ld, \"reps\": %ld, \"plain_ns_p50\": %.1f, "
               "\"plain_ns_min\": %.1f, \"start_ns_p50\": %.1f, \"start_ns_min\": %.1f, "
               "\"start_over_plain\": %.4f}\n", zc_comm_size(c), iters, reps, plain, t[0][0],
               started, t[1][0], started / plain);
    if (zc_plan_release(c, &plan) != ZC_OK) return sp_fail(c, "zc_plan_release");
    if (zc_comm_fini(c) != ZC_OK) return sp_fail(NULL, "fini");
    free(arena);
    return 0;
}
