/* test_overlay.c: overlay mode (cfg->overlay_min_ranks) in process on n = 9..33 ranks, 4 per
 * simulated host: each rank's connections are exactly the set core/layout.h defines (computed
 * here again from the definition, symmetric, and every rank when the mode is off); the calls
 * with an algorithm over them (recursive-doubling all_reduce, Bruck all_gather and all_to_all,
 * binomial-tree broadcast, van de Geijn broadcast above bcast_tree_max_bytes, gather, scatter
 * and reduce (the canonical tree toward the root) from several roots, recursive-halving
 * reduce_scatter, Rabenseifner all_reduce, dissemination barrier) match tests/ref.c bitwise, in
 * place and not, at ragged counts; a send or receive naming a rank without a connection is
 * relayed over the overlay (core/relay.c): every pair, every size class, tags interleaved,
 * credit back-pressure through one relay, relays that only poll, a stalled or aborted relay. */
#include "zt.h"

#include "../core/engine.h"
#include "ref.h"
#include "zcoll.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OV_MAXR 33u
#define OV_PER_HOST 4u

typedef struct ov_group {
    uint32_t n;
    void *arenas[OV_MAXR];
    zc_comm *c[OV_MAXR];
} ov_group;

static void ov_open(ov_group *g, uint32_t n, uint32_t overlay_min) {
    zc_config cfg;
    memset(g, 0, sizeof *g);
    g->n = n;
    zr_group_config(&cfg, n, 256, 2, 1024, 0);
    cfg.log_min_ranks = 1;
    cfg.overlay_min_ranks = overlay_min;
    cfg.overlay_relay = 1; /* send/recv reach every rank (relay.c) */
    cfg.inproc_ranks_per_host = OV_PER_HOST;
    zt_inproc_open(&cfg, g->arenas, g->c);
}

/* Whether q is one of rank r's connections, from the definition (ref.c). */
static bool ov_member(uint32_t n, uint32_t r, uint32_t q) {
    return zr_overlay_member(n, OV_PER_HOST, r, q);
}

static void ov_check_set(const ov_group *g, bool overlay) {
    uint32_t n = g->n;
    for (uint32_t r = 0; r < n; r++) {
        const zc_comm *c = g->c[r];
        uint32_t k = 0;
        for (uint32_t q = 0; q < n; q++) {
            bool want = !overlay || ov_member(n, r, q);
            ZT_CHECK_EQ(c->conn[q] != ZC_NO_CONN, want);
            ZT_CHECK_EQ(ov_member(n, r, q), ov_member(n, q, r)); /* symmetric */
            if (!want) continue;
            ZT_CHECK_EQ(c->conn[q], k);
            ZT_CHECK_EQ(c->conn_peer[k], q);
            k++;
        }
        ZT_CHECK_EQ(c->nconn, k);
        zc_config cfg = c->cfg; /* the footprint names the same peers */
        zc_footprint fp;
        cfg.rank = r;
        ZT_CHECK_ST(zc_comm_footprint(&cfg, 0, &fp), ZC_OK);
        ZT_CHECK_EQ(fp.peers, k - 1u);
        ZT_CHECK_EQ(fp.arena_bytes, zc_comm_arena_bytes(&cfg));
    }
}

