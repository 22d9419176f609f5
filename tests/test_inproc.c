/* test_inproc.c: the engine with all ranks in one process (zc_comm_init_inproc), progressed in
 * turn by this thread: seeded sweeps of every collective against a plain reference for up to
 * 64 ranks, bitwise identity across algorithm thresholds and chunk sizes, misuse, timeouts and
 * split. Inputs are a function of (seed, rank, index) and the reference is tests/ref.c, the one
 * the bare-metal image (tests/baremetal/) checks against too. */
#include "zt.h"
#include "zcoll.h"
#include "ref.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXR 64

typedef struct group {
    uint32_t n;
    zc_config cfg;
    void *arenas[MAXR];
    zc_comm *c[MAXR];
} group;

static void group_open(group *g, uint32_t n, uint32_t slot_bytes, uint32_t slots,
                       uint64_t oneshot_max, uint64_t timeout_ns) {
    memset(g, 0, sizeof *g);
    g->n = n;
    zr_group_config(&g->cfg, n, slot_bytes, slots, oneshot_max, timeout_ns);
    size_t bytes = zc_comm_arena_bytes(&g->cfg);
    ZT_CHECK(bytes > 0);
    for (uint32_t r = 0; r < n; r++) ZT_CHECK((g->arenas[r] = aligned_alloc(64, bytes)) != NULL);
    zc_status st = zc_comm_init_inproc(&g->cfg, g->arenas, bytes, g->c);
    if (st != ZC_OK) printf("    init: %s\n", zc_init_error_text());
    ZT_CHECK_ST(st, ZC_OK);
    for (uint32_t r = 0; r < n; r++) {
        ZT_CHECK_EQ(zc_comm_rank(g->c[r]), r);
        ZT_CHECK_EQ(zc_comm_size(g->c[r]), n);
    }
}

static void group_close(group *g) {
    for (uint32_t r = 0; r < g->n; r++) {
        ZT_CHECK_ST(zc_comm_fini(g->c[r]), ZC_OK);
        free(g->arenas[r]);
    }
}

/* Waits every rank's request; each must end with want. */
static void wait_all(group *g, zc_req *reqs, zc_status want) {
    for (uint32_t r = 0; r < g->n; r++) {
        zc_status st = zc_wait(g->c[r], &reqs[r]);
        if (st != want) printf("    rank %u: %s: %s\n", r, zc_status_name(st),
                               zc_comm_error_text(g->c[r]));
        ZT_CHECK_ST(st, want);
    }
}

static void check_bytes(const void *got, const void *want, size_t bytes, const char *what,
                        uint32_t rank) {
    size_t i = zr_first_diff(got, want, bytes);
    if (i == bytes) return;
    char d[160];
    snprintf(d, sizeof d, "%s differs at rank %u byte %zu of %zu (seed %llu)", what, rank, i,
             bytes, (unsigned long long)zt_seed());
    zt_fail(__FILE__, __LINE__, "memcmp(got, want) == 0", d);
}

/* ---- one collective on every rank against the reference (tests/ref.c) ---- */

typedef struct bufs {
    uint8_t *send[MAXR], *recv[MAXR], *want[MAXR];
} bufs;

/* Runs collective c with count elements (per block where blocked) on every rank of g; inputs
 * are zr_fill's of seed, or with order (fp32 on 4, 5, 7 or 8 ranks) zr_fill_order's. */
static void run_case(group *g, zr_coll c, size_t count, zc_dtype t, zc_op op, uint32_t root,
                     bool in_place, uint64_t seed, bool order) {
    const zr_case k = {c, g->n, count, t, op, root, in_place};
    uint32_t n = g->n;
    size_t bb = zr_buf_bytes(&k);
    bufs b;
    zc_req reqs[MAXR];
    for (uint32_t r = 0; r < n; r++) {
        b.send[r] = malloc(bb);
        b.recv[r] = malloc(bb);
        b.want[r] = malloc(bb);
        if (order) ZT_CHECK(t == ZC_FLOAT32 && zr_fill_order((float *)(void *)b.send[r],
                                                             n * count, n, r));
        else zr_fill(b.send[r], n * count, t, seed, r, 0);
        memset(b.recv[r], 0xA5, bb);
        memset(b.want[r], 0xA5, bb);
    }
    for (uint32_t r = 0; r < n; r++) zr_want(&k, b.send, r, b.want[r]);
    for (uint32_t r = 0; r < n; r++) {
        zc_status st = zr_issue(&k, g->c[r], r, b.send[r], b.recv[r], &reqs[r]);
        if (st != ZC_OK) printf("    %s rank %u: %s\n", zr_coll_name(c), r,
                                zc_comm_error_text(g->c[r]));
        ZT_CHECK_ST(st, ZC_OK);
    }
    wait_all(g, reqs, ZC_OK);
    for (uint32_t r = 0; r < n; r++) {
        size_t bytes;
        const uint8_t *got = zr_result(&k, r, b.send[r], b.recv[r], &bytes);
        char what[128];
        zr_describe(&k, what, sizeof what);
        check_bytes(got, b.want[r], bytes, what, r);
    }
    for (uint32_t r = 0; r < n; r++) free(b.send[r]), free(b.recv[r]), free(b.want[r]);
}

