/* test_logalg.c: the log-depth host algorithms (recursive-doubling all_reduce and its
 * hierarchical form over blocks of ranks that share a simulated host, Bruck
 * all_gather and all_to_all, binomial gather and scatter, reduce down the canonical tree and van
 * de Geijn broadcast from every root) forced by
 * cfg->log_min_ranks (the binomial tree by overlay mode, cfg->overlay_min_ranks), in process on n = 1..17, 31, 33 and 64 ranks: every
 * dtype x op, ragged counts (fewer than n, not divisible by n, several accumulator chunks), in
 * place and not; each result checked bitwise against tests/ref.c (the canonical reduction order)
 * and against the same call on a group that runs today's algorithms (one-shot, reduce-scatter
 * + all-gather, direct). The test build's message hook (zc__test_forge) sees every message:
 * the forced algorithm is the one that ran, and each rank sent to at most ceil(log2 n) + 1
 * peers; Bruck's and the binomial tree's only at ring distances 2^k. */
#include "zt.h"

#define ZC_TEST_HOOKS 1 /* zc__test_forge's declaration; zctest links its definition */
#include "../core/engine.h"
#include "ref.h"
#include "zcoll.h"

#include <stdlib.h>
#include <string.h>

#define LA_MAXR 64u

typedef struct la_group {
    uint32_t n;
    void *arenas[LA_MAXR];
    zc_comm *c[LA_MAXR];
} la_group;

/* What the hook saw since la_seen_reset: per sending rank, the peers it sent to; every
 * message's algorithm. */
static struct {
    zc_comm *const *group; /* the group watched (NULL: none) */
    uint32_t n;
    uint64_t peers[LA_MAXR]; /* bitmaps */
    uint32_t algs;           /* bitmap of 1 << alg */
} la_seen;

static void la_hook(const zc_comm *c, uint32_t peer, zc__hdr *h, uint8_t *payload) {
    (void)payload;
    for (uint32_t r = 0; la_seen.group && r < la_seen.n; r++) {
        if (la_seen.group[r] != c) continue;
        la_seen.peers[r] |= 1ull << peer;
        la_seen.algs |= 1u << h->alg;
    }
}

static void la_seen_reset(const la_group *g) {
    memset(&la_seen, 0, sizeof la_seen);
    la_seen.group = g->c;
    la_seen.n = g->n;
}

/* A group of n ranks over slots of slot_bytes; all_reduce of at most small_max bytes takes
 * the small-message algorithm (one-shot, or recursive doubling from log_min_ranks ranks). */
static void la_open(la_group *g, uint32_t n, uint32_t slot_bytes, uint64_t small_max,
                    uint32_t log_min_ranks) {
    zc_config cfg;
    memset(g, 0, sizeof *g);
    g->n = n;
    zr_group_config(&cfg, n, slot_bytes, 2, small_max, 0);
    cfg.log_min_ranks = log_min_ranks;
    zt_inproc_open(&cfg, g->arenas, g->c);
}

/* la_open with per_host ranks on each simulated host (0: one host) and in overlay mode or not:
 * with every rank its own host, the binomial gather and scatter, recursive halving and
 * Rabenseifner run in overlay mode (a full mesh keeps the direct ones); with blocks of ranks
 * on one host (zc__host_blocks), the hierarchical all_reduce runs, in either mode. */
static void la_open_hosts(la_group *g, uint32_t n, uint32_t slot_bytes, uint64_t small_max,
                          uint32_t per_host, bool overlay) {
    zc_config cfg;
    memset(g, 0, sizeof *g);
    g->n = n;
    zr_group_config(&cfg, n, slot_bytes, 2, small_max, 0);
    cfg.log_min_ranks = 1;
    cfg.overlay_min_ranks = overlay ? 1u : 0u;
    cfg.inproc_ranks_per_host = per_host;
    zt_inproc_open(&cfg, g->arenas, g->c);
}

static void la_open_overlay(la_group *g, uint32_t n, uint32_t slot_bytes, uint64_t small_max) {
    la_open_hosts(g, n, slot_bytes, small_max, 1, true);
}

static void la_close(la_group *g) { zt_inproc_close(g->n, g->arenas, g->c); }

