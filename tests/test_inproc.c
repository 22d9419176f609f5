/* test_inproc.c: the engine with all ranks in one process (zc_comm_init_inproc), progressed in
 * turn by this thread: seeded sweeps of every collective against a plain reference for up to
 * 64 ranks, bitwise identity across algorithm thresholds and chunk sizes, misuse, timeouts and
 * split. Inputs are a function of (seed, rank, index), so the reference is computed here. */
#include "zt.h"
#include "zcoll.h"
#include "../core/reduce.h"

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
    zc_config_default(&g->cfg);
    g->cfg.transport = ZC_TRANSPORT_INPROC;
    g->cfg.nranks = n;
    g->cfg.slot_bytes = slot_bytes;
    g->cfg.slots = slots;
    g->cfg.allreduce_oneshot_max_bytes = oneshot_max;
    g->cfg.reduce_direct_max_bytes = oneshot_max;
    g->cfg.bcast_tree_max_bytes = oneshot_max;
    if (timeout_ns) g->cfg.timeout_ns = timeout_ns;
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

/* ---- inputs and the reference ---- */

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
    zt_rng r = {a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full ^ c};
    return zt_rng_next(&r);
}

/* Element i of rank r's input: finite floats (small fractions), any bits for integers. */
static void fill(void *buf, size_t count, zc_dtype t, uint64_t seed, uint32_t r, size_t base) {
    for (size_t i = 0; i < count; i++) {
        uint64_t v = mix(seed, r, base + i);
        float f = (float)((int64_t)(v % 2001) - 1000) / 8.0f;
        uint8_t *p = (uint8_t *)buf + i * zc_dtype_bytes(t);
        switch (t) {
        case ZC_FLOAT16: { uint16_t h = zc__f32_to_fp16(f); memcpy(p, &h, 2); break; }
        case ZC_BFLOAT16: { uint16_t h = zc__f32_to_bf16(f); memcpy(p, &h, 2); break; }
        case ZC_FP8_E4M3: *p = zc__f32_to_e4m3(f / 8.0f); break;
        case ZC_FP8_E5M2: *p = zc__f32_to_e5m2(f); break;
        case ZC_FLOAT32: memcpy(p, &f, 4); break;
        case ZC_FLOAT64: { double d = (double)f + (double)(v >> 40) * 1e-9; memcpy(p, &d, 8); break; }
        default: memcpy(p, &v, zc_dtype_bytes(t)); break;
        }
    }
}

static float to_f(const uint8_t *p, zc_dtype t) {
    uint16_t h;
    float f;
    switch (t) {
    case ZC_FLOAT16: memcpy(&h, p, 2); return zc__fp16_to_f32(h);
    case ZC_BFLOAT16: memcpy(&h, p, 2); return zc__bf16_to_f32(h);
    case ZC_FP8_E4M3: return zc__e4m3_to_f32(*p);
    case ZC_FP8_E5M2: return zc__e5m2_to_f32(*p);
    default: memcpy(&f, p, 4); return f;
    }
}

static void from_f(uint8_t *p, zc_dtype t, float f) {
    uint16_t h;
    switch (t) {
    case ZC_FLOAT16: h = zc__f32_to_fp16(f); memcpy(p, &h, 2); break;
    case ZC_BFLOAT16: h = zc__f32_to_bf16(f); memcpy(p, &h, 2); break;
    case ZC_FP8_E4M3: *p = zc__f32_to_e4m3(f); break;
    case ZC_FP8_E5M2: *p = zc__f32_to_e5m2(f); break;
    default: memcpy(p, &f, 4); break;
    }
}

static double fold_d(double a, double b, zc_op op) {
    switch (op) {
    case ZC_PROD: return a * b;
    case ZC_MIN: return b < a ? b : a;
    case ZC_MAX: return b > a ? b : a;
    default: return a + b;
    }
}

static float fold_f(float a, float b, zc_op op) {
    switch (op) {
    case ZC_PROD: return a * b;
    case ZC_MIN: return b < a ? b : a;
    case ZC_MAX: return b > a ? b : a;
    default: return a + b;
    }
}

