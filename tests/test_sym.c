/* test_sym.c: the symmetric region (zc_sym_alloc, zc_sym_free) and the single-copy schedule
 * of collectives whose buffers lie in it, in process (zc_comm_init_inproc) and between
 * processes (zcrun, the shared-memory wire). Results are compared bitwise with tests/ref.c,
 * which reduces in the rank tree as every algorithm does, send/recv with what was sent; sizes
 * straddle ZC_SYM_MIN_BYTES so both the single-copy and the slot paths run on region buffers. */
#include "zt.h"
#include "zcoll.h"
#include "ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYM_MAXR 8
#define SYM_REGION (8u << 20)

typedef struct sym_group {
    uint32_t n;
    void *arenas[SYM_MAXR];
    zc_comm *c[SYM_MAXR];
} sym_group;

static void sym_open(sym_group *g, uint32_t n, uint64_t sym_bytes) {
    zc_config cfg;
    memset(g, 0, sizeof *g);
    g->n = n;
    zr_group_config(&cfg, n, 4096, 4, 16384, 0);
    cfg.sym_bytes = sym_bytes;
    zt_inproc_open(&cfg, g->arenas, g->c);
}

static void sym_close(sym_group *g) { zt_inproc_close(g->n, g->arenas, g->c); }

/* Every rank's inputs of case k (n * count elements each, tests/ref.c's fill). */
static void sym_inputs(const zr_case *k, uint64_t seed, uint8_t **in) {
    size_t bb = zr_buf_bytes(k);
    for (uint32_t r = 0; r < k->n; r++) {
        ZT_CHECK((in[r] = malloc(bb)) != NULL);
        zr_fill(in[r], k->n * k->count, k->t, seed, r, 0);
    }
}

/* Rank r's result of case k against the reference; 1 when it differs. */
static int sym_check(const zr_case *k, uint8_t *const *in, uint32_t r, const uint8_t *send,
                     const uint8_t *recv) {
    size_t bb = zr_buf_bytes(k), bytes, at;
    uint8_t *want = malloc(bb);
    ZT_CHECK(want != NULL);
    memset(want, 0xA5, bb);
    zr_want(k, in, r, want);
    const uint8_t *got = zr_result(k, r, send, recv, &bytes);
    at = zr_first_diff(got, want, bytes);
    free(want);
    if (at == bytes) return 0;
    char what[128];
    zr_describe(k, what, sizeof what);
    printf("    %s: rank %u differs at byte %zu of %zu (seed %llu)\n", what, r, at, bytes,
           (unsigned long long)zt_seed());
    return 1;
}

/* A random case of n ranks: every collective, dtype and op, counts around ZC_SYM_MIN_BYTES. */
static zr_case sym_random_case(zt_rng *rng, uint32_t n) {
    zr_case k = {(zr_coll)zt_rng_below(rng, ZR_COUNT), n, 0, ZC_FLOAT32, ZC_SUM, 0, false};
    k.t = (zc_dtype)zt_rng_below(rng, ZC_DTYPE_COUNT_);
    k.op = (zc_op)zt_rng_below(rng, ZC_OP_COUNT_);
    k.count = 1 + (size_t)zt_rng_below(rng, 5u * ZC_SYM_MIN_BYTES / zc_dtype_bytes(k.t) / n);
    k.root = (uint32_t)zt_rng_below(rng, n);
    k.in_place = k.c != ZR_A2A && zt_rng_below(rng, 2);
    return k;
}

/* Runs case k on every rank of g with send and recv carved from each rank's region. */
static int sym_run_inproc(sym_group *g, const zr_case *k, uint64_t seed) {
    size_t bb = zr_buf_bytes(k);
    uint8_t *in[SYM_MAXR], *send[SYM_MAXR], *recv[SYM_MAXR];
    zc_req req[SYM_MAXR];
    int bad = 0;
    sym_inputs(k, seed, in);
    for (uint32_t r = 0; r < g->n; r++) {
        ZT_CHECK_ST(zc_sym_alloc(g->c[r], bb, (void **)&send[r]), ZC_OK);
        ZT_CHECK_ST(zc_sym_alloc(g->c[r], bb, (void **)&recv[r]), ZC_OK);
        memcpy(send[r], in[r], bb);
        memset(recv[r], 0xA5, bb);
        ZT_CHECK_ST(zr_issue(k, g->c[r], r, send[r], recv[r], &req[r]), ZC_OK);
    }
    for (uint32_t r = 0; r < g->n; r++) {
        zc_status st = zc_wait(g->c[r], &req[r]);
        if (st != ZC_OK) printf("    rank %u: %s\n", r, zc_comm_error_text(g->c[r]));
        ZT_CHECK_ST(st, ZC_OK);
    }
    for (uint32_t r = 0; r < g->n; r++) {
        bad |= sym_check(k, in, r, send[r], recv[r]);
        ZT_CHECK_ST(zc_sym_free(g->c[r], send[r]), ZC_OK);
    }
    for (uint32_t r = 0; r < g->n; r++) free(in[r]);
    return bad;
}

