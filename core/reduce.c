/* reduce.c: the host reduction kernels (every dtype x op) and the narrow floating-point
 * conversions' entry points. The element code itself (conversions, loads, stores, min/max,
 * canonical NaN, 64-bit AVG's division) is elem.h, which gpu/reduce.cu compiles too: one source
 * for the bitwise host = device promise.
 *
 * Must not: include anything but zcoll.h / reduce.h / elem.h (the file builds freestanding),
 * call any function outside this file (the compiler may emit memcpy/memset), allocate, recurse,
 * or divide 128-bit integers with the compiler's helpers (the 64-bit AVG has its own long
 * division).
 *
 * Determinism beyond reduce.h's contract: a floating result that is NaN is stored as the
 * canonical quiet NaN; MIN/MAX are minimumNumber/maximumNumber with -0 < +0 (elem.h); no
 * expression here multiplies and then adds, so there is nothing for the compiler to contract
 * into an FMA (and -std=c11 sets -ffp-contract=off anyway); every floating operation is one
 * IEEE operation rounded to its type.
 *
 * Speed: one loop per (type, op), its inner loops free of branches (selects are written as
 * masks), over blocks of a constant size, which GCC -O2 vectorizes. Buffers hold whole
 * elements aligned to the element's size. */
#include "reduce.h"

#include "elem.h"

/* Elements reduced per block: the partial blocks of the rank tree live on the stack (at most
 * ZC_STACK_BYTES, the block shrunk when n needs more levels) and stay in L1 while the ranks
 * are folded in. */
#define ZC_BLOCK 256u

#define ZC_INLINE static inline __attribute__((always_inline))

float zc__fp16_to_f32(uint16_t h) { return zc_fp16_dec(h); }
uint16_t zc__f32_to_fp16(float f) { return zc_fp16_enc(f); }
float zc__bf16_to_f32(uint16_t b) { return zc_bf16_dec(b); }
uint16_t zc__f32_to_bf16(float f) { return zc_bf16_enc(f); }
float zc__e4m3_to_f32(uint8_t v) { return zc_e4m3_dec(v); }
uint8_t zc__f32_to_e4m3(float f) { return zc_e4m3_enc(f); }
float zc__e5m2_to_f32(uint8_t v) { return zc_e5m2_dec(v); }
uint8_t zc__f32_to_e5m2(float f) { return zc_e5m2_enc(f); }

/* ---- kernels -----------------------------------------------------------------------------
 * ZC_KERNEL(name, T, A, LOAD, OP, STORE): T is the stored element type, A the accumulator
 * type; LOAD(x) turns an element into an accumulator, OP(l, r) combines two accumulators (the
 * lower ranks' on the left), STORE(acc) rounds the finished accumulator back (it may use n).
 *
 * The order is the rank tree (reduce.h). With p the largest power of two <= n and e = n - p,
 * leaf i is in[2i] (+) in[2i+1] for i < e and in[i+e] otherwise; leaves are combined in
 * pairs, level by level. A block walks the tree's p/2 leaf pairs left to right as a binary
 * counter: leaf pair j's value (2 to 4 inputs, combined in one loop) is pushed on a stack of
 * partial blocks, or combined into its top when j is odd, and then the stack's top two are
 * combined once for every further trailing one bit of j; the last pair's chain ends in out.
 * The stack holds at most log2(p) - 1 partial blocks; the block length shrinks when they would
 * not fit ZC_STACK_BYTES. Every loop reads element j of its inputs before it writes element j
 * and touches no other element, and out is written only by a block's last loop, so out ==
 * in[k] is safe; ZC_IVDEP tells the compiler so (it cannot know the overlap is exact), which
 * lets it vectorize the loops that write out without a run-time overlap check.
 *
 * The block function is always inlined, once with the constant ZC_BLOCK (which GCC -O2
 * vectorizes without a remainder loop) and once for other lengths; both compute the same
 * per-element operations. */
#if defined(__clang__)
#define ZC_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define ZC_IVDEP _Pragma("GCC ivdep")
#else
#define ZC_IVDEP
#endif

/* Bytes of partial blocks a kernel keeps on the stack. */
#define ZC_STACK_BYTES 8192u
/* The small calls' kernel: at most this many elements (a 64-bit word of the smallest type)
 * from at most this many ranks (a one-line call's). */
