/* zg.h: the device-memory suite's runner interface (tests/gpu/main.c) and shared helpers.
 * Each test needs a CUDA device; zg_need_device() skips (exit 77) where there is none. */
#ifndef ZG_H
#define ZG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime.h>

#include "zcoll.h"

_Noreturn void zg_fail(const char *file, int line, const char *expr, const char *detail);
_Noreturn void zg_skip(const char *why);

#define ZG_CHECK(expr)                                                                        \
    do {                                                                                      \
        if (!(expr)) zg_fail(__FILE__, __LINE__, #expr, NULL);                                \
    } while (0)
/* A zc_status compared with the expected one; the communicator's sentence on failure. */
#define ZG_CHECK_ST(comm, call, expected)                                                     \
    do {                                                                                      \
        zc_status zg_s_ = (call);                                                             \
        if (zg_s_ != (expected)) {                                                            \
            char zg_d_[400];                                                                  \
            snprintf(zg_d_, sizeof zg_d_, "%s, expected %s: %s", zc_status_name(zg_s_),       \
                     zc_status_name(expected), (comm) ? zc_comm_error_text(comm) : "");       \
            zg_fail(__FILE__, __LINE__, #call, zg_d_);                                        \
        }                                                                                     \
    } while (0)
#define ZG_CUDA(call)                                                                         \
    do {                                                                                      \
        cudaError_t zg_e_ = (call);                                                           \
        if (zg_e_ != cudaSuccess) zg_fail(__FILE__, __LINE__, #call, cudaGetErrorName(zg_e_)); \
    } while (0)

/* Skips the test unless a CUDA device is usable; makes device `local_rank % count` current
 * and creates its context (zcoll's gpu_device -1 takes that device). */
void zg_need_device(void);
/* Runs `zcrun -n nranks --timeout T zcgputest --rank name`; returns its exit status (0 ok,
 * 77 skipped). */
int zg_run_ranks(uint32_t nranks, const char *name, uint32_t timeout_s);
/* A rank program's communicator from the zcrun environment; the arena is static. */
zc_comm *zg_comm_from_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes);

/* splitmix64 */
static inline uint64_t zg_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Fills bytes of test data for dtype: random bits for 8/16-bit types (every code, NaN and
 * infinity included), mostly moderate values with some specials for wider floats, raw bits
 * for integers. */
void zg_fill(void *buf, size_t count, zc_dtype dtype, uint64_t seed);
double zg_now_s(void);
/* p[i] += v for i < n, enqueued on s (tests/gpu/kernels.cu); returns the cudaError_t. */
int zg_add_i32(void *p, size_t n, int32_t v, cudaStream_t s);

#define ZG_TEST(name, timeout_s) void name(void);
#define ZG_RANK(name) int name(void);
#include "list.h"
#undef ZG_TEST
#undef ZG_RANK

#endif
