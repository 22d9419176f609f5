/* test_reduce.c: core/reduce.c (the reduction kernels and the fp16 / bf16 / fp8 conversions)
 * against references written here by other means: GCC's _Float16, the formats' formulas
 * evaluated in double, a nearest-value search for rounding, and a per-element evaluation of
 * the rank tree by its recursive definition. Uses libc and libm freely. */
#include "zt.h"

#include "../core/reduce.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------------------------- */

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t d2u(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double u2d(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* GCC's _Float16 (GCC 12 on x86-64; clang from 15) is the independent fp16 reference where
 * the compiler has it; elsewhere the formula and the search below stand in. */
#if defined(__FLT16_MANT_DIG__)
#define HAVE_FLOAT16 1
static uint16_t h2u(_Float16 h) {
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}

static _Float16 u2h(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, sizeof h);
    return h;
}
#else
#define HAVE_FLOAT16 0
#endif

static const char *const dtype_names[ZC_DTYPE_COUNT_] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64", "fp8_e4m3", "fp8_e5m2"};
static const char *const op_names[ZC_OP_COUNT_] = {"sum", "prod", "min", "max", "avg"};
static const size_t dtype_size[ZC_DTYPE_COUNT_] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};

static zt_rng test_rng(uint64_t salt) {
    zt_rng r = {zt_seed() ^ salt};
    return r;
}

/* A float with random sign, mantissa and an exponent in [emin, emax]. */
static float rand_float(zt_rng *r, int emin, int emax) {
    uint32_t e = (uint32_t)(emin + 127 + (int)zt_rng_below(r, (uint64_t)(emax - emin + 1)));
    uint32_t u = (uint32_t)zt_rng_next(r);
    return u2f((u & 0x807fffffu) | (e << 23));
}

/* ---- narrow formats, described for the references ------------------------------------------ */

typedef struct fmt {
    const char *name;
    uint32_t ebits, mbits;
    int bias;
    bool ieee; /* all-ones exponent = inf/NaN; else (OCP fn) only S.1..1.1..1 is NaN */
    uint16_t (*enc)(float);
    float (*dec)(uint16_t);
} fmt;

static uint16_t enc_fp16(float f) { return zc__f32_to_fp16(f); }
static float dec_fp16(uint16_t c) { return zc__fp16_to_f32(c); }
static uint16_t enc_bf16(float f) { return zc__f32_to_bf16(f); }
static float dec_bf16(uint16_t c) { return zc__bf16_to_f32(c); }
static uint16_t enc_e4m3(float f) { return zc__f32_to_e4m3(f); }
static float dec_e4m3(uint16_t c) { return zc__e4m3_to_f32((uint8_t)c); }
static uint16_t enc_e5m2(float f) { return zc__f32_to_e5m2(f); }
static float dec_e5m2(uint16_t c) { return zc__e5m2_to_f32((uint8_t)c); }

static const fmt FP16 = {"fp16", 5, 10, 15, true, enc_fp16, dec_fp16};
static const fmt BF16 = {"bf16", 8, 7, 127, true, enc_bf16, dec_bf16};
static const fmt E4M3 = {"e4m3", 4, 3, 7, false, enc_e4m3, dec_e4m3};
static const fmt E5M2 = {"e5m2", 5, 2, 15, true, enc_e5m2, dec_e5m2};

static uint32_t fmt_codes(const fmt *f) { return 1u << (f->ebits + f->mbits + 1u); }
static uint32_t fmt_sign(const fmt *f) { return 1u << (f->ebits + f->mbits); }
static uint32_t fmt_emask(const fmt *f) { return (1u << f->ebits) - 1u; }
static uint32_t fmt_mmask(const fmt *f) { return (1u << f->mbits) - 1u; }

static uint32_t fmt_max_finite(const fmt *f) {
    return f->ieee ? ((fmt_emask(f) - 1u) << f->mbits) | fmt_mmask(f)
                   : (fmt_emask(f) << f->mbits) | (fmt_mmask(f) - 1u);
}

/* The code overflow gives: infinity for ieee formats, NaN for fn. */
static uint32_t fmt_overflow(const fmt *f) {
    return f->ieee ? fmt_emask(f) << f->mbits : (fmt_emask(f) << f->mbits) | fmt_mmask(f);
}

/* The canonical quiet NaN that reductions store. */
static uint32_t fmt_canonical_nan(const fmt *f) {
    return f->ieee ? (fmt_emask(f) << f->mbits) | (1u << (f->mbits - 1u))
                   : (fmt_emask(f) << f->mbits) | fmt_mmask(f);
}

static bool fmt_is_nan(const fmt *f, uint32_t c) {
    uint32_t e = (c >> f->mbits) & fmt_emask(f), m = c & fmt_mmask(f);
    return f->ieee ? (e == fmt_emask(f) && m != 0) : (e == fmt_emask(f) && m == fmt_mmask(f));
}

/* The value of a code from the format's formula, in double (exact). */
static double fmt_value(const fmt *f, uint32_t c) {
    uint32_t e = (c >> f->mbits) & fmt_emask(f), m = c & fmt_mmask(f);
    double v;
    if (fmt_is_nan(f, c)) v = NAN;
    else if (f->ieee && e == fmt_emask(f)) v = INFINITY;
    else if (e == 0) v = ldexp((double)m, 1 - f->bias - (int)f->mbits);
    else v = ldexp(1.0 + ldexp((double)m, -(int)f->mbits), (int)e - f->bias);
    return (c & fmt_sign(f)) ? -v : v;
}

/* Reference rounding: the nearest code by a search over the ordered positive codes, a tie
 * going to the even code; beyond the largest finite value the next step (one more ulp of the
 * top binade) stands for the overflow code. NaN input gives the canonical NaN. */
static uint32_t ref_encode(const fmt *f, float x) {
    uint32_t sign = signbit(x) ? fmt_sign(f) : 0u, maxf = fmt_max_finite(f);
    if (isnan(x)) return sign | fmt_canonical_nan(f);
    double d = fabs((double)x);
    if (isinf(d)) return sign | fmt_overflow(f);
    uint32_t k;
    if (d >= fmt_value(f, maxf)) {
        k = maxf;
    } else {
        uint32_t lo = 0, hi = maxf;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo + 1u) / 2u;
            if (fmt_value(f, mid) <= d) lo = mid;
            else hi = mid - 1u;
        }
        k = lo;
    }
    double vk = fmt_value(f, k);
    if (d == vk) return sign | k;
    double vnext = k < maxf ? fmt_value(f, k + 1u) : vk + (vk - fmt_value(f, k - 1u));
    double below = d - vk, above = vnext - d;
    uint32_t r = below < above ? k : above < below ? k + 1u : ((k & 1u) ? k + 1u : k);
    return sign | (r > maxf ? fmt_overflow(f) : r);
}

/* The reference's decode: the formula for fp8, _Float16 for fp16, the upper half of fp32 for
 * bf16 (its definition). */
static float ref_decode(const fmt *f, uint32_t c) {
#if HAVE_FLOAT16
    if (f == &FP16) return (float)u2h((uint16_t)c);
#endif
    if (f == &BF16) return u2f(c << 16);
    return (float)fmt_value(f, c);
}

/* Checks one encoding: equal codes, or for NaN a NaN of the same sign with the quiet bit. */
static void check_encode(const fmt *f, float x, uint32_t want, int line) {
    uint32_t got = f->enc(x);
    char d[160];
    if (isnan(x)) {
        uint32_t quiet = f->ieee ? 1u << (f->mbits - 1u) : 0u;
        if (fmt_is_nan(f, got) && (got & quiet) == quiet &&
            (got & fmt_sign(f)) == (signbit(x) ? fmt_sign(f) : 0u))
            return;
    } else if (got == want) {
        return;
    }
    snprintf(d, sizeof d, "%s encode of %a (0x%08x): got 0x%x, want 0x%x", f->name, (double)x,
             f2u(x), got, want);
    zt_fail(__FILE__, line, "encode matches the reference", d);
}

/* Encodes x (and -x) and checks against the search reference. */
static void check_ref(const fmt *f, float x, int line) {
    check_encode(f, x, ref_encode(f, x), line);
    check_encode(f, -x, ref_encode(f, -x), line);
}

/* Every finite code's value, its midpoint with the next code (a tie), and the floats just
 * beside that midpoint; the overflow midpoint beyond the largest finite value too. */
