/* test_engine.c: the engine's own contracts that no single collective shows: the failure record
 * (first failure wins: status, sentence, peer and code stay), and communicators created by
 * several threads at once (no shared scratch in init or split). In-process groups, plus
 * bootstrap inits on distinct loopback ports. */
#include "zt.h"
#include "zcoll.h"
#include "engine.h"
#include "platform.h"

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
    /* Nor does a call's error after the failure. */
    ZT_CHECK_ST(zc_test(c[0], &(zc_req){{0}}), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc__error(c[0], ZC_AGAIN, "all slots busy"), ZC_AGAIN);
    ZT_CHECK(strcmp(zc_comm_error_text(c[0]), first) == 0);
    ZT_CHECK_ST(zc_barrier(c[0], &q[0]), ZC_MISMATCH);
    /* Abort: later calls say ZC_ABORTED (docs/api.md), the sentence still names the cause. */
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

/* ---- parking: a call that waits for one message reads one word ---- */

extern size_t zc__test_lines_max; /* the test build's ceiling of flagged lines (channel.c) */

/* Polls rank 0 alone up to `most` times, until q is no longer in flight; the polls it took. */
static int park_poll(zc_comm *c, zc_req *q, int most) {
    for (int i = 1; i <= most; i++) {
        (void)zc_progress(c);
        zc__req *r = zc__lookup(c, q);
        if (!r || r->state != ZC_REQ_ACTIVE) return i;
    }
    return most + 1;
}

/* Rank 0 polls until it parks (bounded); whether it did. */
static bool park_until_parked(zc_comm *c) {
    for (int i = 0; i < 64 && !c->parked; i++) (void)zc_progress(c);
    return c->parked != 0;
}

