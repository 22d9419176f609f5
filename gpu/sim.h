/* sim.h: the simulated gpu provider's test-facing side (gpu/sim.c; provider/gpu.h's zc_gpu_sim).
 * Built in every build, CUDA or not; a communicator uses it when cfg->gpu_provider is
 * ZC_GPU_PROVIDER_SIM (ZC_GPU_PROVIDER=sim).
 *
 * "Device memory" is what zc_gpu_sim_alloc returns: shared memory (through the platform
 * layer), so a peer process maps it by its exported handle (the platform's segment ref) as
 * CUDA IPC would. Work enqueued on the provider's
 * stream runs later, in order: at most one operation per event_query (the core queries at
 * every zc_progress), so code that reads a result before its event completed sees stale
 * bytes. A caller's stream (zc_gpu_sim_stream, what the _stream forms take for cuda_stream)
 * runs when zc_gpu_sim_stream_query is called, up to its first flag wait that does not hold.
 *
 * Knobs, read from the environment at the provider's init (zc_comm_init):
 *   ZC_GPU_SIM_EAGER=1   run every enqueued operation at once (no deferral);
 *   ZC_GPU_SIM_FAULT=N   the Nth reduce or copy (counted from 1 on this communicator) fails
 *                        when it runs: event_query reports ZC_GPU with a sentence, and every
 *                        later call fails with it (sticky, like a lost CUDA context);
 *   ZC_GPU_SIM_NO_RDMA=1 the device says it cannot take NIC writes (no GPUDirect RDMA), so
 *                        a communicator over transport_ib goes staged (or, with gpu_path
 *                        direct, fails init saying which rank).
 * Not thread-safe: the allocation table is the process's; allocate from one thread. */
#ifndef ZC_GPU_SIM_H
#define ZC_GPU_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "zcoll.h"

#define ZC_GPU_SIM_MAX_ALLOCS 256u /* live zc_gpu_sim_alloc buffers per process */
#define ZC_GPU_SIM_QUEUE 64u       /* operations a stream holds before the oldest runs */

/* Simulated device memory of bytes (> 0), zero-filled, page-aligned; NULL when the table is
 * full or the platform cannot map it. */
void *zc_gpu_sim_alloc(size_t bytes);
/* Unmaps what zc_gpu_sim_alloc returned and stops peers from mapping it (NULL: nothing). */
void zc_gpu_sim_free(void *p);
/* Frees every live allocation of this process. */
void zc_gpu_sim_free_all(void);

/* One operation of a simulated stream (internal layout; public only so that a stream can live
 * in the caller's memory). */
typedef struct zc_gpu_sim_op {
    uint32_t kind, nsrc;
    uint32_t dtype, op;
    uint64_t number;          /* reduce/copy: its number on the provider (fault injection) */
    uint64_t count;           /* elements (reduce) or bytes (copy) */
    void *dst;
    const void *srcs[64];     /* ZC_GPU_MAX_SRCS; copy: srcs[0] */
    volatile uint32_t *flag;  /* flag write / wait */
    uint32_t value, ev;
    void (*fn)(void *arg);    /* host function (a test's "kernel") */
    void *arg;
} zc_gpu_sim_op;

typedef struct zc_gpu_sim_stream {
    uint64_t magic;           /* set by zc_gpu_sim_stream_init */
    uint32_t head, len;       /* ring of ZC_GPU_SIM_QUEUE operations */
    zc_gpu_sim_op ops[ZC_GPU_SIM_QUEUE];
} zc_gpu_sim_stream;

/* An empty caller stream. */
void zc_gpu_sim_stream_init(zc_gpu_sim_stream *s);
/* Enqueues fn(arg) on s (arg must stay valid until it ran). ZC_AGAIN when s is full and its
 * oldest operation is a flag wait that does not hold yet. */
zc_status zc_gpu_sim_stream_call(zc_gpu_sim_stream *s, void (*fn)(void *arg), void *arg);
/* Runs s's operations in order until it is empty (ZC_OK) or reaches a flag wait that does not
 * hold (ZC_IN_PROGRESS): cudaStreamQuery with the simulated device's work done inline. */
zc_status zc_gpu_sim_stream_query(zc_gpu_sim_stream *s);

#endif
