/* test_scale.c: overlay mode at scale, in process: groups of ZC_SCALE_RANKS ranks (a comma list;
 * default 1024; `ninja check-scale` runs 512 and 4096), 8 per simulated host, slots of 1 KiB x
 * 2: all_reduce (hierarchical recursive doubling over the hosts' blocks of 8) at ragged counts,
 * in place and not, all_gather (Bruck), broadcast from several roots (binomial tree; van de
 * Geijn above bcast_tree_max_bytes), reduce (the canonical tree toward the root), barrier
 * (hierarchical: its messages counted); every result checked bitwise against tests/ref.c's
 * documented order. Prints per rank the arena bytes and connections, and the CPU time of one
 * 8-byte all_reduce over all ranks (median of 5; its messages counted against the formula),
 * with the ratio to the first size's; the arena stays within 512 KiB per rank without the
 * relay lane (overlay_relay 0, the default; the group runs with it for sc_relayed) and each
 * rank's connections within the overlay's bound; relayed send/recv over the longest routes
 * (sc_relayed). Last a rank aborts mid-call: every other fails before its deadline, naming it
 * (sc_killed_rank). */
#include "zt.h"

#include "../core/engine.h"
#include "ref.h"
#include "zcoll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct sc_group {
    uint32_t n;
    size_t arena;
    void **arenas;
    zc_comm **c;
    zc_req *reqs;
} sc_group;

static double sc_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sc_open(sc_group *g, uint32_t n) {
    zc_config cfg;
    zt_inproc_config(&cfg, n, 2, 1024);
    cfg.log_min_ranks = 1;
    cfg.overlay_min_ranks = 9;
    cfg.overlay_relay = 1; /* sc_relayed; the arena bound is checked without it */
    cfg.inproc_ranks_per_host = 8;
    g->n = n;
    g->arena = zc_comm_arena_bytes(&cfg);
    ZT_CHECK(g->arena > 0);
    g->arenas = calloc(n, sizeof *g->arenas);
    g->c = calloc(n, sizeof *g->c);
    g->reqs = calloc(n, sizeof *g->reqs);
    ZT_CHECK(g->arenas && g->c && g->reqs);
    for (uint32_t r = 0; r < n; r++) ZT_CHECK((g->arenas[r] = aligned_alloc(64, g->arena)));
    zc_status st = zc_comm_init_inproc(&cfg, g->arenas, g->arena, g->c);
    if (st != ZC_OK) printf("    init: %s\n", zc_init_error_text());
    ZT_CHECK_ST(st, ZC_OK);
}

static void sc_close(sc_group *g) {
    zt_inproc_close(g->n, g->arenas, g->c);
    free(g->arenas), free(g->c), free(g->reqs);
}

static void sc_wait_all(sc_group *g) {
    for (uint32_t r = 0; r < g->n; r++) {
        zc_status st = zc_wait(g->c[r], &g->reqs[r]);
        if (st != ZC_OK) printf("    rank %u: %s\n", r, zc_comm_error_text(g->c[r]));
        ZT_CHECK_ST(st, ZC_OK);
    }
}

/* Case k on every rank, checked against the reference (buffers of count elements, n * count
 * for all_gather's results). */
static void sc_case(sc_group *g, const zr_case *k, uint64_t seed) {
    uint32_t n = g->n;
    size_t blocks = k->c == ZR_AG ? n : 1u, bb = blocks * k->count * zc_dtype_bytes(k->t) + 1u;
    size_t bytes;
    uint8_t **send = calloc(n, sizeof *send), **recv = calloc(n, sizeof *recv);
    uint8_t *want = malloc(bb);
    ZT_CHECK(send && recv && want);
    for (uint32_t r = 0; r < n; r++) {
        ZT_CHECK((send[r] = malloc(bb)) && (recv[r] = malloc(bb)));
        zr_fill(send[r], k->count, k->t, seed, r, 0);
        memset(recv[r], 0xA5, bb);
    }
    memset(want, 0xA5, bb);
    zr_want(k, send, k->root, want); /* the same at every rank (reduce: the root's only) */
    for (uint32_t r = 0; r < n; r++)
        ZT_CHECK_ST(zr_issue(k, g->c[r], r, send[r], recv[r], &g->reqs[r]), ZC_OK);
    sc_wait_all(g);
    for (uint32_t r = 0; r < n; r++) {
        if (k->c == ZR_REDUCE && r != k->root) continue;
        const uint8_t *got = zr_result(k, r, send[r], recv[r], &bytes);
        if (zr_first_diff(got, want, bytes) != bytes) {
            char d[160];
            zr_describe(k, d, sizeof d);
            printf("    %s differs at rank %u of %u (seed %llu)\n", d, r, n,
                   (unsigned long long)seed);
            ZT_CHECK(false);
        }
    }
    for (uint32_t r = 0; r < n; r++) free(send[r]), free(recv[r]);
    free(send), free(recv), free(want);
}

