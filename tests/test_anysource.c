/* test_anysource.c: receives from any source (ZC_ANY_SOURCE) and tags (zc_send_tagged,
 * zc_recv_tagged): every peer's message taken once with its source reported, the lowest rank on
 * a tie, call order kept against named receives before and after, count, dtype and tag
 * mismatches, deadlines and misuse; in one process with up to 16 ranks, and across processes
 * through zcrun. */
#include "zt.h"
#include "zcoll.h"
#include "ref.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AS_MAXR 16

typedef struct as_group {
    uint32_t n;
    uint8_t *block;          /* every rank's arena, one after the other */
    zc_comm *c[AS_MAXR];
} as_group;

/* n ranks in this process (64 request slots each, 256-byte slots; timeout_ns 0: default). */
static void as_open(as_group *g, uint32_t n, uint64_t timeout_ns) {
    zc_config cfg;
    void *arenas[AS_MAXR];
    zr_group_config(&cfg, n, 256, 4, 0, timeout_ns);
    cfg.max_requests = 64;
    size_t bytes = (zc_comm_arena_bytes(&cfg) + 63u) & ~(size_t)63u;
    ZT_CHECK(bytes > 0 && n <= AS_MAXR);
    g->n = n;
    g->block = aligned_alloc(64, bytes * n);
    ZT_CHECK(g->block != NULL);
    for (uint32_t r = 0; r < n; r++) arenas[r] = g->block + (size_t)r * bytes;
    zc_status st = zc_comm_init_inproc(&cfg, arenas, bytes, g->c);
    if (st != ZC_OK) printf("    init: %s\n", zc_init_error_text());
    ZT_CHECK_ST(st, ZC_OK);
}

static void as_close(as_group *g) {
    for (uint32_t r = 0; r < g->n; r++) ZT_CHECK_ST(zc_comm_fini(g->c[r]), ZC_OK);
    free(g->block);
}

static uint64_t as_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static zc_status as_wait(as_group *g, uint32_t r, zc_req *q) {
    zc_status st = zc_wait(g->c[r], q);
    if (st != ZC_OK) printf("    rank %u: %s: %s\n", r, zc_status_name(st),
                            zc_comm_error_text(g->c[r]));
    return st;
}

/* 16 ranks: rank 0 posts 15 x 3 receives from any source before anyone sends (several
 * messages each, more than one slot's worth: 100 int32 in 256-byte slots); every peer's three
 * messages arrive once each, in its send order, with the source they name. */
void any_source_takes_every_peer_once_in_order(void) {
    enum { N = 16, K = 3, C = 100 };
    as_group g;
    as_open(&g, N, 0);
    static int32_t in[N][K][C], out[(N - 1) * K][C];
    uint32_t src[(N - 1) * K];
    zc_req rq[(N - 1) * K], sq[N][K];
    for (uint32_t i = 0; i < (N - 1) * K; i++)
        ZT_CHECK_ST(zc_recv_tagged(g.c[0], out[i], C, ZC_INT32, ZC_ANY_SOURCE, 0, &src[i],
                                   &rq[i]), ZC_OK);
    for (uint32_t p = N - 1; p >= 1; p--)   /* high ranks first: arrival order is not rank order */
        for (uint32_t k = 0; k < K; k++) {
            for (int i = 0; i < C; i++) in[p][k][i] = (int32_t)(p * 10000 + k * 1000) + i;
            ZT_CHECK_ST(zc_send(g.c[p], in[p][k], C, ZC_INT32, 0, &sq[p][k]), ZC_OK);
        }
    for (uint32_t i = 0; i < (N - 1) * K; i++) ZT_CHECK_ST(as_wait(&g, 0, &rq[i]), ZC_OK);
    uint32_t next[N] = {0};
    for (uint32_t i = 0; i < (N - 1) * K; i++) {
        uint32_t p = src[i];
        ZT_CHECK(p >= 1 && p < N);
        ZT_CHECK(next[p] < K);
        ZT_CHECK(memcmp(out[i], in[p][next[p]], sizeof out[i]) == 0); /* per pair: call order */
        next[p]++;
    }
    for (uint32_t p = 1; p < N; p++) {
        ZT_CHECK_EQ(next[p], K);
        for (uint32_t k = 0; k < K; k++) ZT_CHECK_ST(as_wait(&g, p, &sq[p][k]), ZC_OK);
    }
    as_close(&g);
}