/* Case k on every rank of g, checked bitwise against the reference. */
static void ov_case(ov_group *g, const zr_case *k, uint64_t seed) {
    uint32_t n = g->n;
    size_t bb = zr_buf_bytes(k), bytes;
    uint8_t *send[OV_MAXR], *recv[OV_MAXR], *want[OV_MAXR];
    zc_req reqs[OV_MAXR];
    for (uint32_t r = 0; r < n; r++) {
        send[r] = malloc(bb), recv[r] = malloc(bb), want[r] = malloc(bb);
        zr_fill(send[r], n * k->count, k->t, seed, r, 0);
        memset(want[r], 0xA5, bb);
        memset(recv[r], 0xA5, bb);
    }
    for (uint32_t r = 0; r < n; r++) zr_want(k, send, r, want[r]);
    for (uint32_t r = 0; r < n; r++) {
        zc_status st = zr_issue(k, g->c[r], r, send[r], recv[r], &reqs[r]);
        if (st != ZC_OK) printf("    rank %u: %s\n", r, zc_comm_error_text(g->c[r]));
        ZT_CHECK_ST(st, ZC_OK);
    }
    for (uint32_t r = 0; r < n; r++) ZT_CHECK_ST(zc_wait(g->c[r], &reqs[r]), ZC_OK);
    for (uint32_t r = 0; r < n; r++) {
        const uint8_t *got = zr_result(k, r, send[r], recv[r], &bytes);
        if (zr_first_diff(got, want[r], bytes) != bytes) {
            char d[160];
            zr_describe(k, d, sizeof d);
            printf("    %s differs at rank %u (seed %llu)\n", d, r, (unsigned long long)seed);
        }
        ZT_CHECK(zr_first_diff(got, want[r], bytes) == bytes);
    }
    for (uint32_t r = 0; r < n; r++) free(send[r]), free(recv[r]), free(want[r]);
}

/* A send and a receive naming a rank without a connection: relayed (core/relay.c), both
 * ways, byte for byte. */
static void ov_relayed(ov_group *g) {
    zc_comm *c = g->c[0];
    uint32_t n = g->n, far = 0;
    static int32_t a[64], b[64], x[64], y[64];
    zc_req q[4];
    for (uint32_t p = 1; p < n && !far; p++)
        if (c->conn[p] == ZC_NO_CONN) far = p;
    ZT_CHECK(far != 0);
    for (int32_t i = 0; i < 64; i++) a[i] = i * 7 - 3, b[i] = -i, x[i] = y[i] = 0;
    ZT_CHECK_ST(zc_send(c, a, 64, ZC_INT32, far, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_recv(c, x, 64, ZC_INT32, far, &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_recv(g->c[far], y, 64, ZC_INT32, 0, &q[2]), ZC_OK);
    ZT_CHECK_ST(zc_send(g->c[far], b, 64, ZC_INT32, 0, &q[3]), ZC_OK);
    for (uint32_t i = 0; i < 4; i++) ZT_CHECK_ST(zc_wait(i < 2 ? c : g->c[far], &q[i]), ZC_OK);
    ZT_CHECK(memcmp(x, b, sizeof b) == 0 && memcmp(y, a, sizeof a) == 0);
}

static void ov_sweep(uint32_t n) {
    ov_group g;
    ov_open(&g, n, 1);
    ov_check_set(&g, true);
    zt_rng rng = {zt_seed() ^ (n * 104729u)};
    const size_t counts[] = {1, 3, (size_t)n - 1u, (size_t)n + 1u, 2u * n + 3u, 65, 200};
    uint64_t seed = zt_seed() + n;
    for (uint32_t i = 0; i < 7; i++) {
        size_t count = counts[i];
        zc_dtype t = (zc_dtype)zt_rng_below(&rng, ZC_DTYPE_COUNT_);
        zc_op op = (zc_op)zt_rng_below(&rng, ZC_OP_COUNT_);
        bool in_place = i & 1u;
        if (count * 8u <= 1024u || count < n) {
            zr_case ar = {ZR_ALLREDUCE, n, count, t, op, 0, in_place};
            ov_case(&g, &ar, seed++);
        }
        zr_case ag = {ZR_AG, n, count, t, ZC_SUM, 0, in_place};
        ov_case(&g, &ag, seed++);
        zr_case bc = {ZR_BCAST, n, count < 128 ? count : 128, t, ZC_SUM, (uint32_t)(i * 5u) % n,
                      in_place};
        ov_case(&g, &bc, seed++);
        uint32_t root = (uint32_t)(i * 7u + 1u) % n;
        size_t blk = count < 40 ? count : 40; /* n blocks in the reference's buffers */
        zr_case ga = {ZR_GATHER, n, blk, t, ZC_SUM, root, in_place};
        zr_case sc = {ZR_SCATTER, n, blk, t, ZC_SUM, root, in_place};
        zr_case aa = {ZR_A2A, n, blk, t, ZC_SUM, 0, in_place};
        ov_case(&g, &ga, seed++);
        ov_case(&g, &sc, seed++);
        ov_case(&g, &aa, seed++);
        zr_case rs = {ZR_RS, n, blk, t, op, 0, in_place};
        ov_case(&g, &rs, seed++);
        zr_case big = {ZR_ALLREDUCE, n, 64u * n + i, t, op, 0, in_place}; /* Rabenseifner > 1 KiB */
        ov_case(&g, &big, seed++);
        zr_case re = {ZR_REDUCE, n, count, t, op, (uint32_t)(i * 3u + 2u) % n, in_place};
        ov_case(&g, &re, seed++);
        zr_case vg = {ZR_BCAST, n, 1024u / zc_dtype_bytes(t) + 1u + i * n, t, ZC_SUM,
                      (uint32_t)(i * 5u + 3u) % n, in_place}; /* > 1 KiB: van de Geijn */
        ov_case(&g, &vg, seed++);
    }
    zc_req reqs[OV_MAXR];
    for (uint32_t r = 0; r < n; r++) ZT_CHECK_ST(zc_barrier(g.c[r], &reqs[r]), ZC_OK);
    for (uint32_t r = 0; r < n; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r]), ZC_OK);
    ov_relayed(&g);
    zr_case again = {ZR_ALLREDUCE, n, 5, ZC_FLOAT32, ZC_SUM, 0, false}; /* still usable */
    ov_case(&g, &again, seed);
    zt_inproc_close(n, g.arenas, g.c);
}