/* Runs case k on every rank of g: work[r] a fresh copy of send[r], results in work or recv. */
static void la_run(la_group *g, const zr_case *k, uint8_t *const *send, uint8_t **work,
                   uint8_t **recv, size_t bb) {
    zc_req reqs[LA_MAXR];
    for (uint32_t r = 0; r < g->n; r++) {
        memcpy(work[r], send[r], bb);
        memset(recv[r], 0xA5, bb);
        zc_status st = zr_issue(k, g->c[r], r, work[r], recv[r], &reqs[r]);
        if (st != ZC_OK) printf("    rank %u: %s\n", r, zc_comm_error_text(g->c[r]));
        ZT_CHECK_ST(st, ZC_OK);
    }
    for (uint32_t r = 0; r < g->n; r++) {
        zc_status st = zc_wait(g->c[r], &reqs[r]);
        if (st != ZC_OK) printf("    rank %u: %s\n", r, zc_comm_error_text(g->c[r]));
        ZT_CHECK_ST(st, ZC_OK);
    }
}

static void la_check(const char *what, const zr_case *k, uint32_t r, const uint8_t *got,
                     const uint8_t *want, size_t bytes) {
    size_t i = zr_first_diff(got, want, bytes);
    if (i == bytes) return;
    char d[256], c[128];
    zr_describe(k, c, sizeof c);
    snprintf(d, sizeof d, "%s: %s differs at rank %u byte %zu of %zu (seed %llu)", what, c, r, i,
             bytes, (unsigned long long)zt_seed());
    zt_fail(__FILE__, __LINE__, "memcmp(got, want) == 0", d);
}

static uint32_t la_ceil_log2(uint32_t n) {
    uint32_t l = 0;
    while ((1u << l) < n) l++;
    return l;
}

static bool la_pow2(uint32_t d) { return d && (d & (d - 1u)) == 0; }

/* Every message the hook saw went to a ring-distance peer: (peer - rank) mod n or (rank - peer)
 * mod n a power of two (relative to a root the same: both ranks shift by it). */
static void la_check_ring(uint32_t n) {
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t p = 0; p < n; p++) {
            if (!(la_seen.peers[r] >> p & 1u)) continue;
            bool ok = la_pow2((p + n - r) % n) || la_pow2((r + n - p) % n);
            if (!ok) printf("    rank %u sent to rank %u of %u: not at a ring distance 2^k\n", r,
                            p, n);
            ZT_CHECK(ok);
        }
}

/* Whether p is in (b) or (c) of the overlay of n ranks at rank r, written from its definition:
 * P the largest power of two <= n, e = n - P; ranks 2i, 2i+1 (i < e) fold into virtual rank i
 * (2i+1 is folded), rank m >= 2e is virtual m - e; (b) the real ranks of u ^ 2^k for a rank
 * with a virtual rank u, (c) r ^ 1 for r < 2e. */
static bool la_overlay_bc(uint32_t n, uint32_t r, uint32_t p) {
    uint32_t P = 1;
    while (P * 2u <= n) P *= 2u;
    uint32_t e = n - P;
    if (p == r) return false;
    if (r < 2u * e && p == (r ^ 1u)) return true;
    if (r < 2u * e && (r & 1u)) return false;
    uint32_t u = r < 2u * e ? r / 2u : r - e;
    for (uint32_t d = 1; d < P; d *= 2u) {
        uint32_t q = u ^ d;
        if (p == (q < e ? 2u * q : q + e)) return true;
    }
    return false;
}

/* Whether rank r of n may send to p under the hierarchical all_reduce over blocks of q ranks:
 * a rank of its own block, or between two leaders (a block's first rank) the overlay's (b) or
 * (c) of the n / q blocks. */
static bool la_hrd_peer(uint32_t n, uint32_t q, uint32_t r, uint32_t p) {
    if (p / q == r / q) return p != r;
    return r % q == 0 && p % q == 0 && la_overlay_bc(n / q, r / q, p / q);
}

/* Case k on the log group (alg expected) and on the direct group: both equal the reference
 * bitwise; the log group's messages came from alg only, to few peers (for RH and Rabenseifner:
 * only to overlay peers (b) and (c)). */