static void check_midpoints(const fmt *f) {
    uint32_t maxf = fmt_max_finite(f);
    for (uint32_t c = 0; c <= maxf; c++) {
        double v = fmt_value(f, c);
        double next = c < maxf ? fmt_value(f, c + 1u) : v + (v - fmt_value(f, c - 1u));
        float mid = (float)((v + next) / 2.0);
        ZT_CHECK((double)mid == (v + next) / 2.0); /* exact: narrow values have few bits */
        check_ref(f, (float)v, __LINE__);
        check_ref(f, mid, __LINE__);
        check_ref(f, nextafterf(mid, INFINITY), __LINE__);
        check_ref(f, nextafterf(mid, 0.0f), __LINE__);
        uint32_t tie = (c & 1u) ? c + 1u : c;
        check_encode(f, mid, tie > maxf ? fmt_overflow(f) : tie, __LINE__);
        check_encode(f, nextafterf(mid, 0.0f), c, __LINE__);
        uint32_t up = c + 1u > maxf ? fmt_overflow(f) : c + 1u;
        check_encode(f, nextafterf(mid, INFINITY), up, __LINE__);
    }
}

/* Random floats over the format's whole range and beyond, and random bit patterns. */
static void check_random(const fmt *f, uint32_t count, uint64_t salt) {
    zt_rng r = test_rng(salt);
    int emin = 1 - f->bias - (int)f->mbits - 3, emax = (int)fmt_emask(f) - f->bias + 2;
    if (emin < -126) emin = -126;
    if (emax > 127) emax = 127;
    for (uint32_t i = 0; i < count; i++) {
        float x = (i & 1u) ? rand_float(&r, emin, emax) : u2f((uint32_t)zt_rng_next(&r));
        check_encode(f, x, ref_encode(f, x), __LINE__);
    }
}

/* encode(decode(c)) == c for every code but NaN. */
static void check_round_trip(const fmt *f) {
    for (uint32_t c = 0; c < fmt_codes(f); c++) {
        if (fmt_is_nan(f, c)) continue;
        uint32_t back = f->enc(f->dec((uint16_t)c));
        if (back != c) {
            char d[96];
            snprintf(d, sizeof d, "%s code 0x%x came back as 0x%x", f->name, c, back);
            zt_fail(__FILE__, __LINE__, "round trip", d);
        }
    }
}

/* Decodes every code and compares with the formula: same bits (signed zeros too), or NaN for
 * NaN with the sign kept. */
static void check_decode_formula(const fmt *f) {
    for (uint32_t c = 0; c < fmt_codes(f); c++) {
        float got = f->dec((uint16_t)c);
        double want = fmt_value(f, c);
        /* a NaN keeps its sign and comes back quiet (bf16 is the exact upper half instead) */
        uint32_t quiet = f == &BF16 ? 0u : 0x00400000u;
        bool ok = isnan(want) ? (isnan(got) && !signbit(got) == !(c & fmt_sign(f)) &&
                                 (f2u(got) & quiet) == quiet)
                              : f2u(got) == f2u((float)want);
        if (!ok) {
            char d[128];
            snprintf(d, sizeof d, "%s decode of 0x%x: got %a, want %a", f->name, c, (double)got,
                     want);
            zt_fail(__FILE__, __LINE__, "decode matches the formula", d);
        }
    }
}

/* ---- conversions ------------------------------------------------------------------------- */

void fp16_decode_matches_float16_for_all_65536_values(void) {
#if HAVE_FLOAT16
    for (uint32_t c = 0; c < 65536u; c++) {
        float want = (float)u2h((uint16_t)c), got = zc__fp16_to_f32((uint16_t)c);
        bool ok = isnan(want) ? (isnan(got) && !signbit(got) == !signbit(want))
                              : f2u(got) == f2u(want);
        if (!ok) {
            char d[96];
            snprintf(d, sizeof d, "0x%04x: got %a, want %a", c, (double)got, (double)want);
            zt_fail(__FILE__, __LINE__, "fp16 decode matches _Float16", d);
        }
    }
#endif
    check_decode_formula(&FP16);
}

/* Against GCC's (_Float16) conversion, and the search reference agrees with it. */
static void check_fp16(float x, int line) {
    uint32_t want = ref_encode(&FP16, x);
#if HAVE_FLOAT16
    if (!isnan(x)) ZT_CHECK_EQ(want, h2u((_Float16)x));
#endif
    check_encode(&FP16, x, want, line);
}

void fp16_encode_matches_float16_on_ties_subnormals_overflow_and_random(void) {
    for (uint32_t c = 0; c < 0x7c00u; c++) { /* every finite value and the midpoints above it */
        float v = (float)fmt_value(&FP16, c), next = (float)fmt_value(&FP16, c + 1u);
        float mid = (float)(((double)v + (double)next) / 2.0);
        float xs[] = {v, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
            check_fp16(xs[i], __LINE__);
            check_fp16(-xs[i], __LINE__);
        }
    }
    /* below the smallest subnormal (2^-24): half of it is a tie to zero */
    for (float x = 0x1p-24f; x > 0x1p-40f; x *= 0.75f) {
        check_fp16(x, __LINE__);
        check_fp16(-x, __LINE__);
    }
    const float edges[] = {0.0f, 0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f, 0x1p-14f,
                           0x1.ff8p-15f, 65504.0f, 65519.0f, 65519.996f, 65520.0f,
                           65536.0f, 1e10f, 3.4e38f, INFINITY, NAN, 0x1p-149f, 0x1p-126f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        check_fp16(edges[i], __LINE__);
        check_fp16(-edges[i], __LINE__);
    }
    ZT_CHECK_EQ(zc__f32_to_fp16(65520.0f), 0x7c00); /* the overflow tie goes to infinity */
    ZT_CHECK_EQ(zc__f32_to_fp16(65519.0f), 0x7bff);
    ZT_CHECK_EQ(zc__f32_to_fp16(0x1p-25f), 0x0000); /* tie between 0 and 2^-24: even is 0 */
    ZT_CHECK_EQ(zc__f32_to_fp16(0x1.8p-24f), 0x0002);
    ZT_CHECK_EQ(zc__f32_to_fp16(-0.0f), 0x8000);
    ZT_CHECK_EQ(zc__f32_to_fp16(u2f(0x7f800001u)) & 0x7e00u, 0x7e00); /* sNaN: quiet NaN */
    zt_rng r = test_rng(0xf16);
    for (uint32_t i = 0; i < 1000000u; i++) {
        float x = (i & 1u) ? rand_float(&r, -30, 17) : u2f((uint32_t)zt_rng_next(&r));
        check_fp16(x, __LINE__);
    }
}

void bf16_decode_is_exact_for_all_65536_values(void) {
    check_decode_formula(&BF16);
    for (uint32_t c = 0; c < 65536u; c++) /* and bitwise the upper half of an fp32 */
        if (f2u(zc__bf16_to_f32((uint16_t)c)) != c << 16) ZT_CHECK_EQ(c, -1);
}

void bf16_encode_rounds_to_nearest_even_and_keeps_nan_quiet(void) {
    check_midpoints(&BF16);
    check_random(&BF16, 1000000u, 0xbf16);
    ZT_CHECK_EQ(zc__f32_to_bf16(1.0f), 0x3f80);
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x3f808000u)), 0x3f80); /* tie, even stays */
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x3f818000u)), 0x3f82); /* tie, odd rounds up */
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x3f808001u)), 0x3f81);
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to infinity */
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x7f7f7fffu)), 0x7f7f);
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x00008000u)), 0x0000); /* subnormal tie to even zero */
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x00018000u)), 0x0002);
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x807fffffu)), 0x8080); /* up into the normal range */
    ZT_CHECK_EQ(zc__f32_to_bf16(INFINITY), 0x7f80);
    /* a NaN whose payload sits only in the low half must not become infinity */
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0x7f800001u)), 0x7fc0);
    ZT_CHECK_EQ(zc__f32_to_bf16(u2f(0xffffffffu)), 0xffff);
    check_round_trip(&BF16);
}

void e4m3_decode_matches_formula_for_all_256_values(void) {
    check_decode_formula(&E4M3);
    ZT_CHECK(zc__e4m3_to_f32(0x7e) == 448.0f);
    ZT_CHECK(zc__e4m3_to_f32(0x01) == 0x1p-9f);
    ZT_CHECK(zc__e4m3_to_f32(0x78) == 256.0f); /* S.1111.000 is a number in the fn format */
    ZT_CHECK(isnan(zc__e4m3_to_f32(0x7f)) && isnan(zc__e4m3_to_f32(0xff)));
    ZT_CHECK_EQ(f2u(zc__e4m3_to_f32(0x80)), 0x80000000u);
}