void parking_wakes_for_the_message_a_new_call_a_report_and_the_deadline(void) {
    zc_config cfg;
    void *arenas[2];
    zc_comm *c[2];
    pair_open(&cfg, arenas, c);
    /* The message: one line (in the header), flagged lines (40 bytes: one line after the
     * header; 400 bytes: eight, with the lines' ceiling raised), and chunk streams (16 KiB of
     * int32 in 64 KiB slots: one chunk too, then 3 x 64 KiB across slots). Rank 0 parks on it,
     * finishes at the first poll after rank 1's message lands (streams: every later chunk as
     * soon as it lands), bitwise right. */
    static int32_t in[2][3 << 14], out[2][3 << 14];
    const size_t counts[] = {2, 10, 100, 4096, 3u << 14};
    for (size_t t = 0; t < 5; t++) {
        size_t n = counts[t];
        zc__test_lines_max = n == 100 ? 4096u : 0u;
        for (uint32_t r = 0; r < 2; r++)
            for (size_t i = 0; i < n; i++) in[r][i] = (int32_t)((r + 1u) * (i + t));
        zc_req q[2];
        ZT_CHECK_ST(zc_allreduce(c[0], in[0], out[0], n, ZC_INT32, ZC_SUM, &q[0]), ZC_OK);
        ZT_CHECK(park_until_parked(c[0]));
        ZT_CHECK(park_poll(c[0], &q[0], 16) == 17); /* parked: nothing comes */
        ZT_CHECK_ST(zc_allreduce(c[1], in[1], out[1], n, ZC_INT32, ZC_SUM, &q[1]), ZC_OK);
        int polls = 0;
        for (zc__req *r = zc__lookup(c[0], &q[0]); polls < 1000 && r->state == ZC_REQ_ACTIVE;
             polls++) {
            (void)zc_progress(c[0]);
            (void)zc_progress(c[1]);
        }
        if (n <= 100) ZT_CHECK_EQ(polls, 1); /* the first poll after the lines landed */
        ZT_CHECK(polls < 1000);
        ZT_CHECK_ST(zc_test(c[0], &q[0]), ZC_OK);
        ZT_CHECK_ST(zc_wait(c[1], &q[1]), ZC_OK);
        for (size_t i = 0; i < n; i++) {
            ZT_CHECK_EQ(out[0][i], (int32_t)(3u * (i + t)));
            ZT_CHECK_EQ(out[1][i], (int32_t)(3u * (i + t)));
        }
        zc__test_lines_max = 0;
    }
    /* A new call ends the parking: rank 0 parks on an all_reduce, then issues a receive from
     * rank 1, whose send lands: the receive finishes at the next poll though the all_reduce's
     * word did not change. */
    int32_t a[2] = {1, 2}, b[2], v = 7, got = 0;
    zc_req ar[2], rq, sq;
    ZT_CHECK_ST(zc_allreduce(c[0], a, b, 2, ZC_INT32, ZC_SUM, &ar[0]), ZC_OK);
    ZT_CHECK(park_until_parked(c[0]));
    ZT_CHECK_ST(zc_recv(c[0], &got, 1, ZC_INT32, 1, &rq), ZC_OK);
    ZT_CHECK_EQ(c[0]->parked, 0);
    ZT_CHECK_ST(zc_send(c[1], &v, 1, ZC_INT32, 0, &sq), ZC_OK);
    ZT_CHECK_EQ(park_poll(c[0], &rq, 1), 1);
    ZT_CHECK_ST(zc_test(c[0], &rq), ZC_OK);
    ZT_CHECK_EQ(got, 7);
    ZT_CHECK_ST(zc_wait(c[1], &sq), ZC_OK);
    ZT_CHECK_ST(zc_allreduce(c[1], a, b, 2, ZC_INT32, ZC_SUM, &ar[1]), ZC_OK);
    ZT_CHECK_ST(zc_wait(c[0], &ar[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(c[1], &ar[1]), ZC_OK);
    /* A mismatch lands in the awaited slot: found at once, not at the deadline. */
    int32_t m3[3] = {0, 0, 0};
    ZT_CHECK_ST(zc_allreduce(c[0], a, b, 2, ZC_INT32, ZC_SUM, &ar[0]), ZC_OK);
    ZT_CHECK(park_until_parked(c[0]));
    ZT_CHECK_ST(zc_allreduce(c[1], m3, m3, 3, ZC_INT32, ZC_SUM, &ar[1]), ZC_OK);
    ZT_CHECK_EQ(park_poll(c[0], &ar[0], 1), 1);
    ZT_CHECK_ST(zc_test(c[0], &ar[0]), ZC_MISMATCH);
    (void)zc_wait(c[1], &ar[1]);
    pair_close(arenas, c);

    /* A failure report: rank 1 fails and reports while rank 0 is parked; rank 0 reads it
     * within one clock period of polls (ZC_CLOCK_IDLE_POLLS). */
    pair_open(&cfg, arenas, c);
    ZT_CHECK_ST(zc_allreduce(c[0], a, b, 2, ZC_INT32, ZC_SUM, &ar[0]), ZC_OK);
    ZT_CHECK(park_until_parked(c[0]));
    ZT_CHECK_ST(zc__fail(c[1], ZC_PEER_LOST, 0, 1, 0, "rank %u is gone (test)", 1u),
                ZC_PEER_LOST);
    ZT_CHECK(park_poll(c[0], &ar[0], (int)ZC_CLOCK_IDLE_POLLS + 1) <= (int)ZC_CLOCK_IDLE_POLLS + 1);
    ZT_CHECK_ST(zc_test(c[0], &ar[0]), ZC_PEER_LOST);
    ZT_CHECK(strstr(zc_comm_error_text(c[0]), "rank 1 detected ZC_PEER_LOST") != NULL);
    pair_close(arenas, c);

    /* The deadline: rank 1 never joins; rank 0, parked, times out within it (300 ms) and
     * well before twice it. */
    pair_open(&cfg, arenas, c);
    ZT_CHECK_ST(zc_allreduce(c[0], a, b, 2, ZC_INT32, ZC_SUM, &ar[0]), ZC_OK);
    ZT_CHECK(park_until_parked(c[0]));
    uint64_t t0 = zc_plat_now_ns();
    while (zc_test(c[0], &ar[0]) == ZC_IN_PROGRESS && zc_plat_now_ns() - t0 < 5000000000ull)
        (void)zc_progress(c[0]);
    uint64_t took = zc_plat_now_ns() - t0;
    ZT_CHECK_ST(zc_test(c[0], &ar[0]), ZC_INVALID_ARG); /* already finished by the loop */
    ZT_CHECK_EQ(c[0]->failed, ZC_TIMED_OUT);
    ZT_CHECK(took < 2u * cfg.timeout_ns);
    pair_close(arenas, c);
}

/* ---- the in-process walk: zc_wait visits the ranks something arrived for ---- */

#define WALK_N 64u

/* Whether no rank but a and b was visited since the counts in idle were taken (a visit to a
 * rank with nothing in flight is an idle pass: empty_polls grows by one). */
static bool walk_untouched(zc_comm **c, const uint32_t *idle, uint32_t a, uint32_t b) {
    for (uint32_t r = 0; r < WALK_N; r++)
        if (r != a && r != b && c[r]->empty_polls != idle[r]) return false;
    return true;
}

void inproc_walk_visits_the_ranks_something_arrived_for(void) {
    zc_config cfg;
    zt_inproc_config(&cfg, WALK_N, 2, 1024);
    cfg.sym_bytes = 0; /* send/recv through the rings, not the symmetric region's one copy */
    cfg.timeout_ns = 2000000000ull;
    void *arenas[WALK_N];
    zc_comm *c[WALK_N];
    uint32_t idle[WALK_N];
    zt_inproc_open(&cfg, arenas, c);
    /* A stream of 12 slots through a ring of 2, rank 5 to rank 40, driven by rank 40's wait,
     * its receive issued after rank 5 filled the ring and found no slot more: the credit rank
     * 5 waits for wakes it (the wire's credit_wake), and no other rank is visited. Without
     * that wake the walk would find no bit and visit every rank. */
    static int32_t src[3072], dst[3072];
    for (uint32_t i = 0; i < 3072u; i++) src[i] = (int32_t)(i * 7u + 1u), dst[i] = 0;
    zc_req sq, rq;
    ZT_CHECK_ST(zc_send(c[5], src, 3072, ZC_INT32, 40, &sq), ZC_OK);
    for (int i = 0; i < 8; i++) ZT_CHECK_ST(zc_progress(c[5]), ZC_OK);
    ZT_CHECK(c[5]->empty_polls > 0); /* the ring is full */
    memset(c[0]->group_wake, 0, sizeof(uint64_t)); /* as a walk that visited rank 5 leaves it */
    ZT_CHECK_ST(zc_recv(c[40], dst, 3072, ZC_INT32, 5, &rq), ZC_OK);
    for (uint32_t r = 0; r < WALK_N; r++) idle[r] = c[r]->empty_polls;
    ZT_CHECK_ST(zc_wait(c[40], &rq), ZC_OK);
    ZT_CHECK_ST(zc_wait(c[5], &sq), ZC_OK);
    ZT_CHECK(memcmp(src, dst, sizeof src) == 0);
    ZT_CHECK(walk_untouched(c, idle, 5, 40));
    /* A lost wake (the bits cleared after the send's issue set its rank's; a send of three
     * slots posts nothing at issue): the wait finds no bit, walks every rank, and the message
     * arrives all the same. */
    for (uint32_t i = 0; i < 3072u; i++) dst[i] = 0;
    ZT_CHECK_ST(zc_recv(c[9], dst, 600, ZC_INT32, 7, &rq), ZC_OK);
    ZT_CHECK_ST(zc_send(c[7], src, 600, ZC_INT32, 9, &sq), ZC_OK);
    memset(c[0]->group_wake, 0, sizeof(uint64_t));
    for (uint32_t r = 0; r < WALK_N; r++) idle[r] = c[r]->empty_polls;
    ZT_CHECK_ST(zc_wait(c[9], &rq), ZC_OK);
    ZT_CHECK_ST(zc_wait(c[7], &sq), ZC_OK);
    ZT_CHECK(memcmp(src, dst, 600 * sizeof(int32_t)) == 0);
    ZT_CHECK(!walk_untouched(c, idle, 7, 9));
    /* A receive whose first step finds its one message absent leaves its rank's bit clear
     * (that message's post sets it), and a send that posts its one message at issue and
     * finishes there sets the receiver's alone. */
    memset(c[0]->group_wake, 0, sizeof(uint64_t));
    ZT_CHECK_ST(zc_recv(c[20], dst, 2, ZC_INT32, 11, &rq), ZC_OK);
    ZT_CHECK_EQ(c[0]->group_wake[0], 0u);
    ZT_CHECK_ST(zc_send(c[11], src, 2, ZC_INT32, 20, &sq), ZC_OK);
    ZT_CHECK_EQ(c[0]->group_wake[0], (uint64_t)1 << 20);
    ZT_CHECK_ST(zc_wait(c[20], &rq), ZC_OK);
    ZT_CHECK_ST(zc_wait(c[11], &sq), ZC_OK);
    ZT_CHECK(dst[0] == src[0] && dst[1] == src[1]);
    /* A collective of every rank, many times over (the walk's regular full visits among them):
     * results right. */
    int32_t a[WALK_N][4], b[WALK_N][4];
    zc_req q[WALK_N];
    for (uint32_t k = 0; k < 100u; k++) {
        for (uint32_t r = 0; r < WALK_N; r++) {
            for (uint32_t i = 0; i < 4u; i++) a[r][i] = (int32_t)(r + i + k);
            ZT_CHECK_ST(zc_allreduce(c[r], a[r], b[r], 4, ZC_INT32, ZC_SUM, &q[r]), ZC_OK);
        }
        for (uint32_t r = 0; r < WALK_N; r++) ZT_CHECK_ST(zc_wait(c[r], &q[r]), ZC_OK);
        for (uint32_t r = 0; r < WALK_N; r++)
            for (uint32_t i = 0; i < 4u; i++)
                ZT_CHECK_EQ(b[r][i], (int32_t)(WALK_N * (i + k) + WALK_N * (WALK_N - 1u) / 2u));
    }
    /* Before any alarm the group's count is 0 (a pass reads that shared line, not its rank's
     * alarm word); rank 3's report counts 1, wakes every rank it wrote to, and every other
     * rank's next call fails with it. */
    const uint8_t *group = (const uint8_t *)c[0]->group;
    const uint64_t *alarms = (const uint64_t *)(const void *)(group + zc__group_alarms_at(WALK_N));
    ZT_CHECK_EQ(*alarms, 0u);
    memset(c[0]->group_wake, 0, sizeof(uint64_t));
    c[3]->wire->alarm(c[3]->wire_state, 40ull << 56 | 3ull << 32 | 7u); /* ZC_PEER_LOST */
    ZT_CHECK_EQ(*alarms, 1u);
    ZT_CHECK_EQ(c[0]->group_wake[0], ~(uint64_t)0);
    for (uint32_t r = 0; r < WALK_N; r++) { /* rank 3 reads a report of its own: no report */
        if (r == 3) continue;
        zc_status st = zc_barrier(c[r], &q[r]);
        ZT_CHECK_ST(st == ZC_OK ? zc_wait(c[r], &q[r]) : st, ZC_PEER_LOST);
        ZT_CHECK(strstr(zc_comm_error_text(c[r]), "rank 3 detected ZC_PEER_LOST") != NULL);
    }
    zt_inproc_close(WALK_N, arenas, c);
}

/* ---- communicators created by several threads at once ---- */

#include "platform.h"

#include <pthread.h>

#define ZT_THREADS 6
#define ZT_ROUNDS 10

/* All-reduce (sum) of v_r[i] = (r + 1) * (i + salt) over the group's ranks, checked. */
static int allreduce_group_ok(zc_comm *const c[], uint32_t n, int64_t salt) {
    int64_t in[8][5], out[8][5];
    zc_req q[8];
    for (uint32_t r = 0; r < n; r++) {
        for (int i = 0; i < 5; i++) in[r][i] = (int64_t)(r + 1) * (i + salt);
        if (zc_allreduce(c[r], in[r], out[r], 5, ZC_INT64, ZC_SUM, &q[r]) != ZC_OK) return 0;
    }
    int ok = 1;
    for (uint32_t r = 0; r < n; r++) {
        ok &= zc_wait(c[r], &q[r]) == ZC_OK;
        for (int i = 0; i < 5; i++) ok &= out[r][i] == (int64_t)(n * (n + 1) / 2) * (i + salt);
    }
    return ok;
}

/* One thread: ZT_ROUNDS in-process groups of 2..5 ranks, each used, split in two and freed. */
static void *inproc_worker(void *arg) {
    uintptr_t t = (uintptr_t)arg, bad = 0;
    for (int round = 0; round < ZT_ROUNDS && !bad; round++) {
        uint32_t n = 2 + (uint32_t)((t + (uintptr_t)round) % 4);
        zc_config cfg;
        zc_config_default(&cfg);
        cfg.transport = ZC_TRANSPORT_INPROC;
        cfg.nranks = n;
        size_t bytes = zc_comm_arena_bytes(&cfg);
        void *arenas[8], *kid_arenas[8];
        zc_comm *c[8], *kids[8], *half[2][8];
        int colors[8], keys[8];
        for (uint32_t r = 0; r < n; r++) {
            arenas[r] = aligned_alloc(64, bytes);
            kid_arenas[r] = aligned_alloc(64, bytes);
            colors[r] = (int)(r % 2);
            keys[r] = -(int)r;
        }
        bad |= zc_comm_init_inproc(&cfg, arenas, bytes, c) != ZC_OK;
        bad |= !bad && !allreduce_group_ok(c, n, (int64_t)(t * 1000 + (uintptr_t)round));
        bad |= !bad && zc_comm_split_inproc(c, colors, keys, kid_arenas, bytes, kids) != ZC_OK;
        for (uint32_t r = 0; r < n && !bad; r++) /* keys -r: child rank counts down */
            half[r % 2][zc_comm_rank(kids[r])] = kids[r];
        for (uint32_t h = 0; h < 2 && !bad; h++)
            bad |= !allreduce_group_ok(half[h], (n + 1 - h) / 2, (int64_t)round);
        for (uint32_t r = 0; r < n; r++) {
            if (!bad) bad |= zc_comm_fini(kids[r]) != ZC_OK || zc_comm_fini(c[r]) != ZC_OK;
            free(arenas[r]);
            free(kid_arenas[r]);
        }
    }
    return (void *)bad;
}

void threads_create_in_process_groups_and_splits_at_once(void) {
    pthread_t th[ZT_THREADS];
    for (uintptr_t t = 0; t < ZT_THREADS; t++)
        ZT_CHECK(pthread_create(&th[t], NULL, inproc_worker, (void *)t) == 0);
    for (int t = 0; t < ZT_THREADS; t++) {
        void *bad = (void *)1;
        ZT_CHECK(pthread_join(th[t], &bad) == 0);
        ZT_CHECK(bad == NULL);
    }
}

/* Pairs of threads, each thread one rank of a 2-rank job over the bootstrap and the shm wire
 * (its own rendezvous port per round): init, all-reduce, split, all-reduce on the child. */
#define ZT_PAIRS 3
#define ZT_PAIR_ROUNDS 6

typedef struct pair_job {
    uint32_t rank;
    uint16_t ports[ZT_PAIR_ROUNDS];
    char why[ZC_ERROR_TEXT_BYTES];
} pair_job;

/* All-reduce (sum) of (rank + 1) * (i + salt) over comm's ranks, checked. */
static int allreduce_one_ok(zc_comm *c, int64_t salt) {
    int64_t in[5], out[5];
    uint32_t n = zc_comm_size(c), r = zc_comm_rank(c);
    zc_req q;
    for (int i = 0; i < 5; i++) in[i] = (int64_t)(r + 1) * (i + salt);
    if (zc_allreduce(c, in, out, 5, ZC_INT64, ZC_SUM, &q) != ZC_OK) return 0;
    int ok = zc_wait(c, &q) == ZC_OK;
    for (int i = 0; i < 5; i++) ok &= out[i] == (int64_t)(n * (n + 1) / 2) * (i + salt);
    return ok;
}

static void pair_cfg(const pair_job *j, int round, zc_config *cfg) {
    zc_config_default(cfg);
    cfg->nranks = 2;
    cfg->rank = j->rank;
    cfg->transport = ZC_TRANSPORT_SHM;
    snprintf(cfg->root_addr, sizeof cfg->root_addr, "127.0.0.1:%u", (unsigned)j->ports[round]);
    for (uint8_t i = 0; i < 16; i++) cfg->secret[i] = (uint8_t)(i + round);
    cfg->secret_set = true;
}

static int pair_round(pair_job *j, int round, void *arena, void *kid_arena, size_t bytes) {
    zc_config cfg;
    pair_cfg(j, round, &cfg);
    zc_comm *c = NULL, *kid = NULL;
    if (zc_comm_init(&cfg, arena, bytes, &c) != ZC_OK) {
        snprintf(j->why, sizeof j->why, "init: %s", zc_init_error_text());
        return 0;
    }
    int ok = allreduce_one_ok(c, round);
    /* Both ranks one color, keys reversing the order. */
    ok = ok && zc_comm_split(c, 0, -(int)j->rank, kid_arena, bytes, &kid) == ZC_OK;
    ok = ok && zc_comm_rank(kid) == 1 - j->rank && allreduce_one_ok(kid, 100 + round);
    if (!ok) snprintf(j->why, sizeof j->why, "round %d: %s", round, zc_comm_error_text(c));
    if (kid) ok &= zc_comm_fini(kid) == ZC_OK;
    ok &= zc_comm_fini(c) == ZC_OK;
    return ok;
}

static void *pair_worker(void *arg) {
    pair_job *j = arg;
    zc_config cfg;
    pair_cfg(j, 0, &cfg);
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arena = aligned_alloc(64, bytes), *kid_arena = aligned_alloc(64, bytes);
    uintptr_t bad = 0;
    for (int round = 0; round < ZT_PAIR_ROUNDS && !bad; round++)
        bad = !pair_round(j, round, arena, kid_arena, bytes);
    free(arena);
    free(kid_arena);
    return (void *)bad;
}

void threads_init_and_split_through_the_bootstrap_at_once(void) {
    static pair_job jobs[2 * ZT_PAIRS];
    pthread_t th[2 * ZT_PAIRS];
    for (int p = 0; p < ZT_PAIRS; p++)
        for (int round = 0; round < ZT_PAIR_ROUNDS; round++) {
            int s = -1;
            uint16_t port = 0; /* free a moment ago; both ranks of the pair meet there */
            ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &s, &port), ZC_PLAT_OK);
            zc_plat_tcp_close(s);
            jobs[2 * p].ports[round] = jobs[2 * p + 1].ports[round] = port;
        }
    for (uint32_t t = 0; t < 2 * ZT_PAIRS; t++) {
        jobs[t].rank = t % 2;
        ZT_CHECK(pthread_create(&th[t], NULL, pair_worker, &jobs[t]) == 0);
    }
    for (int t = 0; t < 2 * ZT_PAIRS; t++) {
        void *bad = (void *)1;
        ZT_CHECK(pthread_join(th[t], &bad) == 0);
        if (bad) printf("    thread %d: %s\n", t, jobs[t].why);
        ZT_CHECK(bad == NULL);
    }
}