static void run_one(group *g, zr_coll c, size_t count, zc_dtype t, zc_op op, uint32_t root,
                    bool in_place, uint64_t seed) {
    run_case(g, c, count, t, op, root, in_place, seed, false);
}

static void sweep(uint32_t n, uint32_t rounds, uint32_t slot_bytes, uint64_t oneshot_max) {
    group g;
    group_open(&g, n, slot_bytes, 4, oneshot_max, 0);
    zt_rng rng = {zt_seed() ^ n};
    for (uint32_t i = 0; i < rounds; i++) {
        zr_coll c = (zr_coll)zt_rng_below(&rng, ZR_COUNT);
        zc_dtype t = (zc_dtype)zt_rng_below(&rng, ZC_DTYPE_COUNT_);
        zc_op op = (zc_op)zt_rng_below(&rng, ZC_OP_COUNT_);
        size_t count = (size_t)zt_rng_below(&rng, 4) == 0 ? 0 : zt_rng_below(&rng, 3000);
        uint32_t root = (uint32_t)zt_rng_below(&rng, n);
        bool in_place = c != ZR_A2A && zt_rng_below(&rng, 2);
        run_one(&g, c, count, t, op, root, in_place, zt_seed() + i);
    }
    group_close(&g);
}

void inproc_every_collective_matches_reference_small_groups(void) {
    for (uint32_t n = 1; n <= 5; n++) sweep(n, 120, 256, 1024);
}

void inproc_every_collective_matches_reference_large_groups(void) {
    sweep(9, 40, 512, 4096);
    sweep(17, 20, 1024, 0);
    sweep(64, 12, 256, 1u << 20);
}

/* tests/ref.c's full sweep (every collective x dtype x op, in place and not), the one the
 * bare-metal image runs, on 8 ranks and both sides of the small-message thresholds. */
void inproc_full_sweep_of_every_collective_dtype_op_on_8_ranks(void) {
    static const size_t counts[] = {0, 1, 3, 17, 61, 130, 257};
    zr_case k;
    ZT_CHECK(zr_sweep_case(ZR_SWEEP_CASES - 1, 8, counts, 7, &k));
    ZT_CHECK(!zr_sweep_case(ZR_SWEEP_CASES, 8, counts, 7, &k));
    const struct { uint32_t slot; uint64_t small_max; } geoms[] = {{256, 1024}, {1024, 0}};
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        group g;
        group_open(&g, 8, geoms[gi].slot, 4, geoms[gi].small_max, 0);
        for (uint32_t i = 0; zr_sweep_case(i, 8, counts, 7, &k); i++)
            run_one(&g, k.c, k.count, k.t, k.op, k.root, k.in_place, zt_seed() + i);
        group_close(&g);
    }
}

/* On inputs where the rank tree's fp32 sum differs from the linear order's (checked here),
 * all_reduce one-shot and reduce-scatter + all-gather, reduce (direct and tree) and
 * reduce_scatter give the tree's bits (tests/ref.c) on 4, 5, 7 and 8 ranks, in place and not. */
void inproc_reductions_give_the_rank_trees_bits_not_the_linear_orders(void) {
    static const uint32_t ns[] = {4, 5, 7, 8};
    static const zr_coll colls[] = {ZR_ALLREDUCE, ZR_REDUCE, ZR_RS};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        uint32_t n = ns[ni];
        float x[8], tree, linear = 0.0f;
        uint8_t *in[8];
        for (uint32_t r = 0; r < n; r++) {
            ZT_CHECK(zr_fill_order(&x[r], 1, n, r));
            in[r] = (uint8_t *)&x[r];
            linear = r == 0 ? x[0] : linear + x[r];
        }
        zr_reduce((uint8_t *)&tree, in, n, 1, ZC_FLOAT32, ZC_SUM);
        ZT_CHECK(tree != linear);
        for (uint64_t small_max = 0; small_max <= (1u << 20); small_max += 1u << 20) {
            group g;
            group_open(&g, n, 256, 4, small_max, 0);
            for (size_t ci = 0; ci < sizeof colls / sizeof colls[0]; ci++)
                for (int ip = 0; ip < 2; ip++)
                    run_case(&g, colls[ci], 300, ZC_FLOAT32, ZC_SUM, n - 1u, ip, 0, true);
            group_close(&g);
        }
    }
}

