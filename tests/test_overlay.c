/* test_overlay.c: overlay mode (cfg->overlay_min_ranks) in process on n = 9..33 ranks, 4 per
 * simulated host: each rank's connections are exactly the set core/layout.h defines (computed
 * here again from the definition, symmetric, and every rank when the mode is off); the calls
 * with an algorithm over them (recursive-doubling all_reduce, Bruck all_gather and all_to_all,
 * binomial-tree broadcast, van de Geijn broadcast above bcast_tree_max_bytes, gather, scatter
 * and reduce (the canonical tree toward the root) from several roots, recursive-halving
 * reduce_scatter, Rabenseifner all_reduce, dissemination barrier) match tests/ref.c bitwise, in
 * place and not, at ragged counts; a send or receive naming a rank without a connection returns
 * ZC_UNSUPPORTED with a sentence naming overlay mode and leaves the communicator usable. */
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
    cfg.inproc_ranks_per_host = OV_PER_HOST;
    zt_inproc_open(&cfg, g->arenas, g->c);
}

/* Whether q is one of rank r's connections, from the definition (layout.h): r +- 2^k mod n,
 * the recursive-doubling partners of the folded virtual ranks, the fold partner, r's host. */
static bool ov_member(uint32_t n, uint32_t r, uint32_t q) {
    uint32_t P = 1, e;
    while (P * 2u <= n) P *= 2u;
    e = n - P;
    if (q == r || q / OV_PER_HOST == r / OV_PER_HOST) return true;
    for (uint32_t d = 1; d < n; d *= 2u)
        if (q == (r + d) % n || q == (r + n - d) % n) return true;
    if (r < 2u * e && q == (r ^ 1u)) return true;
    bool folded = r < 2u * e && (r & 1u);
    if (folded) return false;
    uint32_t u = r < 2u * e ? r / 2u : r - e;
    for (uint32_t d = 1; d < P; d *= 2u) {
        uint32_t v = u ^ d, real = v < e ? 2u * v : v + e;
        if (q == real) return true;
    }
    return false;
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

/* A call without a way over the overlay: ZC_UNSUPPORTED with the sentence on rank 0. */
static void ov_refused(ov_group *g, zc_status st) {
    ZT_CHECK_ST(st, ZC_UNSUPPORTED);
    ZT_CHECK(strstr(zc_comm_error_text(g->c[0]), "overlay mode") != NULL);
}

static void ov_unsupported(ov_group *g) {
    zc_comm *c = g->c[0];
    uint32_t n = g->n;
    static int32_t a[OV_MAXR * 64];
    zc_req q;
    uint32_t far = 0;
    for (uint32_t p = 1; p < n && !far; p++)
        if (c->conn[p] == ZC_NO_CONN) far = p;
    ZT_CHECK(far != 0);
    ov_refused(g, zc_send(c, a, 4, ZC_INT32, far, &q));
    ov_refused(g, zc_recv(c, a, 4, ZC_INT32, far, &q));
    ZT_CHECK(strstr(zc_comm_error_text(c), "not one of them") != NULL);
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
    ov_unsupported(&g);
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
    cfg.transport = ZC_TRANSPORT_SHM; /* processes: the wires connect every rank */
    ZT_CHECK(!zc__config_check(&cfg, why, sizeof why));
    ZT_CHECK(strstr(why, "in-process") != NULL);
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.nranks = ZC_MESH_MAX_RANKS + 1u;
    cfg.overlay_min_ranks = 0; /* a full mesh this large is refused */
    ZT_CHECK(!zc__config_check(&cfg, why, sizeof why));
    cfg.overlay_min_ranks = 9;
    ZT_CHECK(zc__config_check(&cfg, why, sizeof why));
    cfg.nranks = ZC_MAX_RANKS;
    ZT_CHECK(zc_comm_arena_bytes(&cfg) > 0);
}
