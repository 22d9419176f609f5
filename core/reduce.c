/* reduce.c: the host reduction kernels (every dtype x op) and the narrow floating-point
 * conversions (fp16, bf16, OCP fp8 e4m3 "fn" and e5m2). Rounding is done in integers or in
 * exact floating operations, so no result depends on the FPU's rounding or denormal modes.
 *
 * Must not: include anything but zcoll.h / reduce.h (the file builds freestanding), call any
 * function outside this file (the compiler may emit memcpy/memset), allocate, recurse, or divide
 * 128-bit integers with the compiler's helpers (the 64-bit AVG has its own long division).
 *
 * Determinism beyond reduce.h's contract:
 * - a floating result that is NaN is stored as the canonical quiet NaN (positive, payload
 *   zero), so NaN bits do not depend on which instruction (vector or scalar, operand order)
 *   the compiler chose; the conversion functions themselves keep the NaN's sign and payload;
 * - MIN/MAX are IEEE 754-2019 minimumNumber/maximumNumber: a NaN loses to a number, and
 *   -0 < +0, so the result does not depend on the order of equal-comparing operands;
 * - no expression here multiplies and then adds, so there is nothing for the compiler to
 *   contract into an FMA (and -std=c11 sets -ffp-contract=off anyway); every floating
 *   operation is one IEEE operation rounded to its type.
 *
 * Speed: one loop per (type, op), its inner loops free of branches (selects are written as
 * masks), over blocks of a constant size, which GCC -O2 vectorizes. Buffers hold whole
 * elements aligned to the element's size. */
#include "reduce.h"

/* Elements reduced per block: the accumulators of one block live on the stack (at most
 * 16 x 256 = 4 KiB) and stay in L1 while the ranks are folded in. */
#define ZC_BLOCK 256u

#define ZC_INLINE static inline __attribute__((always_inline))

ZC_INLINE uint32_t zc_f32_bits(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    return u;
}

ZC_INLINE float zc_bits_f32(uint32_t u) {
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}

ZC_INLINE uint64_t zc_f64_bits(double d) {
    uint64_t u;
    __builtin_memcpy(&u, &d, sizeof u);
    return u;
}

ZC_INLINE double zc_bits_f64(uint64_t u) {
    double d;
    __builtin_memcpy(&d, &u, sizeof d);
    return d;
}

/* All ones if c, else zero: selects as (x & m) | (y & ~m) keep loops free of branches. */
ZC_INLINE uint32_t zc_mask(bool c) { return 0u - (uint32_t)c; }

/* ---- conversions -------------------------------------------------------------------------
 * A narrow format is (ebits exponent bits, mbits mantissa bits, bias, ieee): ieee formats
 * spend the all-ones exponent on infinities and NaNs; the OCP "fn" formats (e4m3) have no
 * infinities and only S.1111.111 is NaN. Callers pass constants, so each format compiles to
 * its own straight-line code. */

/* Exact: every narrow value is an fp32 value. A subnormal m * 2^(1-bias-mbits) is (float)m,
 * exact for m < 2^24, with bias+mbits-1 taken off its exponent field (the result stays normal
 * for every format here). bf16 (bias 127: its subnormals are fp32's) is a plain shift
 * instead. NaN comes back quiet, keeping sign and payload. */
ZC_INLINE float zc_decode(uint32_t v, uint32_t ebits, uint32_t mbits, uint32_t bias, bool ieee) {
    uint32_t emask = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u, sh = 23u - mbits;
    uint32_t sign = ((v >> (ebits + mbits)) & 1u) << 31;
    uint32_t e = (v >> mbits) & emask, m = v & mmask;
    uint32_t normal = ((e + 127u - bias) << 23) | (m << sh);
    uint32_t m_nz = zc_mask(m != 0);
    uint32_t sub = (zc_f32_bits((float)(int32_t)m) - ((bias + mbits - 1u) << 23)) & m_nz;
    uint32_t special = ieee ? 0x7f800000u | (m << sh) | (m_nz & 0x00400000u) : 0x7fc00000u;
    uint32_t is_special = zc_mask((e == emask) & (ieee | (m == mmask)));
    uint32_t is_sub = zc_mask(e == 0);
    uint32_t mag = (special & is_special) | (~is_special & ((sub & is_sub) | (normal & ~is_sub)));
    return zc_bits_f32(sign | mag);
}