static void la_case(la_group *lg, la_group *dg, const zr_case *k, uint32_t alg, uint64_t seed) {
    uint32_t n = lg->n;
    size_t bb = zr_buf_bytes(k);
    uint8_t *send[LA_MAXR], *work[LA_MAXR], *recv[LA_MAXR], *want[LA_MAXR], *other[LA_MAXR];
    for (uint32_t r = 0; r < n; r++) {
        send[r] = malloc(bb), work[r] = malloc(bb), recv[r] = malloc(bb);
        want[r] = malloc(bb), other[r] = malloc(bb);
        zr_fill(send[r], n * k->count, k->t, seed, r, 0);
        memset(want[r], 0xA5, bb);
    }
    for (uint32_t r = 0; r < n; r++) zr_want(k, send, r, want[r]);
    la_seen_reset(lg);
    la_run(lg, k, send, work, recv, bb);
    uint32_t algs = la_seen.algs;
    uint64_t most_peers = 0;
    uint32_t outside = 0;
    for (uint32_t r = 0; r < n; r++) {
        uint64_t pc = (uint64_t)__builtin_popcountll(la_seen.peers[r]);
        most_peers = pc > most_peers ? pc : most_peers;
        for (uint32_t p = 0; p < n && (alg == ZC_ALG_RH || alg == ZC_ALG_RAB ||
                                       alg == ZC_ALG_VTREE); p++)
            if (la_seen.peers[r] >> p & 1u && !la_overlay_bc(n, r, p)) {
                printf("    rank %u sent to %u, not an overlay peer (b)+(c)\n", r, p);
                outside++;
            }
        for (uint32_t p = 0, q = lg->c[0]->hblock; p < n && alg == ZC_ALG_HRD; p++)
            if (la_seen.peers[r] >> p & 1u && !la_hrd_peer(n, q, r, p)) {
                printf("    rank %u sent to %u: not in its block of %u, nor a leaders' peer\n",
                       r, p, q);
                outside++;
            }
    }
    ZT_CHECK_EQ(outside, 0);
    la_seen.group = NULL;
    size_t bytes;
    for (uint32_t r = 0; r < n; r++) {
        const uint8_t *got = zr_result(k, r, work[r], recv[r], &bytes);
        la_check("log-depth vs reference", k, r, got, want[r], bytes);
        memcpy(other[r], got, bytes);
    }
    la_run(dg, k, send, work, recv, bb);
    for (uint32_t r = 0; r < n; r++) {
        const uint8_t *got = zr_result(k, r, work[r], recv[r], &bytes);
        la_check("direct vs reference", k, r, got, want[r], bytes);
        la_check("log-depth vs direct", k, r, other[r], got, bytes);
    }
    if (n > 1 && k->count) {
        if (algs != 1u << alg) printf("    algorithms seen 0x%x, want 1 << %u\n", algs, alg);
        ZT_CHECK_EQ(algs, 1u << alg);
        /* van de Geijn sends to its children (+2^j) and Bruck's peers (-2^k) */
        ZT_CHECK(most_peers <= (alg == ZC_ALG_SCAG ? 2u : 1u) * la_ceil_log2(n) + 1u);
        ZT_CHECK(most_peers >= 1u || (alg == ZC_ALG_VTREE && n == 1));
        if (alg == ZC_ALG_BRUCK || alg == ZC_ALG_BINOMIAL || alg == ZC_ALG_SCAG)
            la_check_ring(n);
    }
    for (uint32_t r = 0; r < n; r++)
        free(send[r]), free(work[r]), free(recv[r]), free(want[r]), free(other[r]);
}

/* Counts that matter at n ranks and slots of 256 bytes: fewer than n, not divisible by n, and
 * several accumulator chunks (a 256-byte slot holds 64 fp32 accumulators). */
static size_t la_count(uint32_t n, uint32_t i) {
    const size_t counts[] = {1, 2, 3, (size_t)n + 1u, 2u * n + 3u, 63, 64, 65, 200, 517};
    size_t c = counts[i % (sizeof counts / sizeof counts[0])];
    return c ? c : 1;
}

/* Gather and scatter from every root (binomial), all_to_all (Bruck, which zc__choose takes up
 * to blocks of 1 KiB): dtypes of 1, 2, 4 and 8 bytes in turn, ragged counts, in place and not,
 * and count 0. */
static void la_sweep_trees(la_group *og, la_group *lg, la_group *dg, zt_rng *rng, bool full,
                           uint32_t *i) {
    static const zc_dtype ts[] = {ZC_UINT8, ZC_FLOAT16, ZC_INT32, ZC_FLOAT64, ZC_BFLOAT16,
                                  ZC_FLOAT32, ZC_INT64, ZC_FP8_E5M2};
    uint32_t n = lg->n, nt = sizeof ts / sizeof ts[0];
    for (uint32_t root = 0; root < n; root++)
        for (int c = 0; c < 2; c++) {
            zc_dtype t = ts[(root * 2u + (uint32_t)c) % nt];
            size_t count = root == 1 ? 0 : la_count(n, (*i)++);
            zr_case k = {c ? ZR_SCATTER : ZR_GATHER, n, count, t, ZC_SUM, root,
                         zt_rng_below(rng, 2)};
            la_case(og, dg, &k, ZC_ALG_BINOMIAL, zt_seed() + *i);
        }
    for (uint32_t j = 0; j < (full ? nt + 1u : 3u); j++) {
        zc_dtype t = ts[(j + n) % nt];
        size_t count = j == 1 ? 0 : la_count(n, (*i)++), most = 1024u / zc_dtype_bytes(t);
        zr_case k = {ZR_A2A, n, count < most ? count : most, t, ZC_SUM, 0, false};
        la_case(lg, dg, &k, ZC_ALG_BRUCK, zt_seed() + *i);
    }
}