void e4m3_encode_ties_to_even_and_overflow_gives_nan(void) {
    check_midpoints(&E4M3);
    check_random(&E4M3, 1000000u, 0xe4);
    ZT_CHECK_EQ(zc__f32_to_e4m3(448.0f), 0x7e);
    ZT_CHECK_EQ(zc__f32_to_e4m3(464.0f), 0x7e); /* the tie beyond 448 rounds to even 448 */
    ZT_CHECK_EQ(zc__f32_to_e4m3(nextafterf(464.0f, 0.0f)), 0x7e);
    ZT_CHECK_EQ(zc__f32_to_e4m3(nextafterf(464.0f, INFINITY)), 0x7f);
    ZT_CHECK_EQ(zc__f32_to_e4m3(465.0f), 0x7f);
    ZT_CHECK_EQ(zc__f32_to_e4m3(-465.0f), 0xff);
    ZT_CHECK_EQ(zc__f32_to_e4m3(1e9f), 0x7f);
    ZT_CHECK_EQ(zc__f32_to_e4m3(INFINITY), 0x7f);
    ZT_CHECK_EQ(zc__f32_to_e4m3(-INFINITY), 0xff);
    ZT_CHECK_EQ(zc__f32_to_e4m3(NAN), 0x7f);
    ZT_CHECK_EQ(zc__f32_to_e4m3(1.0f), 0x38);
    ZT_CHECK_EQ(zc__f32_to_e4m3(0x1p-10f), 0x00); /* half the smallest subnormal: to even 0 */
    ZT_CHECK_EQ(zc__f32_to_e4m3(0x1.8p-10f), 0x01);
    ZT_CHECK_EQ(zc__f32_to_e4m3(0x1.8p-9f), 0x02); /* tie between 1 and 2 steps: even 2 */
    ZT_CHECK_EQ(zc__f32_to_e4m3(-0.0f), 0x80);
    ZT_CHECK_EQ(zc__f32_to_e4m3(0x1.ep-7f), 0x08); /* rounds up into the smallest normal */
    check_round_trip(&E4M3);
}

void e5m2_decode_matches_formula_for_all_256_values(void) {
    check_decode_formula(&E5M2);
    ZT_CHECK(zc__e5m2_to_f32(0x7b) == 57344.0f);
    ZT_CHECK(zc__e5m2_to_f32(0x01) == 0x1p-16f);
    ZT_CHECK(isinf(zc__e5m2_to_f32(0x7c)) && zc__e5m2_to_f32(0xfc) < 0.0f);
    ZT_CHECK(isnan(zc__e5m2_to_f32(0x7d)) && isnan(zc__e5m2_to_f32(0xff)));
}

void e5m2_encode_ties_to_even_and_overflow_gives_inf(void) {
    check_midpoints(&E5M2);
    check_random(&E5M2, 1000000u, 0xe5);
    ZT_CHECK_EQ(zc__f32_to_e5m2(57344.0f), 0x7b);
    ZT_CHECK_EQ(zc__f32_to_e5m2(nextafterf(61440.0f, 0.0f)), 0x7b);
    ZT_CHECK_EQ(zc__f32_to_e5m2(61440.0f), 0x7c); /* the overflow tie goes to infinity */
    ZT_CHECK_EQ(zc__f32_to_e5m2(1e9f), 0x7c);
    ZT_CHECK_EQ(zc__f32_to_e5m2(-1e9f), 0xfc);
    ZT_CHECK_EQ(zc__f32_to_e5m2(-INFINITY), 0xfc);
    ZT_CHECK_EQ(zc__f32_to_e5m2(1.0f), 0x3c);
    ZT_CHECK_EQ(zc__f32_to_e5m2(0x1p-17f), 0x00);
    ZT_CHECK_EQ(zc__f32_to_e5m2(0x1.8p-16f), 0x02);
    ZT_CHECK_EQ(zc__f32_to_e5m2(NAN) & 0x7e, 0x7e);
    check_round_trip(&E5M2);
}

void fp16_round_trip_of_every_finite_value_is_exact(void) { check_round_trip(&FP16); }

/* ---- reduction reference ----------------------------------------------------------------- */

static const fmt *narrow_fmt(zc_dtype t) {
    switch (t) {
    case ZC_FLOAT16: return &FP16;
    case ZC_BFLOAT16: return &BF16;
    case ZC_FP8_E4M3: return &E4M3;
    case ZC_FP8_E5M2: return &E5M2;
    default: return NULL;
    }
}

static bool is_signed_int(zc_dtype t) { return t == ZC_INT8 || t == ZC_INT32 || t == ZC_INT64; }
static bool is_unsigned_int(zc_dtype t) {
    return t == ZC_UINT8 || t == ZC_UINT32 || t == ZC_UINT64;
}

/* Raw little-endian element i of buf, zero-extended. */
static uint64_t get_raw(zc_dtype t, const void *buf, size_t i) {
    uint64_t v = 0;
    memcpy(&v, (const char *)buf + i * dtype_size[t], dtype_size[t]);
    return v;
}

static void put_raw(zc_dtype t, void *buf, size_t i, uint64_t v) {
    memcpy((char *)buf + i * dtype_size[t], &v, dtype_size[t]);
}

static int64_t sign_extend(zc_dtype t, uint64_t v) {
    unsigned bits = (unsigned)dtype_size[t] * 8u;
    if (bits == 64) return (int64_t)v;
    uint64_t m = 1ull << (bits - 1u);
    return (int64_t)((v ^ m) - m);
}

static float ref_minf(float a, float b) {
    if (isnan(a)) return b;
    if (isnan(b)) return a;
    if (a < b) return a;
    if (b < a) return b;
    return signbit(a) ? a : b; /* equal: -0 is the smaller zero */
}

static float ref_maxf(float a, float b) {
    if (isnan(a)) return b;
    if (isnan(b)) return a;
    if (a > b) return a;
    if (b > a) return b;
    return signbit(a) ? b : a;
}

static double ref_mind(double a, double b) {
    if (isnan(a)) return b;
    if (isnan(b)) return a;
    if (a < b) return a;
    if (b < a) return b;
    return signbit(a) ? a : b;
}

static double ref_maxd(double a, double b) {
    if (isnan(a)) return b;
    if (isnan(b)) return a;
    if (a > b) return a;
    if (b > a) return b;
    return signbit(a) ? b : a;
}

static uint64_t ref_int(zc_dtype t, zc_op op, const void *const *in, uint32_t n, size_t i) {
    bool sgn = is_signed_int(t);
    uint64_t acc = get_raw(t, in[0], i);
    __int128 sum = sgn ? (__int128)sign_extend(t, acc) : (__int128)acc;
    for (uint32_t k = 1; k < n; k++) {
        uint64_t x = get_raw(t, in[k], i);
        int64_t sa = sign_extend(t, acc), sx = sign_extend(t, x);
        switch (op) {
        case ZC_SUM: acc += x; break;
        case ZC_PROD: acc *= x; break;
        case ZC_MIN: acc = sgn ? (sx < sa ? x : acc) : (x < acc ? x : acc); break;
        case ZC_MAX: acc = sgn ? (sx > sa ? x : acc) : (x > acc ? x : acc); break;
        default: break;
        }
        sum += sgn ? (__int128)sx : (__int128)x;
    }
    if (op == ZC_AVG) return (uint64_t)(sum / (__int128)n); /* C truncates toward zero */
    return acc;
}

static float ref_float_op(zc_op op, float acc, float x) {
    switch (op) {
    case ZC_SUM: case ZC_AVG: return acc + x;
    case ZC_PROD: return acc * x;
    case ZC_MIN: return ref_minf(acc, x);
    default: return ref_maxf(acc, x);
    }
}

static double ref_double_op(zc_op op, double acc, double x) {
    switch (op) {
    case ZC_SUM: case ZC_AVG: return acc + x;
    case ZC_PROD: return acc * x;
    case ZC_MIN: return ref_mind(acc, x);
    default: return ref_maxd(acc, x);
    }
}

/* The rank tree by its definition's recursion: leaves l0..l1-1 of the p leaves (leaf i is
 * input 2i (+) input 2i+1 for i < e, input i+e after) split in two halves, the lower on the
 * left. Floating values are held as doubles; for fp32 accumulators every operation is rounded
 * to float. */
typedef struct tree_in {
    const void *const *in;
    zc_dtype t;
    zc_op op;
    uint32_t e;
} tree_in;

static double tree_elem(const tree_in *x, uint32_t k, size_t i) {
    const fmt *f = narrow_fmt(x->t);
    uint64_t c = get_raw(x->t, x->in[k], i);
    if (x->t == ZC_FLOAT64) return u2d(c);
    return f ? (double)ref_decode(f, (uint32_t)c) : (double)u2f((uint32_t)c);
}

static double tree_op(const tree_in *x, double a, double b) {
    if (x->t == ZC_FLOAT64) return ref_double_op(x->op, a, b);
    return (double)ref_float_op(x->op, (float)a, (float)b);
}

static double tree_eval(const tree_in *x, uint32_t l0, uint32_t l1, size_t i) {
    if (l1 - l0 > 1u) {
        uint32_t mid = l0 + (l1 - l0) / 2u;
        return tree_op(x, tree_eval(x, l0, mid, i), tree_eval(x, mid, l1, i));
    }
    if (l0 < x->e) return tree_op(x, tree_elem(x, 2u * l0, i), tree_elem(x, 2u * l0 + 1u, i));
    return tree_elem(x, l0 + x->e, i);
}

