/* test_engine.c: the engine's own contracts that no single collective shows: the failure record
 * (first failure wins: status, sentence, peer and code stay), and communicators created by
 * several threads at once (no shared scratch in init or split). In-process groups, plus
 * bootstrap inits on distinct loopback ports. */
#include "zt.h"
#include "zcoll.h"
#include "engine.h"

#include <stdlib.h>
#include <string.h>

/* A 2-rank in-process group with a short deadline. */
static void pair_open(zc_config *cfg, void *arenas[2], zc_comm *c[2]) {
    zc_config_default(cfg);
    cfg->transport = ZC_TRANSPORT_INPROC;
    cfg->nranks = 2;
    cfg->timeout_ns = 300000000ull;
    size_t bytes = zc_comm_arena_bytes(cfg);
    ZT_CHECK(bytes > 0);
    for (int r = 0; r < 2; r++) ZT_CHECK((arenas[r] = aligned_alloc(64, bytes)) != NULL);
    ZT_CHECK_ST(zc_comm_init_inproc(cfg, arenas, bytes, c), ZC_OK);
}

static void pair_close(void *arenas[2], zc_comm *c[2]) {
    for (int r = 0; r < 2; r++) {
        ZT_CHECK_ST(zc_comm_fini(c[r]), ZC_OK);
        free(arenas[r]);
    }
}

void failure_record_keeps_the_first_failure_sentence_peer_and_status(void) {
    zc_config cfg;
    void *arenas[2];
    zc_comm *c[2];
    pair_open(&cfg, arenas, c);
    /* Before any failure a call's error writes its sentence and the comm stays usable. */
    zc_req q[2];
    ZT_CHECK_ST(zc_test(c[0], &(zc_req){{0}}), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_comm_error_text(c[0]), "not a request in flight") != NULL);
    /* A mismatch (counts 10 and 20) fails both ranks. */
    int a[20] = {0}, b[20];
    ZT_CHECK_ST(zc_allreduce(c[0], a, b, 10, ZC_INT32, ZC_SUM, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_allreduce(c[1], a, b, 20, ZC_INT32, ZC_SUM, &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_wait(c[0], &q[0]), ZC_MISMATCH);
    ZT_CHECK_ST(zc_wait(c[1], &q[1]), ZC_MISMATCH);
    char first[ZC_ERROR_TEXT_BYTES];
    snprintf(first, sizeof first, "%s", zc_comm_error_text(c[0]));
    /* Rank 0 found it itself or heard it from rank 1: either way about sequence 0 and rank 1. */
    ZT_CHECK(strstr(first, "sequence 0") != NULL && strstr(first, "rank 1") != NULL);
    ZT_CHECK_EQ(c[0]->failed, ZC_MISMATCH);
    ZT_CHECK_EQ(c[0]->fail_peer, 1);
    ZT_CHECK_EQ(c[0]->fail_seq, 0);
    /* A second failure, with its own status, peer and code, changes nothing and returns the
     * first status. */
    ZT_CHECK_ST(zc__fail(c[0], ZC_PEER_LOST, 7, 0, 42, "rank %u is gone (second)", 0u),
                ZC_MISMATCH);
    ZT_CHECK(strcmp(zc_comm_error_text(c[0]), first) == 0);
    ZT_CHECK_EQ(c[0]->failed, ZC_MISMATCH);
    ZT_CHECK_EQ(c[0]->fail_peer, 1);
    ZT_CHECK_EQ(c[0]->fail_code, 0);
    ZT_CHECK_EQ(c[0]->fail_seq, 0);
    /* Nor does a call's error after the failure, nor a failure through the older entry. */
    ZT_CHECK_ST(zc_test(c[0], &(zc_req){{0}}), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc__error(c[0], ZC_AGAIN, "all slots busy"), ZC_AGAIN);
    zc__fail_comm(c[0], ZC_TIMED_OUT, 9);
    ZT_CHECK(strcmp(zc_comm_error_text(c[0]), first) == 0);
    ZT_CHECK_ST(zc_barrier(c[0], &q[0]), ZC_MISMATCH);
    /* Abort: later calls say ZC_ABORTED (API.md), the sentence still names the cause. */
    ZT_CHECK_ST(zc_comm_abort(c[0]), ZC_OK);
    ZT_CHECK_ST(zc_barrier(c[0], &q[0]), ZC_ABORTED);
    ZT_CHECK(strcmp(zc_comm_error_text(c[0]), first) == 0);
    pair_close(arenas, c);
}

void failure_record_fails_every_active_request_with_the_first_status(void) {
    zc_config cfg;
    void *arenas[2];
    zc_comm *c[2];
    pair_open(&cfg, arenas, c);
    int a[4] = {1, 2, 3, 4}, b[3][4];
    zc_req q[3];
    for (int i = 0; i < 3; i++) /* rank 1 never joins: all three stay in flight */
        ZT_CHECK_ST(zc_allreduce(c[0], a, b[i], 4, ZC_INT32, ZC_SUM, &q[i]), ZC_OK);
    ZT_CHECK_ST(zc__fail(c[0], ZC_PEER_LOST, 1, 1, 5, "rank %u is gone (test)", 1u),
                ZC_PEER_LOST);
    ZT_CHECK_ST(zc__fail(c[0], ZC_TIMED_OUT, 2, -1, 0, "timed out (test)"), ZC_PEER_LOST);
    for (int i = 0; i < 3; i++) ZT_CHECK_ST(zc_test(c[0], &q[i]), ZC_PEER_LOST);
    ZT_CHECK(strcmp(zc_comm_error_text(c[0]), "rank 1 is gone (test)") == 0);
    ZT_CHECK_EQ(c[0]->fail_code, 5);
    /* The peer heard of it through the alarm and fails with the same status, naming rank 0. */
    zc_req p;
    ZT_CHECK_ST(zc_allreduce(c[1], a, b[0], 4, ZC_INT32, ZC_SUM, &p), ZC_OK);
    ZT_CHECK_ST(zc_wait(c[1], &p), ZC_PEER_LOST);
    ZT_CHECK(strstr(zc_comm_error_text(c[1]), "rank 0 detected ZC_PEER_LOST") != NULL);
    ZT_CHECK_EQ(c[1]->fail_peer, 0);
    pair_close(arenas, c);
}