/* Reduce (the canonical tree toward the root) and the large broadcast (van de Geijn), forced
 * by overlay mode, from every root: dtype x op in turn, ragged counts (fewer than n, not
 * divisible by n, several chunks), in place and not. */
static void la_sweep_rooted(la_group *og, la_group *rg, la_group *dg, zt_rng *rng, uint32_t *i) {
    uint32_t n = og->n;
    for (uint32_t root = 0; root < n; root++) {
        zc_dtype t = (zc_dtype)((root * 3u + *i) % ZC_DTYPE_COUNT_);
        zc_op op = (zc_op)((root + *i) % ZC_OP_COUNT_);
        size_t count = la_count(n, (*i)++);
        zr_case k = {ZR_REDUCE, n, count, t, op, root, zt_rng_below(rng, 2)};
        la_case(root & 1u ? og : rg, dg, &k, ZC_ALG_VTREE, zt_seed() + *i);
        size_t bc = root == 2 ? 0 : la_count(n, (*i)++) + (root & 1u ? 3u * n : 0u);
        zr_case b = {ZR_BCAST, n, bc, (zc_dtype)((root + *i) % ZC_DTYPE_COUNT_), ZC_SUM, root,
                     zt_rng_below(rng, 2)};
        la_case(rg, dg, &b, ZC_ALG_SCAG, zt_seed() + *i);
    }
}

/* The largest power of two q that divides n and leaves at least two blocks (0: none): with
 * q ranks per simulated host, the blocks of the hierarchical all_reduce. */
static uint32_t la_block(uint32_t n) {
    uint32_t q = 0;
    for (uint32_t b = 2; b <= n / 2u && n % b == 0; b *= 2u) q = b;
    return q;
}

/* The hierarchical all_reduce, forced by q ranks per simulated host (la_block; in overlay
 * mode and in a full mesh, hosts of 3q ranks where they fit: still blocks of q): dtype x op,
 * ragged counts, in place and not. */
static void la_sweep_blocks(la_group *dg, zt_rng *rng, bool full, uint32_t *i) {
    uint32_t n = dg->n, q = la_block(n);
    if (!q) return;
    la_group hg, hog;
    la_open_hosts(&hg, n, 256, 1u << 30, n % (3u * q) == 0 && n > 3u * q ? 3u * q : q, false);
    la_open_hosts(&hog, n, 256, 1u << 30, q, true);
    ZT_CHECK_EQ(hg.c[0]->hblock, q);
    ZT_CHECK_EQ(hog.c[n - 1u]->hblock, q);
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++)
        for (int op = 0; op < ZC_OP_COUNT_; op++) {
            if (!full && zt_rng_below(rng, 4)) continue;
            zr_case k = {ZR_ALLREDUCE, n, la_count(n, (*i)++), (zc_dtype)t, (zc_op)op, 0,
                         zt_rng_below(rng, 2)};
            la_case((t + op) & 1 ? &hog : &hg, dg, &k, ZC_ALG_HRD, zt_seed() + *i);
        }
    la_close(&hg);
    la_close(&hog);
}

static void la_sweep(uint32_t n, bool full) {
    la_group og, lg, dg, rg;
    la_open_overlay(&og, n, 256, 1024);
    la_open(&lg, n, 256, 1u << 30, 1);
    la_open(&dg, n, 256, 1024, 0);
    la_open_overlay(&rg, n, 256, 0); /* all_reduce of count >= n: Rabenseifner; broadcast:
                                      * van de Geijn */
    zc__test_forge = la_hook;
    zt_rng rng = {zt_seed() ^ (n * 7919u)};
    uint32_t i = 0;
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++)
        for (int op = 0; op < ZC_OP_COUNT_; op++) {
            if (!full && zt_rng_below(&rng, 5)) continue;
            bool in_place = zt_rng_below(&rng, 2);
            zr_case k = {ZR_ALLREDUCE, n, la_count(n, i++), (zc_dtype)t, (zc_op)op, 0,
                         in_place};
            la_case(&lg, &dg, &k, ZC_ALG_RD, zt_seed() + i);
        }
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++) {
        if (!full && zt_rng_below(&rng, 3)) continue;
        zr_case k = {ZR_AG, n, la_count(n, i++), (zc_dtype)t, ZC_SUM, 0, zt_rng_below(&rng, 2)};
        la_case(&lg, &dg, &k, ZC_ALG_BRUCK, zt_seed() + i);
    }
    la_sweep_blocks(&dg, &rng, full, &i);
    la_sweep_trees(&og, &lg, &dg, &rng, full, &i);
    la_sweep_rooted(&og, &rg, &dg, &rng, &i);
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++)
        for (int op = 0; op < ZC_OP_COUNT_; op++) {
            if (!full && zt_rng_below(&rng, 4)) continue;
            bool in_place = zt_rng_below(&rng, 2);
            zr_case k = {ZR_RS, n, la_count(n, i++) % 97u, (zc_dtype)t, (zc_op)op, 0, in_place};
            la_case(&og, &dg, &k, ZC_ALG_RH, zt_seed() + i);
            size_t c = la_count(n, i++) + n;
            zr_case a = {ZR_ALLREDUCE, n, c, (zc_dtype)t, (zc_op)op, 0, !in_place};
            la_case(&rg, &dg, &a, ZC_ALG_RAB, zt_seed() + i);
        }
    zc__test_forge = NULL;
    la_close(&og);
    la_close(&lg);
    la_close(&dg);
    la_close(&rg);
}

