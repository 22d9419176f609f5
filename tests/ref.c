/* ref.c: the reference of the collective tests (see ref.h), compiled into build/zctest and into
 * the bare-metal image. Written without libc: only the mem* builtins, no allocation, bounded
 * loops. The integer reduction works on 128-bit values (libgcc's __divti3 for AVG). */
#include "ref.h"
#include "reduce.h"
#include "text.h"

uint64_t zt_rng_next(zt_rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t zt_rng_below(zt_rng *r, uint64_t bound) { return zt_rng_next(r) % bound; }

const char *zr_coll_name(zr_coll c) {
    static const char *const names[ZR_COUNT] = {"allreduce", "reduce", "broadcast",
                                                "reduce_scatter", "allgather", "gather",
                                                "scatter", "alltoall"};
    return (unsigned)c < ZR_COUNT ? names[c] : "unknown";
}

bool zr_coll_reduces(zr_coll c) { return c == ZR_ALLREDUCE || c == ZR_REDUCE || c == ZR_RS; }

void zr_group_config(zc_config *cfg, uint32_t n, uint32_t slot_bytes, uint32_t slots,
                     uint64_t small_max, uint64_t timeout_ns) {
    zc_config_default(cfg);
    cfg->transport = ZC_TRANSPORT_INPROC;
    cfg->nranks = n;
    cfg->slot_bytes = slot_bytes;
    cfg->slots = slots;
    cfg->allreduce_oneshot_max_bytes = small_max;
    cfg->reduce_direct_max_bytes = small_max;
    cfg->bcast_tree_max_bytes = small_max;
    if (timeout_ns) cfg->timeout_ns = timeout_ns;
}

bool zr_sweep_case(uint32_t i, uint32_t n, const size_t *counts, uint32_t ncounts,
                   zr_case *k) {
    uint32_t j = i;
    for (uint32_t c = 0; c < ZR_COUNT; c++) {
        uint32_t ops = zr_coll_reduces((zr_coll)c) ? ZC_OP_COUNT_ : 1u;
        uint32_t forms = c == ZR_A2A ? 1u : 2u; /* not in place, in place */
        if (j >= ZC_DTYPE_COUNT_ * ops * forms) {
            j -= ZC_DTYPE_COUNT_ * ops * forms;
            continue;
        }
        *k = (zr_case){(zr_coll)c, n, counts[i % ncounts], (zc_dtype)(j / (ops * forms)),
                       (zc_op)(j / forms % ops), i % n, j % forms == 1};
        return true;
    }
    return false;
}

/* ---- inputs ---- */

static uint64_t zr_mix(uint64_t a, uint64_t b, uint64_t c) {
    zt_rng r = {a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full ^ c};
    return zt_rng_next(&r);
}

void zr_fill(void *buf, size_t count, zc_dtype t, uint64_t seed, uint32_t r, size_t base) {
    for (size_t i = 0; i < count; i++) {
        uint64_t v = zr_mix(seed, r, base + i);
        float f = (float)((int64_t)(v % 2001) - 1000) / 8.0f;
        uint8_t *p = (uint8_t *)buf + i * zc_dtype_bytes(t);
        switch (t) {
        case ZC_FLOAT16: { uint16_t h = zc__f32_to_fp16(f); __builtin_memcpy(p, &h, 2); break; }
        case ZC_BFLOAT16: { uint16_t h = zc__f32_to_bf16(f); __builtin_memcpy(p, &h, 2); break; }
        case ZC_FP8_E4M3: *p = zc__f32_to_e4m3(f / 8.0f); break;
        case ZC_FP8_E5M2: *p = zc__f32_to_e5m2(f); break;
        case ZC_FLOAT32: __builtin_memcpy(p, &f, 4); break;
        case ZC_FLOAT64: {
            double d = (double)f + (double)(v >> 40) * 1e-9;
            __builtin_memcpy(p, &d, 8);
            break;
        }
        default: __builtin_memcpy(p, &v, zc_dtype_bytes(t)); break;
        }
    }
}

/* ---- the reduction ---- */

static float zr_to_f(const uint8_t *p, zc_dtype t) {
    uint16_t h;
    float f;
    switch (t) {
    case ZC_FLOAT16: __builtin_memcpy(&h, p, 2); return zc__fp16_to_f32(h);
    case ZC_BFLOAT16: __builtin_memcpy(&h, p, 2); return zc__bf16_to_f32(h);
    case ZC_FP8_E4M3: return zc__e4m3_to_f32(*p);
    case ZC_FP8_E5M2: return zc__e5m2_to_f32(*p);
    default: __builtin_memcpy(&f, p, 4); return f;
    }
}

static void zr_from_f(uint8_t *p, zc_dtype t, float f) {
    uint16_t h;
    switch (t) {
    case ZC_FLOAT16: h = zc__f32_to_fp16(f); __builtin_memcpy(p, &h, 2); break;
    case ZC_BFLOAT16: h = zc__f32_to_bf16(f); __builtin_memcpy(p, &h, 2); break;
    case ZC_FP8_E4M3: *p = zc__f32_to_e4m3(f); break;
    case ZC_FP8_E5M2: *p = zc__f32_to_e5m2(f); break;
    default: __builtin_memcpy(p, &f, 4); break;
    }
}

static double zr_fold_d(double a, double b, zc_op op) {
    switch (op) {
    case ZC_PROD: return a * b;
    case ZC_MIN: return b < a ? b : a;
    case ZC_MAX: return b > a ? b : a;
    default: return a + b;
    }
}

/* The fp32 fold through fp64: exact for + and * of two floats (53 >= 2 * 24 + 2 bits), so
 * rounding the double gives the float operation's bits. */
static float zr_fold_f(float a, float b, zc_op op) { return (float)zr_fold_d(a, b, op); }

/* Integers as 128-bit values: signed types sign-extended, unsigned zero-extended. */
static __int128 zr_to_i(const uint8_t *p, zc_dtype t) {
    switch (t) {
    case ZC_INT8: return (int8_t)*p;
    case ZC_UINT8: return *p;
    case ZC_INT32: { int32_t v; __builtin_memcpy(&v, p, 4); return v; }
    case ZC_UINT32: { uint32_t v; __builtin_memcpy(&v, p, 4); return v; }
    case ZC_INT64: { int64_t v; __builtin_memcpy(&v, p, 8); return v; }
    default: { uint64_t v; __builtin_memcpy(&v, p, 8); return v; }
    }
}

static bool zr_is_int(zc_dtype t) { return t <= ZC_UINT64; }

/* Element at offset o: exact integer fold, sum/prod wrapping, AVG truncating toward zero. */
static void zr_reduce_int(uint8_t *out, uint8_t *const *in, uint32_t n, size_t o, zc_dtype t,
                          zc_op op) {
    __int128 acc = zr_to_i(in[0] + o, t);
    unsigned __int128 wrap = (unsigned __int128)acc;
    for (uint32_t r = 1; r < n; r++) {
        __int128 v = zr_to_i(in[r] + o, t);
        if (op == ZC_MIN) acc = v < acc ? v : acc;
        else if (op == ZC_MAX) acc = v > acc ? v : acc;
        else if (op == ZC_PROD) wrap *= (unsigned __int128)v;
        else { acc += v; wrap += (unsigned __int128)v; }
    }
    if (op == ZC_AVG) acc /= n; /* C division truncates toward zero */
    else if (op == ZC_SUM || op == ZC_PROD) acc = (__int128)wrap;
    __builtin_memcpy(out + o, &acc, zc_dtype_bytes(t)); /* little endian: the low bytes wrap */
}

/* The rank tree over v[0..n-1], level by level in place: first the leaves (with p the largest
 * power of two <= n and e = n - p, leaf i is v[2i] (+) v[2i+1] for i < e and v[i+e] after),
 * then halving the row, v[j] = v[2j] (+) v[2j+1], until one value is left. fp32 values are
 * held as doubles and each fold rounded back to fp32 (zr_fold_f). */
static double zr_tree(double *v, uint32_t n, zc_op fold, bool f32) {
    uint32_t p = 1;
    while (p * 2u <= n) p *= 2u;
    uint32_t e = n - p;
    for (uint32_t i = 0; i < p; i++) {
        if (i < e) v[i] = f32 ? zr_fold_f((float)v[2 * i], (float)v[2 * i + 1], fold)
                              : zr_fold_d(v[2 * i], v[2 * i + 1], fold);
        else v[i] = v[i + e];
    }
    for (uint32_t m = p; m > 1; m /= 2)
        for (uint32_t j = 0; j < m / 2; j++)
            v[j] = f32 ? zr_fold_f((float)v[2 * j], (float)v[2 * j + 1], fold)
                       : zr_fold_d(v[2 * j], v[2 * j + 1], fold);
    return v[0];
}

void zr_reduce(uint8_t *out, uint8_t *const *in, uint32_t n, size_t count, zc_dtype t,
               zc_op op) {
    size_t es = zc_dtype_bytes(t);
    zc_op fold = op == ZC_AVG ? ZC_SUM : op;
    double v[ZR_MAX_RANKS];
    for (size_t i = 0; i < count; i++) {
        const size_t o = i * es;
        if (zr_is_int(t)) { /* exact or wrapping, so any order gives these bits */
            zr_reduce_int(out, in, n, o, t, op);
        } else if (t == ZC_FLOAT64) {
            for (uint32_t r = 0; r < n; r++) __builtin_memcpy(&v[r], in[r] + o, 8);
            double acc = zr_tree(v, n, fold, false);
            if (op == ZC_AVG) acc /= (double)n;
            if (acc != acc) acc = __builtin_nan(""); /* the canonical quiet NaN (api.md) */
            __builtin_memcpy(out + o, &acc, 8);
        } else {
            for (uint32_t r = 0; r < n; r++) v[r] = zr_to_f(in[r] + o, t);
            float acc = (float)zr_tree(v, n, fold, true);
            if (op == ZC_AVG) acc /= (float)n;
            if (acc != acc) acc = __builtin_nanf(""); /* the canonical quiet NaN (api.md) */
            zr_from_f(out + o, t, acc);
        }
    }
}

/* Rank values where the rank tree and the linear order differ in fp32 (B = 2^27: B + 1 and
 * -B + 1 round back to B and -B), for 4, 5, 7 and 8 ranks. */
bool zr_fill_order(float *buf, size_t count, uint32_t n, uint32_t r) {
    const float B = 134217728.0f;
    static const float x4[] = {-1, 1, 1, 1}, x5[] = {-1, 8, 3, 1, 1}, x7[] = {3, -1, 8, 1, 1, 8, 1},
                       x8[] = {1, 1, -1, 1, 8, 1, 8, 3};
    static const uint8_t big4 = 0x5, big5 = 0x9, big7 = 0x12, big8 = 0x6; /* ranks holding +-B */
    const float *x = n == 4 ? x4 : n == 5 ? x5 : n == 7 ? x7 : n == 8 ? x8 : 0;
    uint8_t big = n == 4 ? big4 : n == 5 ? big5 : n == 7 ? big7 : big8;
    if (!x || r >= n) return false;
    float v = ((unsigned)big >> r) & 1u ? x[r] * B : x[r];
    for (size_t i = 0; i < count; i++) buf[i] = v * (float)(1u << (i % 8u)); /* exact scaling */
    return true;
}

/* ---- one collective: expected results, issue, result ---- */

size_t zr_buf_bytes(const zr_case *k) { return k->n * k->count * zc_dtype_bytes(k->t) + 1; }

void zr_want(const zr_case *k, uint8_t *const *send, uint32_t r, uint8_t *want) {
    uint32_t n = k->n;
    size_t cb = k->count * zc_dtype_bytes(k->t);
    uint8_t *in[ZR_MAX_RANKS];
    switch (k->c) {
    case ZR_ALLREDUCE:
    case ZR_REDUCE:
        if (k->c == ZR_REDUCE && r != k->root) break; /* untouched */
        for (uint32_t q = 0; q < n; q++) in[q] = send[q];
        zr_reduce(want, in, n, k->count, k->t, k->op);
        break;
    case ZR_BCAST: __builtin_memcpy(want, send[k->root], cb); break;
    case ZR_RS:
        for (uint32_t q = 0; q < n; q++) in[q] = send[q] + r * cb;
        zr_reduce(want, in, n, k->count, k->t, k->op);
        break;
    case ZR_GATHER:
    case ZR_AG:
        if (k->c == ZR_GATHER && r != k->root) break; /* untouched */
        for (uint32_t q = 0; q < n; q++) __builtin_memcpy(want + q * cb, send[q], cb);
        break;
    case ZR_SCATTER: __builtin_memcpy(want, send[k->root] + r * cb, cb); break;
    default:
        for (uint32_t q = 0; q < n; q++) __builtin_memcpy(want + q * cb, send[q] + r * cb, cb);
        break;
    }
}

/* The (send, recv) pair rank r passes; in-place forms copy their input into place first. */
static void zr_args(const zr_case *k, uint32_t r, uint8_t *send, uint8_t *recv,
                    uint8_t **s_out, uint8_t **d_out) {
    size_t cb = k->count * zc_dtype_bytes(k->t);
    bool root = r == k->root, ip = k->in_place;
    uint8_t *s = send, *d = recv;
    switch (k->c) {
    case ZR_ALLREDUCE: d = ip ? send : recv; break;
    case ZR_REDUCE:
    case ZR_BCAST: d = ip && root ? send : recv; break;
    case ZR_RS: d = ip ? send + r * cb : recv; break;
    case ZR_AG:
    case ZR_GATHER:
        if (ip && (k->c == ZR_AG || root)) {
            __builtin_memcpy(recv + r * cb, send, cb);
            s = recv + r * cb;
        }
        break;
    case ZR_SCATTER: d = ip && root ? send + r * cb : recv; break;
    default: break;
    }
    *s_out = s;
    *d_out = d;
}

/* Issues rank r's call, or builds its plan when plan is not NULL. */
static zc_status zr_call(const zr_case *k, zc_comm *cm, uint32_t r, uint8_t *send,
                         uint8_t *recv, zc_req *req, zc_plan *plan) {
    uint8_t *s, *d;
    zr_args(k, r, send, recv, &s, &d);
    size_t n = k->count;
    zc_dtype t = k->t;
    switch (k->c) {
    case ZR_ALLREDUCE:
        return plan ? zc_allreduce_init(cm, s, d, n, t, k->op, plan)
                    : zc_allreduce(cm, s, d, n, t, k->op, req);
    case ZR_REDUCE:
        return plan ? zc_reduce_init(cm, s, d, n, t, k->op, k->root, plan)
                    : zc_reduce(cm, s, d, n, t, k->op, k->root, req);
    case ZR_BCAST:
        return plan ? zc_broadcast_init(cm, s, d, n, t, k->root, plan)
                    : zc_broadcast(cm, s, d, n, t, k->root, req);
    case ZR_RS:
        return plan ? zc_reduce_scatter_init(cm, s, d, n, t, k->op, plan)
                    : zc_reduce_scatter(cm, s, d, n, t, k->op, req);
    case ZR_AG:
        return plan ? zc_allgather_init(cm, s, d, n, t, plan) : zc_allgather(cm, s, d, n, t, req);
    case ZR_GATHER:
        return plan ? zc_gather_init(cm, s, d, n, t, k->root, plan)
                    : zc_gather(cm, s, d, n, t, k->root, req);
    case ZR_SCATTER:
        return plan ? zc_scatter_init(cm, s, d, n, t, k->root, plan)
                    : zc_scatter(cm, s, d, n, t, k->root, req);
    default:
        return plan ? zc_alltoall_init(cm, s, d, n, t, plan) : zc_alltoall(cm, s, d, n, t, req);
    }
}

zc_status zr_issue(const zr_case *k, zc_comm *cm, uint32_t r, uint8_t *send, uint8_t *recv,
                   zc_req *req) {
    return zr_call(k, cm, r, send, recv, req, 0);
}

zc_status zr_plan(const zr_case *k, zc_comm *cm, uint32_t r, uint8_t *send, uint8_t *recv,
                  zc_plan *plan) {
    return zr_call(k, cm, r, send, recv, 0, plan);
}

const uint8_t *zr_result(const zr_case *k, uint32_t r, const uint8_t *send,
                         const uint8_t *recv, size_t *bytes_out) {
    size_t cb = k->count * zc_dtype_bytes(k->t), nb = k->n * cb;
    bool root = r == k->root, ip = k->in_place;
    const uint8_t *got = recv;
    size_t bytes = cb;
    switch (k->c) {
    case ZR_ALLREDUCE: got = ip ? send : recv; break;
    case ZR_REDUCE:
    case ZR_BCAST:
        if (ip && root) got = send;
        if (k->c == ZR_REDUCE && !root) bytes = nb + 1; /* untouched: still the fill */
        break;
    case ZR_RS: got = ip ? send + r * cb : recv; break;
    case ZR_GATHER: bytes = root ? nb : nb + 1; break;
    case ZR_SCATTER: got = ip && root ? send + r * cb : recv; break;
    default: bytes = nb; break; /* allgather, alltoall */
    }
    *bytes_out = bytes;
    return got;
}

size_t zr_first_diff(const void *got, const void *want, size_t bytes) {
    const uint8_t *a = got, *b = want;
    size_t i = 0;
    while (i < bytes && a[i] == b[i]) i++;
    return i;
}

void zr_describe(const zr_case *k, char *buf, size_t cap) {
    zc__fmt(buf, cap, "%s n=%u count=%zu %s %s root=%u%s", zr_coll_name(k->c), k->n, k->count,
            zc_dtype_name(k->t), zc_op_name(k->op), k->root, k->in_place ? " in place" : "");
}