/* ---- back-pressure from the wire ---- */

/* The shm wire, but post refuses two calls of every three with ZC_AGAIN (a full send queue, as
 * transport_ib says it). */
static zc_wire_ops flaky_wire;
static unsigned flaky_calls, flaky_refused;

static zc_status flaky_post(void *state, uint32_t lane, uint32_t peer, uint32_t slot,
                            size_t bytes, uint64_t tag) {
    if (++flaky_calls % 3 != 0) {
        flaky_refused++;
        return ZC_AGAIN;
    }
    return zc_wire_shm.post(state, lane, peer, slot, bytes, tag);
}

void wire_again_on_post_is_back_pressure_not_failure(void) {
    enum { N = 4, COUNT = 20000 };
    zc_config cfg;
    zt_inproc_config(&cfg, N, 4, 1024);
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arenas[N];
    zc_comm *c[N];
    for (int r = 0; r < N; r++) ZT_CHECK((arenas[r] = aligned_alloc(64, bytes)) != NULL);
    ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, bytes, c), ZC_OK);
    flaky_wire = zc_wire_shm;
    flaky_wire.post = flaky_post;
    for (int r = 0; r < N; r++) c[r]->wire = &flaky_wire;
    static int32_t in[N][COUNT], out[N][COUNT], gathered[N][N * 7];
    zc_req q[N];
    for (uint32_t count = 1; count <= COUNT; count *= 10) { /* one-shot up to reduce-scatter */
        for (int r = 0; r < N; r++) {
            for (uint32_t i = 0; i < count; i++) in[r][i] = r * 1000 + (int32_t)i;
            ZT_CHECK_ST(zc_allreduce(c[r], in[r], out[r], count, ZC_INT32, ZC_SUM, &q[r]), ZC_OK);
        }
        for (int r = 0; r < N; r++) ZT_CHECK_ST(zc_wait(c[r], &q[r]), ZC_OK);
        for (int r = 0; r < N; r++)
            for (uint32_t i = 0; i < count; i++)
                ZT_CHECK_EQ(out[r][i], 6000 + 4 * (int32_t)i);
    }
    for (int r = 0; r < N; r++)
        ZT_CHECK_ST(zc_allgather(c[r], in[r], gathered[r], 7, ZC_INT32, &q[r]), ZC_OK);
    for (int r = 0; r < N; r++) ZT_CHECK_ST(zc_wait(c[r], &q[r]), ZC_OK);
    for (int r = 0; r < N; r++)
        for (int p = 0; p < N; p++)
            for (int i = 0; i < 7; i++) ZT_CHECK_EQ(gathered[r][p * 7 + i], p * 1000 + i);
    ZT_CHECK(flaky_refused > 100);
    /* A message of flagged lines is taken from its lines, before its header's post went (the
     * post is for a peer that chose the header protocol): a post still refused goes with the
     * next progress calls. */
    for (int r = 0; r < N; r++)
        for (int i = 0; i < 100 && c[r]->unposted; i++) (void)zc_progress(c[r]);
    for (int r = 0; r < N; r++) {
        ZT_CHECK_EQ(c[r]->unposted, 0);
        ZT_CHECK_ST(zc_comm_fini(c[r]), ZC_OK);
        free(arenas[r]);
    }
}