void logalg_forced_match_reference_and_direct_1_to_9_ranks(void) {
    for (uint32_t n = 1; n <= 9; n++) la_sweep(n, n == 3 || n == 5 || n == 8);
}

void logalg_forced_match_reference_and_direct_10_to_17_ranks(void) {
    for (uint32_t n = 10; n <= 17; n++) la_sweep(n, n == 12 || n == 17);
}

void logalg_forced_match_reference_and_direct_31_33_64_ranks(void) {
    la_sweep(31, false);
    la_sweep(33, true);
    la_sweep(64, false);
}

/* The hierarchical all_reduce's blocks (zc__host_blocks) follow the simulated hosts: the
 * largest power of two q dividing both the ranks per host and n, with at least two blocks;
 * none on one host or with odd hosts. Then every dtype x op at 18 (hosts of 6: blocks of 2,
 * 9 leaders), 24 (8 per host, 3 leaders) and 40 ranks (5 leaders), where the leaders' stage
 * folds, against the reference and the direct algorithms. */
void logalg_hierarchical_all_reduce_blocks_follow_the_hosts(void) {
    static const uint32_t cases[][3] = {/* n, ranks per host, blocks */
                                        {12, 6, 2}, {12, 3, 0}, {12, 4, 4}, {12, 0, 0},
                                        {12, 12, 0}, {20, 8, 4}, {24, 8, 8}, {16, 16, 0},
                                        {16, 8, 8}, {18, 6, 2}, {9, 3, 0}, {64, 16, 16}};
    for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++) {
        la_group g;
        la_open_hosts(&g, cases[j][0], 256, 1024, cases[j][1], j & 1u);
        for (uint32_t r = 0; r < g.n; r++) ZT_CHECK_EQ(g.c[r]->hblock, cases[j][2]);
        la_close(&g);
    }
    static const uint32_t ns[] = {18, 24, 40};
    zc__test_forge = la_hook;
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
        la_group dg;
        zt_rng rng = {zt_seed() ^ ns[j]};
        uint32_t i = 0;
        la_open(&dg, ns[j], 256, 1024, 0);
        la_sweep_blocks(&dg, &rng, true, &i);
        la_close(&dg);
    }
    zc__test_forge = NULL;
}

/* A barrier returns on no rank before every rank entered it: each rank but one enters, every
 * entered rank polls it 64 times (zc_test) and must still be waiting; then the last one enters
 * and every rank's barrier completes. The hierarchical barrier (blocks of q ranks on simulated
 * hosts: one empty message up and down each block's tree, recursive doubling among the
 * leaders, the fold where their count is not a power of two) in a full mesh and in overlay
 * mode, and dissemination (one rank per host); the rank that enters last is a leader, a
 * block's last rank, the last rank or one in the middle. */
