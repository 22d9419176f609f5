/* reduce.cu: the device reduction kernels, every dtype x op, bitwise equal to the host kernels
 * of core/reduce.c because both compile the same element code (elem.h):
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

#include "elem.h"
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
    ZC_K(zc_k_##tag##_sum, TT, TT, x, (TT)((U)a + (U)b), s)                                     \
    ZC_K(zc_k_##tag##_prod, TT, TT, x, (TT)((U)a * (U)b), s)                                    \
    ZC_K(zc_k_##tag##_min, TT, TT, x, (b < a ? b : a), s)                                       \
    ZC_K(zc_k_##tag##_max, TT, TT, x, (b > a ? b : a), s)                                       \
    ZC_K(zc_k_##tag##_avg, TT, W, (W)x, a + b, (TT)(s / (W)n))

/* 8- and 32-bit AVG sum in int64 (exact for ZC_GPU_MAX_SRCS ranks), quotient truncated. */
ZC_INT_K(i8, int8_t, uint32_t, int64_t)
ZC_INT_K(u8, uint8_t, uint32_t, int64_t)
ZC_INT_K(i32, int32_t, uint32_t, int64_t)
ZC_INT_K(u32, uint32_t, uint32_t, int64_t)

ZC_K(zc_k_i64_sum, int64_t, int64_t, x, (int64_t)((uint64_t)a + (uint64_t)b), s)
ZC_K(zc_k_i64_prod, int64_t, int64_t, x, (int64_t)((uint64_t)a * (uint64_t)b), s)
ZC_K(zc_k_i64_min, int64_t, int64_t, x, (b < a ? b : a), s)
ZC_K(zc_k_i64_max, int64_t, int64_t, x, (b > a ? b : a), s)
ZC_K(zc_k_i64_avg, int64_t, zc_u128, zc_i64_wide(x), zc_u128_add(a, b), zc_s128_div_u32(s, n))
ZC_K(zc_k_u64_sum, uint64_t, uint64_t, x, a + b, s)
ZC_K(zc_k_u64_prod, uint64_t, uint64_t, x, a * b, s)
ZC_K(zc_k_u64_min, uint64_t, uint64_t, x, (b < a ? b : a), s)
ZC_K(zc_k_u64_max, uint64_t, uint64_t, x, (b > a ? b : a), s)
ZC_K(zc_k_u64_avg, uint64_t, zc_u128, zc_u64_wide(x), zc_u128_add(a, b), zc_u128_div_u32(s, n))

#define ZC_FLOAT_K(tag, TT, AA, DEC, ADD, MUL, MIN, MAX)                                       \
    ZC_K(zc_k_##tag##_sum, TT, AA, DEC, ADD(a, b), zc_##tag##_store(s))                         \
    ZC_K(zc_k_##tag##_prod, TT, AA, DEC, MUL(a, b), zc_##tag##_store(s))                        \
    ZC_K(zc_k_##tag##_min, TT, AA, DEC, MIN(a, b), zc_##tag##_store(s))                         \
    ZC_K(zc_k_##tag##_max, TT, AA, DEC, MAX(a, b), zc_##tag##_store(s))                         \
    ZC_K(zc_k_##tag##_avg, TT, AA, DEC, ADD(a, b), zc_##tag##_avg(s, n))

ZC_FLOAT_K(f32, float, float, x, zc_addf, zc_mulf, zc_minf, zc_maxf)
ZC_FLOAT_K(f64, double, double, x, zc_addd, zc_muld, zc_mind, zc_maxd)
ZC_FLOAT_K(fp16, uint16_t, float, zc_fp16_dec(x), zc_addf, zc_mulf, zc_minf, zc_maxf)
ZC_FLOAT_K(bf16, uint16_t, float, zc_bf16_dec(x), zc_addf, zc_mulf, zc_minf, zc_maxf)
ZC_FLOAT_K(e4m3, uint8_t, float, zc_e4m3_dec(x), zc_addf, zc_mulf, zc_minf, zc_maxf)
ZC_FLOAT_K(e5m2, uint8_t, float, zc_e5m2_dec(x), zc_addf, zc_mulf, zc_minf, zc_maxf)

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
    case ZC_SUM: return zc_launch<zc_k_##tag##_sum>(s, a, sms);                                 \
    case ZC_PROD: return zc_launch<zc_k_##tag##_prod>(s, a, sms);                               \
    case ZC_MIN: return zc_launch<zc_k_##tag##_min>(s, a, sms);                                 \
    case ZC_MAX: return zc_launch<zc_k_##tag##_max>(s, a, sms);                                 \
    case ZC_AVG: return zc_launch<zc_k_##tag##_avg>(s, a, sms);                                 \
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
    case ZC_FLOAT16: ZC_ROW(fp16)
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