/* A receiver returns its credit when its consumed count reaches a multiple of half the ring,
 * not after every message: after i one-message calls the sender reads floor(i / 2) * 2 with 4
 * slots (per-message credits would read i). A stream many rings long still flows both ways (a
 * sender waits only while more than half the ring is unconsumed), and the count a sender reads
 * never passes what it sent. */
void credits_return_every_half_ring_and_long_streams_flow(void) {
    enum { CALLS = 9, LONG = 5000 };
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.nranks = 2;
    cfg.slots = 4;
    cfg.slot_bytes = 256;
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arenas[2];
    zc_comm *c[2];
    for (int r = 0; r < 2; r++) ZT_CHECK((arenas[r] = aligned_alloc(64, bytes)) != NULL);
    ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, bytes, c), ZC_OK);
    static int32_t in[2][LONG], out[2][LONG];
    zc_req q[2];
    for (uint32_t i = 1; i <= CALLS; i++) {
        for (int r = 0; r < 2; r++) {
            in[r][0] = r + (int32_t)i;
            ZT_CHECK_ST(zc_allreduce(c[r], in[r], out[r], 1, ZC_INT32, ZC_SUM, &q[r]), ZC_OK);
        }
        for (int r = 0; r < 2; r++) ZT_CHECK_ST(zc_wait(c[r], &q[r]), ZC_OK);
        for (int r = 0; r < 2; r++) {
            ZT_CHECK_EQ(out[r][0], 1 + 2 * (int32_t)i);
            uint64_t credit = c[r]->wire->credits(c[r]->wire_state, 0, 1u - (uint32_t)r);
            ZT_CHECK_EQ(credit, i / 2u * 2u);
        }
    }
    for (int r = 0; r < 2; r++) {
        for (uint32_t i = 0; i < LONG; i++) in[r][i] = r * 7 + (int32_t)i;
        ZT_CHECK_ST(zc_allreduce(c[r], in[r], out[r], LONG, ZC_INT32, ZC_SUM, &q[r]), ZC_OK);
    }
    for (int r = 0; r < 2; r++) ZT_CHECK_ST(zc_wait(c[r], &q[r]), ZC_OK);
    for (int r = 0; r < 2; r++) {
        for (uint32_t i = 0; i < LONG; i++) ZT_CHECK_EQ(out[r][i], 7 + 2 * (int32_t)i);
        const zc__chan *ch = &c[r]->chans[1u - (uint32_t)r];
        uint64_t credit = c[r]->wire->credits(c[r]->wire_state, 0, 1u - (uint32_t)r);
        ZT_CHECK(credit <= ch->tx_count && ch->tx_count - credit < cfg.slots / 2u);
        ZT_CHECK_ST(zc_comm_fini(c[r]), ZC_OK);
        free(arenas[r]);
    }
}