void sym_inproc_collectives_match_reference(void) {
    zt_rng rng = {zt_seed() ^ 0x5e11u};
    for (uint32_t n = 2; n <= 4; n++) {
        sym_group g;
        sym_open(&g, n, SYM_REGION);
        int bad = 0;
        for (uint32_t i = 0; i < 60; i++) {
            zr_case k = sym_random_case(&rng, n);
            bad |= sym_run_inproc(&g, &k, zt_seed() + i);
        }
        ZT_CHECK_EQ(bad, 0);
        sym_close(&g);
    }
}

/* Marks are the same on every rank for the same calls; a full region says ZC_LIMIT; free
 * gives back a block and everything after it; pointers it did not hand out are refused. */
void sym_alloc_is_symmetric_and_refuses_misuse(void) {
    sym_group g;
    sym_open(&g, 2, 1u << 16);
    void *a[2], *b[2], *c, *again;
    for (uint32_t r = 0; r < 2; r++) {
        ZT_CHECK_ST(zc_sym_alloc(g.c[r], 100, &a[r]), ZC_OK);
        ZT_CHECK_ST(zc_sym_alloc(g.c[r], 1000, &b[r]), ZC_OK);
        ZT_CHECK_EQ((uintptr_t)a[r] % 64u, 0);
        ZT_CHECK_EQ((uint8_t *)b[r] - (uint8_t *)a[r], 128);
    }
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], 1u << 16, &c), ZC_LIMIT);
    ZT_CHECK(c == NULL);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "do not fit") != NULL);
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], 0, &c), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], 8, NULL), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc_sym_free(g.c[0], (uint8_t *)b[0] + 8), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc_sym_free(g.c[0], &c), ZC_INVALID_ARG);
    char where[40]; /* the sentence names the pointer as a number, not a literal "%p" */
    snprintf(where, sizeof where, "zc_sym_free: %p is not", (void *)&c);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), where) != NULL);
    ZT_CHECK_ST(zc_sym_free(g.c[0], a[1]), ZC_INVALID_ARG); /* another rank's block */
    ZT_CHECK_ST(zc_sym_free(g.c[0], b[0]), ZC_OK);
    ZT_CHECK_ST(zc_sym_free(g.c[0], b[0]), ZC_INVALID_ARG); /* already given back */
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], 64, &again), ZC_OK);
    ZT_CHECK(again == b[0]);
    ZT_CHECK_ST(zc_sym_free(g.c[0], a[0]), ZC_OK);
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], (1u << 16) - 64, &c), ZC_OK);
    ZT_CHECK(c == a[0]);
    sym_close(&g);

    sym_open(&g, 2, 0);
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], 64, &c), ZC_UNSUPPORTED);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "no symmetric region") != NULL);
    sym_close(&g);

    zc_config cfg;
    zr_group_config(&cfg, 2, 4096, 4, 16384, 0);
    cfg.sym_bytes = 4095;
    ZT_CHECK_EQ(zc_comm_arena_bytes(&cfg), 0);
}

/* One rank's buffers in the region and the other's not: both fail with ZC_MISMATCH (the one
 * with region buffers ran single-copy, the other through the slots). */
void sym_one_rank_outside_the_region_is_a_mismatch(void) {
    sym_group g;
    sym_open(&g, 2, SYM_REGION);
    size_t count = 4 * ZC_SYM_MIN_BYTES / sizeof(float);
    float *s0, *r0, *s1 = calloc(count, sizeof(float)), *r1 = calloc(count, sizeof(float));
    ZT_CHECK(s1 && r1);
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], count * sizeof(float), (void **)&s0), ZC_OK);
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], count * sizeof(float), (void **)&r0), ZC_OK);
    memset(s0, 0, count * sizeof(float));
    zc_req q[2];
    ZT_CHECK_ST(zc_allreduce(g.c[0], s0, r0, count, ZC_FLOAT32, ZC_SUM, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_allreduce(g.c[1], s1, r1, count, ZC_FLOAT32, ZC_SUM, &q[1]), ZC_OK);
    for (uint32_t r = 0; r < 2; r++) ZT_CHECK_ST(zc_wait(g.c[r], &q[r]), ZC_MISMATCH);
    free(s1);
    free(r1);
    sym_close(&g);
}

