/* reduce.cu: the device reduction kernels, every dtype x op, bitwise equal to the host kernels
 * of core/reduce.c (this file ports their element operations line for line):
 * - every element folds its n inputs left in rank order 0..n-1;
 * - fp16/bf16/fp8 accumulate in fp32 and round once (nearest-even, in integers), fp32 in fp32,
 *   fp64 in fp64; a NaN result is stored as the canonical quiet NaN;
 * - floating add/mul/div are the _rn intrinsics, which nvcc never contracts into an FMA, and
 *   denormals are kept (no -ftz, no fast math), so each is one IEEE operation as on the host;
 * - MIN/MAX are minimumNumber/maximumNumber with -0 < +0; integer SUM/PROD wrap; integer AVG
 *   truncates the exact sum's quotient toward zero (the host's double trick and its 128-bit
 *   long division both give exactly that).
 * Loads and stores are 16-byte vectors when every pointer is 16-byte aligned, with a scalar tail.
 * Calls no CUDA function but the launch; gpu/cuda.c converts the launch's error. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu.h"
#include "kernels.h"

#define ZC_RED_THREADS 512
#define ZC_RED_BLOCKS_PER_SM 4

struct zc_red_args {
    void *dst;
    const void *src[ZC_GPU_MAX_SRCS];
    uint32_t n;
    uint32_t vec; /* 1: every pointer is 16-byte aligned */
    uint64_t count;
};

#define ZC_DEV static __device__ __forceinline__

ZC_DEV uint32_t zc_mask(bool c) { return 0u - (uint32_t)c; }

/* ---- narrow formats (core/reduce.c's zc_decode / zc_encode) ---- */

ZC_DEV float zc_decode(uint32_t v, uint32_t ebits, uint32_t mbits, uint32_t bias, bool ieee) {
    uint32_t emask = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u, sh = 23u - mbits;
    uint32_t sign = ((v >> (ebits + mbits)) & 1u) << 31;
    uint32_t e = (v >> mbits) & emask, m = v & mmask;
    uint32_t normal = ((e + 127u - bias) << 23) | (m << sh);
    uint32_t m_nz = zc_mask(m != 0);
    uint32_t sub = (__float_as_uint(__int2float_rn((int)m)) - ((bias + mbits - 1u) << 23)) & m_nz;
    uint32_t special = ieee ? 0x7f800000u | (m << sh) | (m_nz & 0x00400000u) : 0x7fc00000u;
    uint32_t is_special = zc_mask((e == emask) && (ieee || (m == mmask)));
    uint32_t is_sub = zc_mask(e == 0);
    uint32_t mag = (special & is_special) | (~is_special & ((sub & is_sub) | (normal & ~is_sub)));
    return __uint_as_float(sign | mag);
}

ZC_DEV uint32_t zc_encode(float f, uint32_t ebits, uint32_t mbits, uint32_t bias, bool ieee,
                          bool canon) {
    uint32_t emask = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u, sh = 23u - mbits;
    uint32_t u = __float_as_uint(f), a = u & 0x7fffffffu;
    uint32_t quiet_nan = ieee ? (emask << mbits) | (1u << (mbits - 1u)) : (emask << mbits) | mmask;
    uint32_t nan = quiet_nan | (ieee && !canon ? (a >> sh) & mmask : 0u);
    uint32_t max_finite = ieee ? ((emask - 1u) << mbits) | mmask : (emask << mbits) | (mmask - 1u);
    uint32_t overflow = ieee ? emask << mbits : nan;
    uint32_t r = a - ((127u - bias) << 23);
    uint32_t code = (r + (1u << (sh - 1u)) - 1u + ((r >> sh) & 1u)) >> sh;
    if (bias < 127u) {
        uint32_t is_sub = zc_mask(a < (128u - bias) << 23);
        float y = __fmul_rn(__uint_as_float(a & is_sub),
                            __uint_as_float((127u + bias + mbits - 1u) << 23));
        int t = __float2int_rz(y); /* 0 <= y < 2^mbits */
        float frac = __fsub_rn(y, __int2float_rn(t));
        uint32_t q = (uint32_t)t + (zc_mask(frac > 0.5f) & 1u) +
                     (zc_mask(frac == 0.5f) & (uint32_t)t & 1u);
        code = (q & is_sub) | (code & ~is_sub);
    }
    if (ebits < 8u) {
        uint32_t is_over = zc_mask(code > max_finite);
        code = (overflow & is_over) | (code & ~is_over);
    }
    uint32_t is_nan = zc_mask(a > 0x7f800000u);
    code = (nan & is_nan) | (code & ~is_nan);
    uint32_t sign = (u >> 31) << (ebits + mbits);
    return (canon ? sign & ~is_nan : sign) | code;
}

