/* reduce.cu: the device reduction kernels, every dtype x op, bitwise equal to the host kernels
 * of core/reduce.c because both compile the same element code (elem.h):
 * - every element reduces its n inputs in the rank tree (core/reduce.h), the host's order;
 * - fp16/bf16/fp8 accumulate in fp32 and round once (nearest-even, in integers), fp32 in fp32,
 *   fp64 in fp64; a NaN result is stored as the canonical quiet NaN;
 * - floating add/mul/div are the _rn intrinsics, which nvcc never contracts into an FMA, and
 *   denormals are kept (no -ftz, no fast math), so each is one IEEE operation as on the host;
 * - MIN/MAX are minimumNumber/maximumNumber with -0 < +0; integer SUM/PROD wrap; integer AVG
 *   truncates the exact sum's quotient toward zero (the host's double trick and its 128-bit
 *   long division both give exactly that).
 * Loads and stores are 16-byte vectors over the part of the range where every pointer is 16-byte
 * aligned (zc__vec_split: an unaligned head, as a reduce-scatter block at any element offset
 * has, and the tail go one element at a time).
 * Stream-ordered steps (zc__cuda_step) read their pointers when they run, from the device copy
 * of their descriptor that the stream made from pinned host memory just before (gpu/cuda.c):
 * every block copies it into shared memory once.
 * The launches call no CUDA function but cudaLaunchKernel, whose own result they return (never
 * an error an earlier call left in the thread's slot); gpu/cuda.c converts it. zc__cuda_preload
 * loads every kernel here at a provider's init (kernels.h says why). */
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
    uint32_t pad_;
    uint64_t count;
    uint64_t head, vecs; /* zc__vec_split: scalar elements first, then 16-byte vectors */
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

/* ---- the kernels ---- */

/* Most partial results on a thread's stack: log2 of ZC_GPU_MAX_SRCS. */
#define ZC_TREE_DEPTH 6u
static_assert((1u << ZC_TREE_DEPTH) >= ZC_GPU_MAX_SRCS, "the stack holds a tree of every n");

/* Input k's V elements from element at on, as accumulators: one 16-byte vector (V > 1) or one
 * element (V == 1). */
template <class K, uint32_t V> struct zc_ld {
    const void *const *src;
    uint64_t at;
    __device__ __forceinline__ void operator()(uint32_t k, typename K::A (&a)[V]) const {
        typedef typename K::T T;
        union {
            uint4 u;
            T e[V];
        } x;
        if (V > 1u) x.u = *reinterpret_cast<const uint4 *>(static_cast<const T *>(src[k]) + at);
        else x.e[0] = static_cast<const T *>(src[k])[at];
#pragma unroll
        for (uint32_t e = 0; e < V; e++) a[e] = K::load(x.e[e]);
    }
};

/* res = the n inputs (1 <= n <= ZC_GPU_MAX_SRCS) reduced in the rank tree, as the host kernels
 * do (reduce.h): with p the largest power of two <= n and e = n - p, leaf l is input 2l (+)
 * input 2l+1 for l < e and input l+e after; leaves are taken left to right as a binary counter,
 * each combined with the stack's top (on the left) once per trailing one bit of l, then pushed. */
template <class K, uint32_t V>
ZC_DEV void zc_tree(typename K::A (&res)[V], uint32_t n, const zc_ld<K, V> &ld) {
    typedef typename K::A A;
    if (n <= 3u) { /* (x0 (+) x1) (+) x2 without the stack, which lives in local memory */
        A w[V];
        ld(0, res);
        for (uint32_t k = 1; k < n; k++) {
            ld(k, w);
#pragma unroll
            for (uint32_t i = 0; i < V; i++) res[i] = K::op(res[i], w[i]);
        }
        return;
    }
    A st[ZC_TREE_DEPTH][V];
    uint32_t p = 1, depth = 0;
    while (p * 2u <= n) p *= 2u;
    uint32_t e = n - p;
    for (uint32_t l = 0; l < p; l++) {
        A v[V];
        if (l < e) {
            A w[V];
            ld(2u * l, v);
            ld(2u * l + 1u, w);
#pragma unroll
            for (uint32_t i = 0; i < V; i++) v[i] = K::op(v[i], w[i]);
        } else {
            ld(l + e, v);
        }
        for (uint32_t x = l; x & 1u; x >>= 1) {
            depth--;
#pragma unroll
            for (uint32_t i = 0; i < V; i++) v[i] = K::op(st[depth][i], v[i]);
        }
#pragma unroll
        for (uint32_t i = 0; i < V; i++) {
            if (l + 1u == p) res[i] = v[i];
            else st[depth][i] = v[i];
        }
        depth += l + 1u == p ? 0u : 1u;
    }
}