#define ZC_TINY_ELEMS 8u
#define ZC_TINY_RANKS 64u

/* The rank tree's shape for n >= 1 inputs. */
typedef struct zc_tree {
    uint32_t e;     /* leaves that combine two inputs */
    uint32_t pairs; /* leaf pairs: p / 2 (0 for n = 1) */
    uint32_t depth; /* most partial blocks on the stack, >= 1 */
} zc_tree;

static zc_tree zc_tree_of(uint32_t n) {
    zc_tree t;
    uint32_t p = 1, lg = 0;
    while (p <= n / 2u) p *= 2u, lg++; /* at most 31 times */
    t.e = n - p;
    t.pairs = p / 2u;
    t.depth = lg > 2u ? lg - 1u : 1u;
    return t;
}

/* Leaf pair j's inputs: kind 4 is (a (+) b) (+) (c (+) d), 3 is (a (+) b) (+) c, 2 is a (+) b. */
typedef struct zc_quad {
    const void *a, *b, *c, *d;
    uint32_t kind;
} zc_quad;

ZC_INLINE zc_quad zc_leaf_pair(const void *const *in, uint32_t e, uint32_t j) {
    zc_quad q;
    uint32_t l = 2u * j; /* its left leaf */
    if (l + 1u < e) {
        q.a = in[2u * l], q.b = in[2u * l + 1u], q.c = in[2u * l + 2u], q.d = in[2u * l + 3u];
        q.kind = 4u;
    } else if (l < e) {
        q.a = in[2u * l], q.b = in[2u * l + 1u], q.c = in[2u * l + 2u], q.d = q.c;
        q.kind = 3u;
    } else {
        q.a = in[l + e], q.b = in[l + e + 1u], q.c = q.b, q.d = q.b;
        q.kind = 2u;
    }
    return q;
}

/* One loop over the block: leaf pair q's value v, kind by kind, handed to W (what is written
 * where: push, combine into the top, the root, the top combined into the root). */
#define ZC_W_PUSH(OP, STORE, j, v) s[j] = (v)
#define ZC_W_MERGE(OP, STORE, j, v) s[j] = OP(s[j], v)
#define ZC_W_ROOT(OP, STORE, j, v) dst[j] = STORE(v)
#define ZC_W_LAST(OP, STORE, j, v) dst[j] = STORE(OP(s[j], v))
#define ZC_LEAF_LOOP(W, T, LOAD, OP, STORE, q, base, len)                                        \
    do {                                                                                        \
        const T *a = (const T *)q.a + base, *b = (const T *)q.b + base;                         \
        const T *c = (const T *)q.c + base, *d = (const T *)q.d + base;                         \
        if (q.kind == 4u) {                                                                     \
            ZC_IVDEP for (size_t j = 0; j < len; j++)                                           \
                W(OP, STORE, j, OP(OP(LOAD(a[j]), LOAD(b[j])), OP(LOAD(c[j]), LOAD(d[j]))));    \
        } else if (q.kind == 3u) {                                                              \
            ZC_IVDEP for (size_t j = 0; j < len; j++)                                           \
                W(OP, STORE, j, OP(OP(LOAD(a[j]), LOAD(b[j])), LOAD(c[j])));                    \
        } else {                                                                                \
            ZC_IVDEP for (size_t j = 0; j < len; j++) W(OP, STORE, j, OP(LOAD(a[j]), LOAD(b[j]))); \
        }                                                                                       \
    } while (0)