/* Element by element: the rank tree (reduce.h) with the accumulation rules spelled out. */
static void ref_reduce(void *out, const void *const *in, uint32_t n, size_t count, zc_dtype t,
                       zc_op op) {
    const fmt *f = narrow_fmt(t);
    uint32_t p = 1;
    while (p * 2u <= n) p *= 2u;
    tree_in x = {in, t, op, n - p};
    for (size_t i = 0; i < count; i++) {
        uint64_t r;
        if (is_signed_int(t) || is_unsigned_int(t)) {
            r = ref_int(t, op, in, n, i); /* exact or wrapping: any order gives these bits */
        } else if (t == ZC_FLOAT64) {
            double acc = tree_eval(&x, 0, p, i);
            if (op == ZC_AVG) acc = acc / (double)n;
            r = isnan(acc) ? 0x7ff8000000000000ull : d2u(acc);
        } else {
            float acc = (float)tree_eval(&x, 0, p, i);
            if (op == ZC_AVG) acc = acc / (float)n;
            if (!f) r = isnan(acc) ? 0x7fc00000u : f2u(acc);
            else if (isnan(acc)) r = fmt_canonical_nan(f);
#if HAVE_FLOAT16
            else if (f == &FP16) r = h2u((_Float16)acc);
#endif
            else r = ref_encode(f, acc);
        }
        put_raw(t, out, i, r);
    }
}

/* Random inputs with the type's awkward values mixed in. */
static uint64_t rand_element(zt_rng *r, zc_dtype t) {
    uint64_t pick = zt_rng_below(r, 16);
    if (is_signed_int(t) || is_unsigned_int(t)) {
        unsigned bits = (unsigned)dtype_size[t] * 8u;
        uint64_t top = 1ull << (bits - 1u);
        const uint64_t extremes[] = {0, 1, ~0ull, top, top - 1u, top + 1u, (top << 1) - 1u, 2};
        if (pick < 4) return extremes[zt_rng_below(r, 8)];
        if (pick < 8) return zt_rng_below(r, 7) - 3u; /* small values of both signs */
        return zt_rng_next(r);
    }
    if (t == ZC_FLOAT64) {
        const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 0x1p-1074,
                                   -0x1p-1022, 1.7976931348623157e308};
        if (pick < 2) return d2u(specials[zt_rng_below(r, 9)]);
        if (pick < 3) return zt_rng_next(r);
        double m = (double)(zt_rng_next(r) >> 11) * 0x1p-53;
        return d2u(ldexp(m + 0.5, (int)zt_rng_below(r, 21) - 10) * (pick & 1u ? -1.0 : 1.0));
    }
    if (t == ZC_FLOAT32) {
        const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 0x1p-149f,
                                  -0x1p-126f, 3.4028235e38f};
        if (pick < 2) return f2u(specials[zt_rng_below(r, 9)]);
        if (pick < 3) return (uint32_t)zt_rng_next(r);
        return f2u(rand_float(r, -10, 10));
    }
    const fmt *f = narrow_fmt(t);
    if (pick < 4) return zt_rng_below(r, fmt_codes(f)); /* any code: NaN, inf, subnormal */
    uint32_t c; /* a finite value of moderate size */
    do c = (uint32_t)zt_rng_below(r, fmt_codes(f));
    while (fmt_is_nan(f, c) || isinf(fmt_value(f, c)) || fabs(fmt_value(f, c)) > 64.0);
    return c;
}

/* A random input set: n buffers of count elements (plus a guard element each). */
typedef struct case_bufs {
    void *in[64];
    void *out, *want;
} case_bufs;

static void fill_case(case_bufs *b, zt_rng *r, zc_dtype t, uint32_t n, size_t count) {
    size_t bytes = (count + 1u) * dtype_size[t];
    for (uint32_t k = 0; k < n; k++) {
        b->in[k] = malloc(bytes);
        ZT_CHECK(b->in[k] != NULL);
        for (size_t i = 0; i < count; i++) put_raw(t, b->in[k], i, rand_element(r, t));
    }
    b->out = malloc(bytes);
    b->want = malloc(bytes);
    ZT_CHECK(b->out && b->want);
    memset(b->out, 0xa5, bytes);
    memset(b->want, 0xa5, bytes);
}

static void free_case(case_bufs *b, uint32_t n) {
    for (uint32_t k = 0; k < n; k++) free(b->in[k]);
    free(b->out);
    free(b->want);
}

/* Bitwise comparison of count elements plus the untouched guard element after them. */
static void compare_case(const case_bufs *b, zc_dtype t, zc_op op, uint32_t n, size_t count,
                         const char *what) {
    size_t es = dtype_size[t];
    if (memcmp(b->out, b->want, (count + 1u) * es) == 0) return;
    size_t i = 0;
    while (i <= count && memcmp((char *)b->out + i * es, (char *)b->want + i * es, es) == 0) i++;
    char d[224];
    snprintf(d, sizeof d, "%s %s n=%u count=%zu %s: element %zu is 0x%llx, want 0x%llx%s",
             dtype_names[t], op_names[op], n, count, what, i,
             (unsigned long long)get_raw(t, b->out, i), (unsigned long long)get_raw(t, b->want, i),
             i == count ? " (written past count)" : "");
    zt_fail(__FILE__, __LINE__, "reduce matches the reference", d);
}

void reduce_matches_reference_for_every_dtype_op_ranks_and_count(void) {
    static const uint32_t ns[] = {1, 2, 3, 4, 5, 7, 8, 13, 31, 64};
    static const size_t counts[] = {0, 1, 5, 255, 256, 257, 1000};
    zt_rng r = test_rng(0x7ed);
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++)
        for (int op = 0; op < ZC_OP_COUNT_; op++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
                    uint32_t n = ns[ni];
                    size_t count = counts[ci];
                    case_bufs b;
                    fill_case(&b, &r, (zc_dtype)t, n, count);
                    ref_reduce(b.want, (const void *const *)b.in, n, count, (zc_dtype)t,
                               (zc_op)op);
                    zc__reduce(b.out, (const void *const *)b.in, n, count, (zc_dtype)t,
                               (zc_op)op);
                    compare_case(&b, (zc_dtype)t, (zc_op)op, n, count, "separate out");
                    free_case(&b, n);
                }
}

/* A few elements (a one-line call's count, which the kernels take element by element) reduce
 * bitwise as the same elements of a long reduction (whole blocks), into a separate output and
 * in place on the first and the last input, the element after them untouched. */
void reduce_of_a_few_elements_equals_their_part_of_a_long_reduction(void) {
    static const uint32_t ns[] = {1, 2, 3, 4, 5, 7, 8, 13, 31, 33, 64};
    const size_t long_count = 300;
    zt_rng r = test_rng(0x7e1);
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++)
        for (int op = 0; op < ZC_OP_COUNT_; op++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                uint32_t n = ns[ni];
                size_t es = dtype_size[t];
                case_bufs b;
                fill_case(&b, &r, (zc_dtype)t, n, long_count);
                void *all = malloc((long_count + 1u) * es), *saved = malloc(10u * es);
                ZT_CHECK(all && saved);
                zc__reduce(all, (const void *const *)b.in, n, long_count, (zc_dtype)t, (zc_op)op);
                for (size_t count = 1; count <= 9; count++) {
                    memcpy(b.want, all, count * es);
                    memset((char *)b.want + count * es, 0xa5, es);
                    memset(b.out, 0xa5, (count + 1u) * es);
                    zc__reduce(b.out, (const void *const *)b.in, n, count, (zc_dtype)t,
                               (zc_op)op);
                    compare_case(&b, (zc_dtype)t, (zc_op)op, n, count, "a few elements");
                    for (uint32_t k = 0; k < n; k += n - 1u > 0 ? n - 1u : 1u) {
                        memcpy(saved, b.in[k], (count + 1u) * es);
                        memset((char *)b.in[k] + count * es, 0xa5, es);
                        zc__reduce(b.in[k], (const void *const *)b.in, n, count, (zc_dtype)t,
                                   (zc_op)op);
                        memcpy(b.out, b.in[k], (count + 1u) * es);
                        compare_case(&b, (zc_dtype)t, (zc_op)op, n, count,
                                     "a few elements in place");
                        memcpy(b.in[k], saved, (count + 1u) * es);
                    }
                }
                free(all);
                free(saved);
                free_case(&b, n);
            }
}

/* out == in[k] for k first, middle and last, for 1 to 13 ranks (the kernels' paths for n = 1,
 * the root leaf pair of n = 2 and 3, and the leaf pairs of two to four inputs pushed and
 * combined), against a separate output. */
