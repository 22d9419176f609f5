/* sim.h: the simulated GPU's test-facing side. gpu/sim.c simulates the CUDA runtime and driver
 * that gpu/cuda.c calls (gpu/sim_cuda.h maps the names), with a device whose "memory" is shared
 * memory and whose kernels are the host kernels; gpu/cuda.c compiled against it is the provider
 * zc_gpu_sim (provider/gpu.h), picked by cfg->gpu_provider ZC_GPU_PROVIDER_SIM
 * (ZC_GPU_PROVIDER=sim). Built in every hosted build, CUDA or not.
 *
 * What it models of CUDA, so that the suite catches code that real CUDA would break:
 *   - the per-thread last-error slot: every failed call, a "not ready" query included, leaves
 *     its error there until cudaGetLastError takes it; sticky errors stay for good;
 *   - contexts: a runtime call with no context current makes the primary context of the
 *     thread's device (0 unless set) current, as the runtime does; driver calls need one
 *     current (CUDA_ERROR_INVALID_CONTEXT); zc_gpu_sim_contexts says which devices got one;
 *   - hardware queues: CUDA_DEVICE_MAX_CONNECTIONS (1..32, default 8) in-order queues per
 *     process; stream k (in creation order) feeds queue k % connections, so with 1 every stream
 *     shares one queue and a flag wait at its head holds back every later operation of every
 *     stream, as on a GPU;
 *   - deferred work: enqueued work runs later, in queue order, at most one operation per
 *     queue per event query (a stream query or synchronize runs until nothing can move);
 *   - graph capture: zc_gpu_sim_capture_begin in global, thread-local or relaxed mode; while a
 *     global capture is active anywhere, an unsafe call (event query, IPC open or close,
 *     allocation, synchronize) by a thread not in relaxed mode fails with
 *     cudaErrorStreamCaptureUnsupported and invalidates the capture; captured graphs replay;
 *   - devices: ZC_GPU_SIM_DEVICES (default 1), seen through ZC_GPU_SIM_VISIBLE (a
 *     CUDA_VISIBLE_DEVICES-like list); peer access between distinct devices unless
 *     ZC_GPU_SIM_NO_PEER=1, in which case an IPC open of another device's memory fails and a
 *     kernel reading it faults (sticky);
 *   - the driver: ZC_GPU_SIM_DRIVER (a version, default 13000 like the runtime; 0: none
 *     loaded; older than 13000: too old, every device count fails as with CUDA);
 *   - the platform's GPUDirect attributes, ZC_GPU_SIM_PLATFORM: "hopper" (default: x86 PCIe,
 *     writes ordering owner, the dma-buf PCIe mapping flag refused), "ampere" (ordering none:
 *     NIC writes need a flush), "c2c" (Grace Hopper: ordering all devices, the PCIe mapping
 *     flag accepted); ZC_GPU_SIM_NO_RDMA=1: no GPUDirect RDMA; ZC_GPU_SIM_DMABUF=1: dma-buf
 *     export works (default: CUDA_ERROR_NOT_SUPPORTED, as without the open kernel module).
 *   - lazy loading (CUDA_MODULE_LOADING, LAZY unless "EAGER"): a kernel's first launch on a
 *     device loads it, and a load waits for the device to go idle; when a flag wait holds a
 *     queue of that device, the real launch would wait for good: the simulated one fails with
 *     cudaErrorUnknown (counted in lazy_blocks); zc_gpu_sim_unload forgets what was loaded;
 *   - IPC lifetimes: freeing an allocation while another process still maps it (undefined
 *     behaviour with CUDA) is counted (zc_gpu_sim_stats.frees_while_mapped);
 *   - ZC_GPU_SIM_EAGER=1 runs every operation at once; ZC_GPU_SIM_FAULT=N makes the Nth
 *     kernel or copy (counted from 1 since the last device count, i.e. per provider init) fail
 *     when it runs with a sticky error, cudaErrorIllegalAddress or the ZC_GPU_SIM_FAULT_ERROR
 *     number (226: cudaErrorContained).
 * Knobs are read at every device count (a provider's init). The runtime is thread-safe (one
 * lock); allocations are the process's. */
#ifndef ZC_GPU_SIM_H
#define ZC_GPU_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "zcoll.h"

#define ZC_GPU_SIM_MAX_ALLOCS 256u /* live zc_gpu_sim_alloc buffers per process */
#define ZC_GPU_SIM_MAX_DEVICES 8u

/* Simulated device memory of bytes (> 0) on the calling thread's device, zero-filled,
 * page-aligned; NULL when the table is full or the platform cannot map it. */
