/* elem.h: the element code of every reduction, one source compiled into both the host kernels
 * (core/reduce.c, C11) and the device kernels (gpu/reduce.cu, CUDA C++), which is what keeps
 * the promise that host and device results are bitwise equal:
 * - the narrow floating-point formats (fp16, bf16, OCP fp8 e4m3 "fn" and e5m2): exact decoding
 *   to fp32 and rounding to nearest, ties to even, done in integers or in exact operations, so
 *   no result depends on the FPU's rounding or denormal modes;
 * - each stored type's load (to its accumulator) and store (one rounding; a NaN becomes the
 *   canonical quiet NaN), and AVG's division;
 * - MIN/MAX as IEEE 754-2019 minimumNumber/maximumNumber (a NaN loses to a number, -0 < +0);
 * - 64-bit AVG's exact 128-bit sum and its long division by 32-bit digits.
 * Floating operations go through ZC_FADD/ZC_FMUL/ZC_FDIV (and the double forms): plain C
 * operators on the host (-std=c11 does not contract them into FMAs), the _rn intrinsics on the
 * device (which nvcc never contracts); each is one IEEE operation rounded to its type.
 * Header only (every function static inline / __device__); the includer provides <stdint.h>
 * and <stdbool.h> (bool is C++'s own on the device). Calls nothing, allocates nothing. */
#ifndef ZC_ELEM_H
#define ZC_ELEM_H

#ifdef __CUDACC__
#define ZC_ELEM static __device__ __forceinline__
#define ZC_FADD(a, b) __fadd_rn(a, b)
#define ZC_FSUB(a, b) __fsub_rn(a, b)
#define ZC_FMUL(a, b) __fmul_rn(a, b)
#define ZC_FDIV(a, b) __fdiv_rn(a, b)
#define ZC_DADD(a, b) __dadd_rn(a, b)
#define ZC_DMUL(a, b) __dmul_rn(a, b)
#define ZC_DDIV(a, b) __ddiv_rn(a, b)
#define ZC_I2F(i) __int2float_rn(i)      /* exact for |i| < 2^24 */
#define ZC_F2I_RZ(f) __float2int_rz(f)   /* truncation toward zero */
ZC_ELEM uint32_t zc_f32_bits(float f) { return __float_as_uint(f); }
ZC_ELEM float zc_bits_f32(uint32_t u) { return __uint_as_float(u); }
ZC_ELEM uint64_t zc_f64_bits(double d) { return (uint64_t)__double_as_longlong(d); }
ZC_ELEM double zc_bits_f64(uint64_t u) { return __longlong_as_double((long long)u); }
#else
#define ZC_ELEM static inline __attribute__((always_inline))
#define ZC_FADD(a, b) ((a) + (b))
#define ZC_FSUB(a, b) ((a) - (b))
#define ZC_FMUL(a, b) ((a) * (b))
#define ZC_FDIV(a, b) ((a) / (b))
#define ZC_DADD(a, b) ((a) + (b))
#define ZC_DMUL(a, b) ((a) * (b))
#define ZC_DDIV(a, b) ((a) / (b))
#define ZC_I2F(i) ((float)(i))
#define ZC_F2I_RZ(f) ((int32_t)(f))
ZC_ELEM uint32_t zc_f32_bits(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    return u;
}
ZC_ELEM float zc_bits_f32(uint32_t u) {
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}
ZC_ELEM uint64_t zc_f64_bits(double d) {
    uint64_t u;
    __builtin_memcpy(&u, &d, sizeof u);
    return u;
}
ZC_ELEM double zc_bits_f64(uint64_t u) {
    double d;
    __builtin_memcpy(&d, &u, sizeof d);
    return d;
}
#endif

/* All ones if c, else zero: selects as (x & m) | (y & ~m) keep loops free of branches. */
ZC_ELEM uint32_t zc_mask(bool c) { return 0u - (uint32_t)c; }

/* ---- narrow formats ----------------------------------------------------------------------
 * A narrow format is (ebits exponent bits, mbits mantissa bits, bias, ieee): ieee formats
 * spend the all-ones exponent on infinities and NaNs; the OCP "fn" formats (e4m3) have no
 * infinities and only S.1111.111 is NaN. Callers pass constants, so each format compiles to
 * its own straight-line code. */