#define ZC_KERNEL(name, T, A, LOAD, OP, STORE)                                                   \
    /* The stack's top two partial blocks combined, depth times or down to the root. */         \
    ZC_INLINE uint32_t name##_fold(T *dst, A *st, uint32_t n, uint32_t depth, uint32_t times,   \
                                   bool last, size_t len) {                                     \
        (void)n;                                                                                \
        for (uint32_t r = 0; r < times; r++, depth--) {                                         \
            A *s = st + (size_t)(depth - 2u) * len, *t = s + len;                               \
            if (last && depth == 2u) {                                                          \
                ZC_IVDEP for (size_t j = 0; j < len; j++) dst[j] = STORE(OP(s[j], t[j]));       \
            } else {                                                                            \
                for (size_t j = 0; j < len; j++) s[j] = OP(s[j], t[j]);                         \
            }                                                                                   \
        }                                                                                       \
        return depth;                                                                           \
    }                                                                                           \
    ZC_INLINE void name##_block(T *out, const void *const *in, uint32_t n, zc_tree tr, A *st,   \
                                size_t base, size_t len) {                                      \
        T *dst = out + base;                                                                    \
        if (n == 1) {                                                                           \
            const T *a = (const T *)in[0] + base;                                               \
            ZC_IVDEP for (size_t j = 0; j < len; j++) dst[j] = STORE(LOAD(a[j]));               \
            return;                                                                             \
        }                                                                                       \
        uint32_t depth = 0;                                                                     \
        for (uint32_t jp = 0; jp < tr.pairs; jp++) {                                            \
            zc_quad q = zc_leaf_pair(in, tr.e, jp);                                             \
            bool last = jp + 1u == tr.pairs;                                                    \
            uint32_t merges = 0;                                                                \
            for (uint32_t x = jp; x & 1u; x >>= 1) merges++;                                    \
            if (last) merges = depth;                                                           \
            A *s = st + (size_t)(depth ? depth - 1u : 0u) * len;                                \
            if (last && merges == 0) {                                                          \
                ZC_LEAF_LOOP(ZC_W_ROOT, T, LOAD, OP, STORE, q, base, len);                      \
            } else if (last && merges == 1) {                                                   \
                ZC_LEAF_LOOP(ZC_W_LAST, T, LOAD, OP, STORE, q, base, len);                      \
            } else if (merges == 0) {                                                           \
                s = st + (size_t)depth++ * len;                                                 \
                ZC_LEAF_LOOP(ZC_W_PUSH, T, LOAD, OP, STORE, q, base, len);                      \
            } else {                                                                            \
                ZC_LEAF_LOOP(ZC_W_MERGE, T, LOAD, OP, STORE, q, base, len);                     \
                depth = name##_fold(dst, st, n, depth, merges - 1u, last, len);                 \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    __attribute__((noinline)) static void name##_blocks(void *out, const void *const *in,       \
                                                        uint32_t n, zc_tree tr, size_t count) { \
        A st[ZC_STACK_BYTES / sizeof(A)];                                                       \
        size_t len = ZC_BLOCK, full = 0;                                                        \
        if ((size_t)tr.depth * ZC_BLOCK > sizeof st / sizeof(A))                                \
            len = (sizeof st / sizeof(A) / tr.depth) & ~(size_t)7;                              \
        else                                                                                    \
            for (full = 0; full + ZC_BLOCK <= count; full += ZC_BLOCK)                          \
                name##_block((T *)out, in, n, tr, st, full, ZC_BLOCK);                          \
        for (size_t base = full; base < count; base += len)                                     \
            name##_block((T *)out, in, n, tr, st, base, count - base < len ? count - base : len); \
    }                                                                                           \
    /* A one-line call's count (at most ZC_TINY_ELEMS elements, at most ZC_TINY_RANKS inputs)  \
     * element by element: the p leaves, then each level's pairs combined left to right down    \
     * to the root, the block code's tree and operations without its loops over blocks. */      \
    ZC_INLINE A name##_leaf(const void *const *in, zc_tree tr, uint32_t i, size_t j) {          \
        if (i >= tr.e) return LOAD(((const T *)in[i + tr.e])[j]);                               \
        return OP(LOAD(((const T *)in[2u * i])[j]), LOAD(((const T *)in[2u * i + 1u])[j]));     \
    }                                                                                           \
    ZC_INLINE void name##_tiny(T *out, const void *const *in, uint32_t n, zc_tree tr,           \
                               size_t count) {                                                  \
        uint32_t p = 2u * tr.pairs; /* >= 2: n >= 2 */                                          \
        (void)n; /* STORE reads it where it divides */                                          \
        for (size_t j = 0; j < count; j++) {                                                    \
            A v[ZC_TINY_RANKS];                                                                 \
            v[0] = name##_leaf(in, tr, 0, j);                                                   \
            v[1] = name##_leaf(in, tr, 1, j);                                                   \
            for (uint32_t i = 2; i < p; i++) v[i] = name##_leaf(in, tr, i, j);                  \
            for (uint32_t w = p; w > 2u; w /= 2u)                                               \
                for (uint32_t i = 0; i < w / 2u; i++) v[i] = OP(v[2u * i], v[2u * i + 1u]);      \
            out[j] = STORE(OP(v[0], v[1]));                                                     \
        }                                                                                       \
    }                                                                                           \
    static void name(void *out, const void *const *in, uint32_t n, size_t count) {              \
        if (n == 2u && count <= ZC_TINY_ELEMS) { /* the tree of two: one pair, its root */      \
            const T *a = (const T *)in[0], *b = (const T *)in[1];                               \
            for (size_t j = 0; j < count; j++)                                                  \
                ((T *)out)[j] = STORE(OP(LOAD(a[j]), LOAD(b[j])));                              \
            return;                                                                             \
        }                                                                                       \
        zc_tree tr = zc_tree_of(n);                                                             \
        if (count <= ZC_TINY_ELEMS && n >= 2u && n <= ZC_TINY_RANKS)                            \
            name##_tiny((T *)out, in, n, tr, count);                                            \
        else                                                                                    \
            name##_blocks(out, in, n, tr, count);                                               \
    }