/* The same allreduce gives the same bits whatever algorithm, chunk size or rank computes it. */
void inproc_allreduce_bits_identical_across_thresholds_and_chunks(void) {
    enum { n = 5 };
    const size_t count = 5000;
    const zc_dtype types[] = {ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64, ZC_FP8_E4M3};
    const struct { uint32_t slot; uint64_t oneshot; } cfgs[] = {
        {256, 0}, {256, 1u << 30}, {4096, 0}, {65536, 1u << 30}, {1024, 8192}};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        zc_dtype t = types[ti];
        size_t bytes = count * zc_dtype_bytes(t);
        uint8_t *in[n], *ref = malloc(bytes), *first = malloc(bytes);
        for (uint32_t r = 0; r < n; r++) zr_fill(in[r] = malloc(bytes), count, t, 77, r, 0);
        zr_reduce(ref, in, n, count, t, ZC_SUM);
        for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
            group g;
            group_open(&g, n, cfgs[k].slot, 4, cfgs[k].oneshot, 0);
            uint8_t *out[n];
            zc_req reqs[n];
            for (uint32_t r = 0; r < n; r++) {
                out[r] = malloc(bytes);
                ZT_CHECK_ST(zc_allreduce(g.c[r], in[r], out[r], count, t, ZC_SUM, &reqs[r]), ZC_OK);
            }
            wait_all(&g, reqs, ZC_OK);
            for (uint32_t r = 0; r < n; r++) {
                check_bytes(out[r], ref, bytes, zc_dtype_name(t), r);
                if (k == 0 && r == 0) memcpy(first, out[r], bytes);
                check_bytes(out[r], first, bytes, "bits across configurations", r);
                free(out[r]);
            }
            group_close(&g);
        }
        for (uint32_t r = 0; r < n; r++) free(in[r]);
        free(ref), free(first);
    }
}

/* Many requests in flight, waited in reverse order. */
void inproc_sixteen_requests_in_flight_complete_in_any_wait_order(void) {
    group g;
    group_open(&g, 4, 512, 4, 256, 0);
    enum { K = 16, CNT = 700 };
    static float in[4][K][CNT], out[4][K][CNT];
    zc_req reqs[4][K];
    for (uint32_t r = 0; r < 4; r++)
        for (int k = 0; k < K; k++) {
            for (int i = 0; i < CNT; i++) in[r][k][i] = (float)(r * 1000 + (uint32_t)k * 10 + (uint32_t)i % 7);
            ZT_CHECK_ST(zc_allreduce(g.c[r], in[r][k], out[r][k], CNT, ZC_FLOAT32, ZC_MAX,
                                     &reqs[r][k]), ZC_OK);
        }
    for (int k = K - 1; k >= 0; k--)
        for (uint32_t r = 0; r < 4; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r][k]), ZC_OK);
    for (uint32_t r = 0; r < 4; r++)
        for (int k = 0; k < K; k++)
            for (int i = 0; i < CNT; i++) ZT_CHECK(out[r][k][i] == in[3][k][i]);
    group_close(&g);
}