/* Messages every rank together sends in one small all_reduce of one chunk (the hierarchical
 * form over blocks of q, docs/algorithms.md): 2 (q - 1) per block up and down its tree, and
 * recursive doubling's among the H = n / q leaders (P the largest power of two <= H: P log2 P,
 * and 2 per folded pair). */
static uint64_t sc_hrd_messages(uint32_t n, uint32_t q) {
    uint32_t H = n / q, P = 1, steps = 0;
    while (P * 2u <= H) P *= 2u, steps++;
    return 2u * (uint64_t)(q - 1u) * H + (uint64_t)P * steps + 2u * (uint64_t)(H - P);
}

static uint64_t sc_sent(const sc_group *g) {
    uint64_t all = 0, tx;
    for (uint32_t r = 0; r < g->n; r++) {
        zc_comm_messages(g->c[r], &tx, NULL);
        all += tx;
    }
    return all;
}

/* CPU ms of one 8-byte float32 all_reduce over every rank, median of 5 after a warm-up; the
 * messages of each call are the formula's. */
static double sc_time_allreduce(sc_group *g) {
    float *in = calloc(2u * g->n, sizeof *in), *out = calloc(2u * g->n, sizeof *out);
    double ms[6];
    ZT_CHECK(in && out);
    ZT_CHECK_EQ(g->c[0]->hblock, 8u);
    uint64_t sent = sc_sent(g);
    for (uint32_t r = 0; r < g->n; r++) in[2u * r] = 1.0f, in[2u * r + 1] = (float)(r & 7u);
    for (int i = 0; i < 6; i++) {
        double t0 = sc_cpu_ms();
        for (uint32_t r = 0; r < g->n; r++)
            ZT_CHECK_ST(zc_allreduce(g->c[r], in + 2u * r, out + 2u * r, 2, ZC_FLOAT32, ZC_SUM,
                                     &g->reqs[r]), ZC_OK);
        sc_wait_all(g);
        ms[i] = sc_cpu_ms() - t0;
        ZT_CHECK(out[0] == (float)g->n);
        uint64_t now = sc_sent(g);
        ZT_CHECK_EQ(now - sent, sc_hrd_messages(g->n, 8u));
        sent = now;
    }
    for (int i = 1; i < 6; i++) /* sort the 5 timed calls */
        for (int j = i; j > 1 && ms[j] < ms[j - 1]; j--) {
            double t = ms[j];
            ms[j] = ms[j - 1], ms[j - 1] = t;
        }
    free(in), free(out);
    return ms[3];
}

static double sc_wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* One rank aborts while every other one waits on an all_reduce (last, the group is failed
 * after it): every other rank fails with ZC_PEER_LOST, ZC_ABORTED or ZC_TIMED_OUT before its
 * deadline, though most have no connection to the dead rank (the report travels the overlay),
 * and each one's failure names the dead rank, not the rank that passed the report on. */