/* ---- element operations (core/reduce.c) ---- */

ZC_DEV float zc_minf(float a, float b) {
    float r = (b < a || a != a) ? b : a;
    return a == b ? __uint_as_float(__float_as_uint(a) | __float_as_uint(b)) : r;
}
ZC_DEV float zc_maxf(float a, float b) {
    float r = (b > a || a != a) ? b : a;
    return a == b ? __uint_as_float(__float_as_uint(a) & __float_as_uint(b)) : r;
}
ZC_DEV double zc_mind(double a, double b) {
    double r = (b < a || a != a) ? b : a;
    return a == b ? __longlong_as_double(__double_as_longlong(a) | __double_as_longlong(b)) : r;
}
ZC_DEV double zc_maxd(double a, double b) {
    double r = (b > a || a != a) ? b : a;
    return a == b ? __longlong_as_double(__double_as_longlong(a) & __double_as_longlong(b)) : r;
}
ZC_DEV float zc_canonf(float x) { return x != x ? __uint_as_float(0x7fc00000u) : x; }
ZC_DEV double zc_canond(double x) {
    return x != x ? __longlong_as_double(0x7ff8000000000000ll) : x;
}

/* 64-bit AVG: the exact sum in two words, divided by 32-bit digits (core/reduce.c). */
struct zc_u128 {
    uint64_t lo, hi;
};
ZC_DEV zc_u128 zc_u128_add(zc_u128 s, zc_u128 x) {
    uint64_t lo = s.lo + x.lo;
    s.hi += x.hi + (uint64_t)(lo < x.lo);
    s.lo = lo;
    return s;
}
ZC_DEV uint64_t zc_u128_div_u32(zc_u128 v, uint32_t d) {
    uint64_t x = ((v.hi % d) << 32) | (v.lo >> 32);
    uint64_t q1 = x / d;
    x = ((x % d) << 32) | (v.lo & 0xffffffffu);
    return (q1 << 32) | (x / d);
}
ZC_DEV int64_t zc_s128_div_u32(zc_u128 v, uint32_t d) {
    uint64_t neg = 0u - (v.hi >> 63);
    zc_u128 mag = {(v.lo ^ neg) - neg, (v.hi ^ neg) + (uint64_t)(neg && v.lo == 0)};
    uint64_t q = zc_u128_div_u32(mag, d);
    return (int64_t)((q ^ neg) - neg);
}

/* ---- the (type, op) table: T stored, A accumulated; load, fold, store ---- */

#define ZC_K(NAME, TT, AA, LOAD, OP, STORE)                                                     \
    struct NAME {                                                                               \
        typedef TT T;                                                                           \
        typedef AA A;                                                                           \
        ZC_DEV A load(T x) { return LOAD; }                                                     \
        ZC_DEV A op(A a, A b) { return OP; }                                                    \
        ZC_DEV T store(A s, uint32_t n) {                                                       \
            (void)n;                                                                            \
            return STORE;                                                                       \
        }                                                                                       \
    };