void logalg_barrier_returns_only_after_every_rank_entered(void) {
    static const uint32_t ns[] = {6, 12, 24, 40};
    zc__test_forge = la_hook;
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
        uint32_t n = ns[j], q = la_block(n);
        for (int hier = 0; hier < 2; hier++) {
            la_group g;
            la_open_hosts(&g, n, 256, 1024, hier ? q : 1u, j & 1u);
            ZT_CHECK_EQ(g.c[0]->hblock, hier ? q : 0u);
            const uint32_t lates[] = {q, 2u * q - 1u, n - 1u, n / 2u, 0};
            for (size_t k = 0; k < sizeof lates / sizeof lates[0]; k++) {
                uint32_t late = lates[k];
                zc_req reqs[LA_MAXR];
                la_seen_reset(&g);
                for (uint32_t r = 0; r < n; r++)
                    if (r != late) ZT_CHECK_ST(zc_barrier(g.c[r], &reqs[r]), ZC_OK);
                uint32_t early = 0;
                for (int pass = 0; pass < 64; pass++)
                    for (uint32_t r = 0; r < n; r++)
                        if (r != late && zc_test(g.c[r], &reqs[r]) != ZC_IN_PROGRESS) early++;
                if (early) printf("    n=%u blocks %u: %u barrier(s) returned before rank %u "
                                  "entered\n", n, hier ? q : 0u, early, late);
                ZT_CHECK_EQ(early, 0);
                ZT_CHECK_ST(zc_barrier(g.c[late], &reqs[late]), ZC_OK);
                for (uint32_t r = 0; r < n; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r]), ZC_OK);
                ZT_CHECK_EQ(la_seen.algs, 1u << (hier ? ZC_ALG_HRD : ZC_ALG_DISSEM));
                for (uint32_t r = 0; hier && r < n; r++)
                    for (uint32_t p = 0; p < n; p++)
                        ZT_CHECK(!(la_seen.peers[r] >> p & 1u) || la_hrd_peer(n, q, r, p));
            }
            la_close(&g);
        }
    }
    zc__test_forge = NULL;
}

/* The defaults: today's algorithms up to 8 ranks, the log-depth ones from 9. */
void logalg_default_choice_switches_at_nine_ranks(void) {
    for (uint32_t n = 8; n <= 9; n++) {
        la_group g;
        zc_config cfg;
        zc_config_default(&cfg);
        ZT_CHECK_EQ(cfg.log_min_ranks, ZC_DEFAULT_LOG_MIN_RANKS);
        la_open(&g, n, 256, 1024, ZC_DEFAULT_LOG_MIN_RANKS);
        zc__test_forge = la_hook;
        la_seen_reset(&g);
        float in[LA_MAXR][4], out[LA_MAXR][4];
        zc_req reqs[LA_MAXR];
        for (uint32_t r = 0; r < n; r++) {
            for (int j = 0; j < 4; j++) in[r][j] = (float)(r + 1u) * 0.5f + (float)j;
            ZT_CHECK_ST(zc_allreduce(g.c[r], in[r], out[r], 4, ZC_FLOAT32, ZC_MAX, &reqs[r]),
                        ZC_OK);
        }
        for (uint32_t r = 0; r < n; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r]), ZC_OK);
        for (uint32_t r = 0; r < n; r++) ZT_CHECK(out[r][3] == (float)n * 0.5f + 3.0f);
        ZT_CHECK_EQ(la_seen.algs, 1u << (n == 8 ? ZC_ALG_ONESHOT : ZC_ALG_RD));
        zc__test_forge = NULL;
        la_close(&g);
    }
}

/* k seeded counts of 1..most elements, one per call in flight. */
static void la_counts(size_t *cnt, int k, size_t most) {
    zt_rng rng = {zt_seed()};
    for (int i = 0; i < k; i++) cnt[i] = 1 + (size_t)zt_rng_below(&rng, most);
}

/* Many calls in flight on 13 ranks, mixing recursive doubling, Bruck and a broadcast, waited in
 * reverse order: a call's messages numbered after another's on a channel never confuse it
 * (Bruck once took a later call's messages for its own and waited forever). */
void logalg_concurrent_calls_complete_in_any_wait_order(void) {
    enum { N = 13, K = 12, MAXC = 700 };
    la_group g;
    la_open(&g, N, 256, 4096, 2);
    static int32_t in[N][K][MAXC], out[N][K][N * MAXC];
    zc_req reqs[N][K];
    size_t cnt[K];
    la_counts(cnt, K, MAXC);
    for (uint32_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++) {
            for (size_t i = 0; i < cnt[k]; i++) in[r][k][i] = (int32_t)(r * 100000u + (uint32_t)i);
            zc_status st = k % 3 == 0 ? zc_allreduce(g.c[r], in[r][k], out[r][k], cnt[k], ZC_INT32,
                                                     ZC_SUM, &reqs[r][k])
                           : k % 3 == 1 ? zc_allgather(g.c[r], in[r][k], out[r][k], cnt[k],
                                                       ZC_INT32, &reqs[r][k])
                                        : zc_broadcast(g.c[r], in[r][k], out[r][k], cnt[k],
                                                       ZC_INT32, (uint32_t)k % N, &reqs[r][k]);
            ZT_CHECK_ST(st, ZC_OK);
        }
    for (int k = K - 1; k >= 0; k--)
        for (uint32_t r = 0; r < N; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r][k]), ZC_OK);
    for (uint32_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < cnt[k]; i++) {
                if (k % 3 == 0) /* sum over ranks of r * 100000 + i */
                    ZT_CHECK_EQ(out[r][k][i], (int32_t)(78u * 100000u + N * (uint32_t)i));
                else if (k % 3 == 1)
                    for (uint32_t p = 0; p < N; p++)
                        ZT_CHECK_EQ(out[r][k][p * cnt[k] + i], in[p][k][i]);
                else
                    ZT_CHECK_EQ(out[r][k][i], in[(uint32_t)k % N][k][i]);
            }
    la_close(&g);
}