/* Round to nearest, ties to even.
 * Normal target: rebias the fp32 bits and drop 23-mbits mantissa bits, adding half-1 plus the
 * kept last bit first (ties to even in integers); a carry out of the mantissa lands in the
 * exponent field, which is exactly the next binade or the overflow code.
 * Subnormal target (|f| < 2^(1-bias)): y = |f| in units of the subnormal step (an exact
 * scaling by a power of two), split exactly into integer part (truncating conversion) and
 * fraction, then rounded in integers. An fp32 subnormal f gives 0 either way, so DAZ/FTZ
 * cannot change the result.
 * Overflow: infinity for ieee, NaN for fn (whose largest finite code is S.1111.110). NaN keeps
 * its sign and the payload's top bits, forced quiet; with canon, every NaN gives the positive
 * quiet NaN with zero payload instead. */
ZC_INLINE uint32_t zc_encode(float f, uint32_t ebits, uint32_t mbits, uint32_t bias, bool ieee,
                             bool canon) {
    uint32_t emask = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u, sh = 23u - mbits;
    uint32_t u = zc_f32_bits(f), a = u & 0x7fffffffu;
    uint32_t quiet_nan = ieee ? (emask << mbits) | (1u << (mbits - 1u)) : (emask << mbits) | mmask;
    uint32_t nan = quiet_nan | (ieee && !canon ? (a >> sh) & mmask : 0u);
    uint32_t max_finite = ieee ? ((emask - 1u) << mbits) | mmask : (emask << mbits) | (mmask - 1u);
    uint32_t overflow = ieee ? emask << mbits : nan;
    uint32_t r = a - ((127u - bias) << 23);
    uint32_t code = (r + (1u << (sh - 1u)) - 1u + ((r >> sh) & 1u)) >> sh;
    if (bias < 127u) { /* constant: the format has subnormals above fp32's smallest normal */
        uint32_t is_sub = zc_mask(a < (128u - bias) << 23);
        float y = zc_bits_f32(a & is_sub) * zc_bits_f32((127u + bias + mbits - 1u) << 23);
        int32_t t = (int32_t)y; /* 0 <= y < 2^mbits */
        float frac = y - (float)t;
        uint32_t q = (uint32_t)t + (zc_mask(frac > 0.5f) & 1u) +
                     (zc_mask(frac == 0.5f) & (uint32_t)t & 1u);
        code = (q & is_sub) | (code & ~is_sub);
    }
    if (ebits < 8u) { /* constant: with fp32's exponent range the carry already gives inf */
        uint32_t is_over = zc_mask(code > max_finite);
        code = (overflow & is_over) | (code & ~is_over);
    }
    uint32_t is_nan = zc_mask(a > 0x7f800000u);
    code = (nan & is_nan) | (code & ~is_nan);
    uint32_t sign = (u >> 31) << (ebits + mbits);
    return (canon ? sign & ~is_nan : sign) | code;
}

ZC_INLINE float zc_fp16_dec(uint16_t h) { return zc_decode(h, 5, 10, 15, true); }
ZC_INLINE float zc_bf16_dec(uint16_t b) { return zc_bits_f32((uint32_t)b << 16); }
ZC_INLINE float zc_e4m3_dec(uint8_t v) { return zc_decode(v, 4, 3, 7, false); }
ZC_INLINE float zc_e5m2_dec(uint8_t v) { return zc_decode(v, 5, 2, 15, true); }

float zc__fp16_to_f32(uint16_t h) { return zc_fp16_dec(h); }
uint16_t zc__f32_to_fp16(float f) { return (uint16_t)zc_encode(f, 5, 10, 15, true, false); }
float zc__bf16_to_f32(uint16_t b) { return zc_bf16_dec(b); }
uint16_t zc__f32_to_bf16(float f) { return (uint16_t)zc_encode(f, 8, 7, 127, true, false); }
float zc__e4m3_to_f32(uint8_t v) { return zc_e4m3_dec(v); }
uint8_t zc__f32_to_e4m3(float f) { return (uint8_t)zc_encode(f, 4, 3, 7, false, false); }
float zc__e5m2_to_f32(uint8_t v) { return zc_e5m2_dec(v); }
uint8_t zc__f32_to_e5m2(float f) { return (uint8_t)zc_encode(f, 5, 2, 15, true, false); }

/* ---- element operations ------------------------------------------------------------------ */