void inproc_pool_exhaustion_is_again_and_recovers(void) {
    group g;
    memset(&g, 0, sizeof g);
    group_open(&g, 2, 256, 2, 0, 0);
    /* A second group with a 2-request pool. */
    group small;
    memset(&small, 0, sizeof small);
    zc_config cfg = g.cfg;
    group_close(&g);
    cfg.max_requests = 2;
    small.n = 2;
    small.cfg = cfg;
    size_t bytes = zc_comm_arena_bytes(&cfg);
    for (int r = 0; r < 2; r++) small.arenas[r] = aligned_alloc(64, bytes);
    ZT_CHECK_ST(zc_comm_init_inproc(&cfg, small.arenas, bytes, small.c), ZC_OK);
    int x[3] = {1, 2, 3}, y[3][2];
    zc_req q[3];
    ZT_CHECK_ST(zc_allreduce(small.c[0], &x[0], &y[0][0], 1, ZC_INT32, ZC_SUM, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_allreduce(small.c[0], &x[1], &y[1][0], 1, ZC_INT32, ZC_SUM, &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_allreduce(small.c[0], &x[2], &y[2][0], 1, ZC_INT32, ZC_SUM, &q[2]), ZC_AGAIN);
    ZT_CHECK(strstr(zc_comm_error_text(small.c[0]), "request slots") != NULL);
    zc_req p[2];
    ZT_CHECK_ST(zc_allreduce(small.c[1], &x[0], &y[0][1], 1, ZC_INT32, ZC_SUM, &p[0]), ZC_OK);
    ZT_CHECK_ST(zc_allreduce(small.c[1], &x[1], &y[1][1], 1, ZC_INT32, ZC_SUM, &p[1]), ZC_OK);
    ZT_CHECK_ST(zc_wait(small.c[0], &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(small.c[0], &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_wait(small.c[1], &p[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(small.c[1], &p[1]), ZC_OK);
    ZT_CHECK_EQ(y[0][0], 2);
    ZT_CHECK_EQ(y[1][1], 4);
    /* The finished handle is stale now. */
    ZT_CHECK_ST(zc_test(small.c[0], &q[0]), ZC_INVALID_ARG);
    group_close(&small);
}

/* zc_wait on a handle whose request finished (at its issue: a non-root's one-message reduce)
 * gives the result once; after that, and for a handle whose slot a later call took over, it
 * says the handle is dead instead of waiting on the later call. */
void inproc_wait_on_a_finished_handle_gives_its_result_once(void) {
    group g;
    group_open(&g, 2, 256, 2, 0, 0);
    int32_t x[2] = {3, 4}, y = 0;
    zc_req q[2], old;
    ZT_CHECK_ST(zc_reduce(g.c[1], &x[1], NULL, 1, ZC_INT32, ZC_SUM, 0, &q[1]), ZC_OK);
    old = q[1];
    ZT_CHECK_ST(zc_wait(g.c[1], &q[1]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[1], &old), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[1]), "not a request in flight") != NULL);
    ZT_CHECK_ST(zc_reduce(g.c[0], &x[0], &y, 1, ZC_INT32, ZC_SUM, 0, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[0], &q[0]), ZC_OK);
    ZT_CHECK_EQ(y, 7);
    /* The next call takes the same slot; the old handle does not name it. */
    ZT_CHECK_ST(zc_reduce(g.c[1], &x[1], NULL, 1, ZC_INT32, ZC_SUM, 0, &q[1]), ZC_OK);
    ZT_CHECK_EQ(q[1].opaque_[0], old.opaque_[0]);
    ZT_CHECK_ST(zc_wait(g.c[1], &old), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc_reduce(g.c[0], &x[0], &y, 1, ZC_INT32, ZC_SUM, 0, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[0], &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_wait(g.c[1], &q[1]), ZC_OK);
    group_close(&g);
}

void inproc_rank_that_never_joins_times_out(void) {
    group g;
    group_open(&g, 3, 256, 2, 0, 150000000ull);
    double x = 1.0, y = 0.0;
    zc_req q[2];
    ZT_CHECK_ST(zc_allreduce(g.c[0], &x, &y, 1, ZC_FLOAT64, ZC_SUM, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_allreduce(g.c[1], &x, &y, 1, ZC_FLOAT64, ZC_SUM, &q[1]), ZC_OK);
    uint32_t t0 = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ZT_CHECK_ST(zc_wait(g.c[0], &q[0]), ZC_TIMED_OUT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    (void)t0;
    ZT_CHECK(ms >= 100 && ms < 2000);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "timed out") != NULL);
    ZT_CHECK(y == 0.0);
    /* The communicator stays failed with the same status. */
    ZT_CHECK_ST(zc_barrier(g.c[0], &q[0]), ZC_TIMED_OUT);
    group_close(&g);
}

void inproc_mismatched_counts_fail_both_ranks(void) {
    group g;
    group_open(&g, 2, 256, 2, 1024, 0);
    int a[20] = {0}, b[20];
    zc_req q[2];
    ZT_CHECK_ST(zc_allreduce(g.c[0], a, b, 10, ZC_INT32, ZC_SUM, &q[0]), ZC_OK);
    ZT_CHECK_ST(zc_allreduce(g.c[1], a, b, 20, ZC_INT32, ZC_SUM, &q[1]), ZC_OK);
    wait_all(&g, q, ZC_MISMATCH);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "sequence 0") != NULL);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "count 20") ||
             strstr(zc_comm_error_text(g.c[1]), "count 10"));
    group_close(&g);
}

/* Calls whose every message is one line (the line steps): every collective and dtype at every
 * count up to the line's 8 bytes and one element past it, in place and not, rooted at each
 * rank in turn, on 2 to 8 ranks and 17, back to back on a 4-slot ring (the slot tags wrap
 * around it every 4 messages, many times over), against the reference. */
void inproc_one_line_calls_match_reference_2_to_8_and_17_ranks(void) {
    static const uint32_t ns[] = {2, 3, 4, 5, 8, 17};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        group g;
        uint32_t n = ns[ni], i = 0;
        group_open(&g, n, 256, 4, 1024, 0);
        for (int c = 0; c < ZR_COUNT; c++)
            for (int t = 0; t < ZC_DTYPE_COUNT_; t++) {
                size_t es = zc_dtype_bytes((zc_dtype)t);
                for (size_t count = 1; count <= 8 / es + 1; count++, i++)
                    run_one(&g, (zr_coll)c, count, (zc_dtype)t, (zc_op)(i % ZC_OP_COUNT_), i % n,
                            c != ZR_A2A && (i & 1), zt_seed() + i);
            }
        group_close(&g);
    }
}

/* The same call over and over with only its root changing, then its count (two elements, one
 * line; 300, several messages on 256-byte slots), two collectives interleaved: each call
 * reserves its own peers' messages (the issue replays a reservation only for the same
 * schedule), against the reference. */
/* The valid calls of inproc_repeated_call_is_validated_afresh_when_an_argument_changes, on
 * both ranks: kind 0 an all_reduce of 8 float32, 1 a reduce to rank 0, 2 rank 0's send to rank
 * 1 (and rank 1's receive); each result checked. */