void *zc_gpu_sim_alloc(size_t bytes);
/* Unmaps what zc_gpu_sim_alloc returned and stops peers from mapping it (NULL: nothing). */
void zc_gpu_sim_free(void *p);
/* Frees every live allocation of this process. */
void zc_gpu_sim_free_all(void);
/* cudaSetDevice: the calling thread's device (an ordinal), its primary context made current. */
zc_status zc_gpu_sim_set_device(int ordinal);

/* A stream (a cudaStream_t of the simulated runtime). The fields are the runtime's. */
typedef struct zc_gpu_sim_stream {
    uint64_t magic;
    uint32_t queue;     /* the hardware queue it feeds */
    uint32_t used;      /* the runtime's own streams: taken */
    uint64_t pending;   /* operations enqueued and not run yet */
    uint32_t capture;   /* 0 none, 1 active, 2 invalidated */
    uint32_t cap_mode;  /* ZC_GPU_SIM_CAPTURE_* of the active capture */
    const void *cap_thread;
    struct zc_gpu_sim_graph *graph; /* where a capture puts the operations */
} zc_gpu_sim_stream;

/* An empty stream (cudaStreamCreate). */
void zc_gpu_sim_stream_init(zc_gpu_sim_stream *s);
/* Enqueues fn(arg) on s (arg must stay valid until it ran): a test's kernel. ZC_AGAIN when
 * its queue is full. */
zc_status zc_gpu_sim_stream_call(zc_gpu_sim_stream *s, void (*fn)(void *arg), void *arg);
/* cudaStreamQuery: runs every queue until nothing can move; ZC_OK once s has nothing left,
 * ZC_IN_PROGRESS while it has (held by a flag wait), ZC_GPU after a sticky fault. */
zc_status zc_gpu_sim_stream_query(zc_gpu_sim_stream *s);

/* Graph capture (cudaStreamBeginCapture / EndCapture / GraphLaunch). */
enum { ZC_GPU_SIM_CAPTURE_GLOBAL = 0, ZC_GPU_SIM_CAPTURE_THREAD_LOCAL = 1,
       ZC_GPU_SIM_CAPTURE_RELAXED = 2 };
typedef struct zc_gpu_sim_graph zc_gpu_sim_graph;
zc_status zc_gpu_sim_capture_begin(zc_gpu_sim_stream *s, int mode);
/* The captured graph; ZC_INVALID_STATE when the capture was invalidated (an unsafe call
 * somewhere during it) or none was active. */
zc_status zc_gpu_sim_capture_end(zc_gpu_sim_stream *s, zc_gpu_sim_graph **out);
zc_status zc_gpu_sim_graph_launch(zc_gpu_sim_graph *g, zc_gpu_sim_stream *s);
void zc_gpu_sim_graph_free(zc_gpu_sim_graph *g);

/* The calling thread's last-error slot: its value (0: cudaSuccess) without clearing
 * (cudaPeekAtLastError), or taken out (cudaGetLastError); and an error's name. */
int zc_gpu_sim_peek_error(void);
int zc_gpu_sim_take_error(void);
const char *zc_gpu_sim_error_name(int e);

/* Bit d: physical device d got a primary context in this process. */
uint32_t zc_gpu_sim_contexts(void);

/* What the runtime did (since the process started). */
typedef struct zc_gpu_sim_stats {
    uint64_t ops_run;         /* operations executed */
    uint64_t flushes;         /* GPUDirect RDMA flushes */
    uint64_t exports;         /* dma-buf exports that succeeded ... */
    uint64_t exports_pcie;    /* ... of which mapped through PCIe BAR1 */
    uint64_t vec_elems;       /* reduction elements the kernels took in 16-byte vectors ... */
    uint64_t scalar_elems;    /* ... and one at a time (kernels.h: zc__vec_split) */
    uint64_t capture_invalidations;
    uint64_t frees_while_mapped; /* allocations freed while a peer process still mapped them
                                  * through IPC (undefined behaviour with CUDA) */
    uint64_t lazy_blocks;     /* first launches refused: their load would have waited for
                               * good behind a flag wait (lazy loading) */
    uint64_t steps;           /* step kernels launched (stream-ordered calls) ... */
    uint64_t steps_host_desc; /* ... of which read their descriptor from host memory: on a GPU
                               * every block of the grid would cross PCIe for it (milliseconds) */
} zc_gpu_sim_stats;
void zc_gpu_sim_get_stats(zc_gpu_sim_stats *out);

/* Forgets every loaded kernel, as a fresh process would have none (lazy loading). */
void zc_gpu_sim_unload(void);

#endif