void overlay_calls_match_reference_or_are_refused_9_to_20_ranks(void) {
    for (uint32_t n = 9; n <= 20; n++) ov_sweep(n);
}

void overlay_calls_match_reference_or_are_refused_21_to_33_ranks(void) {
    for (uint32_t n = 21; n <= 33; n++) ov_sweep(n);
}

/* zc_comm_split_inproc of an overlay group: children of 17 and 16 ranks (even and odd parent
 * ranks) keep their parents' hosts (2 of a child's ranks per host) and run in overlay mode. */
void overlay_split_children_keep_hosts_and_run(void) {
    ov_group g, kid[2];
    ov_open(&g, 33, 1);
    int colors[OV_MAXR], keys[OV_MAXR];
    zc_comm *children[OV_MAXR];
    for (uint32_t r = 0; r < g.n; r++) colors[r] = (int)(r & 1u), keys[r] = 0;
    size_t bytes = zc_comm_arena_bytes(&g.c[0]->cfg);
    void *arenas[OV_MAXR];
    for (uint32_t r = 0; r < g.n; r++) ZT_CHECK((arenas[r] = aligned_alloc(64, bytes)));
    zc_status st = zc_comm_split_inproc(g.c, colors, keys, arenas, bytes, children);
    if (st != ZC_OK) printf("    split: %s\n", zc_init_error_text());
    ZT_CHECK_ST(st, ZC_OK);
    for (uint32_t col = 0; col < 2; col++) {
        ov_group *k = &kid[col];
        memset(k, 0, sizeof *k);
        for (uint32_t r = col; r < g.n; r += 2) k->c[k->n++] = children[r];
        ZT_CHECK_EQ(k->n, col ? 16u : 17u);
        for (uint32_t r = 0; r < k->n; r++) {
            uint32_t peers_on_host = 0;
            for (uint32_t q = 0; q < k->n; q++)
                peers_on_host += q != r && k->c[q]->host == k->c[r]->host;
            ZT_CHECK(peers_on_host <= 1u);
            ZT_CHECK(k->c[r]->nconn < k->n || k->n <= 16u); /* the overlay, not every rank */
        }
        zr_case ar = {ZR_ALLREDUCE, k->n, 9, ZC_FLOAT32, ZC_SUM, 0, col == 1};
        ov_case(k, &ar, zt_seed() + col);
        zr_case ag = {ZR_AG, k->n, 2, ZC_INT32, ZC_SUM, 0, false};
        ov_case(k, &ag, zt_seed() + 7u + col);
    }
    for (uint32_t r = 0; r < g.n; r++) ZT_CHECK_ST(zc_comm_fini(children[r]), ZC_OK);
    for (uint32_t r = 0; r < g.n; r++) free(arenas[r]);
    zt_inproc_close(g.n, g.arenas, g.c);
}