/* minimumNumber / maximumNumber: NaN loses to a number (both NaN: NaN); -0 < +0 (for equal
 * operands the OR of the bits keeps a minus sign, the AND drops it). */
ZC_INLINE float zc_minf(float a, float b) {
    float r = (b < a || a != a) ? b : a;
    return a == b ? zc_bits_f32(zc_f32_bits(a) | zc_f32_bits(b)) : r;
}
ZC_INLINE float zc_maxf(float a, float b) {
    float r = (b > a || a != a) ? b : a;
    return a == b ? zc_bits_f32(zc_f32_bits(a) & zc_f32_bits(b)) : r;
}
ZC_INLINE double zc_mind(double a, double b) {
    double r = (b < a || a != a) ? b : a;
    return a == b ? zc_bits_f64(zc_f64_bits(a) | zc_f64_bits(b)) : r;
}
ZC_INLINE double zc_maxd(double a, double b) {
    double r = (b > a || a != a) ? b : a;
    return a == b ? zc_bits_f64(zc_f64_bits(a) & zc_f64_bits(b)) : r;
}

ZC_INLINE float zc_canonf(float x) {
    uint32_t is_nan = zc_mask(x != x);
    return zc_bits_f32((0x7fc00000u & is_nan) | (zc_f32_bits(x) & ~is_nan));
}
ZC_INLINE double zc_canond(double x) { return x != x ? zc_bits_f64(0x7ff8000000000000ull) : x; }

/* ---- kernels -----------------------------------------------------------------------------
 * ZC_KERNEL(name, T, A, LOAD, OP, STORE): T is the stored element type, A the accumulator
 * type; LOAD(x) turns an element into an accumulator, OP(acc, x) folds the next rank in,
 * STORE(acc) rounds the finished accumulator back (it may use n).
 *
 * A block folds rank 0 and 1 into the accumulators, ranks 2..n-2 onto them, and the last rank
 * on the way out; n = 1 and 2 go straight from the inputs to out. Every loop reads element j
 * of its inputs before it writes element j of out and touches no other element, so out ==
 * in[k] is safe; ZC_IVDEP tells the compiler so (it cannot know the overlap is exact), which
 * lets it vectorize the loops that write out without a run-time overlap check.
 *
 * The block function is always inlined, once with the constant ZC_BLOCK (which GCC -O2
 * vectorizes without a remainder loop) and once for the tail; both compute the same
 * per-element operations. */
#if defined(__clang__)
#define ZC_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define ZC_IVDEP _Pragma("GCC ivdep")
#else
#define ZC_IVDEP
#endif

#define ZC_KERNEL(name, T, A, LOAD, OP, STORE)                                                   \
    ZC_INLINE void name##_block(T *out, const void *const *in, uint32_t n, size_t base,         \
                                size_t len) {                                                   \
        const T *s0 = (const T *)in[0] + base, *s1 = (const T *)in[n > 1 ? 1 : 0] + base;       \
        T *dst = out + base;                                                                    \
        if (n == 1) {                                                                           \
            ZC_IVDEP for (size_t j = 0; j < len; j++) dst[j] = STORE(LOAD(s0[j]));              \
            return;                                                                             \
        }                                                                                       \
        if (n == 2) {                                                                           \
            ZC_IVDEP for (size_t j = 0; j < len; j++)                                           \
                dst[j] = STORE(OP(LOAD(s0[j]), LOAD(s1[j])));                                   \
            return;                                                                             \
        }                                                                                       \
        A acc[ZC_BLOCK];                                                                        \
        for (size_t j = 0; j < len; j++) acc[j] = OP(LOAD(s0[j]), LOAD(s1[j]));                 \
        for (uint32_t k = 2; k + 1 < n; k++) {                                                  \
            const T *src = (const T *)in[k] + base;                                             \
            for (size_t j = 0; j < len; j++) acc[j] = OP(acc[j], LOAD(src[j]));                 \
        }                                                                                       \
        const T *last = (const T *)in[n - 1] + base;                                            \
        ZC_IVDEP for (size_t j = 0; j < len; j++) dst[j] = STORE(OP(acc[j], LOAD(last[j])));    \
    }                                                                                           \
    static void name(void *out, const void *const *in, uint32_t n, size_t count) {              \
        size_t full = count - count % ZC_BLOCK;                                                 \
        for (size_t base = 0; base < full; base += ZC_BLOCK)                                    \
            name##_block((T *)out, in, n, base, ZC_BLOCK);                                      \
        if (full < count) name##_block((T *)out, in, n, full, count - full);                    \
    }