void reduce_in_place_on_first_middle_or_last_input_matches_separate_output(void) {
    static const uint32_t ns[] = {1, 2, 3, 4, 5, 7, 8, 13};
    zt_rng r = test_rng(0x1a);
    const size_t count = 1000; /* three whole blocks and a tail */
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++)
        for (int op = 0; op < ZC_OP_COUNT_; op++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                uint32_t n = ns[ni];
                size_t es = dtype_size[t], bytes = (count + 1u) * es;
                case_bufs b;
                fill_case(&b, &r, (zc_dtype)t, n, count);
                zc__reduce(b.want, (const void *const *)b.in, n, count, (zc_dtype)t, (zc_op)op);
                void *saved[13];
                for (uint32_t k = 0; k < n; k++) {
                    saved[k] = malloc(bytes);
                    ZT_CHECK(saved[k] != NULL);
                    memcpy(saved[k], b.in[k], bytes);
                }
                const uint32_t aliased[] = {0, n / 2u, n - 1u};
                const char *what[] = {"out == in[0]", "out == in[n/2]", "out == in[n-1]"};
                for (size_t a = 0; a < 3; a++) {
                    uint32_t k = aliased[a];
                    /* the guard after count must stay as it is in want */
                    memcpy((char *)b.in[k] + count * es, (char *)b.want + count * es, es);
                    zc__reduce(b.in[k], (const void *const *)b.in, n, count, (zc_dtype)t,
                               (zc_op)op);
                    memcpy(b.out, b.in[k], bytes);
                    compare_case(&b, (zc_dtype)t, (zc_op)op, n, count, what[a]);
                    memcpy(b.in[k], saved[k], bytes);
                }
                for (uint32_t k = 0; k < n; k++) free(saved[k]);
                free_case(&b, n);
            }
}

/* ---- the accumulator primitives ---------------------------------------------------------- */

/* n inputs of count random elements each, as n pointers (one allocation). */
static void **alloc_inputs(zt_rng *r, zc_dtype t, uint32_t n, size_t count, void **block) {
    size_t bytes = count * dtype_size[t];
    void **in = malloc(sizeof *in * n);
    *block = malloc(bytes * n + 1u);
    ZT_CHECK(in && *block);
    for (uint32_t k = 0; k < n; k++) {
        in[k] = (char *)*block + k * bytes;
        for (size_t i = 0; i < count; i++) put_raw(t, in[k], i, rand_element(r, t));
    }
    return in;
}

/* The rank tree of zc__acc_combine over acc[0..n) (count accumulators of ab bytes each),
 * level by level in place; the result is left in acc[0]. */
static void acc_tree(char *acc, uint32_t n, size_t count, size_t ab, zc_dtype t, zc_op op) {
    size_t row = count * ab;
    uint32_t p = 1;
    while (p * 2u <= n) p *= 2u;
    uint32_t e = n - p;
    for (uint32_t i = 0; i < p; i++) {
        if (i < e) zc__acc_combine(acc + i * row, acc + 2u * i * row, acc + (2u * i + 1u) * row,
                                   count, t, op);
        else memmove(acc + i * row, acc + (i + e) * row, row);
    }
    for (uint32_t m = p; m > 1; m /= 2)
        for (uint32_t j = 0; j < m / 2; j++)
            zc__acc_combine(acc + j * row, acc + 2u * j * row, acc + (2u * j + 1u) * row, count,
                            t, op);
}

/* Recursive doubling on virtual ranks, as a log-depth all_reduce runs it: ranks 2i and 2i+1
 * (i < e) fold into virtual rank i, rank r >= 2e is virtual rank r - e; at step k virtual rank
 * u combines its value with u ^ 2^k's, the lower block on the left. Every virtual rank ends
 * with the result; each is stored and compared with want. */
static void acc_doubling(const char *acc, char *vr, char *next, uint32_t n, size_t count,
                         size_t ab, zc_dtype t, zc_op op, const void *want, void *out) {
    size_t row = count * ab;
    uint32_t p = 1;
    while (p * 2u <= n) p *= 2u;
    uint32_t e = n - p;
    for (uint32_t r = 0; r < n; r++) {
        if (r < 2u * e && (r & 1u)) zc__acc_combine(vr + r / 2u * row, acc + (r - 1u) * row,
                                                    acc + r * row, count, t, op);
        else if (r >= 2u * e) memcpy(vr + (r - e) * row, acc + r * row, row);
    }
    for (uint32_t bit = 1; bit < p; bit *= 2u) {
        for (uint32_t u = 0; u < p; u++) {
            uint32_t lo = u & ~bit, hi = u | bit;
            zc__acc_combine(next + u * row, vr + lo * row, vr + hi * row, count, t, op);
        }
        char *x = vr;
        vr = next, next = x;
    }
    for (uint32_t u = 0; u < p; u++) {
        zc__acc_store(out, vr + u * row, count, t, op, n);
        if (memcmp(out, want, count * dtype_size[t]) != 0) {
            char d[128];
            snprintf(d, sizeof d, "%s %s n=%u: virtual rank %u of %u", dtype_names[t],
                     op_names[op], n, u, p);
            zt_fail(__FILE__, __LINE__, "recursive doubling of the primitives == zc__reduce", d);
        }
    }
}

/* One (dtype, op, n): zc__reduce, the primitives' rank tree and their recursive doubling. */
static void check_primitives(zt_rng *r, zc_dtype t, zc_op op, uint32_t n, size_t count) {
    size_t ab = zc__acc_bytes(t, op), row = count * ab, ob = count * dtype_size[t];
    ZT_CHECK(ab >= dtype_size[t] && ab <= 16u);
    void *block;
    void **in = alloc_inputs(r, t, n, count, &block);
    char *acc = malloc(row * n + 1u), *vr = malloc(row * n + 1u), *next = malloc(row * n + 1u);
    char *want = malloc(ob + 1u), *got = malloc(ob + 1u);
    ZT_CHECK(acc && vr && next && want && got);
    zc__reduce(want, (const void *const *)in, n, count, t, op);
    for (uint32_t k = 0; k < n; k++) zc__acc_load(acc + k * row, in[k], count, t, op);
    acc_doubling(acc, vr, next, n, count, ab, t, op, want, got);
    acc_tree(acc, n, count, ab, t, op);
    zc__acc_store(got, acc, count, t, op, n);
    if (memcmp(got, want, ob) != 0) {
        size_t i = 0;
        while (get_raw(t, got, i) == get_raw(t, want, i)) i++;
        char d[160];
        snprintf(d, sizeof d, "%s %s n=%u element %zu: 0x%llx, zc__reduce 0x%llx",
                 dtype_names[t], op_names[op], n, i, (unsigned long long)get_raw(t, got, i),
                 (unsigned long long)get_raw(t, want, i));
        zt_fail(__FILE__, __LINE__, "rank tree of the primitives == zc__reduce", d);
    }
    free(acc), free(vr), free(next), free(want), free(got), free(block), free(in);
}

void reduce_equals_the_rank_tree_of_the_accumulator_primitives(void) {
    static const uint32_t big[] = {1000, 4097};
    zt_rng r = test_rng(0xacc);
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++)
        for (int op = 0; op < ZC_OP_COUNT_; op++) {
            for (uint32_t n = 1; n <= 70; n++)
                check_primitives(&r, (zc_dtype)t, (zc_op)op, n, 37u + n % 5u * 110u);
            for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
                check_primitives(&r, (zc_dtype)t, (zc_op)op, big[i], 41);
        }
}

/* The accumulator formats: sizes, and a partial result that would overflow the element type
 * (integer AVG) or round in it (narrow floats) kept exact until the store. */
void reduce_accumulator_formats_keep_partial_results_exact(void) {
    static const size_t want[ZC_DTYPE_COUNT_] = {4, 4, 8, 8, 16, 16, 4, 4, 4, 8, 4, 4};
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++) {
        ZT_CHECK(zc__acc_bytes((zc_dtype)t, ZC_AVG) == want[t]);
        ZT_CHECK(zc__acc_bytes((zc_dtype)t, ZC_SUM) ==
                 (narrow_fmt((zc_dtype)t) ? 4u : dtype_size[t]));
    }
    ZT_CHECK(zc__acc_bytes(ZC_DTYPE_COUNT_, ZC_SUM) == 0 &&
             zc__acc_bytes(ZC_FLOAT32, ZC_OP_COUNT_) == 0);
    int8_t x[2] = {127, -128}, o[2];
    int32_t a[2], b[2];
    zc__acc_load(a, x, 2, ZC_INT8, ZC_AVG);
    zc__acc_combine(b, a, a, 2, ZC_INT8, ZC_AVG); /* 254, -256: outside int8 */
    zc__acc_combine(b, a, b, 2, ZC_INT8, ZC_AVG); /* out == right */
    zc__acc_store(o, b, 2, ZC_INT8, ZC_AVG, 3);
    ZT_CHECK(o[0] == 127 && o[1] == -128);
    uint16_t h[2] = {enc_fp16(2048.0f), enc_fp16(1.0f)}, ho;
    float fa[2], fs;
    zc__acc_load(fa, h, 2, ZC_FLOAT16, ZC_SUM);
    zc__acc_combine(&fs, &fa[0], &fa[1], 1, ZC_FLOAT16, ZC_SUM); /* 2049: not an fp16 value */
    zc__acc_combine(&fs, &fs, &fa[1], 1, ZC_FLOAT16, ZC_SUM);
    zc__acc_store(&ho, &fs, 1, ZC_FLOAT16, ZC_SUM, 3);
    ZT_CHECK(dec_fp16(ho) == 2050.0f);
}