/* A rank that aborts while the others wait on an all_reduce: its failure report reaches every
 * rank, most of which have no connection to it, through the ranks that learn it and report it
 * to theirs (each failure's first report goes to every connection), long before the deadline. */
void overlay_failure_report_reaches_unconnected_ranks(void) {
    ov_group g;
    ov_open(&g, 33, 1);
    const uint32_t dead = 5;
    uint32_t unconnected = 0;
    for (uint32_t r = 0; r < g.n; r++) unconnected += g.c[dead]->conn[r] == ZC_NO_CONN;
    ZT_CHECK(unconnected >= 10u);
    static float in[OV_MAXR][4], out[OV_MAXR][4];
    zc_req reqs[OV_MAXR];
    for (uint32_t r = 0; r < g.n; r++)
        if (r != dead)
            ZT_CHECK_ST(zc_allreduce(g.c[r], in[r], out[r], 4, ZC_FLOAT32, ZC_SUM, &reqs[r]),
                        ZC_OK);
    ZT_CHECK_ST(zc_comm_abort(g.c[dead]), ZC_OK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t r = 0; r < g.n; r++)
        if (r != dead) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r]), ZC_ABORTED);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ZT_CHECK(s < 5.0); /* the deadline is the default's minutes away */
    zt_inproc_close(g.n, g.arenas, g.c);
}

/* Below overlay_min_ranks (and with it 0) the communicator is a full mesh, as before. */
void overlay_off_keeps_the_full_mesh(void) {
    ov_group g;
    ov_open(&g, 17, 18);
    ov_check_set(&g, false);
    zr_case k = {ZR_A2A, 17, 3, ZC_INT32, ZC_SUM, 0, false};
    ov_case(&g, &k, zt_seed());
    zt_inproc_close(g.n, g.arenas, g.c);
    ov_open(&g, 17, 0);
    ov_check_set(&g, false);
    zt_inproc_close(g.n, g.arenas, g.c);
}

/* Overlay mode's refusals at the size query and init, each with its sentence. */
void overlay_config_refusals_say_why(void) {
    zc_config cfg;
    char why[ZC_ERROR_TEXT_BYTES];
    zr_group_config(&cfg, 64, 256, 2, 1024, 0);
    cfg.overlay_min_ranks = 9;
    cfg.log_min_ranks = 10; /* overlay mode needs the log-depth algorithms */
    ZT_CHECK(!zc__config_check(&cfg, why, sizeof why));
    ZT_CHECK(strstr(why, "log_min_ranks") != NULL);
    cfg.log_min_ranks = 1;
    cfg.transport = ZC_TRANSPORT_SHM; /* processes: overlay mode too, past the full mesh's */
    strcpy(cfg.root_addr, "127.0.0.1:1");
    cfg.secret_set = true;
    ZT_CHECK(zc__config_check(&cfg, why, sizeof why));
    cfg.nranks = ZC_MAX_RANKS;
    ZT_CHECK(zc__config_check(&cfg, why, sizeof why));
    cfg.overlay_min_ranks = 0;
    ZT_CHECK(!zc__config_check(&cfg, why, sizeof why));
    ZT_CHECK(strstr(why, "overlay mode") != NULL);
    cfg.overlay_min_ranks = 9;
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.nranks = ZC_MESH_MAX_RANKS + 1u;
    cfg.overlay_min_ranks = 0; /* a full mesh this large is refused */
    ZT_CHECK(!zc__config_check(&cfg, why, sizeof why));
    cfg.overlay_min_ranks = 9;
    ZT_CHECK(zc__config_check(&cfg, why, sizeof why));
    cfg.nranks = ZC_MAX_RANKS;
    ZT_CHECK(zc_comm_arena_bytes(&cfg) > 0);
}