/* Gathers and scatters from different roots, all_to_alls and all_gathers in flight together
 * on 13 ranks, waited in reverse order: each call's streams through the binomial tree and
 * Bruck's rounds take only their own messages. */
void logalg_tree_and_bruck_calls_in_flight_complete_in_any_wait_order(void) {
    enum { N = 13, K = 12, MAXC = 300 };
    la_group g;
    la_open_overlay(&g, N, 256, 1024);
    static int32_t in[N][K][N * MAXC], out[N][K][N * MAXC];
    zc_req reqs[N][K];
    size_t cnt[K];
    la_counts(cnt, K, MAXC);
    for (uint32_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++) {
            uint32_t root = (uint32_t)(k * 5) % N;
            for (size_t i = 0; i < N * cnt[k]; i++)
                in[r][k][i] = (int32_t)(r * 1000000u + (uint32_t)(k * 50000) + (uint32_t)i);
            memset(out[r][k], 0, sizeof out[r][k]);
            zc_status st = k % 4 == 0 ? zc_gather(g.c[r], in[r][k], out[r][k], cnt[k], ZC_INT32,
                                                  root, &reqs[r][k])
                           : k % 4 == 1 ? zc_scatter(g.c[r], in[r][k], out[r][k], cnt[k],
                                                     ZC_INT32, root, &reqs[r][k])
                           : k % 4 == 2 ? zc_alltoall(g.c[r], in[r][k], out[r][k], cnt[k],
                                                      ZC_INT32, &reqs[r][k])
                                        : zc_allgather(g.c[r], in[r][k], out[r][k], cnt[k],
                                                       ZC_INT32, &reqs[r][k]);
            ZT_CHECK_ST(st, ZC_OK);
        }
    for (int k = K - 1; k >= 0; k--)
        for (uint32_t r = 0; r < N; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r][k]), ZC_OK);
    for (uint32_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++) {
            uint32_t root = (uint32_t)(k * 5) % N;
            size_t c = cnt[k];
            for (uint32_t p = 0; p < N; p++)
                for (size_t i = 0; i < c; i++) {
                    int32_t got = out[r][k][p * c + i];
                    if (k % 4 == 0 && r == root) ZT_CHECK_EQ(got, in[p][k][i]);
                    if (k % 4 == 1 && p == 0) ZT_CHECK_EQ(got, in[root][k][r * c + i]);
                    if (k % 4 == 2) ZT_CHECK_EQ(got, in[p][k][r * c + i]);
                    if (k % 4 == 3) ZT_CHECK_EQ(got, in[p][k][i]);
                }
        }
    la_close(&g);
}

/* Rabenseifner all_reduce and recursive-halving reduce_scatter, several calls in flight on 13
 * ranks (a folded pair, ragged blocks, a count of 0 among them), waited in reverse order. */
void logalg_rh_rab_concurrent_calls_match_sums(void) {
    enum { N = 13, K = 8, MAXC = 600 };
    la_group g;
    la_open_overlay(&g, N, 256, 0);
    static int32_t in[N][K][N * MAXC], out[N][K][N * MAXC];
    zc_req reqs[N][K];
    zt_rng rng = {zt_seed() ^ 0x5eed};
    size_t cnt[K];
    for (int k = 0; k < K; k++) cnt[k] = k == 3 ? 0 : N + (size_t)zt_rng_below(&rng, MAXC - N);
    for (uint32_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++) {
            for (size_t i = 0; i < N * cnt[k]; i++) in[r][k][i] = (int32_t)(r * 1000u + (uint32_t)i);
            zc_status st = k % 2 ? zc_reduce_scatter(g.c[r], in[r][k], out[r][k], cnt[k],
                                                     ZC_INT32, ZC_SUM, &reqs[r][k])
                                 : zc_allreduce(g.c[r], in[r][k], out[r][k], cnt[k], ZC_INT32,
                                                ZC_SUM, &reqs[r][k]);
            ZT_CHECK_ST(st, ZC_OK);
        }
    for (int k = K - 1; k >= 0; k--)
        for (uint32_t r = 0; r < N; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r][k]), ZC_OK);
    for (uint32_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < cnt[k]; i++) { /* sum over ranks of p * 1000 + element */
                size_t at = k % 2 ? r * cnt[k] + i : i;
                ZT_CHECK_EQ(out[r][k][i], (int32_t)(78u * 1000u + N * (uint32_t)at));
            }
    la_close(&g);
}