/* The documented order, not the linear one, on inputs where they differ in fp32: with
 * B = 2^27 (fp32 spacing 16 above it, 8 below), B + 1 and -B + 1 round back to B and -B. The
 * tree's value is also spelled out as an expression per n (each + rounded to fp32). */
static float tree_expr(uint32_t n, const float *x) {
    switch (n) {
    case 4: return (x[0] + x[1]) + (x[2] + x[3]);
    case 5: return ((x[0] + x[1]) + x[2]) + (x[3] + x[4]);
    case 7: return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + x[6]);
    default: return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
    }
}

void reduce_follows_the_rank_tree_where_the_linear_order_differs(void) {
    const float B = 0x1p27f;
    const struct {
        uint32_t n;
        float x[8], tree, linear;
    } cases[] = {
        {4, {-B, 1, B, 1}, 0.0f, 1.0f},
        {5, {-B, 8, 3, B, 1}, 8.0f, 9.0f},
        {7, {3, -B, 8, 1, B, 8, 1}, 8.0f, 17.0f},
        {8, {1, B, -B, 1, 8, 1, 8, 3}, 20.0f, 21.0f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const void *in[8];
        float out = -1.0f, lin = cases[c].x[0];
        for (uint32_t k = 0; k < cases[c].n; k++) in[k] = &cases[c].x[k];
        for (uint32_t k = 1; k < cases[c].n; k++) lin += cases[c].x[k];
        ZT_CHECK(lin == cases[c].linear && tree_expr(cases[c].n, cases[c].x) == cases[c].tree);
        zc__reduce(&out, in, cases[c].n, 1, ZC_FLOAT32, ZC_SUM);
        ZT_CHECK(out == cases[c].tree);
    }
}

/* ---- targeted cases ---------------------------------------------------------------------- */

/* Reduces n single elements given as raw values; returns the raw result. */
static uint64_t reduce1(zc_dtype t, zc_op op, uint32_t n, const uint64_t *vals) {
    uint64_t bufs[64], out = 0x5a5a5a5a5a5a5a5aull;
    const void *in[64];
    for (uint32_t k = 0; k < n; k++) {
        bufs[k] = 0;
        put_raw(t, &bufs[k], 0, vals[k]);
        in[k] = &bufs[k];
    }
    zc__reduce(&out, in, n, 1, t, op);
    return get_raw(t, &out, 0);
}

#define R2(t, op, a, b) reduce1(t, op, 2, (const uint64_t[]){(uint64_t)(a), (uint64_t)(b)})
#define R3(t, op, a, b, c)                                                                     \
    reduce1(t, op, 3, (const uint64_t[]){(uint64_t)(a), (uint64_t)(b), (uint64_t)(c)})

void reduce_integer_avg_truncates_toward_zero(void) {
    ZT_CHECK_EQ((int32_t)R2(ZC_INT32, ZC_AVG, -3, 0), -1); /* -1.5 -> -1, not -2 */
    ZT_CHECK_EQ((int32_t)R2(ZC_INT32, ZC_AVG, 3, 0), 1);
    ZT_CHECK_EQ((int8_t)R2(ZC_INT8, ZC_AVG, (uint8_t)-3, 0), -1);
    ZT_CHECK_EQ((int8_t)R3(ZC_INT8, ZC_AVG, (uint8_t)-128, (uint8_t)-128, (uint8_t)-127), -127);
    ZT_CHECK_EQ((int8_t)R2(ZC_INT8, ZC_AVG, 127, 127), 127); /* the sum 254 does not wrap */
    ZT_CHECK_EQ((uint8_t)R2(ZC_UINT8, ZC_AVG, 255, 254), 254);
    ZT_CHECK_EQ((int64_t)R2(ZC_INT64, ZC_AVG, -3, 0), -1);
    ZT_CHECK_EQ((int64_t)R3(ZC_INT64, ZC_AVG, 5, -1, -1), 1);
    ZT_CHECK_EQ((int64_t)R3(ZC_INT64, ZC_AVG, -5, 1, 1), -1);
    ZT_CHECK_EQ((uint32_t)R3(ZC_UINT32, ZC_AVG, 1, 1, 0), 0);
    /* the exact quotient just below an integer: INT32_MAX - 1/7 truncates to INT32_MAX - 1 */
    uint64_t v[7];
    for (int k = 0; k < 7; k++) v[k] = (uint32_t)INT32_MAX;
    v[3] = (uint32_t)(INT32_MAX - 1);
    ZT_CHECK_EQ((int32_t)reduce1(ZC_INT32, ZC_AVG, 7, v), INT32_MAX - 1);
    for (int k = 0; k < 7; k++) v[k] = (uint32_t)INT32_MIN;
    v[5] = (uint32_t)(INT32_MIN + 1);
    ZT_CHECK_EQ((int32_t)reduce1(ZC_INT32, ZC_AVG, 7, v), INT32_MIN + 1);
    for (int k = 0; k < 7; k++) v[k] = UINT32_MAX;
    v[0] = UINT32_MAX - 1u;
    ZT_CHECK_EQ((uint32_t)reduce1(ZC_UINT32, ZC_AVG, 7, v), UINT32_MAX - 1u);
}

void reduce_int64_and_uint64_avg_is_exact_near_the_limits(void) {
    ZT_CHECK(R3(ZC_INT64, ZC_AVG, INT64_MAX, INT64_MAX, INT64_MAX) == (uint64_t)INT64_MAX);
    ZT_CHECK(R3(ZC_INT64, ZC_AVG, INT64_MAX, INT64_MAX, INT64_MAX - 1) ==
             (uint64_t)(INT64_MAX - 1));
    ZT_CHECK(R3(ZC_INT64, ZC_AVG, INT64_MIN, INT64_MIN, INT64_MIN) == (uint64_t)INT64_MIN);
    ZT_CHECK(R3(ZC_INT64, ZC_AVG, INT64_MIN, INT64_MIN, INT64_MIN + 1) ==
             (uint64_t)(INT64_MIN + 1));
    ZT_CHECK(R3(ZC_INT64, ZC_AVG, INT64_MAX, INT64_MIN, -1) == 0); /* -2/3 -> 0 */
    /* (2 * INT64_MIN + INT64_MAX) / 3 = -(2^63 + 1) / 3, an integer */
    ZT_CHECK(R3(ZC_INT64, ZC_AVG, INT64_MIN, INT64_MIN, INT64_MAX) ==
             (uint64_t)-3074457345618258603ll);
    ZT_CHECK(R3(ZC_UINT64, ZC_AVG, UINT64_MAX, UINT64_MAX, UINT64_MAX) == UINT64_MAX);
    ZT_CHECK(R3(ZC_UINT64, ZC_AVG, UINT64_MAX, UINT64_MAX, UINT64_MAX - 1) == UINT64_MAX - 1);
    ZT_CHECK(R2(ZC_UINT64, ZC_AVG, UINT64_MAX, 1) == 1ull << 63);
    /* 64 ranks near the top: the sum needs 70 bits */
    uint64_t v[64];
    for (int k = 0; k < 64; k++) v[k] = UINT64_MAX - (uint64_t)k;
    ZT_CHECK(reduce1(ZC_UINT64, ZC_AVG, 64, v) == UINT64_MAX - 32); /* mean is MAX - 31.5 */
    for (int k = 0; k < 64; k++) v[k] = (uint64_t)(INT64_MIN + k);
    ZT_CHECK(reduce1(ZC_INT64, ZC_AVG, 64, v) == (uint64_t)(INT64_MIN + 32)); /* MIN + 31.5 */
}

/* Exactness does not depend on the number of ranks: the 8- and 32-bit AVG switch methods at
 * 2^23 and 2^20 ranks (pointers repeat; one rank differs so the quotient is just off an
 * integer). */
static void check_many_rank_avg(zc_dtype t, uint32_t n, uint64_t common, uint64_t odd,
                                uint64_t want) {
    const void **in = malloc(sizeof *in * n);
    ZT_CHECK(in != NULL);
    uint64_t a[2] = {0, 0}, b[2] = {0, 0}, out[2] = {0, 0};
    for (size_t i = 0; i < 2; i++) {
        put_raw(t, a, i, common);
        put_raw(t, b, i, odd);
    }
    for (uint32_t k = 0; k < n; k++) in[k] = a;
    in[n / 2] = b;
    zc__reduce(out, in, n, 2, t, ZC_AVG);
    free(in);
    if (get_raw(t, out, 0) != want || get_raw(t, out, 1) != want) {
        char d[128];
        snprintf(d, sizeof d, "%s avg over %u ranks: 0x%llx, want 0x%llx", dtype_names[t], n,
                 (unsigned long long)get_raw(t, out, 0), (unsigned long long)want);
        zt_fail(__FILE__, __LINE__, "many-rank avg", d);
    }
}

void reduce_integer_avg_is_exact_for_any_number_of_ranks(void) {
    const uint32_t n8[] = {(1u << 23) - 1u, 1u << 23}, n32[] = {1u << 20, (1u << 20) + 1u};
    for (int i = 0; i < 2; i++) {
        check_many_rank_avg(ZC_INT8, n8[i], 127, 126, 126);
        check_many_rank_avg(ZC_INT8, n8[i], (uint8_t)-128, (uint8_t)-127, (uint8_t)-127);
        check_many_rank_avg(ZC_UINT8, n8[i], 255, 254, 254);
        check_many_rank_avg(ZC_INT32, n32[i], INT32_MAX, INT32_MAX - 1, INT32_MAX - 1);
        check_many_rank_avg(ZC_INT32, n32[i], (uint32_t)INT32_MIN, (uint32_t)(INT32_MIN + 1),
                            (uint32_t)(INT32_MIN + 1));
        check_many_rank_avg(ZC_UINT32, n32[i], UINT32_MAX, UINT32_MAX - 1u, UINT32_MAX - 1u);
        check_many_rank_avg(ZC_INT64, n32[i], (uint64_t)INT64_MIN, (uint64_t)(INT64_MIN + 1),
                            (uint64_t)(INT64_MIN + 1));
        check_many_rank_avg(ZC_UINT64, n32[i], UINT64_MAX, UINT64_MAX - 1u, UINT64_MAX - 1u);
    }
}

void reduce_integer_sum_and_prod_wrap_in_the_type(void) {
    ZT_CHECK_EQ((int8_t)R2(ZC_INT8, ZC_SUM, 100, 100), -56);
    ZT_CHECK_EQ((uint8_t)R2(ZC_UINT8, ZC_SUM, 200, 100), 44);
    ZT_CHECK_EQ((int8_t)R2(ZC_INT8, ZC_PROD, 16, 16), 0);
    ZT_CHECK_EQ((int8_t)R2(ZC_INT8, ZC_PROD, (uint8_t)-128, (uint8_t)-1), -128);
    ZT_CHECK_EQ((uint8_t)R2(ZC_UINT8, ZC_PROD, 255, 255), 1);
    ZT_CHECK_EQ((int32_t)R2(ZC_INT32, ZC_SUM, INT32_MAX, 1), INT32_MIN);
    ZT_CHECK_EQ((int32_t)R2(ZC_INT32, ZC_PROD, 65536, 65536), 0);
    ZT_CHECK_EQ((uint32_t)R2(ZC_UINT32, ZC_SUM, UINT32_MAX, 2), 1);
    ZT_CHECK(R2(ZC_INT64, ZC_SUM, INT64_MAX, 1) == (uint64_t)INT64_MIN);
    ZT_CHECK(R2(ZC_UINT64, ZC_SUM, UINT64_MAX, 2) == 1);
    ZT_CHECK(R2(ZC_INT64, ZC_PROD, (1ull << 32) + 1u, (1ull << 32) + 1u) == (1ull << 33) + 1u);
    ZT_CHECK(R2(ZC_INT64, ZC_PROD, INT64_MIN, -1) == (uint64_t)INT64_MIN);
    ZT_CHECK_EQ((int8_t)R3(ZC_INT8, ZC_MIN, 5, (uint8_t)-128, 127), -128);
    ZT_CHECK_EQ((uint8_t)R3(ZC_UINT8, ZC_MAX, 5, 255, 0), 255);
    ZT_CHECK(R3(ZC_INT64, ZC_MIN, 0, INT64_MIN, INT64_MAX) == (uint64_t)INT64_MIN);
    ZT_CHECK(R3(ZC_UINT64, ZC_MAX, 0, UINT64_MAX, 1) == UINT64_MAX);
}

static uint64_t enc_as(zc_dtype t, double v) {
    switch (t) {
    case ZC_FLOAT32: return f2u((float)v);
    case ZC_FLOAT64: return d2u(v);
    case ZC_FLOAT16: return zc__f32_to_fp16((float)v);
    case ZC_BFLOAT16: return zc__f32_to_bf16((float)v);
    case ZC_FP8_E4M3: return zc__f32_to_e4m3((float)v);
    default: return zc__f32_to_e5m2((float)v);
    }
}

static double dec_as(zc_dtype t, uint64_t c) {
    switch (t) {
    case ZC_FLOAT32: return (double)u2f((uint32_t)c);
    case ZC_FLOAT64: return u2d(c);
    case ZC_FLOAT16: return (double)zc__fp16_to_f32((uint16_t)c);
    case ZC_BFLOAT16: return (double)zc__bf16_to_f32((uint16_t)c);
    case ZC_FP8_E4M3: return (double)zc__e4m3_to_f32((uint8_t)c);
    default: return (double)zc__e5m2_to_f32((uint8_t)c);
    }
}

static const zc_dtype float_types[] = {ZC_FLOAT32, ZC_FLOAT64, ZC_FLOAT16,
                                       ZC_BFLOAT16, ZC_FP8_E4M3, ZC_FP8_E5M2};

void reduce_min_max_let_a_number_beat_nan(void) {
    for (size_t i = 0; i < sizeof float_types / sizeof float_types[0]; i++) {
        zc_dtype t = float_types[i];
        uint64_t nan = enc_as(t, NAN), one = enc_as(t, 1.0), two = enc_as(t, 2.0);
        ZT_CHECK(dec_as(t, R2(t, ZC_MIN, nan, one)) == fmin(NAN, 1.0));
        ZT_CHECK(dec_as(t, R2(t, ZC_MIN, one, nan)) == 1.0);
        ZT_CHECK(dec_as(t, R2(t, ZC_MAX, nan, one)) == fmax(NAN, 1.0));
        ZT_CHECK(dec_as(t, R2(t, ZC_MAX, one, nan)) == 1.0);
        ZT_CHECK(dec_as(t, R3(t, ZC_MIN, nan, two, one)) == 1.0);
        ZT_CHECK(dec_as(t, R3(t, ZC_MAX, one, nan, two)) == 2.0);
        ZT_CHECK(isnan(dec_as(t, R2(t, ZC_MIN, nan, nan))));
        ZT_CHECK(isnan(dec_as(t, R3(t, ZC_MAX, nan, nan, nan))));
        ZT_CHECK(dec_as(t, R2(t, ZC_MIN, enc_as(t, -INFINITY), nan)) < -1e300 ||
                 t == ZC_FP8_E4M3); /* e4m3 has no infinity */
    }
}

void reduce_min_max_order_negative_zero_below_positive_zero(void) {
    for (size_t i = 0; i < sizeof float_types / sizeof float_types[0]; i++) {
        zc_dtype t = float_types[i];
        uint64_t pz = enc_as(t, 0.0), nz = enc_as(t, -0.0);
        ZT_CHECK(pz != nz);
        ZT_CHECK(R2(t, ZC_MIN, pz, nz) == nz && R2(t, ZC_MIN, nz, pz) == nz);
        ZT_CHECK(R2(t, ZC_MAX, pz, nz) == pz && R2(t, ZC_MAX, nz, pz) == pz);
    }
}

void reduce_nan_results_are_the_canonical_quiet_nan(void) {
    ZT_CHECK(R2(ZC_FLOAT32, ZC_SUM, 0xffc12345u, f2u(1.0f)) == 0x7fc00000u);
    ZT_CHECK(R2(ZC_FLOAT32, ZC_SUM, f2u(INFINITY), f2u(-INFINITY)) == 0x7fc00000u);
    ZT_CHECK(R2(ZC_FLOAT32, ZC_PROD, f2u(0.0f), f2u(INFINITY)) == 0x7fc00000u);
    ZT_CHECK(R2(ZC_FLOAT32, ZC_MIN, 0xff812345u, 0x7fd00001u) == 0x7fc00000u);
    ZT_CHECK(R2(ZC_FLOAT64, ZC_AVG, d2u(INFINITY), d2u(-INFINITY)) == 0x7ff8000000000000ull);
    ZT_CHECK(R2(ZC_FLOAT64, ZC_SUM, 0xfff0000000000001ull, 0) == 0x7ff8000000000000ull);
    ZT_CHECK(R2(ZC_FLOAT16, ZC_SUM, 0xfe01u, 0x3c00u) == 0x7e00u);
    ZT_CHECK(R2(ZC_FLOAT16, ZC_MAX, 0xfc01u, 0xfc01u) == 0x7e00u);
    ZT_CHECK(R2(ZC_BFLOAT16, ZC_SUM, 0xffc1u, 0x3f80u) == 0x7fc0u);
    ZT_CHECK(R2(ZC_FP8_E4M3, ZC_SUM, 0xffu, 0x38u) == 0x7fu);
    ZT_CHECK(R2(ZC_FP8_E4M3, ZC_SUM, 0x7eu, 0x7eu) == 0x7fu); /* 896 overflows e4m3 to NaN */
    ZT_CHECK(R2(ZC_FP8_E5M2, ZC_SUM, 0xfdu, 0x3cu) == 0x7eu);
    ZT_CHECK(R2(ZC_FP8_E5M2, ZC_SUM, 0x7cu, 0xfcu) == 0x7eu); /* inf + -inf */
}

/* 16- and 8-bit floats are summed in fp32 and rounded once: x + 1 + 1 where the format's
 * spacing at x is 2 gives x + 2, while rounding after each addition would give x (each +1 is
 * a tie that goes back to the even x). AVG of two large values does not overflow either. */
void reduce_narrow_floats_accumulate_in_fp32_and_round_once(void) {
    const struct {
        zc_dtype t;
        double x, big;
    } cases[] = {{ZC_FLOAT16, 2048.0, 60000.0},
                 {ZC_BFLOAT16, 256.0, 1e38},
                 {ZC_FP8_E4M3, 16.0, 448.0},
                 {ZC_FP8_E5M2, 8.0, 57344.0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zc_dtype t = cases[i].t;
        uint64_t x = enc_as(t, cases[i].x), one = enc_as(t, 1.0);
        ZT_CHECK(dec_as(t, x) == cases[i].x);
        /* pairwise rounding in the format would stay at x */
        ZT_CHECK(dec_as(t, R2(t, ZC_SUM, x, one)) == cases[i].x);
        ZT_CHECK(dec_as(t, R3(t, ZC_SUM, x, one, one)) == cases[i].x + 2.0);
        uint64_t big = enc_as(t, cases[i].big);
        ZT_CHECK(dec_as(t, R2(t, ZC_AVG, big, big)) == dec_as(t, big));
    }
    /* fp32 itself accumulates in fp32: 2^24 + 1 + 1 stays 2^24 */
    ZT_CHECK(R3(ZC_FLOAT32, ZC_SUM, f2u(0x1p24f), f2u(1.0f), f2u(1.0f)) == f2u(0x1p24f));
}

void reduce_with_zero_count_writes_nothing(void) {
    for (int t = 0; t < ZC_DTYPE_COUNT_; t++) {
        uint64_t a = 1, b = 2, out = 0x1234567890abcdefull;
        const void *in[2] = {&a, &b};
        zc__reduce(&out, in, 2, 0, (zc_dtype)t, ZC_SUM);
        ZT_CHECK(out == 0x1234567890abcdefull);
    }
}

/* zc__copy_stream: every head alignment, tail length and size around its 64-byte loop, with
 * guard bytes on both sides that must stay untouched. */
void copy_stream_copies_every_alignment_and_length_exactly(void) {
    static uint8_t src[4096 + 64], dst[4096 + 96];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 131u + 7u);
    static const size_t lens[] = {0, 1, 15, 16, 63, 64, 65, 79, 80, 127, 128, 129, 1000, 4096};
    for (size_t so = 0; so < 16; so += 3)
        for (size_t doff = 0; doff < 32; doff++)
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t n = lens[li];
                memset(dst, 0xa5, sizeof dst);
                zc__copy_stream(dst + 32 + doff, src + so, n);
                for (size_t i = 0; i < sizeof dst; i++) {
                    bool inside = i >= 32 + doff && i < 32 + doff + n;
                    uint8_t want = inside ? src[so + i - 32 - doff] : 0xa5;
                    if (dst[i] != want) {
                        char why[96];
                        snprintf(why, sizeof why, "src+%zu -> dst+%zu, %zu bytes: byte %zu", so,
                                 doff, n, i);
                        zt_fail(__FILE__, __LINE__, "dst[i] == want", why);
                    }
                }
            }
}