/* ---- relayed send/recv (core/relay.c) ---- */

/* The bytes message m of rank s to rank d carries (a pattern no other message shares). */
static void ov_pattern(uint8_t *p, size_t bytes, uint32_t s, uint32_t d, uint32_t m) {
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)(s * 131u + d * 31u + m * 7u + i * 13u + (i >> 8));
}

static uint32_t ov_ceil_log2(uint32_t n) {
    uint32_t k = 0;
    while ((1u << k) < n) k++;
    return k;
}

/* Hops of the route from s to d (core/relay.c's rule), counted by following it. */
static uint32_t ov_hops(uint32_t n, uint32_t s, uint32_t d) {
    uint32_t h = 0;
    for (uint32_t at = s; at != d && h <= 32u; h++) at = zc__relay_next(n, at, d);
    return h;
}

/* Round k of every pair: rank r sends two messages (tags 2k and 2k + 1, interleaved with its
 * receives) of bytes to r + k and receives two from r - k; waits; compares byte for byte. */
static void ov_pairs_round(ov_group *g, uint32_t k, size_t bytes) {
    uint32_t n = g->n;
    static uint8_t sbuf[OV_MAXR][2][1100], rbuf[OV_MAXR][2][1100], want[1100];
    zc_req q[OV_MAXR][4];
    for (uint32_t r = 0; r < n; r++) {
        uint32_t to = (r + k) % n, from = (r + n - k) % n;
        for (uint32_t m = 0; m < 2; m++) {
            ov_pattern(sbuf[r][m], bytes, r, to, k * 2u + m);
            memset(rbuf[r][m], 0xA5, bytes + 4u);
            ZT_CHECK_ST(zc_send_tagged(g->c[r], sbuf[r][m], bytes, ZC_UINT8, to, 2u * k + m,
                                       &q[r][2u * m]), ZC_OK);
            ZT_CHECK_ST(zc_recv_tagged(g->c[r], rbuf[r][m], bytes, ZC_UINT8, from, 2u * k + m,
                                       NULL, &q[r][2u * m + 1u]), ZC_OK);
        }
    }
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t j = 0; j < 4; j++) ZT_CHECK_ST(zc_wait(g->c[r], &q[r][j]), ZC_OK);
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t m = 0; m < 2; m++) {
            uint32_t from = (r + n - k) % n;
            ov_pattern(want, bytes, from, r, k * 2u + m);
            ZT_CHECK(memcmp(rbuf[r][m], want, bytes) == 0);
            ZT_CHECK(rbuf[r][m][bytes] == 0xA5); /* nothing past the message */
        }
}

/* Every ordered pair of ranks at n = 9, 17, 33 (2 ranks per simulated host: most pairs have no
 * connection, routes of up to log2 n hops), at 0 B, 8 B, one slot, several slots and a ragged
 * size, two tags interleaved per pair: every message arrives, byte for byte, in call order. */
static void ov_every_pair(uint32_t n) {
    ov_group g;
    zc_config cfg;
    memset(&g, 0, sizeof g);
    g.n = n;
    zr_group_config(&cfg, n, 256, 2, 1024, 0);
    cfg.log_min_ranks = 1, cfg.overlay_min_ranks = 1, cfg.inproc_ranks_per_host = 2;
    cfg.overlay_relay = 1;
    zt_inproc_open(&cfg, g.arenas, g.c);
    uint32_t relayed = 0, most = 0;
    for (uint32_t d = 1; d < n; d++) {
        relayed += g.c[0]->conn[d] == ZC_NO_CONN;
        most = ov_hops(n, 0, d) > most ? ov_hops(n, 0, d) : most;
    }
    ZT_CHECK(relayed >= (n > 9u ? n / 3u : 1u));
    ZT_CHECK(most >= 2u && most <= ov_ceil_log2(n));
    const size_t sizes[] = {0, 8, 256, 3u * 256u + 77u, 1024};
    for (uint32_t k = 1; k < n; k++) ov_pairs_round(&g, k, sizes[k % 5u]);
    for (uint32_t i = 0; i < 5; i++) ov_pairs_round(&g, 1u + (i * 5u + 3u) % (n - 1u), sizes[i]);
    zt_inproc_close(n, g.arenas, g.c);
}