/* Exact: every narrow value is an fp32 value. A subnormal m * 2^(1-bias-mbits) is (float)m,
 * exact for m < 2^24, with bias+mbits-1 taken off its exponent field (the result stays normal
 * for every format here). bf16 (bias 127: its subnormals are fp32's) is a plain shift
 * instead. NaN comes back quiet, keeping sign and payload. */
ZC_ELEM float zc_decode(uint32_t v, uint32_t ebits, uint32_t mbits, uint32_t bias, bool ieee) {
    uint32_t emask = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u, sh = 23u - mbits;
    uint32_t sign = ((v >> (ebits + mbits)) & 1u) << 31;
    uint32_t e = (v >> mbits) & emask, m = v & mmask;
    uint32_t normal = ((e + 127u - bias) << 23) | (m << sh);
    uint32_t m_nz = zc_mask(m != 0);
    uint32_t sub = (zc_f32_bits(ZC_I2F((int32_t)m)) - ((bias + mbits - 1u) << 23)) & m_nz;
    uint32_t special = ieee ? 0x7f800000u | (m << sh) | (m_nz & 0x00400000u) : 0x7fc00000u;
    uint32_t is_special = zc_mask((e == emask) && (ieee || (m == mmask)));
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
ZC_ELEM uint32_t zc_encode(float f, uint32_t ebits, uint32_t mbits, uint32_t bias, bool ieee,
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
        float y = ZC_FMUL(zc_bits_f32(a & is_sub), zc_bits_f32((127u + bias + mbits - 1u) << 23));
        int32_t t = ZC_F2I_RZ(y); /* 0 <= y < 2^mbits */
        float frac = ZC_FSUB(y, ZC_I2F(t));
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

/* The conversions of each format (keeping a NaN's sign and payload). */
ZC_ELEM float zc_fp16_dec(uint16_t h) { return zc_decode(h, 5, 10, 15, true); }
ZC_ELEM float zc_bf16_dec(uint16_t b) { return zc_bits_f32((uint32_t)b << 16); }
ZC_ELEM float zc_e4m3_dec(uint8_t v) { return zc_decode(v, 4, 3, 7, false); }
ZC_ELEM float zc_e5m2_dec(uint8_t v) { return zc_decode(v, 5, 2, 15, true); }
ZC_ELEM uint16_t zc_fp16_enc(float f) { return (uint16_t)zc_encode(f, 5, 10, 15, true, false); }
ZC_ELEM uint16_t zc_bf16_enc(float f) { return (uint16_t)zc_encode(f, 8, 7, 127, true, false); }
ZC_ELEM uint8_t zc_e4m3_enc(float f) { return (uint8_t)zc_encode(f, 4, 3, 7, false, false); }
ZC_ELEM uint8_t zc_e5m2_enc(float f) { return (uint8_t)zc_encode(f, 5, 2, 15, true, false); }

/* ---- element operations ------------------------------------------------------------------ */

/* minimumNumber / maximumNumber: NaN loses to a number (both NaN: NaN); -0 < +0 (for equal
 * operands the OR of the bits keeps a minus sign, the AND drops it). */
ZC_ELEM float zc_minf(float a, float b) {
    float r = (b < a || a != a) ? b : a;
    return a == b ? zc_bits_f32(zc_f32_bits(a) | zc_f32_bits(b)) : r;
}
ZC_ELEM float zc_maxf(float a, float b) {
    float r = (b > a || a != a) ? b : a;
    return a == b ? zc_bits_f32(zc_f32_bits(a) & zc_f32_bits(b)) : r;
}
ZC_ELEM double zc_mind(double a, double b) {
    double r = (b < a || a != a) ? b : a;
    return a == b ? zc_bits_f64(zc_f64_bits(a) | zc_f64_bits(b)) : r;
}
ZC_ELEM double zc_maxd(double a, double b) {
    double r = (b > a || a != a) ? b : a;
    return a == b ? zc_bits_f64(zc_f64_bits(a) & zc_f64_bits(b)) : r;
}
ZC_ELEM float zc_addf(float a, float b) { return ZC_FADD(a, b); }
ZC_ELEM float zc_mulf(float a, float b) { return ZC_FMUL(a, b); }
ZC_ELEM double zc_addd(double a, double b) { return ZC_DADD(a, b); }
ZC_ELEM double zc_muld(double a, double b) { return ZC_DMUL(a, b); }

/* A NaN becomes the canonical quiet NaN (positive, payload zero), so stored NaN bits do not
 * depend on which instruction (vector or scalar, operand order) produced them. */
ZC_ELEM float zc_canonf(float x) {
    uint32_t is_nan = zc_mask(x != x);
    return zc_bits_f32((0x7fc00000u & is_nan) | (zc_f32_bits(x) & ~is_nan));
}
ZC_ELEM double zc_canond(double x) { return x != x ? zc_bits_f64(0x7ff8000000000000ull) : x; }

/* Stores: the finished fp32 (fp64) accumulator rounded once to the stored type, NaN canonical;
 * the _avg forms divide the sum by n first, in the accumulator's type. */
ZC_ELEM float zc_f32_store(float s) { return zc_canonf(s); }
ZC_ELEM double zc_f64_store(double s) { return zc_canond(s); }
ZC_ELEM uint16_t zc_fp16_store(float s) { return (uint16_t)zc_encode(s, 5, 10, 15, true, true); }
ZC_ELEM uint16_t zc_bf16_store(float s) { return (uint16_t)zc_encode(s, 8, 7, 127, true, true); }
ZC_ELEM uint8_t zc_e4m3_store(float s) { return (uint8_t)zc_encode(s, 4, 3, 7, false, true); }
ZC_ELEM uint8_t zc_e5m2_store(float s) { return (uint8_t)zc_encode(s, 5, 2, 15, true, true); }
ZC_ELEM float zc_f32_avg(float s, uint32_t n) { return zc_canonf(ZC_FDIV(s, (float)n)); }
ZC_ELEM double zc_f64_avg(double s, uint32_t n) { return zc_canond(ZC_DDIV(s, (double)n)); }
ZC_ELEM uint16_t zc_fp16_avg(float s, uint32_t n) { return zc_fp16_store(ZC_FDIV(s, (float)n)); }
ZC_ELEM uint16_t zc_bf16_avg(float s, uint32_t n) { return zc_bf16_store(ZC_FDIV(s, (float)n)); }
ZC_ELEM uint8_t zc_e4m3_avg(float s, uint32_t n) { return zc_e4m3_store(ZC_FDIV(s, (float)n)); }
ZC_ELEM uint8_t zc_e5m2_avg(float s, uint32_t n) { return zc_e5m2_store(ZC_FDIV(s, (float)n)); }

/* ---- 64-bit AVG ---------------------------------------------------------------------------
 * The exact sum as a two-word 128-bit integer (two's complement for int64), divided by n in a
 * long division by 32-bit digits (each step divides a 64-bit value natively). The quotient
 * fits 64 bits: it lies between the inputs' min and max. */
typedef struct zc_u128 {
    uint64_t lo, hi;
} zc_u128;

ZC_ELEM zc_u128 zc_u128_of(uint64_t lo, uint64_t hi) {
    zc_u128 v;
    v.lo = lo;
    v.hi = hi;
    return v;
}
ZC_ELEM zc_u128 zc_i64_wide(int64_t x) { /* sign-extended */
    return zc_u128_of((uint64_t)x, x < 0 ? ~0ull : 0ull);
}
ZC_ELEM zc_u128 zc_u64_wide(uint64_t x) { return zc_u128_of(x, 0ull); }

ZC_ELEM zc_u128 zc_u128_add(zc_u128 s, zc_u128 x) {
    uint64_t lo = s.lo + x.lo;
    s.hi += x.hi + (uint64_t)(lo < x.lo);
    s.lo = lo;
    return s;
}

/* floor(v / d) for v < d * 2^64. */
ZC_ELEM uint64_t zc_u128_div_u32(zc_u128 v, uint32_t d) {
    uint64_t x = ((v.hi % d) << 32) | (v.lo >> 32);
    uint64_t q1 = x / d;
    x = ((x % d) << 32) | (v.lo & 0xffffffffu);
    return (q1 << 32) | (x / d);
}

/* v / d truncated toward zero, v a two's complement 128-bit value whose quotient fits int64. */
ZC_ELEM int64_t zc_s128_div_u32(zc_u128 v, uint32_t d) {
    uint64_t neg = 0u - (v.hi >> 63); /* all ones if v < 0 */
    zc_u128 mag = zc_u128_of((v.lo ^ neg) - neg, (v.hi ^ neg) + (uint64_t)(neg && v.lo == 0));
    uint64_t q = zc_u128_div_u32(mag, d);
    return (int64_t)((q ^ neg) - neg); /* q <= 2^63; -2^63 wraps to INT64_MIN */
}

#endif
