/* percall.c: the software cost of one small call, without scheduling noise. Two ranks in one
 * process (zc_comm_init_inproc) run ITERS back-to-back calls of one collective on 8 bytes per
 * rank (zcbench's 8 B row: 2 floats, or 1 per block where a call has a block per rank); under
 * callgrind the instruction count per call per rank is (total - init) / (2 * ITERS), which the
 * difference of two runs gives without the init:
 *   cc -O2 -g -Iinclude bench/percall.c build/libzcoll.a -lpthread -libverbs -o build/percall
 *   valgrind --tool=callgrind build/percall allreduce 10000   (or any COLL below)
 *   callgrind_annotate callgrind.out.*                         (where the instructions go)
 * COLL: allreduce reduce broadcast reduce_scatter allgather gather scatter alltoall sendrecv
 * barrier, or start (a persistent all_reduce plan, zc_start). sendrecv is one zc_recv and one
 * zc_send per rank per iteration (zcbench's sendrecv), counted as one call.
 * One rank's path: `percall COLL ITERS RANK` counts only rank RANK's calls (run it with
 * `valgrind --tool=callgrind --collect-atstart=no`; the difference of two runs over the
 * difference of ITERS is then per call of that rank) and issues in the order of a loop's steady
 * state between two processes, where the rank that only sends (a non-root of reduce and
 * gather) runs ahead: it issues first, so that the root finds its message there. Needs
 * valgrind's <valgrind/callgrind.h> (Debian: valgrind); without it RANK is refused.
 * Link the CUDA runtime too (-L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lstdc++) when
 * the library was built with CUDA. */
#include "zcoll.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define PC_TOGGLE() CALLGRIND_TOGGLE_COLLECT
#define PC_HAS_TOGGLE 1
#else
#define PC_TOGGLE() ((void)0)
#define PC_HAS_TOGGLE 0
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pc_colls[] = {"allreduce", "reduce",  "broadcast", "reduce_scatter",
                                       "allgather", "gather",  "scatter",   "alltoall",
                                       "sendrecv",  "barrier", "start"};
enum { PC_NCOLLS = sizeof pc_colls / sizeof pc_colls[0] };

/* Issues iteration's call of collective c on rank k (q[1]: sendrecv's send). */
static zc_status pc_issue(int c, zc_comm *comm, uint32_t k, float *in, float *out, zc_plan *plan,
                          zc_req q[2]) {
    switch (c) {
    case 0: return zc_allreduce(comm, in, out, 2, ZC_FLOAT32, ZC_SUM, &q[0]);
    case 1: return zc_reduce(comm, in, out, 2, ZC_FLOAT32, ZC_SUM, 0, &q[0]);
    case 2: return zc_broadcast(comm, in, k == 0 ? in : out, 2, ZC_FLOAT32, 0, &q[0]);
    case 3: return zc_reduce_scatter(comm, in, out, 1, ZC_FLOAT32, ZC_SUM, &q[0]);
    case 4: return zc_allgather(comm, in, out, 1, ZC_FLOAT32, &q[0]);
    case 5: return zc_gather(comm, in, out, 1, ZC_FLOAT32, 0, &q[0]);
    case 6: return zc_scatter(comm, in, out, 1, ZC_FLOAT32, 0, &q[0]);
    case 7: return zc_alltoall(comm, in, out, 1, ZC_FLOAT32, &q[0]);
    case 8: {
        zc_status st = zc_recv(comm, out, 2, ZC_FLOAT32, 1 - k, &q[0]);
        return st != ZC_OK ? st : zc_send(comm, in, 2, ZC_FLOAT32, 1 - k, &q[1]);
    }
    case 9: return zc_barrier(comm, &q[0]);
    default: return zc_start(comm, plan, &q[0]);
    }
}

/* Around rank k's calls when only counts rank k alone: turns callgrind's collection on before
 * them and off after (-1: everything is counted, nothing toggled). */
static void pc_toggle(int only, uint32_t k) {
    if (only == (int)k) PC_TOGGLE();
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "allreduce";
    int iters = argc > 2 ? atoi(argv[2]) : 100000, c = 0;
    int only = argc > 3 ? atoi(argv[3]) : -1;
    while (c < PC_NCOLLS && strcmp(name, pc_colls[c]) != 0) c++;
    if (c == PC_NCOLLS || iters < 1 || only < -1 || only > 1 || (only >= 0 && !PC_HAS_TOGGLE)) {
        fprintf(stderr, "usage: percall COLL [ITERS [RANK]]; COLL: allreduce reduce broadcast "
                        "reduce_scatter allgather gather scatter alltoall sendrecv barrier "
                        "start\n");
        return 2;
    }
    /* One rank's path: the sending rank of reduce and gather (rank 1) issues first. */
    uint32_t first = only >= 0 && (c == 1 || c == 5) ? 1u : 0u;
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.nranks = 2;
    cfg.transport = ZC_TRANSPORT_INPROC;
    size_t bytes = (zc_comm_arena_bytes(&cfg) + 63u) / 64u * 64u;
    void *arenas[2] = {aligned_alloc(64, bytes), aligned_alloc(64, bytes)};
    zc_comm *comm[2];
    if (!arenas[0] || !arenas[1] || zc_comm_init_inproc(&cfg, arenas, bytes, comm) != ZC_OK) {
        fprintf(stderr, "percall: init failed: %s\n", zc_init_error_text());
        return 1;
    }
    float in[2][2] = {{1, 2}, {3, 4}}, out[2][2];
    zc_plan plan[2];
    for (uint32_t k = 0; k < 2 && c == PC_NCOLLS - 1; k++)
        if (zc_allreduce_init(comm[k], in[k], out[k], 2, ZC_FLOAT32, ZC_SUM, &plan[k]) != ZC_OK)
            return 1;
    for (int i = 0; i < iters; i++) {
        zc_req q[2][2];
        for (uint32_t j = 0; j < 2; j++) {
            uint32_t k = j ^ first;
            pc_toggle(only, k);
            zc_status st = pc_issue(c, comm[k], k, in[k], out[k], &plan[k], q[k]);
            pc_toggle(only, k);
            if (st != ZC_OK) return 1;
        }
        for (uint32_t j = 0; j < 2; j++) {
            uint32_t k = j ^ first;
            pc_toggle(only, k);
            zc_status st = zc_wait(comm[k], &q[k][0]);
            if (st == ZC_OK && c == 8) st = zc_wait(comm[k], &q[k][1]);
            pc_toggle(only, k);
            if (st != ZC_OK) return 1;
        }
    }
    printf("%s x %d on 2 in-process ranks: rank 1 holds %g %g\n", name, iters, out[1][0],
           out[1][1]);
    for (uint32_t k = 0; k < 2 && c == PC_NCOLLS - 1; k++) zc_plan_release(comm[k], &plan[k]);
    for (int k = 0; k < 2; k++) zc_comm_fini(comm[k]);
    free(arenas[0]);
    free(arenas[1]);
    return 0;
}
