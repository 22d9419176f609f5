/* kernels.h: what gpu/reduce.cu (compiled by nvcc) offers gpu/cuda.c (compiled by cc). The
 * launch returns the CUDA error as an int; cuda.c turns it into a status and a sentence. */
#ifndef ZC_GPU_KERNELS_H
#define ZC_GPU_KERNELS_H

#include "zcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues dst[i] = srcs[0][i] op ... op srcs[nsrc-1][i] (i < count) on stream (a cudaStream_t)
 * with grids sized for sms multiprocessors: bitwise the host kernels of core/reduce.c. Returns
 * the launch's cudaError_t (0: enqueued). 1 <= nsrc <= ZC_GPU_MAX_SRCS; count > 0; dst may
 * equal a source. 16-byte vector loads when every pointer is 16-byte aligned. */
int zc__cuda_reduce(void *stream, void *dst, const void *const *srcs, uint32_t nsrc,
                    size_t count, zc_dtype dtype, zc_op op, int sms);

#ifdef __cplusplus
}
#endif

#endif
