/* hostkernel.h: the host reduction kernel (core/reduce.c) as a service to providers whose
 * "device" is host memory (gpu/sim.c, the simulated device): they run the very kernel the
 * host collectives run, so their results are the host results by construction. The core
 * declares it for itself through core/reduce.h, which includes this header. */
#ifndef ZC_PROVIDER_HOSTKERNEL_H
#define ZC_PROVIDER_HOSTKERNEL_H

#include "zcoll.h"

/* out[i] = in[0][i] (op) in[1][i] (op) ... (op) in[n-1][i], folded left in that order.
 * Accumulation: fp16/bf16/fp8 in fp32, rounded once (nearest-even) at the store; fp32 in fp32;
 * fp64 in fp64; integer SUM/PROD wrap as two's complement; AVG = the sum divided by n
 * (floating: in the accumulation type, then rounded; integers: the exact sum, truncated toward
 * zero); MIN/MAX of NaN follow IEEE fmin/fmax (a NaN loses to a number).
 * n >= 1. out may be exactly equal to any in[k] (in place); no other overlap. Subnormals are
 * kept whatever the caller's floating-point mode (flush-to-zero / denormals-are-zero are off
 * for the call and restored after), as on the device. */
void zc__reduce(void *out, const void *const *in, uint32_t n, size_t count, zc_dtype dtype,
                zc_op op);

#endif
