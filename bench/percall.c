/* percall.c: the software cost of one small call, without scheduling noise. Two ranks in one
 * process (zc_comm_init_inproc) run ITERS back-to-back calls of one collective on 2 floats;
 * under callgrind the instruction count per call per rank is (total - init) / (2 * ITERS):
 *   cc -O2 -g -Iinclude bench/percall.c build/libzcoll.a -lpthread -libverbs -o build/percall
 *   valgrind --tool=callgrind build/percall allreduce 10000   (or: broadcast)
 *   callgrind_annotate callgrind.out.*                         (where the instructions go)
 * Link the CUDA runtime too (-L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lstdc++) when
 * the library was built with CUDA. */
#include "zcoll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *coll = argc > 1 ? argv[1] : "allreduce";
    int iters = argc > 2 ? atoi(argv[2]) : 100000;
    bool bcast = strcmp(coll, "broadcast") == 0;
    if ((!bcast && strcmp(coll, "allreduce") != 0) || iters < 1) {
        fprintf(stderr, "usage: percall allreduce|broadcast [ITERS]\n");
        return 2;
    }
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.nranks = 2;
    cfg.transport = ZC_TRANSPORT_INPROC;
    size_t bytes = (zc_comm_arena_bytes(&cfg) + 63u) / 64u * 64u;
    void *arenas[2] = {aligned_alloc(64, bytes), aligned_alloc(64, bytes)};
    zc_comm *c[2];
    if (!arenas[0] || !arenas[1] || zc_comm_init_inproc(&cfg, arenas, bytes, c) != ZC_OK) {
        fprintf(stderr, "percall: init failed: %s\n", zc_init_error_text());
        return 1;
    }
    float in[2][2] = {{1, 2}, {3, 4}}, out[2][2];
    for (int i = 0; i < iters; i++) {
        zc_req q[2];
        for (int k = 0; k < 2; k++) {
            zc_status st = bcast ? zc_broadcast(c[k], in[k], k == 0 ? in[k] : out[k], 2,
                                                ZC_FLOAT32, 0, &q[k])
                                 : zc_allreduce(c[k], in[k], out[k], 2, ZC_FLOAT32, ZC_SUM,
                                                &q[k]);
            if (st != ZC_OK) return 1;
        }
        for (int k = 0; k < 2; k++)
            if (zc_wait(c[k], &q[k]) != ZC_OK) return 1;
    }
    printf("%s x %d on 2 in-process ranks: rank 1 holds %g %g\n", coll, iters, out[1][0],
           out[1][1]);
    for (int k = 0; k < 2; k++) zc_comm_fini(c[k]);
    free(arenas[0]);
    free(arenas[1]);
    return 0;
}