static void sc_killed_rank(sc_group *g) {
    uint32_t n = g->n, dead = n / 2u + 5u, unconnected = 0, named = 0;
    for (uint32_t r = 0; r < n; r++) unconnected += g->c[dead]->conn[r] == ZC_NO_CONN;
    ZT_CHECK(unconnected > n / 2u);
    float *in = calloc(2u * n, sizeof *in), *out = calloc(2u * n, sizeof *out);
    ZT_CHECK(in && out);
    for (uint32_t r = 0; r < n; r++)
        if (r != dead)
            ZT_CHECK_ST(zc_allreduce(g->c[r], in + 2u * r, out + 2u * r, 2, ZC_FLOAT32, ZC_SUM,
                                     &g->reqs[r]), ZC_OK);
    double t0 = sc_wall_ms(), most = 0.0;
    ZT_CHECK_ST(zc_comm_abort(g->c[dead]), ZC_OK);
    for (uint32_t r = 0; r < n; r++) {
        if (r == dead) continue;
        zc_status st = zc_wait(g->c[r], &g->reqs[r]);
        double t = sc_wall_ms() - t0;
        most = t > most ? t : most;
        if (st != ZC_PEER_LOST && st != ZC_ABORTED && st != ZC_TIMED_OUT)
            printf("    rank %u: %s\n", r, zc_comm_error_text(g->c[r]));
        ZT_CHECK(st == ZC_PEER_LOST || st == ZC_ABORTED || st == ZC_TIMED_OUT);
        named += g->c[r]->fail_peer == (int32_t)dead;
    }
    double deadline_ms = (double)g->c[0]->cfg.timeout_ns / 1e6;
    printf("    %u ranks: rank %u aborted; all %u others failed within %.3f ms wall (deadline "
           "%.0f ms), %u of them unconnected to it, %u naming it as the failed rank\n", n, dead,
           n - 1u, most, deadline_ms, unconnected, named);
    fflush(stdout);
    ZT_CHECK(most < deadline_ms);
    ZT_CHECK_EQ(named, n - 1u);
    free(in), free(out);
}

/* Relayed send/recv (core/relay.c) between a few pairs at the longest routes (distance
 * 2^k - 1 below n / 2: k hops, either way round) and at the largest ring distance (n / 2),
 * 3 slots and a ragged tail each, byte for byte; prints the hops. */
static void sc_relayed(sc_group *g) {
    uint32_t n = g->n, k = 0;
    while ((2u << k) <= n / 2u) k++;
    uint32_t far = (1u << k) - 1u; /* k ones */
    const uint32_t pairs[4][2] = {{0, far}, {n / 3u, n / 3u + far}, {n - 1u, n - 1u - far},
                                  {5, 5u + n / 2u}};
    static uint8_t out[4][3100], in[4][3100];
    zc_req q[8];
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t s = pairs[i][0], d = pairs[i][1] % n;
        for (uint32_t b = 0; b < sizeof out[i]; b++) out[i][b] = (uint8_t)(b * 7u + i * 31u + s);
        memset(in[i], 0, sizeof in[i]);
        ZT_CHECK_EQ(g->c[s]->conn[d] == ZC_NO_CONN, i < 3);
        ZT_CHECK_ST(zc_send_tagged(g->c[s], out[i], sizeof out[i], ZC_UINT8, d, i, &q[2u * i]),
                    ZC_OK);
        ZT_CHECK_ST(zc_recv_tagged(g->c[d], in[i], sizeof in[i], ZC_UINT8, s, i, NULL,
                                   &q[2u * i + 1u]), ZC_OK);
    }
    double t0 = sc_cpu_ms();
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t s = pairs[i][0], d = pairs[i][1] % n;
        ZT_CHECK_ST(zc_wait(g->c[d], &q[2u * i + 1u]), ZC_OK);
        ZT_CHECK_ST(zc_wait(g->c[s], &q[2u * i]), ZC_OK);
        ZT_CHECK(memcmp(in[i], out[i], sizeof out[i]) == 0);
    }
    printf("    relayed send/recv of 3,100 B: routes of %u hops (3 pairs, both ways round) and "
           "the ring's far side (1 hop): %.1f ms CPU over all ranks\n", k, sc_cpu_ms() - t0);
}

