/* ref.h: the reference every collective test checks against, shared by build/zctest
 * (tests/test_inproc.c) and the bare-metal image (tests/baremetal/sweep.c): the seeded random
 * stream, seeded inputs as a function of (seed, rank, index), the reduction in docs/api.md's
 * order (the rank tree) with its accumulation rules, and for each collective its expected
 * result on every rank, how a rank issues it (in place or not) and where its result is read
 * back.
 * Freestanding: includes no libc header, calls nothing but the mem* builtins, allocates
 * nothing; the caller owns every buffer. */
#ifndef ZT_REF_H
#define ZT_REF_H

#include "zcoll.h"

/* Ranks the reference handles (the largest in-process group the tests build: test_scale.c's);
 * its tables of them are on the stack, which the bare-metal image keeps at 64 KiB. */
#if __STDC_HOSTED__
#define ZR_MAX_RANKS 4096u
#else
#define ZR_MAX_RANKS 64u
#endif

/* A deterministic pseudo-random stream (splitmix64) for seeded sweeps. */
typedef struct zt_rng { uint64_t state; } zt_rng;
uint64_t zt_rng_next(zt_rng *r);
/* Uniform in [0, bound) (bound > 0). */
uint64_t zt_rng_below(zt_rng *r, uint64_t bound);

typedef enum zr_coll { ZR_ALLREDUCE, ZR_REDUCE, ZR_BCAST, ZR_RS, ZR_AG, ZR_GATHER, ZR_SCATTER,
                       ZR_A2A, ZR_COUNT } zr_coll;
/* "allreduce", "reduce_scatter", ... */
const char *zr_coll_name(zr_coll c);
/* True for the collectives that take an op (allreduce, reduce, reduce_scatter). */
bool zr_coll_reduces(zr_coll c);

/* One call of a collective on every rank of an n-rank group: count elements per block
 * (per rank for the blocked collectives). A2A has no in-place form. */
typedef struct zr_case {
    zr_coll c;
    uint32_t n;       /* ranks, 1..ZR_MAX_RANKS */
    size_t count;
    zc_dtype t;
    zc_op op;
    uint32_t root;    /* < n */
    bool in_place;
} zr_case;

/* Whether q is one of rank r's connections in overlay mode on n ranks, per to a host (ranks
 * 0..per-1 are host 0, ...), from core/layout.h's definition written again: r +- 2^k mod n,
 * the recursive-doubling partners of the folded virtual ranks, the fold partner, r's host. */
bool zr_overlay_member(uint32_t n, uint32_t per, uint32_t r, uint32_t q);
/* A configuration for an in-process group of n ranks: slots rings of slot_bytes, every
 * small-message threshold (one-shot allreduce, direct reduce, tree broadcast) at small_max
 * bytes, and timeout_ns as the deadline (0: the default). */
void zr_group_config(zc_config *cfg, uint32_t n, uint32_t slot_bytes, uint32_t slots,
                     uint64_t small_max, uint64_t timeout_ns);

/* Cases in the full sweep: every collective x dtype x op (ops only for the reducing
 * collectives), in place and not (alltoall has no in-place form). */
#define ZR_SWEEP_CASES 468u
/* Case i (< ZR_SWEEP_CASES) of the full sweep on n ranks, in the order collective, dtype, op,
 * in place; the count rotates through counts[0..ncounts-1] and the root through 0..n-1.
 * False when i is past the last case. */
bool zr_sweep_case(uint32_t i, uint32_t n, const size_t *counts, uint32_t ncounts,
                   zr_case *k);

/* Fills count elements of rank r's input, elements base.. of the seeded stream: small exact
 * fractions for floating types (so sums stay finite), any bits for integers. */
void zr_fill(void *buf, size_t count, zc_dtype t, uint64_t seed, uint32_t r, size_t base);
/* out[i] = in[0..n-1][i] reduced in the rank tree (docs/api.md: the lower ranks' partial
 * result on the left), with docs/api.md's accumulation rules; n <= ZR_MAX_RANKS. */
void zr_reduce(uint8_t *out, uint8_t *const *in, uint32_t n, size_t count, zc_dtype t,
               zc_op op);

/* Fills count fp32 elements of rank r of an n-rank group (n = 4, 5, 7 or 8) with values whose
 * sum in the rank tree differs from the linear order's (element i is rank r's value times
 * 2^(i % 8)). False for any other n. */
bool zr_fill_order(float *buf, size_t count, uint32_t n, uint32_t r);

/* Bytes of each rank's send, receive and expected buffer: n * count elements plus one guard
 * byte, which must still hold the caller's fill after the call. */
size_t zr_buf_bytes(const zr_case *k);
/* Writes rank r's expected result into want (zr_buf_bytes, pre-filled with the same byte as
 * the receive buffers) from every rank's send buffer (each zr_fill'ed with n * count
 * elements). */
void zr_want(const zr_case *k, uint8_t *const *send, uint32_t r, uint8_t *want);
/* Rank r issues its call on cm (in place: with its result buffer inside send or recv as the
 * case says). Returns the call's status. */
zc_status zr_issue(const zr_case *k, zc_comm *cm, uint32_t r, uint8_t *send, uint8_t *recv,
                   zc_req *req);
/* Same as zr_issue, as a persistent plan for zc_start. */
zc_status zr_plan(const zr_case *k, zc_comm *cm, uint32_t r, uint8_t *send, uint8_t *recv,
                  zc_plan *plan);
/* Where rank r's result is after the call, and how many bytes of it to compare with want. */
const uint8_t *zr_result(const zr_case *k, uint32_t r, const uint8_t *send,
                         const uint8_t *recv, size_t *bytes_out);
/* Index of the first byte where got and want differ, or bytes when they are equal. */
size_t zr_first_diff(const void *got, const void *want, size_t bytes);
/* "allreduce n=8 count=37 float16 sum root=3 in place" into buf (cap > 0). */
void zr_describe(const zr_case *k, char *buf, size_t cap);

#endif /* ZT_REF_H */