static void memo_valid(group *g, int kind, float (*in)[8], float (*out)[8]) {
    zc_req q[2];
    memset(out, 0, 2 * sizeof out[0]);
    if (kind == 0) {
        for (uint32_t r = 0; r < 2; r++)
            ZT_CHECK_ST(zc_allreduce(g->c[r], in[r], out[r], 8, ZC_FLOAT32, ZC_SUM, &q[r]), ZC_OK);
    } else if (kind == 1) {
        for (uint32_t r = 0; r < 2; r++)
            ZT_CHECK_ST(zc_reduce(g->c[r], in[r], out[r], 8, ZC_FLOAT32, ZC_SUM, 0, &q[r]), ZC_OK);
    } else {
        ZT_CHECK_ST(zc_send(g->c[0], in[0], 8, ZC_FLOAT32, 1, &q[0]), ZC_OK);
        ZT_CHECK_ST(zc_recv(g->c[1], out[1], 8, ZC_FLOAT32, 0, &q[1]), ZC_OK);
    }
    wait_all(g, q, ZC_OK);
    for (int i = 0; i < 8; i++) {
        float sum = in[0][i] + in[1][i];
        if (kind == 0) ZT_CHECK(out[0][i] == sum && out[1][i] == sum);
        if (kind == 1) ZT_CHECK(out[0][i] == sum);
        if (kind == 2) ZT_CHECK(out[1][i] == in[0][i]);
    }
}

/* A call with the arguments of an earlier valid call takes that call's schedule without
 * validating it again (core/coll.c's memo): each call below differs from a valid one made just
 * before it in one argument, is validated afresh and refused, and leaves the communicator
 * usable (the valid call runs again after it); then calls rotating over four buffer pairs. */
void inproc_repeated_call_is_validated_afresh_when_an_argument_changes(void) {
    group g;
    group_open(&g, 2, 256, 4, 0, 0);
    float in[2][8], out[2][8];
    for (int i = 0; i < 8; i++) {
        in[0][i] = (float)i;
        in[1][i] = (float)(100 + i);
    }
    zc_comm *c = g.c[0];
    zc_req q;
    for (int variant = 0; variant < 9; variant++) {
        int kind = variant < 5 ? 0 : variant < 7 ? 1 : 2;
        memo_valid(&g, kind, in, out);
        memo_valid(&g, kind, in, out); /* the second takes the memo */
        zc_status st = ZC_OK;
        switch (variant) {
        case 0: st = zc_allreduce(c, in[0], out[0], 8, ZC_FLOAT32, (zc_op)77, &q); break;
        case 1: st = zc_allreduce(c, in[0], out[0], 8, (zc_dtype)77, ZC_SUM, &q); break;
        case 2: st = zc_allreduce(c, in[0], out[0], SIZE_MAX / 2, ZC_FLOAT32, ZC_SUM, &q); break;
        case 3: st = zc_allreduce(c, NULL, out[0], 8, ZC_FLOAT32, ZC_SUM, &q); break;
        case 4: st = zc_allreduce(c, in[0], in[0] + 1, 8, ZC_FLOAT32, ZC_SUM, &q); break;
        case 5: st = zc_reduce(c, in[0], out[0], 8, ZC_FLOAT32, ZC_SUM, 2, &q); break;
        case 6: st = zc_reduce(c, in[0], out[0], 8, ZC_FLOAT32, (zc_op)-1, 0, &q); break;
        case 7: st = zc_send(c, in[0], 8, ZC_FLOAT32, 0, &q); break;
        default: st = zc_send(c, in[0], 8, ZC_FLOAT32, 7, &q); break;
        }
        if (st != ZC_INVALID_ARG)
            printf("    variant %d: %s (%s)\n", variant, zc_status_name(st), zc_comm_error_text(c));
        ZT_CHECK_ST(st, ZC_INVALID_ARG);
        memo_valid(&g, kind, in, out);
    }
    /* Calls rotating over four buffer pairs, each kept in its own entry (or sharing one): every
     * result lands in its own call's recv. */
    static float rin[4][2][8], rout[4][2][8];
    for (int rep = 0; rep < 3; rep++)
        for (int b = 0; b < 4; b++) {
            zc_req rq[2];
            for (uint32_t r = 0; r < 2; r++) {
                for (int i = 0; i < 8; i++) {
                    rin[b][r][i] = (float)(rep * 1000 + b * 100 + (int)r * 10 + i);
                    rout[b][r][i] = -1.0f;
                }
                ZT_CHECK_ST(zc_allreduce(g.c[r], rin[b][r], rout[b][r], 8, ZC_FLOAT32, ZC_SUM,
                                         &rq[r]), ZC_OK);
            }
            wait_all(&g, rq, ZC_OK);
            for (uint32_t r = 0; r < 2; r++)
                for (int i = 0; i < 8; i++)
                    ZT_CHECK(rout[b][r][i] == rin[b][0][i] + rin[b][1][i]);
        }
    group_close(&g);
}