/* Integers as 128-bit values: signed types sign-extended, unsigned zero-extended. */
static __int128 to_i(const uint8_t *p, zc_dtype t) {
    switch (t) {
    case ZC_INT8: return (int8_t)*p;
    case ZC_UINT8: return *p;
    case ZC_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case ZC_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ZC_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static bool is_int(zc_dtype t) { return t <= ZC_UINT64; }
static bool is_signed(zc_dtype t) { return t == ZC_INT8 || t == ZC_INT32 || t == ZC_INT64; }

/* out[i] = fold over in[0..n-1][i] in rank order, with API.md's accumulation rules. */
static void ref_reduce(uint8_t *out, uint8_t *const *in, uint32_t n, size_t count, zc_dtype t,
                       zc_op op) {
    size_t es = zc_dtype_bytes(t);
    for (size_t i = 0; i < count; i++) {
        const size_t o = i * es;
        if (is_int(t)) {
            __int128 acc = to_i(in[0] + o, t);
            unsigned __int128 wrap = (unsigned __int128)acc;
            for (uint32_t r = 1; r < n; r++) {
                __int128 v = to_i(in[r] + o, t);
                if (op == ZC_MIN) acc = v < acc ? v : acc;
                else if (op == ZC_MAX) acc = v > acc ? v : acc;
                else if (op == ZC_PROD) wrap *= (unsigned __int128)v;
                else { acc += v; wrap += (unsigned __int128)v; }
            }
            if (op == ZC_AVG) acc /= n; /* C division truncates toward zero */
            else if (op == ZC_SUM || op == ZC_PROD) acc = (__int128)wrap;
            (void)is_signed;
            memcpy(out + o, &acc, es); /* little endian: the low bytes wrap */
        } else if (t == ZC_FLOAT64) {
            double acc, v;
            memcpy(&acc, in[0] + o, 8);
            for (uint32_t r = 1; r < n; r++) {
                memcpy(&v, in[r] + o, 8);
                acc = fold_d(acc, v, op == ZC_AVG ? ZC_SUM : op);
            }
            if (op == ZC_AVG) acc /= (double)n;
            memcpy(out + o, &acc, 8);
        } else {
            float acc = to_f(in[0] + o, t);
            for (uint32_t r = 1; r < n; r++)
                acc = fold_f(acc, to_f(in[r] + o, t), op == ZC_AVG ? ZC_SUM : op);
            if (op == ZC_AVG) acc /= (float)n;
            from_f(out + o, t, acc);
        }
    }
}

static void check_bytes(const void *got, const void *want, size_t bytes, const char *what,
                        uint32_t rank) {
    if (memcmp(got, want, bytes) == 0) return;
    size_t i = 0;
    while (((const uint8_t *)got)[i] == ((const uint8_t *)want)[i]) i++;
    char d[160];
    snprintf(d, sizeof d, "%s differs at rank %u byte %zu of %zu (seed %llu)", what, rank, i,
             bytes, (unsigned long long)zt_seed());
    zt_fail(__FILE__, __LINE__, "memcmp(got, want) == 0", d);
}

/* ---- one collective on every rank against the reference ---- */

typedef enum coll { C_ALLREDUCE, C_REDUCE, C_BCAST, C_RS, C_AG, C_GATHER, C_SCATTER, C_A2A,
                    C_COUNT } coll;

static const char *coll_name(coll c) {
    static const char *names[] = {"allreduce", "reduce", "broadcast", "reduce_scatter",
                                  "allgather", "gather", "scatter", "alltoall"};
    return names[c];
}

typedef struct bufs {
    uint8_t *send[MAXR], *recv[MAXR], *want[MAXR];
} bufs;

/* Runs collective c with count elements (per block where blocked) on every rank of g. */
static void run_one(group *g, coll c, size_t count, zc_dtype t, zc_op op, uint32_t root,
                    bool in_place, uint64_t seed) {
    uint32_t n = g->n;
    size_t es = zc_dtype_bytes(t), nb = n * count * es, cb = count * es;
    bufs b;
    zc_req reqs[MAXR];
    for (uint32_t r = 0; r < n; r++) {
        b.send[r] = malloc(nb + 1);
        b.recv[r] = malloc(nb + 1);
        b.want[r] = malloc(nb + 1);
        fill(b.send[r], n * count, t, seed, r, 0);
        memset(b.recv[r], 0xA5, nb + 1);
        memset(b.want[r], 0xA5, nb + 1);
    }
    uint8_t *tmp = malloc(nb + 1);
    for (uint32_t r = 0; r < n; r++) {
        uint8_t *in[MAXR];
        switch (c) {
        case C_ALLREDUCE:
        case C_REDUCE:
            for (uint32_t q = 0; q < n; q++) in[q] = b.send[q];
            if (c == C_ALLREDUCE || r == root) ref_reduce(b.want[r], in, n, count, t, op);
            break;
        case C_BCAST: memcpy(b.want[r], b.send[root], cb); break;
        case C_RS:
            for (uint32_t q = 0; q < n; q++) in[q] = b.send[q] + r * cb;
            ref_reduce(b.want[r], in, n, count, t, op);
            break;
        case C_AG:
            for (uint32_t q = 0; q < n; q++) memcpy(b.want[r] + q * cb, b.send[q], cb);
            break;
        case C_GATHER:
            if (r == root)
                for (uint32_t q = 0; q < n; q++) memcpy(b.want[r] + q * cb, b.send[q], cb);
            break;
        case C_SCATTER: memcpy(b.want[r], b.send[root] + r * cb, cb); break;
        default:
            for (uint32_t q = 0; q < n; q++) memcpy(b.want[r] + q * cb, b.send[q] + r * cb, cb);
            break;
        }
    }
    (void)tmp;
    free(tmp);
    for (uint32_t r = 0; r < n; r++) {
        uint8_t *s = b.send[r], *v = b.recv[r];
        zc_comm *cm = g->c[r];
        zc_status st = ZC_INVALID_ARG;
        switch (c) {
        case C_ALLREDUCE: st = zc_allreduce(cm, s, in_place ? s : v, count, t, op, &reqs[r]); break;
        case C_REDUCE:
            st = zc_reduce(cm, s, in_place && r == root ? s : v, count, t, op, root, &reqs[r]);
            break;
        case C_BCAST:
            if (r == root && !in_place) memcpy(v, s, cb), memset(v, 0xA5, cb);
            st = zc_broadcast(cm, s, in_place && r == root ? s : v, count, t, root, &reqs[r]);
            break;
        case C_RS:
            st = zc_reduce_scatter(cm, s, in_place ? s + r * cb : v, count, t, op, &reqs[r]);
            break;
        case C_AG:
            if (in_place) memcpy(v + r * cb, s, cb);
            st = zc_allgather(cm, in_place ? v + r * cb : s, v, count, t, &reqs[r]);
            break;
        case C_GATHER:
            if (in_place && r == root) memcpy(v + r * cb, s, cb);
            st = zc_gather(cm, in_place && r == root ? v + r * cb : s, v, count, t, root, &reqs[r]);
            break;
        case C_SCATTER:
            st = zc_scatter(cm, s, in_place && r == root ? s + r * cb : v, count, t, root, &reqs[r]);
            break;
        default: st = zc_alltoall(cm, s, v, count, t, &reqs[r]); break;
        }
        if (st != ZC_OK) printf("    %s rank %u: %s\n", coll_name(c), r, zc_comm_error_text(cm));
        ZT_CHECK_ST(st, ZC_OK);
    }
    wait_all(g, reqs, ZC_OK);
    for (uint32_t r = 0; r < n; r++) {
        const uint8_t *got = b.recv[r];
        size_t bytes = cb;
        if (in_place) {
            if (c == C_ALLREDUCE || (c == C_REDUCE && r == root) || (c == C_BCAST && r == root))
                got = b.send[r];
            if (c == C_RS) got = b.send[r] + r * cb;
            if (c == C_SCATTER && r == root) got = b.send[r] + r * cb;
        }
        if (c == C_AG || c == C_A2A || (c == C_GATHER && r == root)) bytes = nb;
        if (c == C_REDUCE && r != root) bytes = nb + 1; /* untouched: still the 0xA5 fill */
        if (c == C_GATHER && r != root) bytes = nb + 1;
        if (c == C_BCAST && r == root && in_place) got = b.send[r];
        char what[128];
        snprintf(what, sizeof what, "%s n=%u count=%zu %s %s root=%u%s", coll_name(c), n,
                 count, zc_dtype_name(t), zc_op_name(op), root, in_place ? " in place" : "");
        check_bytes(got, b.want[r], bytes, what, r);
    }
    for (uint32_t r = 0; r < n; r++) free(b.send[r]), free(b.recv[r]), free(b.want[r]);
}

static void sweep(uint32_t n, uint32_t rounds, uint32_t slot_bytes, uint64_t oneshot_max) {
    group g;
    group_open(&g, n, slot_bytes, 4, oneshot_max, 0);
    zt_rng rng = {zt_seed() ^ n};
    for (uint32_t i = 0; i < rounds; i++) {
        coll c = (coll)zt_rng_below(&rng, C_COUNT);
        zc_dtype t = (zc_dtype)zt_rng_below(&rng, ZC_DTYPE_COUNT_);
        zc_op op = (zc_op)zt_rng_below(&rng, ZC_OP_COUNT_);
        size_t count = (size_t)zt_rng_below(&rng, 4) == 0 ? 0 : zt_rng_below(&rng, 3000);
        uint32_t root = (uint32_t)zt_rng_below(&rng, n);
        bool in_place = c != C_A2A && zt_rng_below(&rng, 2);
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
        for (uint32_t r = 0; r < n; r++) fill(in[r] = malloc(bytes), count, t, 77, r, 0);
        ref_reduce(ref, in, n, count, t, ZC_SUM);
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