#define ZC_INT_K(tag, TT, U, W)                                                                 \
    ZC_K(zc_##tag##_sum, TT, TT, x, (TT)((U)a + (U)b), s)                                       \
    ZC_K(zc_##tag##_prod, TT, TT, x, (TT)((U)a * (U)b), s)                                      \
    ZC_K(zc_##tag##_min, TT, TT, x, (b < a ? b : a), s)                                         \
    ZC_K(zc_##tag##_max, TT, TT, x, (b > a ? b : a), s)                                         \
    ZC_K(zc_##tag##_avg, TT, W, (W)x, a + b, (TT)(s / (W)n))

/* 8- and 32-bit AVG sum in int64 (exact for ZC_GPU_MAX_SRCS ranks), quotient truncated. */
ZC_INT_K(i8, int8_t, uint32_t, int64_t)
ZC_INT_K(u8, uint8_t, uint32_t, int64_t)
ZC_INT_K(i32, int32_t, uint32_t, int64_t)
ZC_INT_K(u32, uint32_t, uint32_t, int64_t)

#define ZC_I64_LOAD(x) (zc_u128{(uint64_t)(x), (x) < 0 ? ~0ull : 0ull})
#define ZC_U64_LOAD(x) (zc_u128{(x), 0ull})
ZC_K(zc_i64_sum, int64_t, int64_t, x, (int64_t)((uint64_t)a + (uint64_t)b), s)
ZC_K(zc_i64_prod, int64_t, int64_t, x, (int64_t)((uint64_t)a * (uint64_t)b), s)
ZC_K(zc_i64_min, int64_t, int64_t, x, (b < a ? b : a), s)
ZC_K(zc_i64_max, int64_t, int64_t, x, (b > a ? b : a), s)
ZC_K(zc_i64_avg, int64_t, zc_u128, ZC_I64_LOAD(x), zc_u128_add(a, b), zc_s128_div_u32(s, n))
ZC_K(zc_u64_sum, uint64_t, uint64_t, x, a + b, s)
ZC_K(zc_u64_prod, uint64_t, uint64_t, x, a * b, s)
ZC_K(zc_u64_min, uint64_t, uint64_t, x, (b < a ? b : a), s)
ZC_K(zc_u64_max, uint64_t, uint64_t, x, (b > a ? b : a), s)
ZC_K(zc_u64_avg, uint64_t, zc_u128, ZC_U64_LOAD(x), zc_u128_add(a, b), zc_u128_div_u32(s, n))

#define ZC_FLOAT_K(tag, TT, DEC, ENC)                                                           \
    ZC_K(zc_##tag##_sum, TT, float, DEC, __fadd_rn(a, b), ENC(s))                               \
    ZC_K(zc_##tag##_prod, TT, float, DEC, __fmul_rn(a, b), ENC(s))                              \
    ZC_K(zc_##tag##_min, TT, float, DEC, zc_minf(a, b), ENC(s))                                 \
    ZC_K(zc_##tag##_max, TT, float, DEC, zc_maxf(a, b), ENC(s))                                 \
    ZC_K(zc_##tag##_avg, TT, float, DEC, __fadd_rn(a, b), ENC(__fdiv_rn(s, (float)n)))

#define ZC_F32_ENC(s) zc_canonf(s)
#define ZC_F16_DEC zc_decode(x, 5, 10, 15, true)
#define ZC_F16_ENC(s) ((uint16_t)zc_encode(s, 5, 10, 15, true, true))
#define ZC_BF16_DEC __uint_as_float((uint32_t)x << 16)
#define ZC_BF16_ENC(s) ((uint16_t)zc_encode(s, 8, 7, 127, true, true))
#define ZC_E4M3_DEC zc_decode(x, 4, 3, 7, false)
#define ZC_E4M3_ENC(s) ((uint8_t)zc_encode(s, 4, 3, 7, false, true))
#define ZC_E5M2_DEC zc_decode(x, 5, 2, 15, true)
#define ZC_E5M2_ENC(s) ((uint8_t)zc_encode(s, 5, 2, 15, true, true))
ZC_FLOAT_K(f32, float, x, ZC_F32_ENC)
ZC_FLOAT_K(f16, uint16_t, ZC_F16_DEC, ZC_F16_ENC)
ZC_FLOAT_K(bf16, uint16_t, ZC_BF16_DEC, ZC_BF16_ENC)
ZC_FLOAT_K(e4m3, uint8_t, ZC_E4M3_DEC, ZC_E4M3_ENC)
ZC_FLOAT_K(e5m2, uint8_t, ZC_E5M2_DEC, ZC_E5M2_ENC)
ZC_K(zc_f64_sum, double, double, x, __dadd_rn(a, b), zc_canond(s))
ZC_K(zc_f64_prod, double, double, x, __dmul_rn(a, b), zc_canond(s))
ZC_K(zc_f64_min, double, double, x, zc_mind(a, b), zc_canond(s))
ZC_K(zc_f64_max, double, double, x, zc_maxd(a, b), zc_canond(s))
ZC_K(zc_f64_avg, double, double, x, __dadd_rn(a, b), zc_canond(__ddiv_rn(s, (double)n)))

/* ---- the kernel ---- */

template <class K>
__global__ void __launch_bounds__(ZC_RED_THREADS)
    zc_reduce_kernel(const __grid_constant__ zc_red_args a) {
    typedef typename K::T T;
    typedef typename K::A A;
    constexpr uint32_t V = 16u / sizeof(T);
    union vec {
        uint4 u;
        T e[V];
    };
    const uint64_t nvec = a.vec ? a.count / V : 0;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t i = tid; i < nvec; i += stride) {
        vec x, o;
        A acc[V];
        x.u = static_cast<const uint4 *>(a.src[0])[i];
#pragma unroll
        for (uint32_t j = 0; j < V; j++) acc[j] = K::load(x.e[j]);
        for (uint32_t k = 1; k < a.n; k++) {
            x.u = static_cast<const uint4 *>(a.src[k])[i];
#pragma unroll
            for (uint32_t j = 0; j < V; j++) acc[j] = K::op(acc[j], K::load(x.e[j]));
        }
#pragma unroll
        for (uint32_t j = 0; j < V; j++) o.e[j] = K::store(acc[j], a.n);
        static_cast<uint4 *>(a.dst)[i] = o.u;
    }
    for (uint64_t i = nvec * V + tid; i < a.count; i += stride) {
        A acc = K::load(static_cast<const T *>(a.src[0])[i]);
        for (uint32_t k = 1; k < a.n; k++)
            acc = K::op(acc, K::load(static_cast<const T *>(a.src[k])[i]));
        static_cast<T *>(a.dst)[i] = K::store(acc, a.n);
    }
}

template <class K> static cudaError_t zc_launch(cudaStream_t s, const zc_red_args &a, int sms) {
    constexpr uint64_t V = 16u / sizeof(typename K::T);
    uint64_t items = a.vec ? a.count / V + a.count % V : a.count;
    uint64_t blocks = (items + ZC_RED_THREADS - 1) / ZC_RED_THREADS;
    uint64_t most = (uint64_t)(sms > 0 ? sms : 1) * ZC_RED_BLOCKS_PER_SM;
    if (blocks > most) blocks = most;
    if (blocks == 0) blocks = 1;
    zc_reduce_kernel<K><<<(unsigned)blocks, ZC_RED_THREADS, 0, s>>>(a);
    return cudaGetLastError();
}

#define ZC_ROW(tag)                                                                             \
    switch (op) {                                                                               \
    case ZC_SUM: return zc_launch<zc_##tag##_sum>(s, a, sms);                                   \
    case ZC_PROD: return zc_launch<zc_##tag##_prod>(s, a, sms);                                 \
    case ZC_MIN: return zc_launch<zc_##tag##_min>(s, a, sms);                                   \
    case ZC_MAX: return zc_launch<zc_##tag##_max>(s, a, sms);                                   \
    case ZC_AVG: return zc_launch<zc_##tag##_avg>(s, a, sms);                                   \
    default: return cudaErrorInvalidValue;                                                      \
    }

static cudaError_t zc_dispatch(cudaStream_t s, const zc_red_args &a, zc_dtype dtype, zc_op op,
                               int sms) {
    switch (dtype) {
    case ZC_INT8: ZC_ROW(i8)
    case ZC_UINT8: ZC_ROW(u8)
    case ZC_INT32: ZC_ROW(i32)
    case ZC_UINT32: ZC_ROW(u32)
    case ZC_INT64: ZC_ROW(i64)
    case ZC_UINT64: ZC_ROW(u64)
    case ZC_FLOAT16: ZC_ROW(f16)
    case ZC_BFLOAT16: ZC_ROW(bf16)
    case ZC_FLOAT32: ZC_ROW(f32)
    case ZC_FLOAT64: ZC_ROW(f64)
    case ZC_FP8_E4M3: ZC_ROW(e4m3)
    case ZC_FP8_E5M2: ZC_ROW(e5m2)
    default: return cudaErrorInvalidValue;
    }
}

extern "C" int zc__cuda_reduce(void *stream, void *dst, const void *const *srcs, uint32_t nsrc,
                               size_t count, zc_dtype dtype, zc_op op, int sms) {
    zc_red_args a;
    if (nsrc == 0 || nsrc > ZC_GPU_MAX_SRCS) return (int)cudaErrorInvalidValue;
    if (count == 0) return 0;
    uintptr_t align = (uintptr_t)dst;
    a.dst = dst;
    for (uint32_t k = 0; k < ZC_GPU_MAX_SRCS; k++) {
        a.src[k] = k < nsrc ? srcs[k] : nullptr;
        align |= (uintptr_t)a.src[k];
    }
    a.n = nsrc;
    a.vec = (align & 15u) == 0;
    a.count = count;
    return (int)zc_dispatch(static_cast<cudaStream_t>(stream), a, dtype, op, sms);
}
