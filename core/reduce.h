/* reduce.h: host reduction kernels and the narrow floating-point conversions (fp16, bf16,
 * fp8 e4m3 / e5m2), written here without libm. The one n-input entry point (zc__reduce) and the
 * pairwise accumulator primitives (zc__acc_*) both reduce in the rank tree, an order that
 * depends on n alone (zcoll.h's zc_op, docs/api.md): with p the largest power of two <= n and
 * e = n - p, leaf i is x_2i (+) x_2i+1 for i < e and x_i+e after, then pairs level by level,
 * the lower ranks on the left. So every algorithm that computes that tree, in one pass or in
 * steps across ranks, gives bitwise the same result for the same inputs. */
#ifndef ZC_CORE_REDUCE_H
#define ZC_CORE_REDUCE_H

#include "hostkernel.h" /* zc__reduce, the one reduction entry point */
#include "zcoll.h"

/* Copies bytes from src to dst (no overlap) with streaming stores that bypass the caches
 * where the CPU has them (x86-64), falling back to memcpy; for results larger than the caches,
 * where a normal store first reads the line it overwrites. Stores are fenced before return. */
void zc__copy_stream(void *dst, const void *src, size_t bytes);
/* Results (a call's whole result buffer) at least this large are written with
 * zc__copy_stream: larger than the last-level caches of the hosts measured (an 8 MiB
 * all_gather was 1.5x slower with streaming stores, a 64 MiB one 1.5x faster). */
#define ZC_STREAM_COPY_MIN_BYTES (32u << 20)

/* Conversions (round to nearest even; NaN stays NaN; e4m3 is the OCP "fn" variant: no
 * infinities, finite maximum 448, overflow gives NaN; e5m2 has infinities and overflow gives
 * infinity; fp16 overflow gives infinity). */
float zc__fp16_to_f32(uint16_t h);
uint16_t zc__f32_to_fp16(float f);
float zc__bf16_to_f32(uint16_t b);
uint16_t zc__f32_to_bf16(float f);
float zc__e4m3_to_f32(uint8_t v);
uint8_t zc__f32_to_e4m3(float f);
float zc__e5m2_to_f32(uint8_t v);
uint8_t zc__f32_to_e5m2(float f);

#endif