/* A call repeated with the same arguments after zc_sym_alloc or zc_sym_free changed whether
 * its buffers lie in the region is decided afresh (core/coll.c's memo forgets at both): rank 0
 * re-allocating its freed buffers takes the single copy again while rank 1, whose buffers stay
 * outside, takes the slots (a mismatch on both); then, with both in the region, rank 1 freeing
 * its buffers makes the same call a mismatch again. */
void sym_alloc_and_free_redecide_a_repeated_call(void) {
    size_t count = 4 * ZC_SYM_MIN_BYTES / sizeof(float);
    for (int phase = 0; phase < 2; phase++) {
        sym_group g;
        sym_open(&g, 2, SYM_REGION);
        float *s[2], *r[2];
        zc_req q[2];
        for (uint32_t k = 0; k < 2; k++) {
            ZT_CHECK_ST(zc_sym_alloc(g.c[k], count * sizeof(float), (void **)&s[k]), ZC_OK);
            ZT_CHECK_ST(zc_sym_alloc(g.c[k], count * sizeof(float), (void **)&r[k]), ZC_OK);
            for (size_t i = 0; i < count; i++) s[k][i] = (float)(k + 1u);
            if (phase == 0) ZT_CHECK_ST(zc_sym_free(g.c[k], s[k]), ZC_OK); /* both outside */
        }
        for (int rep = 0; rep < 2; rep++) { /* the same call twice: the second takes the memo */
            for (uint32_t k = 0; k < 2; k++)
                ZT_CHECK_ST(zc_allreduce(g.c[k], s[k], r[k], count, ZC_FLOAT32, ZC_SUM, &q[k]),
                            ZC_OK);
            for (uint32_t k = 0; k < 2; k++) ZT_CHECK_ST(zc_wait(g.c[k], &q[k]), ZC_OK);
            for (uint32_t k = 0; k < 2; k++) ZT_CHECK(r[k][0] == 3.0f && r[k][count - 1] == 3.0f);
        }
        if (phase == 0) { /* rank 0's buffers back in the region, at the same addresses */
            void *again[2];
            ZT_CHECK_ST(zc_sym_alloc(g.c[0], count * sizeof(float), &again[0]), ZC_OK);
            ZT_CHECK_ST(zc_sym_alloc(g.c[0], count * sizeof(float), &again[1]), ZC_OK);
            ZT_CHECK(again[0] == (void *)s[0] && again[1] == (void *)r[0]);
        } else {
            ZT_CHECK_ST(zc_sym_free(g.c[1], s[1]), ZC_OK);
        }
        for (uint32_t k = 0; k < 2; k++)
            ZT_CHECK_ST(zc_allreduce(g.c[k], s[k], r[k], count, ZC_FLOAT32, ZC_SUM, &q[k]), ZC_OK);
        for (uint32_t k = 0; k < 2; k++) ZT_CHECK_ST(zc_wait(g.c[k], &q[k]), ZC_MISMATCH);
        sym_close(&g);
    }
}

/* ---- send and recv ---- */

/* Elements of a send/recv in the region: half of them from ZC_SYM_MIN_BYTES up (single copy),
 * half below (the slots), ragged. */
static size_t sym_p2p_count(zt_rng *rng, zc_dtype t) {
    size_t es = zc_dtype_bytes(t), lo = zt_rng_below(rng, 2) ? ZC_SYM_MIN_BYTES / es : 1;
    return lo + (size_t)zt_rng_below(rng, 4u * ZC_SYM_MIN_BYTES / es);
}

/* A ring on every rank of g, two messages per pair in flight (the second issued before the
 * first is received, sizes on both sides of ZC_SYM_MIN_BYTES), buffers in the region, every
 * recv compared bytewise with what its sender sent; the odd rounds as persistent plans. */