void overlay_relayed_send_recv_every_pair(void) {
    ov_every_pair(9);
    ov_every_pair(17);
    ov_every_pair(33);
}

/* overlay_relay 0 (the default): no relay lane (a smaller arena, two lanes), and send/recv
 * naming a rank without a connection return ZC_UNSUPPORTED with a sentence naming the knob;
 * connected ranks still exchange, and the collectives run. */
void overlay_without_relay_refuses_unconnected_send_recv(void) {
    ov_group g;
    zc_config cfg;
    memset(&g, 0, sizeof g);
    g.n = 17;
    zr_group_config(&cfg, g.n, 256, 2, 1024, 0);
    cfg.log_min_ranks = 1, cfg.overlay_min_ranks = 1, cfg.inproc_ranks_per_host = 2;
    size_t plain = zc_comm_arena_bytes(&cfg);
    cfg.overlay_relay = 1;
    size_t relaying = zc_comm_arena_bytes(&cfg);
    ZT_CHECK(plain > 0 && plain < relaying);
    cfg.overlay_relay = 2;
    ZT_CHECK(zc_comm_arena_bytes(&cfg) == 0); /* 0 or 1 only */
    cfg.overlay_relay = 0;
    zt_inproc_open(&cfg, g.arenas, g.c);
    zc_comm *c = g.c[0];
    uint32_t far = 0, near = 0;
    for (uint32_t p = 1; p < g.n; p++) {
        if (c->conn[p] == ZC_NO_CONN && !far) far = p;
        if (c->conn[p] != ZC_NO_CONN && !near) near = p;
    }
    ZT_CHECK(far != 0 && near != 0 && !c->relay);
    static int32_t a[16], b[16];
    zc_req q[2];
    ZT_CHECK_ST(zc_send(c, a, 16, ZC_INT32, far, &q[0]), ZC_UNSUPPORTED);
    ZT_CHECK(strstr(zc_comm_error_text(c), "overlay_relay") != NULL);
    ZT_CHECK_ST(zc_recv(g.c[far], b, 16, ZC_INT32, 0, &q[1]), ZC_UNSUPPORTED);
    for (int32_t i = 0; i < 16; i++) a[i] = i * 3 + 1, b[i] = 0;
    ZT_CHECK_ST(zc_send(c, a, 16, ZC_INT32, near, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_recv(g.c[near], b, 16, ZC_INT32, 0, &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_wait(c, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[near], &q[1]), ZC_OK);
    ZT_CHECK(memcmp(a, b, sizeof a) == 0);
    zc_req r[OV_MAXR];
    static int64_t in[OV_MAXR], out[OV_MAXR];
    for (uint32_t k = 0; k < g.n; k++) {
        in[k] = (int64_t)k * 5 - 7;
        ZT_CHECK_ST(zc_allreduce(g.c[k], &in[k], &out[k], 1, ZC_INT64, ZC_SUM, &r[k]), ZC_OK);
    }
    for (uint32_t k = 0; k < g.n; k++) ZT_CHECK_ST(zc_wait(g.c[k], &r[k]), ZC_OK);
    for (uint32_t k = 0; k < g.n; k++) ZT_CHECK_EQ(out[k], (int64_t)(5 * 136 - 7 * 17));
    zt_inproc_close(g.n, g.arenas, g.c);
}

/* A 33-rank group, 2 ranks per simulated host, with timeout_ns (0: the default). */
static void ov_open_relay(ov_group *g, uint32_t n, uint64_t timeout_ns) {
    zc_config cfg;
    memset(g, 0, sizeof *g);
    g->n = n;
    zr_group_config(&cfg, n, 256, 2, 1024, timeout_ns);
    cfg.log_min_ranks = 1, cfg.overlay_min_ranks = 1, cfg.inproc_ranks_per_host = 2;
    cfg.overlay_relay = 1;
    zt_inproc_open(&cfg, g->arenas, g->c);
}

/* 24 sends of 5 slots each from rank 0 to rank 15 (4 hops: 0, 8, 12, 14, 15) before rank 15
 * issues any receive: the relay rings fill (2 slots each) and the sends wait on credits; then
 * the receives take them all, in order, byte for byte. The relays have no call in flight and
 * only zc_progress runs on every rank; rank 12, a relay, waits meanwhile in a receive of its
 * own from rank 13 that comes last. */
void overlay_relay_backpressure_and_polling_relays(void) {
    ov_group g;
    ov_open_relay(&g, 33, 0);
    const uint32_t s = 0, d = 15, M = 24, B = 5u * 256u;
    ZT_CHECK_EQ(g.c[s]->conn[d], ZC_NO_CONN);
    ZT_CHECK_EQ(ov_hops(33, s, d), 4u);
    static uint8_t out[24][5 * 256], in[24][5 * 256], own[8];
    zc_req sq[24], rq[24], wq, oq;
    uint64_t own_v = 0x1122334455667788ull;
    ZT_CHECK_ST(zc_recv(g.c[12], own, 8, ZC_UINT8, 13, &wq), ZC_OK);
    for (uint32_t m = 0; m < M; m++) {
        ov_pattern(out[m], B, s, d, m);
        ZT_CHECK_ST(zc_send(g.c[s], out[m], B, ZC_UINT8, d, &sq[m]), ZC_OK);
    }
    for (uint32_t pass = 0; pass < 2000; pass++)
        for (uint32_t r = 0; r < g.n; r++) (void)zc_progress(g.c[r]);
    ZT_CHECK_ST(zc_test(g.c[s], &sq[M - 1u]), ZC_IN_PROGRESS); /* held back by credits */
    for (uint32_t m = 0; m < M; m++)
        ZT_CHECK_ST(zc_recv(g.c[d], in[m], B, ZC_UINT8, s, &rq[m]), ZC_OK);
    uint32_t left = 2u * M;
    for (uint32_t pass = 0; pass < 200000 && left; pass++) {
        for (uint32_t r = 0; r < g.n; r++) (void)zc_progress(g.c[r]);
        left = 0;
        for (uint32_t m = 0; m < M; m++) {
            left += sq[m].opaque_[0] && zc_test(g.c[s], &sq[m]) == ZC_IN_PROGRESS;
            left += rq[m].opaque_[0] && zc_test(g.c[d], &rq[m]) == ZC_IN_PROGRESS;
        }
    }
    ZT_CHECK_EQ(left, 0u);
    for (uint32_t m = 0; m < M; m++) ZT_CHECK(memcmp(in[m], out[m], B) == 0);
    ZT_CHECK_ST(zc_send(g.c[13], &own_v, 8, ZC_UINT8, 12, &oq), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[12], &wq), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[13], &oq), ZC_OK);
    ZT_CHECK(memcmp(own, &own_v, 8) == 0);
    zt_inproc_close(g.n, g.arenas, g.c);
}