void inproc_repeated_calls_changing_only_root_or_count_match_reference(void) {
    static const uint32_t ns[] = {2, 3, 5, 8};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        group g;
        uint32_t n = ns[ni], i = 0;
        group_open(&g, n, 256, 4, 1024, 2000000000ull);
        for (int c = 0; c < ZR_COUNT; c++)
            for (uint32_t rep = 0; rep < 3u * n; rep++, i++) {
                size_t count = rep / n == 1 ? 300 : 2;
                run_one(&g, (zr_coll)c, count, ZC_FLOAT32, ZC_SUM, rep % n, false, zt_seed() + i);
                run_one(&g, (zr_coll)((c + 1) % ZR_COUNT), 2, ZC_FLOAT32, ZC_SUM, (rep + 1) % n,
                        false, zt_seed() + i);
            }
        group_close(&g);
    }
}

/* A one-line call against a peer's different call is a mismatch, with both calls named, on
 * every rank: a count that still fits the line, one that does not, another collective. */
void inproc_one_line_mismatch_names_both_calls(void) {
    float a[4] = {1, 2, 3, 4}, b[4];
    for (int k = 0; k < 3; k++) {
        group g;
        zc_req q[2];
        group_open(&g, 2, 256, 2, 1024, 0);
        ZT_CHECK_ST(zc_allreduce(g.c[0], a, b, 1, ZC_FLOAT32, ZC_SUM, &q[0]), ZC_OK);
        if (k < 2)
            ZT_CHECK_ST(zc_allreduce(g.c[1], a, b, k == 0 ? 2 : 3, ZC_FLOAT32, ZC_SUM, &q[1]),
                        ZC_OK);
        else
            ZT_CHECK_ST(zc_broadcast(g.c[1], a, b, 1, ZC_FLOAT32, 0, &q[1]), ZC_OK);
        wait_all(&g, q, ZC_MISMATCH);
        const char *t0 = zc_comm_error_text(g.c[0]), *t1 = zc_comm_error_text(g.c[1]);
        const char *theirs = k == 0 ? "zc_allreduce(count 2" : k == 1 ? "zc_allreduce(count 3"
                                                                      : "zc_broadcast(count 1";
        const char *both = strstr(t0, theirs) ? t0 : t1; /* who detected it names both */
        if (!strstr(both, theirs) || !strstr(both, "zc_allreduce(count 1, float32, sum)"))
            printf("    rank 0: %s\n    rank 1: %s\n", t0, t1);
        ZT_CHECK(strstr(both, theirs) && strstr(both, "zc_allreduce(count 1, float32, sum)"));
        group_close(&g);
    }
}

/* The test build's override of the largest message of flagged lines (core/proto.h). */
extern size_t zc__test_lines_max;

/* Calls whose messages travel as flagged lines (over 8 bytes on the in-process wire: one line
 * of 56 bytes as built, up to 4 KiB with the test build's override, core/proto.h): every
 * collective at sizes on both sides of a line's 56 data bytes up to 4 KiB, the dtypes in
 * turn, in place and not, rooted at every rank, on 2, 3, 5 and 8 ranks with 16 KiB slots
 * (flagged lines up to 4 KiB) and 17 with 4 KiB ones (up to 1,792 bytes: the larger go
 * header, payload and credit), back to back on a 4-slot ring whose tags wrap every 4
 * messages, against the reference. */
void inproc_flagged_line_calls_match_reference(void) {
    static const uint32_t ns[] = {2, 3, 5, 8, 17};
    static const size_t sizes[] = {9, 16, 55, 56, 57, 113, 255, 1000, 1792, 1800, 4096};
    for (size_t ni = 0; ni < 2 * sizeof ns / sizeof ns[0]; ni++) {
        zc__test_lines_max = ni & 1 ? 4096 : 0;
        group g;
        uint32_t n = ns[ni / 2], i = 0;
        group_open(&g, n, n == 17 ? 4096 : 16384, 4, 1u << 20, 0);
        for (int c = 0; c < ZR_COUNT; c++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                bool rooted = c == ZR_REDUCE || c == ZR_BCAST || c == ZR_GATHER ||
                              c == ZR_SCATTER;
                for (uint32_t root = 0; root < (rooted ? n : 1u); root++, i++) {
                    zc_dtype t = (zc_dtype)(i % ZC_DTYPE_COUNT_);
                    size_t es = zc_dtype_bytes(t), count = (sizes[si] + es - 1) / es;
                    run_one(&g, (zr_coll)c, count, t, (zc_op)(i % ZC_OP_COUNT_),
                            rooted ? root : i % n, c != ZR_A2A && (i & 1), zt_seed() + i);
                }
            }
        group_close(&g);
    }
    zc__test_lines_max = 0;
}

/* Through flagged lines (up to 4 KiB: the test build's override) a peer's different call is a
 * mismatch on every rank, its sentence naming both calls: another count (both in lines; lines
 * against the header protocol, either way round), another dtype of the same bytes, another
 * op. */