/* Messages of ranks 3, 2 and 1 are all there when rank 0's receives are first polled: they go
 * to the lowest rank first. */
void any_source_tie_takes_the_lowest_rank(void) {
    as_group g;
    as_open(&g, 4, 0);
    int64_t v[4] = {0, 11, 22, 33}, got[3] = {0};
    uint32_t src[3];
    zc_req sq[4], rq[3];
    for (uint32_t p = 3; p >= 1; p--) ZT_CHECK_ST(zc_send(g.c[p], &v[p], 1, ZC_INT64, 0, &sq[p]),
                                                   ZC_OK);
    for (uint32_t i = 0; i < 3; i++)
        ZT_CHECK_ST(zc_recv_tagged(g.c[0], &got[i], 1, ZC_INT64, ZC_ANY_SOURCE, 0, &src[i],
                                   &rq[i]), ZC_OK);
    for (uint32_t i = 0; i < 3; i++) ZT_CHECK_ST(as_wait(&g, 0, &rq[i]), ZC_OK);
    for (uint32_t i = 0; i < 3; i++) {
        ZT_CHECK_EQ(src[i], i + 1);
        ZT_CHECK_EQ(got[i], v[i + 1]);
    }
    for (uint32_t p = 1; p < 4; p++) ZT_CHECK_ST(as_wait(&g, p, &sq[p]), ZC_OK);
    as_close(&g);
}

/* A named receive after a receive from any source does not overtake it, even when waited
 * first; a receive from any source does not take a message an earlier named receive will. */
void any_source_keeps_call_order_with_named_receives(void) {
    as_group g;
    as_open(&g, 3, 0);
    int32_t a = 1, b = 2, c = 3, w = 0, r = 0, r0 = 0, w2 = 0;
    uint32_t src = 99, src2 = 99, named = 99;
    zc_req qw, qr, qa, qb, qc, q0, qw2;
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], &w, 1, ZC_INT32, ZC_ANY_SOURCE, 0, &src, &qw), ZC_OK);
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], &r, 1, ZC_INT32, 1, 0, &named, &qr), ZC_OK);
    ZT_CHECK_EQ(named, 1);
    ZT_CHECK_ST(zc_send(g.c[1], &a, 1, ZC_INT32, 0, &qa), ZC_OK);
    ZT_CHECK_ST(zc_send(g.c[1], &b, 1, ZC_INT32, 0, &qb), ZC_OK);
    ZT_CHECK_ST(as_wait(&g, 0, &qr), ZC_OK); /* the named one first */
    ZT_CHECK_ST(as_wait(&g, 0, &qw), ZC_OK);
    ZT_CHECK(w == 1 && src == 1 && r == 2);
    /* Named before wildcard: rank 1's next message is the named receive's; the wildcard takes
     * rank 2's although rank 1 is lower. */
    ZT_CHECK_ST(zc_recv(g.c[0], &r0, 1, ZC_INT32, 1, &q0), ZC_OK);
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], &w2, 1, ZC_INT32, ZC_ANY_SOURCE, 0, &src2, &qw2), ZC_OK);
    ZT_CHECK_ST(zc_send(g.c[1], &a, 1, ZC_INT32, 0, &qa), ZC_OK);
    ZT_CHECK_ST(zc_send(g.c[2], &c, 1, ZC_INT32, 0, &qc), ZC_OK);
    ZT_CHECK_ST(as_wait(&g, 0, &qw2), ZC_OK);
    ZT_CHECK_ST(as_wait(&g, 0, &q0), ZC_OK);
    ZT_CHECK(r0 == 1 && w2 == 3 && src2 == 2);
    ZT_CHECK_ST(as_wait(&g, 1, &qa), ZC_OK);
    ZT_CHECK_ST(as_wait(&g, 1, &qb), ZC_OK);
    ZT_CHECK_ST(as_wait(&g, 2, &qc), ZC_OK);
    as_close(&g);
}

