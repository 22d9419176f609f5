/* kernels.h: what gpu/reduce.cu (compiled by nvcc) offers gpu/cuda.c (compiled by cc); the
 * simulated runtime (gpu/sim.c) offers the same three calls on its device. Each returns the
 * call's own cudaError_t as an int (cudaLaunchKernel's result, never an earlier error left in
 * the thread's error slot); cuda.c turns it into a status and a sentence. */
#ifndef ZC_GPU_KERNELS_H
#define ZC_GPU_KERNELS_H

#include "gpu.h"
#include "zcoll.h"

#ifdef __CUDACC__
#define ZC_HOST_DEVICE __host__ __device__
#else
#define ZC_HOST_DEVICE
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues dst[i] = srcs[0][i] op ... op srcs[nsrc-1][i] (i < count) on stream (a cudaStream_t)
 * with grids sized for sms multiprocessors: bitwise the host kernels of core/reduce.c. 1 <= nsrc
 * <= ZC_GPU_MAX_SRCS; count > 0; dst may equal a source. 16-byte vector loads and stores over
 * the part of the range where every pointer is 16-byte aligned (zc__vec_split), scalar ones for
 * the unaligned head and the tail. */
int zc__cuda_reduce(void *stream, void *dst, const void *const *srcs, uint32_t nsrc,
                    size_t count, zc_dtype dtype, zc_op op, int sms);
/* Enqueues on stream one step of a stream-ordered call: a kernel that reads the zc_gpu_desc at
 * desc (device view of pinned host memory) when it runs and does what it says (reductions of
 * dtype and op, or copies). */
int zc__cuda_step(void *stream, const void *desc, zc_dtype dtype, zc_op op, int sms);

/* Loads every kernel above into the current device's context now and raises the device's stack
 * limit to the most local memory any of them uses; the first error, 0 when none. Called at a
 * provider's init, so that no later launch loads a module (CUDA's lazy loading, the default
 * since 12.2, loads a kernel at its first launch) or grows the device's local memory: either
 * may wait inside cudaLaunchKernel until the whole device is idle, and a stream-ordered call's
 * step is launched behind its own flag wait, which only the host's next progress releases. */
int zc__cuda_preload(void);

/* The vector split of a reduction over count elements of esize bytes whose pointers are
 * ptrs[0..n): *head elements one by one until every pointer is 16-byte aligned, then *vecs
 * 16-byte vectors, the rest one by one. No vectors (head = count) when the pointers are not
 * all equally misaligned or an element does not divide 16 bytes. */
static inline ZC_HOST_DEVICE void zc__vec_split(const void *const *ptrs, uint32_t n, uint64_t count,
                                 uint32_t esize, uint64_t *head, uint64_t *vecs) {
    uintptr_t mis = (uintptr_t)ptrs[0] & 15u;
    bool same = esize != 0 && 16u % esize == 0 && mis % esize == 0;
    for (uint32_t k = 1; k < n && same; k++) same = ((uintptr_t)ptrs[k] & 15u) == mis;
    uint64_t h = same ? ((16u - mis) & 15u) / esize : count;
    *head = h < count ? h : count;
    *vecs = same ? (count - *head) / (16u / esize) : 0u;
}

#ifdef __cplusplus
}
#endif

#endif