static void sc_one(uint32_t n, double *ms_first) {
    sc_group g;
    sc_open(&g, n);
    uint32_t most = 0, bound = 0;
    for (uint32_t d = 1; d < n; d *= 2u) bound += 3u; /* 2 ceil(log2 n) + log2 P, + own host */
    bound += 2u + 8u;
    for (uint32_t r = 0; r < n; r++) most = g.c[r]->nconn - 1u > most ? g.c[r]->nconn - 1u : most;
    ZT_CHECK(most <= bound);
    /* 512 KiB with the default overlay_relay 0; the relay lane adds, per connection the window
     * is sized for, a ring of slots, two counter lines and a channel (core/relay.c). */
    zc_config plain = g.c[0]->cfg;
    plain.rank = 0, plain.overlay_relay = 0;
    size_t arena0 = zc_comm_arena_bytes(&plain), relay = g.arena - arena0;
    ZT_CHECK(arena0 > 0 && arena0 <= 512u * 1024u);
    ZT_CHECK(relay <= (size_t)zc__conn_cap(&g.c[0]->cfg) *
                          (2u * (64u + 1024u) + 128u + sizeof(zc__chan) + 64u));
    uint64_t seed = zt_seed() ^ n;
    const size_t counts[] = {1, 7, 256, (size_t)n - 3u, (size_t)n + 5u};
    for (uint32_t i = 0; i < 5; i++) {
        zc_dtype t = i & 1u ? ZC_FLOAT32 : ZC_INT64;
        if (counts[i] * 8u <= ZC_DEFAULT_ALLREDUCE_ONESHOT_MAX_BYTES || counts[i] < n) {
            zr_case ar = {ZR_ALLREDUCE, n, counts[i], t, i & 2u ? ZC_MAX : ZC_SUM, 0, i & 1u};
            sc_case(&g, &ar, seed++);
        }
    }
    zr_case avg = {ZR_ALLREDUCE, n, 600, ZC_FLOAT16, ZC_AVG, 0, true}; /* several chunks */
    sc_case(&g, &avg, seed++);
    zr_case ag = {ZR_AG, n, 3, ZC_INT32, ZC_SUM, 0, false};
    sc_case(&g, &ag, seed++);
    zr_case ag2 = {ZR_AG, n, 1, ZC_FLOAT64, ZC_SUM, 0, true};
    sc_case(&g, &ag2, seed++);
    const uint32_t roots[] = {0, 1, n / 2u + 3u, n - 1u};
    for (uint32_t i = 0; i < 4; i++) {
        zr_case bc = {ZR_BCAST, n, 5u + i * 100u, ZC_INT32, ZC_SUM, roots[i], i == 2};
        sc_case(&g, &bc, seed++);
    }
    zr_case vg = {ZR_BCAST, n, ZC_DEFAULT_BCAST_TREE_MAX_BYTES / 4u + 3u + n / 8u, ZC_INT32,
                  ZC_SUM, n / 2u + 3u, false}; /* above the tree's bytes: van de Geijn */
    sc_case(&g, &vg, seed++);
    zr_case re = {ZR_REDUCE, n, 7, ZC_INT32, ZC_SUM, n - 1u, false}; /* the tree to the root */
    sc_case(&g, &re, seed++);
    zr_case re2 = {ZR_REDUCE, n, 300, ZC_FLOAT32, ZC_MAX, 3, true};
    sc_case(&g, &re2, seed++);
    uint64_t sent = sc_sent(&g); /* the hierarchical barrier: the all_reduce's messages */
    for (uint32_t r = 0; r < n; r++) ZT_CHECK_ST(zc_barrier(g.c[r], &g.reqs[r]), ZC_OK);
    sc_wait_all(&g);
    ZT_CHECK_EQ(sc_sent(&g) - sent, sc_hrd_messages(n, 8u));
    double ms = sc_time_allreduce(&g);
    if (*ms_first == 0.0) *ms_first = ms;
    printf("    %u ranks, 8 per host: arena %zu bytes per rank (%zu without the relay lane), at "
           "most %u connections per rank (bound %u), 8-byte all_reduce %.2f ms CPU over all "
           "ranks (x%.1f the first size)\n", n, g.arena, arena0, most, bound, ms,
           ms / *ms_first);
    fflush(stdout);
    sc_relayed(&g);
    sc_killed_rank(&g);
    sc_close(&g);
}

void scale_overlay_inproc_matches_reference(void) {
    const char *env = getenv("ZC_SCALE_RANKS");
    char list[128];
    snprintf(list, sizeof list, "%s", env && *env ? env : "1024");
    double first = 0.0;
    for (char *s = strtok(list, ","); s; s = strtok(NULL, ",")) {
        unsigned long n = strtoul(s, NULL, 10);
        ZT_CHECK(n >= 9 && n <= ZC_MAX_RANKS);
        sc_one((uint32_t)n, &first);
    }
}