/* Tags travel with every message and must agree; counts from any source too. */
void tags_match_or_fail_with_both_named(void) {
    as_group g;
    as_open(&g, 2, 0);
    float x[40], y[40];
    for (int i = 0; i < 40; i++) x[i] = (float)i * 0.5f;
    zc_req s, r;
    uint32_t src = 0;
    ZT_CHECK_ST(zc_send_tagged(g.c[1], x, 40, ZC_FLOAT32, 0, 77, &s), ZC_OK);
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], y, 40, ZC_FLOAT32, ZC_ANY_SOURCE, 77, &src, &r), ZC_OK);
    ZT_CHECK_ST(as_wait(&g, 0, &r), ZC_OK);
    ZT_CHECK_ST(as_wait(&g, 1, &s), ZC_OK);
    ZT_CHECK(src == 1 && memcmp(x, y, sizeof x) == 0);
    ZT_CHECK_ST(zc_send_tagged(g.c[1], x, 40, ZC_FLOAT32, 0, 5, &s), ZC_OK);
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], y, 40, ZC_FLOAT32, 1, 6, NULL, &r), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[0], &r), ZC_MISMATCH);
    const char *e = zc_comm_error_text(g.c[0]);
    ZT_CHECK(strstr(e, "tag 6") != NULL && strstr(e, "tag 5") != NULL);
    as_close(&g);
}

void any_source_count_mismatch_fails_both_ends(void) {
    as_group g;
    as_open(&g, 3, 0);
    int32_t x[11] = {0}, y[10];
    zc_req s, r;
    uint32_t src = 0;
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], y, 10, ZC_INT32, ZC_ANY_SOURCE, 0, &src, &r), ZC_OK);
    ZT_CHECK_ST(zc_send(g.c[2], x, 11, ZC_INT32, 0, &s), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[0], &r), ZC_MISMATCH);
    ZT_CHECK_EQ(src, 2);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "count 11") != NULL);
    (void)zc_wait(g.c[2], &s); /* a one-message send may have finished at issue */
    ZT_CHECK_ST(zc_progress(g.c[2]), ZC_MISMATCH); /* the receiver's report reached it */
    as_close(&g);
}

/* No peer sends: the receive from any source and the named receive behind it end at the
 * deadline (200 ms), with a sentence that says so. */
void any_source_times_out_when_nobody_sends(void) {
    as_group g;
    as_open(&g, 3, 200000000ull);
    int32_t y = 0, z = 0;
    zc_req r, r2;
    ZT_CHECK_ST(zc_recv(g.c[0], &y, 1, ZC_INT32, ZC_ANY_SOURCE, &r), ZC_OK);
    ZT_CHECK_ST(zc_recv(g.c[0], &z, 1, ZC_INT32, 2, &r2), ZC_OK);
    uint64_t t0 = as_now_ns();
    ZT_CHECK_ST(zc_wait(g.c[0], &r), ZC_TIMED_OUT);
    uint64_t ms = (as_now_ns() - t0) / 1000000u;
    ZT_CHECK(ms >= 150 && ms < 5000);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "from any source") != NULL);
    ZT_CHECK_ST(zc_wait(g.c[0], &r2), ZC_TIMED_OUT);
    as_close(&g);
}