/* Reduce toward every root on inputs whose sum in the rank tree differs from the linear order's
 * (zr_fill_order, fp32 on 5, 7 and 8 ranks: folded pairs and none): the canonical tree's steps
 * toward the root give the reference's bits at every root, with recv NULL off the root. */
void logalg_vtree_reduce_keeps_the_tree_order_at_every_root(void) {
    enum { CNT = 24 };
    static const uint32_t ns[] = {5, 7, 8};
    for (uint32_t ni = 0; ni < 3; ni++) {
        uint32_t n = ns[ni];
        la_group g;
        la_open_overlay(&g, n, 256, 1024);
        float in[8][CNT], out[CNT], want[CNT], lin[CNT];
        uint8_t *ins[8];
        for (uint32_t r = 0; r < n; r++) {
            ZT_CHECK(zr_fill_order(in[r], CNT, n, r));
            ins[r] = (uint8_t *)in[r];
        }
        zr_reduce((uint8_t *)want, ins, n, CNT, ZC_FLOAT32, ZC_SUM);
        bool differs = false;
        for (uint32_t i = 0; i < CNT; i++) {
            lin[i] = 0;
            for (uint32_t r = 0; r < n; r++) lin[i] += in[r][i];
            differs = differs || memcmp(&lin[i], &want[i], sizeof lin[i]) != 0;
        }
        ZT_CHECK(differs); /* the inputs tell the orders apart */
        zc__test_forge = la_hook;
        for (uint32_t root = 0; root < n; root++) {
            zc_req reqs[8];
            la_seen_reset(&g);
            memset(out, 0xA5, sizeof out);
            for (uint32_t r = 0; r < n; r++)
                ZT_CHECK_ST(zc_reduce(g.c[r], in[r], r == root ? out : NULL, CNT, ZC_FLOAT32,
                                      ZC_SUM, root, &reqs[r]), ZC_OK);
            for (uint32_t r = 0; r < n; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r]), ZC_OK);
            ZT_CHECK_EQ(la_seen.algs, 1u << ZC_ALG_VTREE);
            ZT_CHECK(memcmp(out, want, sizeof out) == 0);
        }
        zc__test_forge = NULL;
        la_close(&g);
    }
}

/* Reduces down the canonical tree and van de Geijn broadcasts from different roots in flight
 * together on 13 ranks (a folded pair, ragged blocks, a count of 0 among them), waited in
 * reverse order: each call's streams take only their own messages. */
void logalg_vtree_scag_concurrent_calls_match(void) {
    enum { N = 13, K = 8, MAXC = 700 };
    la_group g;
    la_open_overlay(&g, N, 256, 0);
    static int32_t in[N][K][MAXC], out[N][K][MAXC];
    zc_req reqs[N][K];
    size_t cnt[K];
    la_counts(cnt, K, MAXC);
    cnt[5] = 0;
    for (uint32_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++) {
            uint32_t root = (uint32_t)(k * 5 + 1) % N;
            for (size_t i = 0; i < cnt[k]; i++) in[r][k][i] = (int32_t)(r * 1000u + (uint32_t)i);
            memset(out[r][k], 0, sizeof out[r][k]);
            zc_status st = k % 2 ? zc_broadcast(g.c[r], in[r][k], out[r][k], cnt[k], ZC_INT32,
                                                root, &reqs[r][k])
                                 : zc_reduce(g.c[r], in[r][k], out[r][k], cnt[k], ZC_INT32,
                                             ZC_SUM, root, &reqs[r][k]);
            ZT_CHECK_ST(st, ZC_OK);
        }
    for (int k = K - 1; k >= 0; k--)
        for (uint32_t r = 0; r < N; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r][k]), ZC_OK);
    for (uint32_t r = 0; r < N; r++)
        for (int k = 0; k < K; k++) {
            uint32_t root = (uint32_t)(k * 5 + 1) % N;
            for (size_t i = 0; i < cnt[k]; i++) {
                if (k % 2) ZT_CHECK_EQ(out[r][k][i], in[root][k][i]);
                else if (r == root) /* sum over ranks of p * 1000 + i */
                    ZT_CHECK_EQ(out[r][k][i], (int32_t)(78u * 1000u + N * (uint32_t)i));
            }
        }
    la_close(&g);
}