/* The floating-point mode a program may run in: flush-to-zero and denormals-are-zero on (x86
 * MXCSR FTZ | DAZ, arm64 FPCR.FZ), as -ffast-math start-up code or torch.set_flush_denormal
 * leave it. Returns the mode before, for zt_flush_restore; false where this CPU has none. */
static bool zt_flush_on(uint64_t *before) {
#if defined(__x86_64__)
    uint32_t c;
    __asm__ __volatile__("stmxcsr %0" : "=m"(c)::"memory");
    *before = c;
    c |= 0x8040u;
    __asm__ __volatile__("ldmxcsr %0" ::"m"(c) : "memory");
    return true;
#elif defined(__aarch64__)
    uint64_t c;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(c)::"memory");
    *before = c;
    __asm__ __volatile__("msr fpcr, %0" ::"r"(c | (1u << 24)) : "memory");
    return true;
#else
    (void)before;
    return false;
#endif
}

static void zt_flush_restore(uint64_t before) {
#if defined(__x86_64__)
    uint32_t c = (uint32_t)before;
    __asm__ __volatile__("ldmxcsr %0" ::"m"(c) : "memory");
#elif defined(__aarch64__)
    __asm__ __volatile__("msr fpcr, %0" ::"r"(before) : "memory");
#else
    (void)before;
#endif
}

