/* zg.h: the device-memory suite's runner interface (tests/gpu/main.c) and shared helpers.
 * The suite runs on the device ZC_GPU_PROVIDER names (inherited by the ranks zcrun starts):
 * "sim", the simulated device of every build (`ninja check`), or "cuda" (`ninja check-gpu`);
 * unset, it is cuda in CUDA builds and sim otherwise. Device memory, copies and streams go
 * through the zg_dev_* helpers (tests/gpu/dev.c), so every test is written once for both.
 * zg_need_device() skips (exit 77) where the chosen device is not usable. */
#ifndef ZG_H
#define ZG_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu.h"

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
/* Skips the test unless the chosen device is usable; with CUDA makes device
 * `local_rank % count` current and creates its context (zcoll's gpu_device -1 takes it). */
void zg_need_device(void);
/* True when the suite runs on the simulated device. */
bool zg_sim(void);
/* The provider under test (provider/gpu.h), for tests that drive it without a communicator. */
const zc_gpu_ops *zg_ops(void);
/* Device memory (cudaMalloc, or zc_gpu_sim_alloc), copies to and from it, memset; each fails
 * the test on error. */
void *zg_dev_alloc(size_t bytes);
void zg_dev_free(void *p);
void zg_h2d(void *dst, const void *src, size_t bytes);
void zg_d2h(void *dst, const void *src, size_t bytes);
void zg_dev_memset(void *p, int v, size_t bytes);
/* A caller's stream (a cudaStream_t, or a zc_gpu_sim_stream *) for the _stream forms;
 * p[i] += v for i < n enqueued on it; a query: true once everything enqueued ran. */
void *zg_stream_create(void);
void zg_add_i32(void *p, size_t n, int32_t v, void *stream);
bool zg_stream_done(void *stream);
void zg_stream_destroy(void *stream);
/* Managed memory (CUDA only; NULL with the simulated device). */
void *zg_managed_alloc(size_t bytes);
/* Runs `zcrun -n nranks --timeout T zcgputest --rank name`; returns its exit status (0 ok,
 * 77 skipped). */
int zg_run_ranks(uint32_t nranks, const char *name, uint32_t timeout_s);
/* A rank program's communicator from the zcrun environment; the arena is static. The _init_env
 * form returns zc_comm_init's status instead of failing the test. */
zc_comm *zg_comm_from_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes);
zc_status zg_comm_init_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes,
                           zc_comm **out);

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

#define ZG_TEST(name, timeout_s) void name(void);
#define ZG_RANK(name) int name(void);
#include "list.h"
#undef ZG_TEST
#undef ZG_RANK

#endif