/* A receive from any source takes a relayed message and names its sender; a receive whose
 * count differs from the relayed send's fails with ZC_MISMATCH naming both calls. */
void overlay_relayed_any_source_and_mismatch(void) {
    ov_group g;
    ov_open_relay(&g, 17, 0);
    const uint32_t s = 3, d = 14; /* distance 6 the short way: 2 hops */
    ZT_CHECK_EQ(g.c[s]->conn[d], ZC_NO_CONN);
    int32_t a[40], b[40];
    uint32_t source = 99;
    for (int32_t i = 0; i < 40; i++) a[i] = 1000 + i, b[i] = 0;
    zc_req q[2];
    ZT_CHECK_ST(zc_recv_tagged(g.c[d], b, 40, ZC_INT32, ZC_ANY_SOURCE, 5, &source, &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_send_tagged(g.c[s], a, 40, ZC_INT32, d, 5, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[s], &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[d], &q[1]), ZC_OK);
    ZT_CHECK_EQ(source, s);
    ZT_CHECK(memcmp(a, b, sizeof a) == 0);
    ZT_CHECK_ST(zc_send(g.c[s], a, 40, ZC_INT32, d, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_recv(g.c[d], b, 39, ZC_INT32, s, &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[d], &q[1]), ZC_MISMATCH);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[d]), "relayed") != NULL);
    zt_inproc_close(g.n, g.arenas, g.c);
}