void sym_inproc_send_recv_match_what_was_sent(void) {
    zt_rng rng = {zt_seed() ^ 0x5e13u};
    for (uint32_t n = 2; n <= 4; n++) {
        sym_group g;
        sym_open(&g, n, SYM_REGION);
        for (uint32_t round = 0; round < 24; round++) {
            zc_dtype t = (zc_dtype)zt_rng_below(&rng, ZC_DTYPE_COUNT_);
            size_t count[2] = {sym_p2p_count(&rng, t), sym_p2p_count(&rng, t)};
            size_t es = zc_dtype_bytes(t);
            uint8_t *snd[SYM_MAXR][2], *rcv[SYM_MAXR][2];
            zc_req q[SYM_MAXR][4];
            zc_plan pl[SYM_MAXR][4];
            bool plans = round % 2;
            for (uint32_t r = 0; r < n; r++)
                for (uint32_t m = 0; m < 2; m++) {
                    ZT_CHECK_ST(zc_sym_alloc(g.c[r], count[m] * es, (void **)&snd[r][m]), ZC_OK);
                    ZT_CHECK_ST(zc_sym_alloc(g.c[r], count[m] * es, (void **)&rcv[r][m]), ZC_OK);
                    for (size_t i = 0; i < count[m] * es; i++)
                        snd[r][m][i] = (uint8_t)(zt_seed() + 131u * r + 7u * m + i * 13u + round);
                    memset(rcv[r][m], 0xA5, count[m] * es);
                }
            for (uint32_t r = 0; r < n; r++) {
                uint32_t to = (r + 1) % n, from = (r + n - 1) % n;
                for (uint32_t m = 0; m < 2; m++) {
                    if (plans) {
                        ZT_CHECK_ST(zc_send_init(g.c[r], snd[r][m], count[m], t, to, &pl[r][2 * m]),
                                    ZC_OK);
                        ZT_CHECK_ST(zc_recv_init(g.c[r], rcv[r][m], count[m], t, from,
                                                 &pl[r][2 * m + 1]), ZC_OK);
                        ZT_CHECK_ST(zc_start(g.c[r], &pl[r][2 * m], &q[r][2 * m]), ZC_OK);
                        ZT_CHECK_ST(zc_start(g.c[r], &pl[r][2 * m + 1], &q[r][2 * m + 1]), ZC_OK);
                    } else {
                        ZT_CHECK_ST(zc_send(g.c[r], snd[r][m], count[m], t, to, &q[r][2 * m]),
                                    ZC_OK);
                        ZT_CHECK_ST(zc_recv(g.c[r], rcv[r][m], count[m], t, from,
                                            &q[r][2 * m + 1]), ZC_OK);
                    }
                }
            }
            for (uint32_t r = 0; r < n; r++)
                for (uint32_t i = 0; i < 4; i++) {
                    zc_status st = zc_wait(g.c[r], &q[r][i]);
                    if (st != ZC_OK) printf("    rank %u: %s\n", r, zc_comm_error_text(g.c[r]));
                    ZT_CHECK_ST(st, ZC_OK);
                }
            for (uint32_t r = 0; r < n; r++) {
                uint32_t from = (r + n - 1) % n;
                for (uint32_t m = 0; m < 2; m++) {
                    size_t at = zr_first_diff(rcv[r][m], snd[from][m], count[m] * es);
                    if (at != count[m] * es)
                        printf("    n %u round %u: rank %u's message %u (%zu B) differs at byte "
                               "%zu (seed %llu)\n", n, round, r, m, count[m] * es, at,
                               (unsigned long long)zt_seed());
                    ZT_CHECK_EQ(at, count[m] * es);
                }
                for (uint32_t i = 0; plans && i < 4; i++)
                    ZT_CHECK_ST(zc_plan_release(g.c[r], &pl[r][i]), ZC_OK);
                ZT_CHECK_ST(zc_sym_free(g.c[r], snd[r][0]), ZC_OK);
            }
        }
        sym_close(&g);
    }
}

/* A single-copy send finishes only after its receiver has copied the buffer: while rank 1
 * makes no progress, rank 0's send stays in progress however often rank 0 progresses; then
 * rank 1's recv gets the bytes, and the send finishes; the sender's buffer is changed only
 * after that and the recv still holds what was sent. */