void inproc_flagged_line_mismatch_names_both_calls(void) {
    static const struct { size_t n0, n1; zc_dtype t1; zc_op op1; const char *theirs; } k[] = {
        {100, 101, ZC_FLOAT32, ZC_SUM, "zc_allreduce(count 101, float32, sum)"},
        {100, 5000, ZC_FLOAT32, ZC_SUM, "zc_allreduce(count 5000, float32, sum)"},
        {5000, 100, ZC_FLOAT32, ZC_SUM, "zc_allreduce(count 100, float32, sum)"},
        {100, 100, ZC_INT32, ZC_SUM, "zc_allreduce(count 100, int32, sum)"},
        {100, 100, ZC_FLOAT32, ZC_MAX, "zc_allreduce(count 100, float32, max)"},
    };
    static float a[5000], b[5000];
    zc__test_lines_max = 4096;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        group g;
        zc_req q[2];
        group_open(&g, 2, 65536, 4, 1u << 20, 0);
        ZT_CHECK_ST(zc_allreduce(g.c[0], a, b, k[i].n0, ZC_FLOAT32, ZC_SUM, &q[0]), ZC_OK);
        ZT_CHECK_ST(zc_allreduce(g.c[1], a, b, k[i].n1, k[i].t1, k[i].op1, &q[1]), ZC_OK);
        wait_all(&g, q, ZC_MISMATCH);
        char mine[64];
        snprintf(mine, sizeof mine, "zc_allreduce(count %zu, float32, sum)", k[i].n0);
        const char *t0 = zc_comm_error_text(g.c[0]), *t1 = zc_comm_error_text(g.c[1]);
        bool named = (strstr(t0, k[i].theirs) && strstr(t0, mine)) ||
                     (strstr(t1, k[i].theirs) && strstr(t1, mine));
        if (!named) printf("    case %zu: rank 0: %s\n    rank 1: %s\n", i, t0, t1);
        ZT_CHECK(named);
        group_close(&g);
    }
    zc__test_lines_max = 0;
}

void inproc_split_makes_independent_children(void) {
    group g;
    group_open(&g, 6, 512, 4, 1024, 0);
    size_t bytes = zc_comm_arena_bytes(&g.cfg);
    void *arenas[6];
    zc_comm *kids[6];
    int colors[6] = {0, 1, 0, 1, -1, 0}, keys[6] = {5, 0, 1, 0, 0, 0};
    for (int r = 0; r < 6; r++) arenas[r] = aligned_alloc(64, bytes);
    ZT_CHECK_ST(zc_comm_split_inproc(g.c, colors, keys, arenas, bytes, kids), ZC_OK);
    ZT_CHECK(kids[4] == NULL);
    /* color 0: parent ranks 0 (key 5), 2 (key 1), 5 (key 0) -> child ranks 2, 1, 0 */
    ZT_CHECK_EQ(zc_comm_rank(kids[0]), 2);
    ZT_CHECK_EQ(zc_comm_rank(kids[2]), 1);
    ZT_CHECK_EQ(zc_comm_rank(kids[5]), 0);
    ZT_CHECK_EQ(zc_comm_size(kids[1]), 2);
    int v[6], out[6], pout[6];
    zc_req q[6], pq[6];
    for (int r = 0; r < 6; r++) {
        v[r] = r + 1;
        if (kids[r]) ZT_CHECK_ST(zc_allreduce(kids[r], &v[r], &out[r], 1, ZC_INT32, ZC_SUM, &q[r]), ZC_OK);
        ZT_CHECK_ST(zc_allreduce(g.c[r], &v[r], &pout[r], 1, ZC_INT32, ZC_SUM, &pq[r]), ZC_OK);
    }
    for (int r = 0; r < 6; r++) ZT_CHECK_ST(zc_wait(g.c[r], &pq[r]), ZC_OK);
    for (int r = 0; r < 6; r++)
        if (kids[r]) ZT_CHECK_ST(zc_wait(kids[r], &q[r]), ZC_OK);
    for (int r = 0; r < 6; r++) ZT_CHECK_EQ(pout[r], 21);
    ZT_CHECK_EQ(out[0], 1 + 3 + 6);
    ZT_CHECK_EQ(out[1], 2 + 4);
    for (int r = 0; r < 6; r++)
        if (kids[r]) zc_comm_fini(kids[r]);
    for (int r = 0; r < 6; r++) free(arenas[r]);
    group_close(&g);
}

/* cfg->threads ZC_THREADS_SERIAL (the caller's promise that calls never overlap, instead of
 * the communicator's lock): the same results, here from this one thread progressing 4 ranks,
 * rooted and not, with requests in flight on every rank at once. */
