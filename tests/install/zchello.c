/* zchello.c: a user's program built against an installed zcoll (tests/install/run.sh builds it
 * with only `pkg-config --cflags --libs zcoll`) and started by real launchers
 * (tests/launchers/run.sh: torchrun, mpirun, srun). It takes its rank, size and rendezvous from
 * the launcher's environment (zc_config_from_env), all_reduces rank+1 and prints
 * "zchello rank R of N: sum S" (S = N(N+1)/2); exits 1 on any failure or a wrong sum. */
#include <stdio.h>
#include <stdlib.h>

#include "zcoll.h"

int main(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    zc_status st = zc_config_from_env(&cfg);
    if (st != ZC_OK) {
        fprintf(stderr, "zchello: %s: %s\n", zc_status_name(st), cfg.error_text);
        return 1;
    }
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arena = bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    zc_comm *comm = NULL;
    st = arena ? zc_comm_init(&cfg, arena, bytes, &comm) : ZC_INVALID_ARG;
    if (st != ZC_OK) {
        fprintf(stderr, "zchello: zc_comm_init: %s: %s\n", zc_status_name(st), zc_init_error_text());
        return 1;
    }
    int64_t value = (int64_t)zc_comm_rank(comm) + 1;
    zc_req req;
    st = zc_allreduce(comm, &value, &value, 1, ZC_INT64, ZC_SUM, &req);
    if (st == ZC_OK) st = zc_wait(comm, &req);
    uint32_t n = zc_comm_size(comm);
    int bad = st != ZC_OK || value != (int64_t)n * (n + 1) / 2;
    if (st != ZC_OK) fprintf(stderr, "zchello: %s\n", zc_comm_error_text(comm));
    printf("zchello rank %u of %u: sum %lld\n", zc_comm_rank(comm), n, (long long)value);
    zc_comm_fini(comm);
    free(arena);
    return bad;
}