void sym_send_finishes_only_after_its_receiver_copied(void) {
    sym_group g;
    sym_open(&g, 2, SYM_REGION);
    size_t count = 3 * ZC_SYM_MIN_BYTES / sizeof(uint32_t) + 5;
    uint32_t *snd, *rcv;
    ZT_CHECK_ST(zc_sym_alloc(g.c[0], count * sizeof *snd, (void **)&snd), ZC_OK);
    ZT_CHECK_ST(zc_sym_alloc(g.c[1], count * sizeof *rcv, (void **)&rcv), ZC_OK);
    for (size_t i = 0; i < count; i++) snd[i] = (uint32_t)(i * 2654435761u);
    memset(rcv, 0xA5, count * sizeof *rcv);
    zc_req q[2];
    ZT_CHECK_ST(zc_send(g.c[0], snd, count, ZC_UINT32, 1, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_recv(g.c[1], rcv, count, ZC_UINT32, 0, &q[1]), ZC_OK);
    for (uint32_t i = 0; i < 1000; i++) {
        ZT_CHECK_ST(zc_progress(g.c[0]), ZC_OK);
        ZT_CHECK_ST(zc_test(g.c[0], &q[0]), ZC_IN_PROGRESS);
    }
    ZT_CHECK_EQ(rcv[0], 0xA5A5A5A5u);
    ZT_CHECK_ST(zc_wait(g.c[1], &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[0], &q[0]), ZC_OK);
    memset(snd, 0, count * sizeof *snd);
    for (size_t i = 0; i < count; i++) ZT_CHECK_EQ(rcv[i], (uint32_t)(i * 2654435761u));
    sym_close(&g);
}

/* A send from the region to a recv outside it (or the other way): both ends fail with
 * ZC_MISMATCH, the sentence naming the region, and the private recv is not written; below
 * ZC_SYM_MIN_BYTES the same buffers go through the slots and work. */
void sym_send_recv_one_end_outside_the_region_is_a_mismatch(void) {
    size_t count = 2 * ZC_SYM_MIN_BYTES / sizeof(float);
    for (uint32_t outside = 0; outside < 2; outside++) {
        sym_group g;
        sym_open(&g, 2, SYM_REGION);
        float *in, *priv = malloc(count * sizeof(float));
        ZT_CHECK(priv != NULL);
        ZT_CHECK_ST(zc_sym_alloc(g.c[outside], count * sizeof(float), (void **)&in), ZC_OK);
        for (size_t i = 0; i < count; i++) in[i] = (float)i;
        memset(priv, 0xA5, count * sizeof(float));
        zc_req q[2];
        /* outside 0: rank 0 sends from the region, rank 1 receives into private memory;
         * outside 1: rank 0 sends from private memory, rank 1 receives into the region. */
        float *sbuf = outside ? priv : in, *rbuf = outside ? in : priv;
        if (outside) memset(in, 0xA5, count * sizeof(float));
        ZT_CHECK_ST(zc_send(g.c[0], sbuf, count, ZC_FLOAT32, 1, &q[0]), ZC_OK);
        ZT_CHECK_ST(zc_recv(g.c[1], rbuf, count, ZC_FLOAT32, 0, &q[1]), ZC_OK);
        for (uint32_t r = 0; r < 2; r++) ZT_CHECK_ST(zc_wait(g.c[r], &q[r]), ZC_MISMATCH);
        ZT_CHECK(strstr(zc_comm_error_text(g.c[1]), "symmetric region") != NULL);
        if (!outside) ZT_CHECK_EQ(((uint32_t *)priv)[0], 0xA5A5A5A5u);
        free(priv);
        sym_close(&g);

        sym_open(&g, 2, SYM_REGION);
        size_t small = ZC_SYM_MIN_BYTES / sizeof(float) - 1;
        priv = malloc(small * sizeof(float));
        ZT_CHECK(priv != NULL);
        ZT_CHECK_ST(zc_sym_alloc(g.c[outside], small * sizeof(float), (void **)&in), ZC_OK);
        for (size_t i = 0; i < small; i++) (outside ? priv : in)[i] = (float)i;
        sbuf = outside ? priv : in;
        rbuf = outside ? in : priv;
        ZT_CHECK_ST(zc_send(g.c[0], sbuf, small, ZC_FLOAT32, 1, &q[0]), ZC_OK);
        ZT_CHECK_ST(zc_recv(g.c[1], rbuf, small, ZC_FLOAT32, 0, &q[1]), ZC_OK);
        for (uint32_t r = 0; r < 2; r++) ZT_CHECK_ST(zc_wait(g.c[r], &q[r]), ZC_OK);
        ZT_CHECK_EQ(rbuf[small - 1], (float)(small - 1));
        free(priv);
        sym_close(&g);
    }
}

/* ---- between processes ---- */

static int sym_rank_fail(const char *what, zc_comm *c) {
    return zt_rank_fail(what, "%s", c ? zc_comm_error_text(c) : zc_init_error_text());
}

/* Every rank draws the same cases from the same seed and checks its own result. */
int sym_rank_collectives(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    if (zc_config_from_env(&cfg) != ZC_OK) return zt_rank_fail("config", "%s", cfg.error_text);
    cfg.sym_bytes = 24u << 20;
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arena = malloc(bytes);
    zc_comm *c = 0;
    if (!arena || zc_comm_init(&cfg, arena, bytes, &c) != ZC_OK) return sym_rank_fail("init", 0);
    uint32_t me = cfg.rank, n = cfg.nranks;
    zt_rng rng = {zt_seed() ^ 0x5e12u};
    int bad = 0;
    for (uint32_t i = 0; i < 40 && !bad; i++) {
        zr_case k = sym_random_case(&rng, n);
        if (i % 8 == 7) k.count = (64u << 20) / 8 / zc_dtype_bytes(k.t) / n; /* 8 MiB / rank */
        uint8_t *in[ZR_MAX_RANKS], *send, *recv;
        size_t bb = zr_buf_bytes(&k);
        sym_inputs(&k, zt_seed() + i, in);
        if (zc_sym_alloc(c, bb, (void **)&send) != ZC_OK ||
            zc_sym_alloc(c, bb, (void **)&recv) != ZC_OK)
            return sym_rank_fail("zc_sym_alloc", c);
        memcpy(send, in[me], bb);
        memset(recv, 0xA5, bb);
        zc_req req;
        if (zr_issue(&k, c, me, send, recv, &req) != ZC_OK || zc_wait(c, &req) != ZC_OK)
            return sym_rank_fail("collective", c);
        bad = sym_check(&k, in, me, send, recv);
        if (zc_sym_free(c, send) != ZC_OK) return sym_rank_fail("zc_sym_free", c);
        for (uint32_t r = 0; r < n; r++) free(in[r]);
    }
    for (uint32_t i = 0; i < 12 && !bad; i++) { /* a ring of send/recv in the region */
        zc_dtype t = (zc_dtype)zt_rng_below(&rng, ZC_DTYPE_COUNT_);
        size_t pb = sym_p2p_count(&rng, t) * zc_dtype_bytes(t);
        if (i % 4 == 3) pb = (8u << 20) / zc_dtype_bytes(t) * zc_dtype_bytes(t); /* 8 MiB */
        uint8_t *ps, *pr;
        if (zc_sym_alloc(c, pb, (void **)&ps) != ZC_OK ||
            zc_sym_alloc(c, pb, (void **)&pr) != ZC_OK)
            return sym_rank_fail("zc_sym_alloc", c);
        uint32_t to = (me + 1) % n, from = (me + n - 1) % n;
        for (size_t j = 0; j < pb; j++) ps[j] = (uint8_t)(zt_seed() + 131u * me + j * 13u + i);
        memset(pr, 0xA5, pb);
        zc_req q[2];
        size_t count = pb / zc_dtype_bytes(t);
        if (zc_send(c, ps, count, t, to, &q[0]) != ZC_OK ||
            zc_recv(c, pr, count, t, from, &q[1]) != ZC_OK || zc_wait(c, &q[0]) != ZC_OK ||
            zc_wait(c, &q[1]) != ZC_OK)
            return sym_rank_fail("send/recv", c);
        for (size_t j = 0; j < pb && !bad; j++)
            if (pr[j] != (uint8_t)(zt_seed() + 131u * from + j * 13u + i)) {
                printf("    rank %u: send/recv of %zu B from rank %u differs at byte %zu\n", me,
                       pb, from, j);
                bad = 1;
            }
        if (zc_sym_free(c, ps) != ZC_OK) return sym_rank_fail("zc_sym_free", c);
    }
    if (zc_comm_fini(c) != ZC_OK) return sym_rank_fail("fini", 0);
    free(arena);
    return bad ? zt_rank_fail("results", "a result differs from the reference") : 0;
}

void sym_collectives_between_processes(void) {
    char out[8192];
    for (uint32_t n = 2; n <= 3; n++) {
        int rc = zt_run_ranks(n, "sym_rank_collectives", 90, NULL, out, sizeof out);
        if (rc != 0) printf("%s\n", out);
        ZT_CHECK_EQ(rc, 0);
    }
}