/* ---- pairwise accumulator primitives ------------------------------------------------------
 * ZC_PRIMS(name, T, A, LOAD, OP, STORE) defines name_load (A from T), name_combine (A (+) A)
 * and name_store (A to T for n ranks) over whole arrays, for the log-depth algorithms that move
 * partial results between ranks in the accumulator format A. The accumulator of integer AVG is
 * an exact sum in any wide enough type, so its format here may differ from the n-input kernel's
 * (whose width depends on n): the bits of the stored quotient do not. */
#define ZC_PRIMS(name, T, A, LOAD, OP, STORE)                                                    \
    static void name##_load(void *acc, const void *in, size_t count) {                          \
        A *a = (A *)acc;                                                                        \
        const T *x = (const T *)in;                                                             \
        for (size_t j = 0; j < count; j++) a[j] = LOAD(x[j]);                                   \
    }                                                                                           \
    static void name##_combine(void *out, const void *left, const void *right, size_t count) {  \
        A *o = (A *)out;                                                                        \
        const A *l = (const A *)left, *r = (const A *)right;                                    \
        ZC_IVDEP for (size_t j = 0; j < count; j++) o[j] = OP(l[j], r[j]);                      \
    }                                                                                           \
    static void name##_store(void *out, const void *acc, size_t count, uint32_t n) {            \
        T *o = (T *)out;                                                                        \
        const A *a = (const A *)acc;                                                            \
        (void)n;                                                                                \
        for (size_t j = 0; j < count; j++) o[j] = STORE(a[j]);                                  \
    }

/* A (type, op)'s n-input kernel zc_red_X and its primitives zc_acc_X, for the pairs whose
 * accumulator is the same in both. */
