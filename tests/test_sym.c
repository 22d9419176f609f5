/* test_sym.c: the symmetric region (zc_sym_alloc, zc_sym_free) and the single-copy schedule
 * of collectives whose buffers lie in it, in process (zc_comm_init_inproc) and between
 * processes (zcrun, the shared-memory wire). Results are compared bitwise with tests/ref.c,
 * which reduces in rank order as every algorithm does; sizes straddle ZC_SYM_MIN_BYTES so
 * both the single-copy and the slot paths run on region buffers. */
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
    size_t bytes = zc_comm_arena_bytes(&cfg);
    ZT_CHECK(bytes > 0);
    for (uint32_t r = 0; r < n; r++) ZT_CHECK((g->arenas[r] = aligned_alloc(64, bytes)) != NULL);
    zc_status st = zc_comm_init_inproc(&cfg, g->arenas, bytes, g->c);
    if (st != ZC_OK) printf("    init: %s\n", zc_init_error_text());
    ZT_CHECK_ST(st, ZC_OK);
}

static void sym_close(sym_group *g) {
    for (uint32_t r = 0; r < g->n; r++) {
        ZT_CHECK_ST(zc_comm_fini(g->c[r]), ZC_OK);
        free(g->arenas[r]);
    }
}

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