void any_source_misuse_is_refused(void) {
    as_group g;
    as_open(&g, 2, 0);
    int32_t y[4];
    zc_plan plan;
    zc_req r;
    uint32_t src = 7;
    ZT_CHECK_ST(zc_recv_init(g.c[0], y, 4, ZC_INT32, ZC_ANY_SOURCE, &plan), ZC_UNSUPPORTED);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "ZC_ANY_SOURCE") != NULL);
    ZT_CHECK_ST(zc_send(g.c[0], y, 4, ZC_INT32, ZC_ANY_SOURCE, &r), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], y, 4, ZC_INT32, ZC_ANY_SOURCE, 0, &src, NULL),
                ZC_INVALID_ARG);
    /* count 0 completes at once, with no message and no source */
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], y, 0, ZC_INT32, ZC_ANY_SOURCE, 0, &src, &r), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[0], &r), ZC_OK);
    ZT_CHECK_EQ(src, ZC_ANY_SOURCE);
    /* the communicator still works */
    int32_t v = 5, w = 0;
    zc_req s;
    ZT_CHECK_ST(zc_send(g.c[1], &v, 1, ZC_INT32, 0, &s), ZC_OK);
    ZT_CHECK_ST(zc_recv_tagged(g.c[0], &w, 1, ZC_INT32, ZC_ANY_SOURCE, 0, &src, &r), ZC_OK);
    ZT_CHECK_ST(as_wait(&g, 0, &r), ZC_OK);
    ZT_CHECK(w == 5 && src == 1);
    ZT_CHECK_ST(as_wait(&g, 1, &s), ZC_OK);
    as_close(&g);
    as_open(&g, 1, 0);
    ZT_CHECK_ST(zc_recv(g.c[0], y, 4, ZC_INT32, ZC_ANY_SOURCE, &r), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "one rank") != NULL);
    as_close(&g);
}

/* ---- across processes ---- */

/* Rank 0 takes (n-1) * K messages from any source, the others send K each (counts of up to
 * four slots); every source's messages arrive in its send order, each once. */
int anysrc_rank_mp(void) {
    enum { K = 20, C = 300 };
    zc_config cfg;
    zc_config_default(&cfg);
    if (zc_config_from_env(&cfg) != ZC_OK) return zt_rank_fail("anysrc", "config: %s",
                                                                cfg.error_text);
    cfg.slot_bytes = 256;
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arena = aligned_alloc(64, bytes);
    zc_comm *c;
    if (!arena || zc_comm_init(&cfg, arena, bytes, &c) != ZC_OK)
        return zt_rank_fail("anysrc", "init: %s", zc_init_error_text());
    uint32_t me = cfg.rank, n = cfg.nranks;
    static int32_t buf[K][C];
    static uint32_t src[64 * K];
    zc_req q[K];
    zc_status st = ZC_OK;
    if (me != 0) {
        for (uint32_t k = 0; k < K && st == ZC_OK; k++) {
            for (int i = 0; i < C; i++) buf[k][i] = (int32_t)(me * 100000 + k * 1000) + i;
            st = zc_send_tagged(c, buf[k], C, ZC_INT32, 0, 9, &q[k]);
        }
        for (uint32_t k = 0; k < K && st == ZC_OK; k++) st = zc_wait(c, &q[k]);
    } else {
        uint32_t next[64] = {0}, got = 0;
        while (got < (n - 1) * K && st == ZC_OK) { /* K receives in flight at a time */
            uint32_t batch = (n - 1) * K - got < K ? (n - 1) * K - got : K;
            for (uint32_t k = 0; k < batch && st == ZC_OK; k++)
                st = zc_recv_tagged(c, buf[k], C, ZC_INT32, ZC_ANY_SOURCE, 9, &src[got + k],
                                    &q[k]);
            for (uint32_t k = 0; k < batch && st == ZC_OK; k++) st = zc_wait(c, &q[k]);
            for (uint32_t k = 0; k < batch && st == ZC_OK; k++) {
                uint32_t p = src[got + k];
                if (p == 0 || p >= n || buf[k][0] != (int32_t)(p * 100000 + next[p] * 1000) ||
                    buf[k][C - 1] != buf[k][0] + C - 1)
                    return zt_rank_fail("anysrc", "message %u: source %u, first value %d",
                                        got + k, p, buf[k][0]);
                next[p]++;
            }
            got += batch;
        }
    }
    if (st != ZC_OK) return zt_rank_fail("anysrc", "%s: %s", zc_status_name(st),
                                         zc_comm_error_text(c));
    zc_comm_fini(c);
    free(arena);
    printf("anysrc ok\n");
    return 0;
}

static char as_out[1 << 16];

static void as_job(uint32_t n) {
    int rc = zt_run_ranks(n, "anysrc_rank_mp", 40, NULL, as_out, sizeof as_out);
    if (rc != 0) printf("%s\n", as_out);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK(strstr(as_out, "FAILED") == NULL);
}

void any_source_across_processes_n2(void) { as_job(2); }
void any_source_across_processes_n4(void) { as_job(4); }