/* dst[i] = the rank tree of src[0..n)[i] for i < count: the head one element at a time, then
 * 16-byte vectors, then the tail; thread tid of stride. */
template <class K>
static __device__ __forceinline__ void zc_reduce_body(void *dst, const void *const *src,
                                                      uint32_t n, uint64_t count, uint64_t head,
                                                      uint64_t vecs, uint64_t tid,
                                                      uint64_t stride) {
    typedef typename K::T T;
    typedef typename K::A A;
    constexpr uint32_t V = 16u / sizeof(T);
    union vec {
        uint4 u;
        T e[V];
    };
    for (uint64_t j = tid; j < vecs; j += stride) {
        vec o;
        A acc[V];
        uint64_t at = head + j * V;
        zc_tree<K, V>(acc, n, zc_ld<K, V>{src, at});
#pragma unroll
        for (uint32_t e = 0; e < V; e++) o.e[e] = K::store(acc[e], n);
        *reinterpret_cast<uint4 *>(static_cast<T *>(dst) + at) = o.u;
    }
    uint64_t scalars = head + (count - head - vecs * V);
    for (uint64_t j = tid; j < scalars; j += stride) {
        uint64_t i = j < head ? j : j + vecs * V;
        A acc[1];
        zc_tree<K, 1>(acc, n, zc_ld<K, 1>{src, i});
        static_cast<T *>(dst)[i] = K::store(acc[0], n);
    }
}