/* One rank's links (the family's statement of a call's message counts) as a table. */
typedef struct links_seen {
    uint32_t me, n, dup;
    uint64_t tx[8], rx[8];
    uint8_t seen[8];
} links_seen;

static void links_record(void *ctx, uint32_t peer, uint64_t tx, uint64_t rx) {
    links_seen *l = ctx;
    if (peer >= l->n || peer == l->me || l->seen[peer]) {
        l->dup++;
        return;
    }
    l->seen[peer] = 1;
    l->tx[peer] = tx;
    l->rx[peer] = rx;
}

/* Every call's links name each peer at most once and never this rank; both ends of every
 * channel agree (what rank a sends to b is what b receives from a); and running the call moves
 * exactly those messages on every channel. On 1 to 8 in-process ranks, every kind, root,
 * algorithm (thresholds around the sizes) and message count (0, 1, a chunk, more). */
void links_are_what_the_schedules_move(void) {
    static const size_t counts[] = {0, 1, 3, 64, 65, 200, 1000};
    static uint8_t sendbuf[8][8 * 1000 * 4], recvbuf[8][8 * 1000 * 4];
    uint32_t calls = 0, multi_peer = 0;
    for (uint32_t n = 1; n <= 8; n++) {
        for (uint64_t small = 64; small <= 4096; small *= 64) {
            zc_config cfg;
            void *arenas[8];
            zc_comm *c[8];
            zr_group_config(&cfg, n, 256, 4, small, 0);
            size_t bytes = zc_comm_arena_bytes(&cfg);
            for (uint32_t r = 0; r < n; r++)
                ZT_CHECK((arenas[r] = aligned_alloc(64, bytes)) != NULL);
            ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, bytes, c), ZC_OK);
            for (uint32_t kind = ZC_K_ALLREDUCE; kind <= ZC_K_BARRIER; kind++)
                for (uint32_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
                    for (uint32_t root = 0; root < n; root++) {
                        bool p2p = kind == ZC_K_SEND || kind == ZC_K_RECV;
                        if (p2p && (kind == ZC_K_RECV || n < 2)) continue; /* pairs below */
                        uint32_t to = (root + 1) % n; /* p2p: root sends to its next rank */
                        zc__sched s[8];
                        links_seen l[8];
                        zc_req q[8];
                        uint64_t before_tx[8][8], before_rx[8][8];
                        uint32_t lane = p2p ? 1u : 0u;
                        for (uint32_t me = 0; me < n; me++) {
                            uint32_t k = !p2p ? kind : me == root ? ZC_K_SEND : ZC_K_RECV;
                            uint32_t peer = !p2p ? root : me == root ? to : root;
                            if (p2p && me != root && me != to) continue;
                            ZT_CHECK_ST(zc__build(c[me], k, sendbuf[me], recvbuf[me], counts[i],
                                                  ZC_INT32, ZC_SUM, peer, &s[me]),
                                        ZC_OK);
                            l[me] = (links_seen){.me = me, .n = n};
                            zc__family_of(s[me].alg)->links(c[me], &s[me], links_record, &l[me]);
                            ZT_CHECK_EQ(l[me].dup, 0);
                            for (uint32_t p = 0; p < n; p++) {
                                const zc__chan *ch = &c[me]->chans[lane * n + p];
                                before_tx[me][p] = ch->tx_count;
                                before_rx[me][p] = ch->rx_count;
                            }
                        }
                        for (uint32_t me = 0; me < n; me++) {
                            if (p2p && me != root && me != to) continue;
                            uint32_t peers = 0;
                            for (uint32_t p = 0; p < n; p++) {
                                peers += l[me].seen[p];
                                if (!p2p || p == root || p == to)
                                    ZT_CHECK_EQ(l[me].tx[p], l[p].rx[me]);
                            }
                            multi_peer += peers > 1;
                            ZT_CHECK_ST(zc__issue(c[me], &s[me], -1, 0, &q[me]), ZC_OK);
                        }
                        for (uint32_t me = 0; me < n; me++)
                            if (!p2p || me == root || me == to)
                                ZT_CHECK_ST(zc_wait(c[me], &q[me]), ZC_OK);
                        for (uint32_t me = 0; me < n; me++) {
                            if (p2p && me != root && me != to) continue;
                            for (uint32_t p = 0; p < n; p++) {
                                const zc__chan *ch = &c[me]->chans[lane * n + p];
                                ZT_CHECK_EQ(ch->tx_count - before_tx[me][p], l[me].tx[p]);
                                ZT_CHECK_EQ(ch->rx_count - before_rx[me][p], l[me].rx[p]);
                                ZT_CHECK_EQ(ch->tx_count, ch->tx_reserved);
                                ZT_CHECK_EQ(ch->rx_count, ch->rx_reserved);
                            }
                        }
                        calls++;
                    }
            for (uint32_t r = 0; r < n; r++) {
                ZT_CHECK_ST(zc_comm_fini(c[r]), ZC_OK);
                free(arenas[r]);
            }
        }
    }
    ZT_CHECK(calls > 2000 && multi_peer > 1000);
}