#define ZC_ID(x) (x)
#define ZC_ADD(a, b) ((a) + (b))
#define ZC_MUL(a, b) ((a) * (b))
#define ZC_IMIN(a, b) ((b) < (a) ? (b) : (a))
#define ZC_IMAX(a, b) ((b) > (a) ? (b) : (a))

/* ---- integers ----------------------------------------------------------------------------
 * SUM/PROD wrap: the arithmetic is done in an unsigned type at least as wide (and at least
 * 32 bits, so uint8 products do not promote to signed int), then cast back. */
#define ZC_INT_KERNELS(tag, T, U)                                                                \
    ZC_INLINE T zc_##tag##_wadd(T a, T b) { return (T)((U)a + (U)b); }                           \
    ZC_INLINE T zc_##tag##_wmul(T a, T b) { return (T)((U)a * (U)b); }                           \
    ZC_KERNEL(zc_red_##tag##_sum, T, T, ZC_ID, zc_##tag##_wadd, ZC_ID)                          \
    ZC_KERNEL(zc_red_##tag##_prod, T, T, ZC_ID, zc_##tag##_wmul, ZC_ID)                         \
    ZC_KERNEL(zc_red_##tag##_min, T, T, ZC_ID, ZC_IMIN, ZC_ID)                                  \
    ZC_KERNEL(zc_red_##tag##_max, T, T, ZC_ID, ZC_IMAX, ZC_ID)

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

/* AVG of 64-bit integers: the exact sum as a two-word 128-bit integer (two's complement for
 * int64), divided by n in a long division by 32-bit digits (each step divides a 64-bit value
 * natively). The quotient fits 64 bits: it lies between the inputs' min and max. */
typedef struct zc_u128 {
    uint64_t lo, hi;
} zc_u128;

ZC_INLINE zc_u128 zc_u128_add(zc_u128 s, zc_u128 x) {
    uint64_t lo = s.lo + x.lo;
    s.hi += x.hi + (uint64_t)(lo < x.lo);
    s.lo = lo;
    return s;
}

/* floor(v / d) for v < d * 2^64. */
ZC_INLINE uint64_t zc_u128_div_u32(zc_u128 v, uint32_t d) {
    uint64_t x = ((v.hi % d) << 32) | (v.lo >> 32);
    uint64_t q1 = x / d;
    x = ((x % d) << 32) | (v.lo & 0xffffffffu);
    return (q1 << 32) | (x / d);
}

/* v / d truncated toward zero, v a two's complement 128-bit value whose quotient fits int64. */
ZC_INLINE int64_t zc_s128_div_u32(zc_u128 v, uint32_t d) {
    uint64_t neg = 0u - (v.hi >> 63); /* all ones if v < 0 */
    zc_u128 mag = {(v.lo ^ neg) - neg, (v.hi ^ neg) + (uint64_t)(neg && v.lo == 0)};
    uint64_t q = zc_u128_div_u32(mag, d);
    return (int64_t)((q ^ neg) - neg); /* q <= 2^63; -2^63 wraps to INT64_MIN */
}

#define ZC_I64_LOAD(x) ((zc_u128){(uint64_t)(x), (x) < 0 ? ~0ull : 0u}) /* sign-extended */
#define ZC_I64_AVG(s) zc_s128_div_u32(s, n)
#define ZC_U64_LOAD(x) ((zc_u128){(x), 0u})
#define ZC_U64_AVG(s) zc_u128_div_u32(s, n)
ZC_KERNEL(zc_red_i64_avg, int64_t, zc_u128, ZC_I64_LOAD, zc_u128_add, ZC_I64_AVG)
ZC_KERNEL(zc_red_u64_avg, uint64_t, zc_u128, ZC_U64_LOAD, zc_u128_add, ZC_U64_AVG)

/* ---- floating types ----------------------------------------------------------------------
 * Accumulated in A (fp32 for fp32 and every narrow type, fp64 for fp64); AVG divides the sum
 * by n in A; one rounding to the stored type at the end, a NaN made canonical. */
#define ZC_FLOAT_KERNELS(tag, T, A, DEC, MIN, MAX)                                                \
    ZC_KERNEL(zc_red_##tag##_sum, T, A, DEC, ZC_ADD, ZC_##tag##_STORE)                          \
    ZC_KERNEL(zc_red_##tag##_prod, T, A, DEC, ZC_MUL, ZC_##tag##_STORE)                         \
    ZC_KERNEL(zc_red_##tag##_min, T, A, DEC, MIN, ZC_##tag##_STORE)                             \
    ZC_KERNEL(zc_red_##tag##_max, T, A, DEC, MAX, ZC_##tag##_STORE)                             \
    ZC_KERNEL(zc_red_##tag##_avg, T, A, DEC, ZC_ADD, ZC_##tag##_AVG)

#define ZC_f32_STORE(s) zc_canonf(s)
#define ZC_f32_AVG(s) zc_canonf((s) / (float)n)
#define ZC_f64_STORE(s) zc_canond(s)
#define ZC_f64_AVG(s) zc_canond((s) / (double)n)
#define ZC_f16_STORE(s) ((uint16_t)zc_encode(s, 5, 10, 15, true, true))
#define ZC_f16_AVG(s) ZC_f16_STORE((s) / (float)n)
#define ZC_bf16_STORE(s) ((uint16_t)zc_encode(s, 8, 7, 127, true, true))
#define ZC_bf16_AVG(s) ZC_bf16_STORE((s) / (float)n)
#define ZC_e4m3_STORE(s) ((uint8_t)zc_encode(s, 4, 3, 7, false, true))
#define ZC_e4m3_AVG(s) ZC_e4m3_STORE((s) / (float)n)
#define ZC_e5m2_STORE(s) ((uint8_t)zc_encode(s, 5, 2, 15, true, true))
#define ZC_e5m2_AVG(s) ZC_e5m2_STORE((s) / (float)n)

ZC_FLOAT_KERNELS(f32, float, float, ZC_ID, zc_minf, zc_maxf)
ZC_FLOAT_KERNELS(f64, double, double, ZC_ID, zc_mind, zc_maxd)
ZC_FLOAT_KERNELS(f16, uint16_t, float, zc_fp16_dec, zc_minf, zc_maxf)
ZC_FLOAT_KERNELS(bf16, uint16_t, float, zc_bf16_dec, zc_minf, zc_maxf)
ZC_FLOAT_KERNELS(e4m3, uint8_t, float, zc_e4m3_dec, zc_minf, zc_maxf)
ZC_FLOAT_KERNELS(e5m2, uint8_t, float, zc_e5m2_dec, zc_minf, zc_maxf)

/* ---- dispatch ---------------------------------------------------------------------------- */
typedef void (*zc_reduce_fn)(void *out, const void *const *in, uint32_t n, size_t count);

#define ZC_ROW(tag)                                                                              \
    {[ZC_SUM] = zc_red_##tag##_sum, [ZC_PROD] = zc_red_##tag##_prod,                            \
     [ZC_MIN] = zc_red_##tag##_min, [ZC_MAX] = zc_red_##tag##_max, [ZC_AVG] = zc_red_##tag##_avg}

static const zc_reduce_fn zc_reduce_fns[ZC_DTYPE_COUNT_][ZC_OP_COUNT_] = {
    [ZC_INT8] = ZC_ROW(i8),      [ZC_UINT8] = ZC_ROW(u8),       [ZC_INT32] = ZC_ROW(i32),
    [ZC_UINT32] = ZC_ROW(u32),   [ZC_INT64] = ZC_ROW(i64),      [ZC_UINT64] = ZC_ROW(u64),
    [ZC_FLOAT16] = ZC_ROW(f16),  [ZC_BFLOAT16] = ZC_ROW(bf16),  [ZC_FLOAT32] = ZC_ROW(f32),
    [ZC_FLOAT64] = ZC_ROW(f64),  [ZC_FP8_E4M3] = ZC_ROW(e4m3), [ZC_FP8_E5M2] = ZC_ROW(e5m2),
};

void zc__reduce(void *out, const void *const *in, uint32_t n, size_t count, zc_dtype dtype,
                zc_op op) {
    /* dtype and op are checked at the API (and between ranks); n == 0 has no result. Any of
     * them here is a caller's bug: do nothing rather than read out of bounds. */
    if ((unsigned)dtype >= ZC_DTYPE_COUNT_ || (unsigned)op >= ZC_OP_COUNT_ || n == 0) return;
    zc_reduce_fns[dtype][op](out, in, n, count);
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