/* A relay on the route that stops (never progressed again: a stalled process) while a message
 * is on its way: the receive ends with ZC_TIMED_OUT at its deadline; a relay that aborts: the
 * sender's and receiver's calls end with its failure report (ZC_ABORTED), long before it. */
void overlay_relay_stalled_or_aborted_fails_within_deadline(void) {
    for (uint32_t mode = 0; mode < 2; mode++) {
        ov_group g;
        ov_open_relay(&g, 17, 300000000ull); /* 300 ms */
        const uint32_t s = 0, d = 7, relay = 6; /* 0 -> 4 -> 6 -> 7 */
        ZT_CHECK_EQ(zc__relay_next(17, 4, d), relay);
        ZT_CHECK_EQ(g.c[s]->conn[d], ZC_NO_CONN);
        static uint8_t a[700], b[700];
        zc_req q[2];
        zc_comm **walked = g.c[0]->group; /* what zc_wait walks */
        if (mode == 0) /* stalled: out of the group zc_wait walks, never progressed */
            walked[relay] = g.c[relay + 1u];
        else
            ZT_CHECK_ST(zc_comm_abort(g.c[relay]), ZC_OK);
        uint64_t t0 = zt_now_ms();
        ZT_CHECK_ST(zc_send(g.c[s], a, sizeof a, ZC_UINT8, d, &q[0]), ZC_OK);
        ZT_CHECK_ST(zc_recv(g.c[d], b, sizeof b, ZC_UINT8, s, &q[1]), ZC_OK);
        zc_status got = zc_wait(g.c[d], &q[1]);
        ZT_CHECK_ST(got, mode == 0 ? ZC_TIMED_OUT : ZC_ABORTED);
        zc_status sent = zc_wait(g.c[s], &q[0]);
        ZT_CHECK(sent == ZC_OK || sent == ZC_TIMED_OUT || sent == ZC_ABORTED);
        ZT_CHECK(zt_now_ms() - t0 < 5000u);
        if (mode == 1) ZT_CHECK(zt_now_ms() - t0 < 250u);
        walked[relay] = g.c[relay];
        zt_inproc_close(g.n, g.arenas, g.c);
    }
}

/* A relay-lane message no rank sends (a destination outside the communicator, a payload larger
 * than a slot) fails the rank that takes it with ZC_MISMATCH and a sentence, nothing copied. */
void overlay_forged_relay_header_fails_with_sentence(void) {
    for (uint32_t which = 0; which < 3; which++) {
        ov_group g;
        ov_open_relay(&g, 17, 0);
        zc__hdr *h = zc__relay_tx_slot(g.c[1], 2); /* rank 1 plays a hostile relay */
        ZT_CHECK(h != NULL);
        memset(h, 0, offsetof(zc__hdr, tag));
        h->comm_id = g.c[1]->comm_id;
        h->kind = ZC_K_SEND;
        h->alg = ZC_ALG_RELAY;
        h->src = 1;
        h->dst = which == 0 ? 17u : 9u;
        h->bytes = which == 1 ? 100000u : 4u;
        if (which == 2) h->comm_id ^= 1u;
        ZT_CHECK_ST(zc__relay_tx_post(g.c[1], 2, 4), ZC_OK);
        zc_status st = ZC_OK;
        for (uint32_t i = 0; i < 200 && st == ZC_OK; i++) st = zc_progress(g.c[2]);
        ZT_CHECK_ST(st, ZC_MISMATCH);
        ZT_CHECK(strstr(zc_comm_error_text(g.c[2]), "relayed a message") != NULL);
        zt_inproc_close(g.n, g.arenas, g.c);
    }
}