#define ZC_BOTH(X, T, A, LOAD, OP, STORE)                                                        \
    ZC_KERNEL(zc_red_##X, T, A, LOAD, OP, STORE)                                                \
    ZC_PRIMS(zc_acc_##X, T, A, LOAD, OP, STORE)

#define ZC_ID(x) (x)
#define ZC_ADD(a, b) ((a) + (b))
#define ZC_IMIN(a, b) ((b) < (a) ? (b) : (a))
#define ZC_IMAX(a, b) ((b) > (a) ? (b) : (a))

/* ---- integers ----------------------------------------------------------------------------
 * SUM/PROD wrap: the arithmetic is done in an unsigned type at least as wide (and at least
 * 32 bits, so uint8 products do not promote to signed int), then cast back. */
#define ZC_INT_KERNELS(tag, T, U)                                                                \
    ZC_INLINE T zc_##tag##_wadd(T a, T b) { return (T)((U)a + (U)b); }                           \
    ZC_INLINE T zc_##tag##_wmul(T a, T b) { return (T)((U)a * (U)b); }                           \
    ZC_BOTH(tag##_sum, T, T, ZC_ID, zc_##tag##_wadd, ZC_ID)                                     \
    ZC_BOTH(tag##_prod, T, T, ZC_ID, zc_##tag##_wmul, ZC_ID)                                    \
    ZC_BOTH(tag##_min, T, T, ZC_ID, ZC_IMIN, ZC_ID)                                             \
    ZC_BOTH(tag##_max, T, T, ZC_ID, ZC_IMAX, ZC_ID)

ZC_INT_KERNELS(i8, int8_t, uint32_t)
ZC_INT_KERNELS(u8, uint8_t, uint32_t)
ZC_INT_KERNELS(i32, int32_t, uint32_t)
ZC_INT_KERNELS(u32, uint32_t, uint32_t)
ZC_INT_KERNELS(i64, int64_t, uint64_t)
ZC_INT_KERNELS(u64, uint64_t, uint64_t)

/* AVG of 8- and 32-bit integers: the exact sum in a wide accumulator, then truncated toward
 * zero. While |sum| < 2^52 the quotient is taken in double, which is exact after truncation:
 * an integer quotient is representable and comes back as itself, and a fractional one lies
 * at least 1/n from every integer while the division's error (under any rounding mode) is
 * below ulp(sum/n) <= 2^-52 * |sum|/n < 1/n. That holds for n < 2^23 (8-bit, summed in
 * int32, vectorized) and n <= 2^20 (32-bit); more ranks take the integer division. */
#define ZC_AVG_DBL(T, Q, s) ((T)(Q)((double)(s) / (double)n)) /* Q holds the quotient */
#define ZC_i8_AVG_DBL(s) ZC_AVG_DBL(int8_t, int32_t, s)
#define ZC_u8_AVG_DBL(s) ZC_AVG_DBL(uint8_t, int32_t, s)
#define ZC_i32_AVG_DBL(s) ZC_AVG_DBL(int32_t, int64_t, s)
#define ZC_u32_AVG_DBL(s) ZC_AVG_DBL(uint32_t, int64_t, s)
#define ZC_i8_AVG_DIV(s) ((int8_t)((s) / (int64_t)n))
#define ZC_u8_AVG_DIV(s) ((uint8_t)((s) / n))
#define ZC_i32_AVG_DIV(s) ((int32_t)((s) / (int64_t)n))
#define ZC_u32_AVG_DIV(s) ((uint32_t)((s) / n))
#define ZC_INT_AVG(tag, T, NARROW, WIDE, DBL_MAX_N)                                              \
    ZC_KERNEL(zc_red_##tag##_avg_dbl, T, NARROW, (NARROW), ZC_ADD, ZC_##tag##_AVG_DBL)           \
    ZC_KERNEL(zc_red_##tag##_avg_div, T, WIDE, (WIDE), ZC_ADD, ZC_##tag##_AVG_DIV)               \
    static void zc_red_##tag##_avg(void *out, const void *const *in, uint32_t n, size_t count) { \
        if (n <= (DBL_MAX_N)) zc_red_##tag##_avg_dbl(out, in, n, count);                         \
        else zc_red_##tag##_avg_div(out, in, n, count);                                          \
    }

ZC_INT_AVG(i8, int8_t, int32_t, int64_t, (1u << 23) - 1u)
ZC_INT_AVG(u8, uint8_t, int32_t, uint64_t, (1u << 23) - 1u)
ZC_INT_AVG(i32, int32_t, int64_t, int64_t, 1u << 20)
ZC_INT_AVG(u32, uint32_t, int64_t, uint64_t, 1u << 20)

/* AVG of 64-bit integers: the exact 128-bit sum, divided by n (elem.h). */
#define ZC_I64_AVG(s) zc_s128_div_u32(s, n)
#define ZC_U64_AVG(s) zc_u128_div_u32(s, n)
ZC_KERNEL(zc_red_i64_avg, int64_t, zc_u128, zc_i64_wide, zc_u128_add, ZC_I64_AVG)
ZC_KERNEL(zc_red_u64_avg, uint64_t, zc_u128, zc_u64_wide, zc_u128_add, ZC_U64_AVG)

/* ---- floating types ----------------------------------------------------------------------
 * Accumulated in A (fp32 for fp32 and every narrow type, fp64 for fp64); AVG divides the sum
 * by n in A; one rounding to the stored type at the end, a NaN made canonical (elem.h). */
#define ZC_FLOAT_KERNELS(tag, T, A, DEC, ADD, MUL, MIN, MAX)                                    \
    ZC_BOTH(tag##_sum, T, A, DEC, ADD, zc_##tag##_store)                                        \
    ZC_BOTH(tag##_prod, T, A, DEC, MUL, zc_##tag##_store)                                       \
    ZC_BOTH(tag##_min, T, A, DEC, MIN, zc_##tag##_store)                                        \
    ZC_BOTH(tag##_max, T, A, DEC, MAX, zc_##tag##_store)                                        \
    ZC_BOTH(tag##_avg, T, A, DEC, ADD, ZC_##tag##_AVG)

#define ZC_f32_AVG(s) zc_f32_avg(s, n)
#define ZC_f64_AVG(s) zc_f64_avg(s, n)
#define ZC_fp16_AVG(s) zc_fp16_avg(s, n)
#define ZC_bf16_AVG(s) zc_bf16_avg(s, n)
#define ZC_e4m3_AVG(s) zc_e4m3_avg(s, n)
#define ZC_e5m2_AVG(s) zc_e5m2_avg(s, n)

ZC_FLOAT_KERNELS(f32, float, float, ZC_ID, zc_addf, zc_mulf, zc_minf, zc_maxf)
ZC_FLOAT_KERNELS(f64, double, double, ZC_ID, zc_addd, zc_muld, zc_mind, zc_maxd)
ZC_FLOAT_KERNELS(fp16, uint16_t, float, zc_fp16_dec, zc_addf, zc_mulf, zc_minf, zc_maxf)
ZC_FLOAT_KERNELS(bf16, uint16_t, float, zc_bf16_dec, zc_addf, zc_mulf, zc_minf, zc_maxf)
ZC_FLOAT_KERNELS(e4m3, uint8_t, float, zc_e4m3_dec, zc_addf, zc_mulf, zc_minf, zc_maxf)
ZC_FLOAT_KERNELS(e5m2, uint8_t, float, zc_e5m2_dec, zc_addf, zc_mulf, zc_minf, zc_maxf)

/* ---- integer AVG accumulator primitives ---------------------------------------------------
 * Integer AVG accumulators: 8-bit in int32 (exact below 2^23 ranks, which ZC_MAX_RANKS keeps),
 * int32 in int64 and uint32 in uint64 (exact for every n), 64-bit in 128 bits. The store
 * divides as the n-input kernel does for that n. */
_Static_assert(ZC_MAX_RANKS < (1u << 23), "8-bit AVG accumulators are int32");
#define ZC_i32_AVG_ST(s) (n <= (1u << 20) ? ZC_i32_AVG_DBL(s) : ZC_i32_AVG_DIV(s))
#define ZC_u32_AVG_ST(s) (n <= (1u << 20) ? ZC_u32_AVG_DBL(s) : ZC_u32_AVG_DIV(s))
ZC_PRIMS(zc_acc_i8_avg, int8_t, int32_t, (int32_t), ZC_ADD, ZC_i8_AVG_DBL)
ZC_PRIMS(zc_acc_u8_avg, uint8_t, int32_t, (int32_t), ZC_ADD, ZC_u8_AVG_DBL)
ZC_PRIMS(zc_acc_i32_avg, int32_t, int64_t, (int64_t), ZC_ADD, ZC_i32_AVG_ST)
ZC_PRIMS(zc_acc_u32_avg, uint32_t, uint64_t, (uint64_t), ZC_ADD, ZC_u32_AVG_ST)
ZC_PRIMS(zc_acc_i64_avg, int64_t, zc_u128, zc_i64_wide, zc_u128_add, ZC_I64_AVG)
ZC_PRIMS(zc_acc_u64_avg, uint64_t, zc_u128, zc_u64_wide, zc_u128_add, ZC_U64_AVG)

/* ---- dispatch ---------------------------------------------------------------------------- */
typedef void (*zc_reduce_fn)(void *out, const void *const *in, uint32_t n, size_t count);

#define ZC_ROW(tag)                                                                              \
    {[ZC_SUM] = zc_red_##tag##_sum, [ZC_PROD] = zc_red_##tag##_prod,                            \
     [ZC_MIN] = zc_red_##tag##_min, [ZC_MAX] = zc_red_##tag##_max, [ZC_AVG] = zc_red_##tag##_avg}

static const zc_reduce_fn zc_reduce_fns[ZC_DTYPE_COUNT_][ZC_OP_COUNT_] = {
    [ZC_INT8] = ZC_ROW(i8),      [ZC_UINT8] = ZC_ROW(u8),       [ZC_INT32] = ZC_ROW(i32),
    [ZC_UINT32] = ZC_ROW(u32),   [ZC_INT64] = ZC_ROW(i64),      [ZC_UINT64] = ZC_ROW(u64),
    [ZC_FLOAT16] = ZC_ROW(fp16),  [ZC_BFLOAT16] = ZC_ROW(bf16),  [ZC_FLOAT32] = ZC_ROW(f32),
    [ZC_FLOAT64] = ZC_ROW(f64),  [ZC_FP8_E4M3] = ZC_ROW(e4m3), [ZC_FP8_E5M2] = ZC_ROW(e5m2),
};

/* The caller's floating-point environment may flush subnormals to zero (x86 MXCSR FTZ and
 * DAZ, arm64 FPCR.FZ: set by -ffast-math start-up code, torch.set_flush_denormal(True), ...).
 * The device kernels never flush, so the host kernels run with flushing off and put the
 * caller's mode back: subnormal inputs and results are IEEE's on every path. The kernel is
 * called through a pointer between the two, so no floating operation moves across them. */
#if defined(__x86_64__) && defined(__SSE2__)
#define ZC_FP_FLUSH 0x8040u /* MXCSR: FTZ (bit 15), DAZ (bit 6) */
static inline uint64_t zc_fp_mode(void) {
    uint32_t c;
    __asm__ __volatile__("stmxcsr %0" : "=m"(c)::"memory");
    return c;
}
static inline void zc_fp_set(uint64_t mode) {
    uint32_t c = (uint32_t)mode;
    __asm__ __volatile__("ldmxcsr %0" ::"m"(c) : "memory");
}
#elif defined(__aarch64__)
#define ZC_FP_FLUSH (1u << 24) /* FPCR.FZ */
static inline uint64_t zc_fp_mode(void) {
    uint64_t c;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(c)::"memory");
    return c;
}
static inline void zc_fp_set(uint64_t mode) {
    __asm__ __volatile__("msr fpcr, %0" ::"r"(mode) : "memory");
}
#else
#define ZC_FP_FLUSH 0u
static inline uint64_t zc_fp_mode(void) { return 0; }
static inline void zc_fp_set(uint64_t mode) { (void)mode; }
#endif

/* Turns flushing off for a kernel call; returns the caller's mode for zc_fp_leave. */
static uint64_t zc_fp_enter(void) {
    uint64_t mode = zc_fp_mode();
    if (mode & ZC_FP_FLUSH) zc_fp_set(mode & ~(uint64_t)ZC_FP_FLUSH);
    return mode;
}
static void zc_fp_leave(uint64_t mode) {
    if (mode & ZC_FP_FLUSH) zc_fp_set(mode);
}

typedef struct zc_acc_fns {
    void (*load)(void *acc, const void *in, size_t count);
    void (*combine)(void *out, const void *left, const void *right, size_t count);
    void (*store)(void *out, const void *acc, size_t count, uint32_t n);
    uint32_t acc_bytes;
} zc_acc_fns;

#define ZC_ACC(name, A) {name##_load, name##_combine, name##_store, (uint32_t)sizeof(A)}
#define ZC_ACC_ROW(tag, A, AVG_A)                                                                \
    {[ZC_SUM] = ZC_ACC(zc_acc_##tag##_sum, A), [ZC_PROD] = ZC_ACC(zc_acc_##tag##_prod, A),       \
     [ZC_MIN] = ZC_ACC(zc_acc_##tag##_min, A), [ZC_MAX] = ZC_ACC(zc_acc_##tag##_max, A),         \
     [ZC_AVG] = ZC_ACC(zc_acc_##tag##_avg, AVG_A)}

static const zc_acc_fns zc_acc_table[ZC_DTYPE_COUNT_][ZC_OP_COUNT_] = {
    [ZC_INT8] = ZC_ACC_ROW(i8, int8_t, int32_t),
    [ZC_UINT8] = ZC_ACC_ROW(u8, uint8_t, int32_t),
    [ZC_INT32] = ZC_ACC_ROW(i32, int32_t, int64_t),
    [ZC_UINT32] = ZC_ACC_ROW(u32, uint32_t, uint64_t),
    [ZC_INT64] = ZC_ACC_ROW(i64, int64_t, zc_u128),
    [ZC_UINT64] = ZC_ACC_ROW(u64, uint64_t, zc_u128),
    [ZC_FLOAT16] = ZC_ACC_ROW(fp16, float, float),
    [ZC_BFLOAT16] = ZC_ACC_ROW(bf16, float, float),
    [ZC_FLOAT32] = ZC_ACC_ROW(f32, float, float),
    [ZC_FLOAT64] = ZC_ACC_ROW(f64, double, double),
    [ZC_FP8_E4M3] = ZC_ACC_ROW(e4m3, float, float),
    [ZC_FP8_E5M2] = ZC_ACC_ROW(e5m2, float, float),
};

void zc__reduce(void *out, const void *const *in, uint32_t n, size_t count, zc_dtype dtype,
                zc_op op) {
    /* dtype and op are checked at the API (and between ranks); n == 0 has no result. Any of
     * them here is a caller's bug: do nothing rather than read out of bounds. */
    if ((unsigned)dtype >= ZC_DTYPE_COUNT_ || (unsigned)op >= ZC_OP_COUNT_ || n == 0) return;
    uint64_t mode = zc_fp_enter();
    zc_reduce_fns[dtype][op](out, in, n, count);
    zc_fp_leave(mode);
}

/* dtype and op out of range are a caller's bug (checked at the API): the primitives then do
 * nothing and the size is 0. */
static const zc_acc_fns *zc_acc_of(zc_dtype dtype, zc_op op) {
    if ((unsigned)dtype >= ZC_DTYPE_COUNT_ || (unsigned)op >= ZC_OP_COUNT_) return 0;
    return &zc_acc_table[dtype][op];
}

size_t zc__acc_bytes(zc_dtype dtype, zc_op op) {
    const zc_acc_fns *f = zc_acc_of(dtype, op);
    return f ? f->acc_bytes : 0u;
}

void zc__acc_load(void *acc, const void *in, size_t count, zc_dtype dtype, zc_op op) {
    const zc_acc_fns *f = zc_acc_of(dtype, op);
    if (f) f->load(acc, in, count); /* exact conversions: no floating mode matters */
}

void zc__acc_combine(void *out, const void *left, const void *right, size_t count,
                     zc_dtype dtype, zc_op op) {
    const zc_acc_fns *f = zc_acc_of(dtype, op);
    if (!f) return;
    uint64_t mode = zc_fp_enter();
    f->combine(out, left, right, count);
    zc_fp_leave(mode);
}

void zc__acc_store(void *out, const void *acc, size_t count, zc_dtype dtype, zc_op op,
                   uint32_t n) {
    const zc_acc_fns *f = zc_acc_of(dtype, op);
    if (!f || n == 0) return;
    uint64_t mode = zc_fp_enter();
    f->store(out, acc, count, n);
    zc_fp_leave(mode);
}

/* ---- streaming copy ---- */

#if defined(__x86_64__) && defined(__SSE2__)
typedef long long zc_v2di __attribute__((vector_size(16)));
/* One 16-byte streaming store (movntdq), in each compiler's spelling. */
#if defined(__clang__)
#define zc_store_nt(p, v) __builtin_nontemporal_store((v), (p))
#else
#define zc_store_nt(p, v) __builtin_ia32_movntdq((p), (v))
#endif

void zc__copy_stream(void *dst, const void *src, size_t bytes) {
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (16u - ((uintptr_t)d & 15u)) & 15u;
    if (bytes < head + 64u) {
        __builtin_memcpy(d, s, bytes);
        return;
    }
    __builtin_memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    for (; bytes >= 64u; bytes -= 64u, d += 64, s += 64) {
        zc_v2di v[4];
        __builtin_memcpy(v, s, sizeof v); /* unaligned loads */
        for (int k = 0; k < 4; k++) zc_store_nt((zc_v2di *)(void *)(d + 16 * k), v[k]);
    }
    __builtin_memcpy(d, s, bytes);
    __builtin_ia32_sfence(); /* streaming stores are weakly ordered: publish them */
}
#else
void zc__copy_stream(void *dst, const void *src, size_t bytes) {
    __builtin_memcpy(dst, src, bytes);
}
#endif
