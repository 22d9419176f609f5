/* zg.h: the device-memory suite's helpers (tests/gpu/dev.c, main.c) on top of the shared test
 * harness (tests/zt.h: ZT_CHECK, zt_fail, zt_run_ranks, the runner). The suite runs on the device
 * ZC_GPU_PROVIDER names (inherited by the ranks zcrun starts): "sim", the simulated GPU of every
 * build (`ninja check`), or "cuda" (`ninja check-gpu`); unset, it is cuda in CUDA builds and sim
 * otherwise. Device memory, copies, streams and graphs go through the zg_* helpers, so every
 * test is written once for both. zg_need_device() skips (exit 77) where there is no device and
 * fails where one is there but cannot be used (a driver too old, say). */
#ifndef ZG_H
#define ZG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../zt.h"
#include "gpu.h"
#include "zcoll.h"

/* Skips the test unless the chosen device is usable (fails it when a device is there but
 * unusable); makes device `local_rank % count` current with its context (zcoll's gpu_device -1
 * takes it). */
void zg_need_device(void);
/* True when the suite runs on the simulated GPU. */
bool zg_sim(void);
/* The provider under test (provider/gpu.h), for tests that drive it without a communicator. */
const zc_gpu_ops *zg_ops(void);
/* Device memory (cudaMalloc, or zc_gpu_sim_alloc), copies to, from and within it, memset; each fails
 * the test on error and returns once the device holds the result (a pageable cudaMemcpy to the
 * device and cudaMemset return earlier; a host-ordered zcoll call must find its inputs there). */
void *zg_dev_alloc(size_t bytes);
/* Two device buffers of bytes each, registered ZC_MEM_CUDA on c. */
void zg_register_pair(zc_comm *c, size_t bytes, void **send, void **recv);
void zg_dev_free(void *p);
void zg_h2d(void *dst, const void *src, size_t bytes);
void zg_d2h(void *dst, const void *src, size_t bytes);
void zg_d2d(void *dst, const void *src, size_t bytes);
void zg_dev_memset(void *p, int v, size_t bytes);
/* A caller's stream (a cudaStream_t, or a zc_gpu_sim_stream *) for the _stream forms;
 * p[i] += v for i < n enqueued on it (a kernel launch checked the way PyTorch checks its own:
 * the thread's error slot must be empty after it); a query: true once everything enqueued ran
 * (or the device was lost: nothing will run any more). */
void *zg_stream_create(void);
void zg_add_i32(void *p, size_t n, int32_t v, void *stream);
bool zg_stream_done(void *stream);
void zg_stream_destroy(void *stream);
/* Graph capture of a stream (global: cudaStreamCaptureModeGlobal, else thread-local), the
 * graph (NULL when the capture was invalidated), a replay on a stream, and its end. */
void zg_capture_begin(void *stream, bool global);
void *zg_capture_end(void *stream);
void zg_graph_launch(void *graph, void *stream);
void zg_graph_free(void *graph);
/* Managed memory (CUDA only; NULL with the simulated GPU). */
void *zg_managed_alloc(size_t bytes);
/* A rank program's communicator from the zcrun environment (zg_need_device first); the arena
 * is static. The _init_env form returns zc_comm_init's status instead of failing the test. */
zc_comm *zg_comm_from_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes);
zc_status zg_comm_init_env(uint64_t gpu_scratch_bytes, uint64_t oneshot_max_bytes,
                           zc_comm **out);
/* Fills count elements of test data for dtype, from seed: random bits for 8/16-bit types (every
 * code, NaN and infinity included); for wider floats signed values of mixed magnitudes with
 * cancellation (x and -x in neighbouring ranks' data), subnormals, sums that underflow to
 * subnormals, and some specials; raw bits for integers. */
void zg_fill(void *buf, size_t count, zc_dtype dtype, uint64_t seed);
/* A communicator's stream slots and active requests, on stderr; the watchdog of ZG_WATCHDOG_S
 * seconds (unset or 0: none) that prints the thread's backtrace and that dump, then exits 124
 * (tests/gpu/watch.c). zg_comm_from_env arms it. */
void zg_dump(const zc_comm *c);
void zg_watch(const zc_comm *c);
/* This rank's ZC_RANK (0 outside zcrun). */
uint32_t zg_rank(void);
/* Runs rank program name on n ranks through zcrun (zg_need_device first); fails the test unless
 * every rank exited 0 (skips when they found no device). */
void zg_run(uint32_t n, const char *name);
/* Skips the test unless the simulated GPU runs it (a property only the simulation can set up
 * or observe). */
void zg_need_sim(void);

#define ZT_TEST(name, timeout_s) void name(void);
#define ZT_RANK(name) int name(void);
#include "list.h"
#undef ZT_TEST
#undef ZT_RANK

#endif
