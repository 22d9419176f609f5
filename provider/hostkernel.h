/* hostkernel.h: the host reduction kernel (core/reduce.c) as a service to providers whose
 * "device" is host memory (gpu/sim.c, the simulated device): they run the very kernel the
 * host collectives run, so their results are the host results by construction. The core
 * declares it for itself through core/reduce.h, which includes this header. */
#ifndef ZC_PROVIDER_HOSTKERNEL_H
#define ZC_PROVIDER_HOSTKERNEL_H

#include "zcoll.h"

/* out[i] = in[0..n-1][i] reduced in the rank tree (core/reduce.h, zcoll.h's zc_op): with p the
 * largest power of two <= n and e = n - p, leaf j is in[2j] (+) in[2j+1] for j < e and in[j+e]
 * for e <= j < p, then pairs of neighbours level by level to one value, the lower ranks' on
 * the left; for n <= 3 that is (in[0] (+) in[1]) (+) in[2]. Accumulation: fp16/bf16/fp8 in
 * fp32, rounded once (nearest-even) at the store; fp32 in fp32; fp64 in fp64; integer SUM/PROD
 * wrap as two's complement; AVG = the sum divided by n (floating: in the accumulation type,
 * then rounded; integers: the exact sum, truncated toward zero); MIN/MAX of NaN follow IEEE
 * fmin/fmax (a NaN loses to a number).
 * n >= 1. out may be exactly equal to any in[k] (in place); no other overlap. Subnormals are
 * kept whatever the caller's floating-point mode (flush-to-zero / denormals-are-zero are off
 * for the call and restored after), as on the device. */
void zc__reduce(void *out, const void *const *in, uint32_t n, size_t count, zc_dtype dtype,
                zc_op op);

/* Pairwise accumulator primitives, for algorithms that reduce in steps across ranks and move
 * partial results between them: a partial result travels in the accumulator format of
 * (dtype, op), so that any grouping of the same rank tree gives zc__reduce's bits. The format
 * is the element type for integer SUM/PROD/MIN/MAX; fp32 for fp32, fp16, bf16 and fp8; fp64
 * for fp64; for integer AVG the exact sum: int32 for 8-bit types, int64 for int32, uint64 for
 * uint32, a 128-bit two's complement {lo, hi} pair of uint64 for 64-bit types. Buffers hold
 * whole elements aligned to their size; dtype and op in range (else nothing is done and the
 * size is 0). Subnormals are kept whatever the caller's floating-point mode, as zc__reduce.
 * zc__reduce(out, in, n) equals zc__acc_store(out, R, n) where R is the rank tree of
 * zc__acc_combine over zc__acc_load(in[k]). */

/* Bytes of one element of the accumulator format of (dtype, op). */
size_t zc__acc_bytes(zc_dtype dtype, zc_op op);
/* acc[i] = the accumulator of in[i]. acc and in do not overlap. */
void zc__acc_load(void *acc, const void *in, size_t count, zc_dtype dtype, zc_op op);
/* out[i] = left[i] (+) right[i] (accumulators; out may be left or right). */
void zc__acc_combine(void *out, const void *left, const void *right, size_t count,
                     zc_dtype dtype, zc_op op);
/* out[i] = the stored element of acc[i] for a reduction over n ranks (AVG divides by n); n >= 1
 * (n == 0: nothing is done). out and acc do not overlap. */
void zc__acc_store(void *out, const void *acc, size_t count, zc_dtype dtype, zc_op op,
                   uint32_t n);

#endif
