/* manyranks.c: the CPU time of one small all_reduce over every rank of a large in-process group
 * (zc_comm_init_inproc, slots of 1 KiB, 2 per ring), one thread driving all ranks: each
 * repetition issues one 8-byte float32 all_reduce (2 elements) on every rank, then polls the
 * ranks in turn until all finished; the median over the repetitions of the process CPU time
 * per repetition is printed with the algorithm the configuration picks.
 *   cc -O2 -Iinclude bench/manyranks.c build/libzcoll.a -lpthread -libverbs -o build/manyranks
 *   build/manyranks N REPS LOG_MIN_RANKS   (LOG_MIN_RANKS 0: one-shot; 1: recursive doubling)
 * Link the CUDA runtime too (as percall.c says) when the library was built with CUDA. */
#include "zcoll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mr_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int mr_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: manyranks N REPS LOG_MIN_RANKS\n");
        return 2;
    }
    uint32_t n = (uint32_t)atoi(argv[1]), reps = (uint32_t)atoi(argv[2]);
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.nranks = n;
    cfg.slot_bytes = 1024;
    cfg.slots = 2;
    cfg.threads = ZC_THREADS_SERIAL;
    cfg.log_min_ranks = (uint32_t)atoi(argv[3]);
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void **arenas = calloc(n, sizeof *arenas);
    zc_comm **c = calloc(n, sizeof *c);
    zc_req *reqs = calloc(n, sizeof *reqs);
    float *in = calloc(2u * n, sizeof *in), *out = calloc(2u * n, sizeof *out);
    double *ms = calloc(reps, sizeof *ms);
    if (!bytes || !arenas || !c || !reqs || !in || !out || !ms) return 1;
    for (uint32_t r = 0; r < n; r++)
        if (!(arenas[r] = aligned_alloc(64, bytes))) return 1;
    if (zc_comm_init_inproc(&cfg, arenas, bytes, c) != ZC_OK) {
        fprintf(stderr, "init: %s\n", zc_init_error_text());
        return 1;
    }
    for (uint32_t r = 0; r < 2u * n; r++) in[r] = (float)(r % 7u);
    for (uint32_t i = 0; i < reps; i++) {
        double t0 = mr_cpu_ms();
        for (uint32_t r = 0; r < n; r++)
            if (zc_allreduce(c[r], in + 2u * r, out + 2u * r, 2, ZC_FLOAT32, ZC_SUM, &reqs[r]) !=
                ZC_OK)
                return 1;
        uint32_t left = n;
        for (uint64_t pass = 0; left && pass < 100000000u; pass++)
            for (uint32_t r = 0; r < n; r++) {
                if (!reqs[r].opaque_[0]) continue;
                (void)zc_progress(c[r]);
                zc_status st = zc_test(c[r], &reqs[r]);
                if (st == ZC_IN_PROGRESS) continue;
                if (st != ZC_OK) {
                    fprintf(stderr, "rank %u: %s\n", r, zc_comm_error_text(c[r]));
                    return 1;
                }
                left--;
            }
        ms[i] = mr_cpu_ms() - t0;
        if (left) return 1;
    }
    qsort(ms, reps, sizeof *ms, mr_cmp);
    printf("n %u log_min_ranks %u: median %.3f ms per all_reduce over all ranks (min %.3f, max "
           "%.3f, %u reps), arena %zu bytes per rank\n", n, cfg.log_min_ranks, ms[reps / 2],
           ms[0], ms[reps - 1], reps, bytes);
    for (uint32_t r = 0; r < n; r++) zc_comm_fini(c[r]);
    return 0;
}