void inproc_serial_threads_promise_gives_the_same_results(void) {
    group g;
    memset(&g, 0, sizeof g);
    g.n = 4;
    zr_group_config(&g.cfg, 4, 256, 4, 1024, 0);
    g.cfg.threads = ZC_THREADS_SERIAL;
    size_t bytes = zc_comm_arena_bytes(&g.cfg);
    for (uint32_t r = 0; r < 4; r++) ZT_CHECK((g.arenas[r] = aligned_alloc(64, bytes)) != NULL);
    ZT_CHECK_ST(zc_comm_init_inproc(&g.cfg, g.arenas, bytes, g.c), ZC_OK);
    int64_t in[4][300], sum[4][300], red[300];
    zc_req q[4], rq[4];
    for (uint32_t r = 0; r < 4; r++) {
        for (int i = 0; i < 300; i++) in[r][i] = (int64_t)(r + 1) * i;
        ZT_CHECK_ST(zc_allreduce(g.c[r], in[r], sum[r], 300, ZC_INT64, ZC_SUM, &q[r]), ZC_OK);
        ZT_CHECK_ST(zc_reduce(g.c[r], in[r], r == 2 ? red : NULL, 300, ZC_INT64, ZC_MAX, 2,
                              &rq[r]), ZC_OK);
    }
    wait_all(&g, q, ZC_OK);
    wait_all(&g, rq, ZC_OK);
    for (uint32_t r = 0; r < 4; r++)
        for (int i = 0; i < 300; i++) ZT_CHECK(sum[r][i] == 10 * i);
    for (int i = 0; i < 300; i++) ZT_CHECK(red[i] == 4 * i);
    group_close(&g);
}

void inproc_init_rejects_short_arena_and_wrong_transport(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.transport = ZC_TRANSPORT_INPROC;
    cfg.nranks = 2;
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arenas[2] = {aligned_alloc(64, bytes), aligned_alloc(64, bytes)};
    zc_comm *c[2];
    ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, bytes - 1, c), ZC_TOO_SMALL);
    char want[64];
    snprintf(want, sizeof want, "%zu", bytes);
    ZT_CHECK(strstr(zc_init_error_text(), want) != NULL);
    cfg.transport = ZC_TRANSPORT_SHM;
    ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, bytes, c), ZC_INVALID_ARG);
    free(arenas[0]), free(arenas[1]);
}

void inproc_send_recv_complete_in_call_order(void) {
    group g;
    group_open(&g, 3, 256, 2, 0, 0);
    enum { M = 20 };
    static int64_t msgs[M][300], got[M][300];
    zc_req s[M], r[M];
    for (int k = 0; k < M; k++) {
        for (int i = 0; i < 300; i++) msgs[k][i] = k * 1000 + i;
        ZT_CHECK_ST(zc_recv(g.c[2], got[k], (size_t)(k * 15), ZC_INT64, 0, &r[k]), ZC_OK);
    }
    for (int k = 0; k < M; k++)
        ZT_CHECK_ST(zc_send(g.c[0], msgs[k], (size_t)(k * 15), ZC_INT64, 2, &s[k]), ZC_OK);
    for (int k = M - 1; k >= 0; k--) ZT_CHECK_ST(zc_wait(g.c[2], &r[k]), ZC_OK);
    for (int k = 0; k < M; k++) ZT_CHECK_ST(zc_wait(g.c[0], &s[k]), ZC_OK);
    for (int k = 0; k < M; k++)
        for (int i = 0; i < k * 15; i++) ZT_CHECK(got[k][i] == msgs[k][i]);
    ZT_CHECK_ST(zc_send(g.c[0], msgs[0], 1, ZC_INT64, 0, &s[0]), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_comm_error_text(g.c[0]), "peer") != NULL);
    group_close(&g);
}

void inproc_persistent_plans_restart_without_rebuilding(void) {
    group g;
    group_open(&g, 4, 256, 2, 512, 0);
    float in[4][500], out[4][500];
    zc_plan plans[4];
    zc_req q[4];
    for (uint32_t r = 0; r < 4; r++)
        ZT_CHECK_ST(zc_allreduce_init(g.c[r], in[r], out[r], 500, ZC_FLOAT32, ZC_SUM, &plans[r]), ZC_OK);
    for (int it = 0; it < 30; it++) {
        for (uint32_t r = 0; r < 4; r++) {
            for (int i = 0; i < 500; i++) in[r][i] = (float)(it + (int)r * i);
            ZT_CHECK_ST(zc_start(g.c[r], &plans[r], &q[r]), ZC_OK);
        }
        ZT_CHECK_ST(zc_start(g.c[0], &plans[0], &q[0]), ZC_INVALID_STATE);
        ZT_CHECK_ST(zc_plan_release(g.c[1], &plans[1]), ZC_INVALID_STATE);
        wait_all(&g, q, ZC_OK);
        for (int i = 0; i < 500; i++) ZT_CHECK(out[2][i] == (float)(4 * it + 6 * i));
    }
    for (uint32_t r = 0; r < 4; r++) ZT_CHECK_ST(zc_plan_release(g.c[r], &plans[r]), ZC_OK);
    ZT_CHECK_ST(zc_start(g.c[0], &plans[0], &q[0]), ZC_INVALID_ARG);
    group_close(&g);
}