template <class K>
__global__ void __launch_bounds__(ZC_RED_THREADS)
    zc_reduce_kernel(const __grid_constant__ zc_red_args a) {
    zc_reduce_body<K>(a.dst, a.src, a.n, a.count, a.head, a.vecs,
                      (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                      (uint64_t)gridDim.x * blockDim.x);
}

/* One copy of a step: bytes from src to dst, 16-byte vectors where both are equally aligned. */
static __device__ __forceinline__ void zc_copy_body(uint8_t *dst, const uint8_t *src,
                                                    uint64_t bytes, uint64_t tid,
                                                    uint64_t stride) {
    const void *ptrs[2] = {dst, src};
    uint64_t head, vecs;
    zc__vec_split(ptrs, 2, bytes, 1, &head, &vecs);
    for (uint64_t j = tid; j < vecs; j += stride)
        reinterpret_cast<uint4 *>(dst + head)[j] = reinterpret_cast<const uint4 *>(src + head)[j];
    uint64_t scalars = bytes - vecs * 16u;
    for (uint64_t j = tid; j < scalars; j += stride) {
        uint64_t i = j < head ? j : j + vecs * 16u;
        dst[i] = src[i];
    }
}

/* A stream-ordered step: the descriptor is read once per block (volatile: the host wrote it
 * just before the stream's wait let this kernel start), then reduced or copied. */
template <class K>
__global__ void __launch_bounds__(ZC_RED_THREADS) zc_step_kernel(const zc_gpu_desc *d) {
    __shared__ void *dst[ZC_GPU_MAX_SRCS];
    __shared__ const void *src[ZC_GPU_MAX_SRCS];
    __shared__ uint64_t bytes[ZC_GPU_MAX_SRCS];
    __shared__ uint32_t mode, n;
    __shared__ uint64_t count;
    const volatile zc_gpu_desc *v = d;
    if (threadIdx.x == 0) {
        mode = v->mode;
        n = v->n < ZC_GPU_MAX_SRCS ? v->n : ZC_GPU_MAX_SRCS;
        count = v->count;
    }
    __syncthreads();
    for (uint32_t k = threadIdx.x; k < n; k += blockDim.x) {
        dst[k] = v->dst[k];
        src[k] = v->src[k];
        bytes[k] = v->bytes[k];
    }
    __syncthreads();
    uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    if (mode == ZC_GPU_STEP_REDUCE && n && count) {
        uint64_t head, vecs;
        zc__vec_split(src, n, count, sizeof(typename K::T), &head, &vecs);
        if (((uintptr_t)dst[0] & 15u) != ((uintptr_t)src[0] & 15u))
            vecs = 0, head = count; /* dst aligned otherwise: one at a time */
        zc_reduce_body<K>(dst[0], src, n, count, head, vecs, tid, stride);
    } else if (mode == ZC_GPU_STEP_COPY) {
        for (uint32_t k = 0; k < n; k++)
            zc_copy_body(static_cast<uint8_t *>(dst[k]), static_cast<const uint8_t *>(src[k]),
                         bytes[k], tid, stride);
    }
}

static uint64_t zc_blocks(uint64_t items, int sms) {
    uint64_t blocks = (items + ZC_RED_THREADS - 1) / ZC_RED_THREADS;
    uint64_t most = (uint64_t)(sms > 0 ? sms : 1) * ZC_RED_BLOCKS_PER_SM;
    if (blocks > most) blocks = most;
    return blocks ? blocks : 1;
}

template <class K> static cudaError_t zc_launch(cudaStream_t s, zc_red_args &a, int sms) {
    constexpr uint64_t V = 16u / sizeof(typename K::T);
    const void *ptrs[ZC_GPU_MAX_SRCS + 1];
    for (uint32_t k = 0; k < a.n; k++) ptrs[k] = a.src[k];
    ptrs[a.n] = a.dst;
    zc__vec_split(ptrs, a.n + 1u, a.count, (uint32_t)sizeof(typename K::T), &a.head, &a.vecs);
    uint64_t items = a.vecs + (a.count - a.vecs * V);
    void *args[] = {&a};
    return cudaLaunchKernel(reinterpret_cast<const void *>(&zc_reduce_kernel<K>),
                            dim3((unsigned)zc_blocks(items, sms)), dim3(ZC_RED_THREADS), args, 0,
                            s);
}

/* A step's grid covers the device (the counts are known only when it runs). */
template <class K> static cudaError_t zc_launch_step(cudaStream_t s, const zc_gpu_desc *d,
                                                     int sms) {
    void *args[] = {&d};
    return cudaLaunchKernel(reinterpret_cast<const void *>(&zc_step_kernel<K>),
                            dim3((unsigned)zc_blocks(~0ull >> 1, sms)), dim3(ZC_RED_THREADS),
                            args, 0, s);
}

/* A launch of kernel family F (zc_launch, zc_launch_step) for dtype and op, arguments ARGS. */
#define ZC_ROW(F, tag, ARGS)                                                                    \
    switch (op) {                                                                               \
    case ZC_SUM: return F<zc_k_##tag##_sum> ARGS;                                               \
    case ZC_PROD: return F<zc_k_##tag##_prod> ARGS;                                             \
    case ZC_MIN: return F<zc_k_##tag##_min> ARGS;                                               \
    case ZC_MAX: return F<zc_k_##tag##_max> ARGS;                                               \
    case ZC_AVG: return F<zc_k_##tag##_avg> ARGS;                                               \
    default: return cudaErrorInvalidValue;                                                      \
    }

#define ZC_TABLE(F, ARGS)                                                                       \
    switch (dtype) {                                                                            \
    case ZC_INT8: ZC_ROW(F, i8, ARGS)                                                           \
    case ZC_UINT8: ZC_ROW(F, u8, ARGS)                                                          \
    case ZC_INT32: ZC_ROW(F, i32, ARGS)                                                         \
    case ZC_UINT32: ZC_ROW(F, u32, ARGS)                                                        \
    case ZC_INT64: ZC_ROW(F, i64, ARGS)                                                         \
    case ZC_UINT64: ZC_ROW(F, u64, ARGS)                                                        \
    case ZC_FLOAT16: ZC_ROW(F, fp16, ARGS)                                                      \
    case ZC_BFLOAT16: ZC_ROW(F, bf16, ARGS)                                                     \
    case ZC_FLOAT32: ZC_ROW(F, f32, ARGS)                                                       \
    case ZC_FLOAT64: ZC_ROW(F, f64, ARGS)                                                       \
    case ZC_FP8_E4M3: ZC_ROW(F, e4m3, ARGS)                                                     \
    case ZC_FP8_E5M2: ZC_ROW(F, e5m2, ARGS)                                                     \
    default: return cudaErrorInvalidValue;                                                      \
    }

static cudaError_t zc_dispatch(cudaStream_t s, zc_red_args &a, zc_dtype dtype, zc_op op,
                               int sms) {
    ZC_TABLE(zc_launch, (s, a, sms))
}

static cudaError_t zc_dispatch_step(cudaStream_t s, const zc_gpu_desc *d, zc_dtype dtype,
                                    zc_op op, int sms) {
    ZC_TABLE(zc_launch_step, (s, d, sms))
}

/* Loads both kernels of K (cudaFuncGetAttributes loads a kernel that lazy loading left out) and
 * keeps the most local memory a thread of either uses in *local. */
template <class K> static cudaError_t zc_load(size_t *local) {
    const void *fns[2] = {reinterpret_cast<const void *>(&zc_reduce_kernel<K>),
                          reinterpret_cast<const void *>(&zc_step_kernel<K>)};
    for (const void *fn : fns) {
        cudaFuncAttributes a;
        cudaError_t e = cudaFuncGetAttributes(&a, fn);
        if (e != cudaSuccess) return e;
        if (a.localSizeBytes > *local) *local = a.localSizeBytes;
    }
    return cudaSuccess;
}

static cudaError_t zc_load_pair(zc_dtype dtype, zc_op op, size_t *local) {
    ZC_TABLE(zc_load, (local))
}

extern "C" int zc__cuda_preload(void) {
    size_t local = 0, limit = 0;
    for (int t = 0; t < (int)ZC_DTYPE_COUNT_; t++)
        for (int o = 0; o < (int)ZC_OP_COUNT_; o++) {
            cudaError_t e = zc_load_pair((zc_dtype)t, (zc_op)o, &local);
            if (e != cudaSuccess) return (int)e;
        }
    cudaError_t e = cudaDeviceGetLimit(&limit, cudaLimitStackSize);
    if (e == cudaSuccess && local > limit) e = cudaDeviceSetLimit(cudaLimitStackSize, local);
    return (int)e;
}

extern "C" int zc__cuda_reduce(void *stream, void *dst, const void *const *srcs, uint32_t nsrc,
                               size_t count, zc_dtype dtype, zc_op op, int sms) {
    zc_red_args a;
    if (nsrc == 0 || nsrc > ZC_GPU_MAX_SRCS) return (int)cudaErrorInvalidValue;
    if (count == 0) return 0;
    a.dst = dst;
    for (uint32_t k = 0; k < ZC_GPU_MAX_SRCS; k++) a.src[k] = k < nsrc ? srcs[k] : nullptr;
    a.n = nsrc;
    a.count = count;
    return (int)zc_dispatch(static_cast<cudaStream_t>(stream), a, dtype, op, sms);
}

extern "C" int zc__cuda_step(void *stream, const void *desc, zc_dtype dtype, zc_op op, int sms) {
    return (int)zc_dispatch_step(static_cast<cudaStream_t>(stream),
                                 static_cast<const zc_gpu_desc *>(desc), dtype, op, sms);
}