/* Subnormal inputs, sums that cancel into subnormals, and narrow floats whose fp32
 * accumulators are subnormal: reduced with the caller's flush-to-zero mode on, the host kernels
 * give bitwise what they give with it off (what the device kernels give: they never flush),
 * and the caller's mode is what it was after the call. */
void reduce_ignores_the_callers_flush_to_zero_mode(void) {
    enum { N = 512 };
    static float a32[N], b32[N], want32[N], got32[N];
    static double a64[N], b64[N], want64[N], got64[N];
    static uint16_t a16[N], b16[N], want16[N], got16[N];
    zt_rng rng = {zt_seed()};
    for (int i = 0; i < N; i++) {
        double m = (double)(zt_rng_below(&rng, 1u << 20) + 1) / (double)(1u << 20);
        double s = (i & 1) ? -1.0 : 1.0;
        a32[i] = (float)(s * m * 0x1p-127);                /* subnormal */
        b32[i] = (float)(-s * (m + 0.25) * 0x1p-126);      /* normal; the sum cancels */
        a64[i] = s * m * 0x1p-1023;
        b64[i] = -s * (m + 0.25) * 0x1p-1022;
        a16[i] = (uint16_t)(zt_rng_below(&rng, 0x3ff) + 1); /* fp16 subnormals */
        b16[i] = (uint16_t)(0x8000u | (zt_rng_below(&rng, 0x3ff) + 1));
    }
    const void *in32[2] = {a32, b32}, *in64[2] = {a64, b64}, *in16[2] = {a16, b16};
    zc__reduce(want32, in32, 2, N, ZC_FLOAT32, ZC_SUM);
    zc__reduce(want64, in64, 2, N, ZC_FLOAT64, ZC_SUM);
    zc__reduce(want16, in16, 2, N, ZC_FLOAT16, ZC_PROD);
    uint64_t before = 0, during = 0;
    if (!zt_flush_on(&before)) ZT_SKIP("this CPU has no flush-to-zero mode we can set");
    zc__reduce(got32, in32, 2, N, ZC_FLOAT32, ZC_SUM);
    zc__reduce(got64, in64, 2, N, ZC_FLOAT64, ZC_SUM);
    zc__reduce(got16, in16, 2, N, ZC_FLOAT16, ZC_PROD);
    bool flushed = zt_flush_on(&during); /* the mode as the calls left it */
    zt_flush_restore(before);
    ZT_CHECK(flushed && during != before);
    ZT_CHECK(memcmp(got32, want32, sizeof got32) == 0);
    ZT_CHECK(memcmp(got64, want64, sizeof got64) == 0);
    ZT_CHECK(memcmp(got16, want16, sizeof got16) == 0);
    int subnormal = 0;
    for (int i = 0; i < N; i++) subnormal += want32[i] != 0.0f && fabsf(want32[i]) < 0x1p-126f;
    ZT_CHECK(subnormal > N / 2); /* the data did exercise subnormal results */
}
