/* gpu.h: the provider interface between the core and a GPU runtime (gpu/cuda.c implements it,
 * compiled once against CUDA and once against the simulated runtime of gpu/sim.c). The core owns
 * the protocol of device-memory collectives (who reads which peer's buffer when, the readiness
 * and "done reading" messages, stream-ordered starts); a gpu provider only detects memory kinds,
 * exports and maps buffers between processes, launches reductions and copies on its own stream,
 * records and polls events, and enqueues on a caller's stream flag writes and waits and the
 * steps of a stream-ordered call. gpu/ includes this header, zcoll.h and platform.h, never core
 * internals.
 *
 * Every object (the stream, the events, the pinned flag words and step descriptors, the scratch
 * buffer) is created by init and sized by the geometry; no function after init allocates.
 * Data-path functions never block: they enqueue work and return. Every failure returns a status
 * and leaves one sentence (naming the call and the runtime's error name) in error_text(); a
 * sticky error (a lost context) makes every later call fail with the same sentence. No call
 * leaves an error in the calling thread's runtime error slot for the caller's next launch
 * check to find, and none disturbs another thread's stream capture. */
#ifndef ZC_GPU_H
#define ZC_GPU_H

#include "zcoll.h"

#define ZC_GPU_VERSION 4u
/* Ranks whose buffers one reduction launch reads (and the ceiling of ranks in a communicator
 * that runs device-memory collectives: every rank's input is one source). */
#define ZC_GPU_MAX_SRCS 64u
#define ZC_GPU_IPC_HANDLE_BYTES 64u /* sizeof(cudaIpcMemHandle_t) */
#define ZC_GPU_BUS_BYTES 16u        /* a PCI bus id "dddd:bb:dd.f", NUL included */
#define ZC_GPU_PROBE_DEVS 16u       /* devices a probe describes */

typedef struct zc_gpu_geom {
    uint32_t rank, nranks;
    uint32_t events;        /* event slots, 0..events-1 (the core uses one per request slot) */
    uint32_t flags;         /* 32-bit flag words in pinned host memory the GPU can reach */
    uint32_t descs;         /* step descriptors (zc_gpu_desc) in pinned host memory */
    int32_t device;         /* CUDA device ordinal; -1: the calling thread's current device */
    uint64_t scratch_bytes; /* device scratch buffer (0: none) */
    /* Host memory the core copies device memory to and from (the staged path's staging in the
     * arena; NULL: none): init page-locks it (CUDA: cudaHostRegister) so that those copies are
     * asynchronous and never block the host, and fini releases it. */
    void *pin;
    uint64_t pin_bytes;
} zc_gpu_geom;

/* What a provider's device can do (caps, read after init). */
#define ZC_GPU_CAP_RDMA 1u /* a NIC may write its memory (GPUDirect RDMA): the direct path */

/* What mem_query says about an address range. */
typedef enum zc_gpu_mem {
    ZC_GPU_MEM_HOST = 0,     /* not device memory (pageable or pinned host memory) */
    ZC_GPU_MEM_DEVICE,       /* device memory of this provider's device, range inside one
                              * allocation */
    ZC_GPU_MEM_MANAGED,      /* managed (unified) memory: not registrable */
    ZC_GPU_MEM_OTHER_DEVICE, /* device memory of another device */
    ZC_GPU_MEM_PARTIAL       /* device memory, but the range runs past its allocation */
} zc_gpu_mem;

/* A registered buffer as a peer process needs it to map it (exchanged by the core). */
typedef struct zc_gpu_ipc {
    uint8_t handle[ZC_GPU_IPC_HANDLE_BYTES]; /* the allocation's IPC handle */
    uint64_t offset;   /* addr - the allocation's base */
    uint64_t addr;     /* the exporter's own address (a peer in the same process uses it) */
    uint64_t bytes;    /* registered length */
    uint64_t pid;      /* exporting process */
    uint64_t process;  /* the exporter's process identity (zc_gpu_ident.process): equal only
                        * within one address space, whatever PID namespaces say */
    uint32_t device;   /* exporting device ordinal */
    uint32_t creg;     /* the communicator's CUDA registration number (same on every rank) */
    uint32_t valid;    /* 1: a registration; 0: the exporter failed (see its error text) */
    uint32_t pad_;
} zc_gpu_ipc;

/* Which device a rank uses, as its peers need to know it (exchanged by the core at init). */
typedef struct zc_gpu_ident {
    char bus[ZC_GPU_BUS_BYTES]; /* PCI bus id: the same device in every process */
    uint64_t process;           /* a random identity of this process (one address space) */
    int32_t ordinal;            /* in this process */
    uint32_t pad_;
} zc_gpu_ident;

/* One step of a stream-ordered call: what the kernel enqueued by stream_step does when its
 * stream reaches it, read from pinned host memory then (the core writes it just before it
 * lets the step run). */
#define ZC_GPU_STEP_NONE 0u   /* nothing */
#define ZC_GPU_STEP_REDUCE 1u /* dst[0] = src[0] op ... op src[n-1], count elements */
#define ZC_GPU_STEP_COPY 2u   /* dst[i] = src[i] for bytes[i] bytes, i < n */
typedef struct zc_gpu_desc {
    uint32_t mode;     /* ZC_GPU_STEP_* */
    uint32_t n;        /* sources (REDUCE) or copies (COPY), 1..ZC_GPU_MAX_SRCS */
    uint64_t count;    /* REDUCE: elements */
    void *dst[ZC_GPU_MAX_SRCS];
    const void *src[ZC_GPU_MAX_SRCS];
    uint64_t bytes[ZC_GPU_MAX_SRCS];
} zc_gpu_desc;

/* What a machine offers (probe; zc_device_report prints it). Versions are 1000 * major +
 * 10 * minor, 0 when absent. */
typedef struct zc_gpu_probe_dev {
    char name[64];
    char bus[ZC_GPU_BUS_BYTES];
    int32_t cc_major, cc_minor, sms;
    int32_t rdma;       /* GPUDirect RDMA supported (NICs may write its memory) */
    int32_t ordering;   /* GPUDirect RDMA writes ordering: 0 none (flush needed), 100 owner,
                         * 200 all devices */
    int32_t flush_opts; /* bit 0: a host flush call exists; bit 1: a stream flush */
    int32_t dmabuf;     /* its memory can be exported as dma-buf */
    int32_t memops;     /* stream memory operations (flag write / wait) usable */
    uint64_t mem_bytes;
    uint32_t peers;     /* bit j: this device can read device j's memory (j == self too) */
    uint32_t pad_;
} zc_gpu_probe_dev;

typedef struct zc_gpu_probe {
    int32_t driver, runtime;
    uint32_t ndevs;     /* devices described (at most ZC_GPU_PROBE_DEVS) */
    uint32_t unusable;  /* 1: a device is there but cannot be used (why says how) */
    char why[ZC_ERROR_TEXT_BYTES]; /* no device / unusable: the reason; else empty */
    zc_gpu_probe_dev devs[ZC_GPU_PROBE_DEVS];
} zc_gpu_probe;

typedef struct zc_gpu_ops {
    uint32_t struct_bytes; /* sizeof(zc_gpu_ops) */
    uint32_t version;      /* ZC_GPU_VERSION */
    const char *name;
    /* Arena bytes of the provider's state for g (host memory; device objects are made by init). */
    size_t (*state_bytes)(const zc_gpu_geom *g);
    /* Creates the stream, g->events events, g->flags pinned flag words (zeroed), g->descs step
     * descriptors and the scratch buffer. ZC_UNSUPPORTED when this process has no device (no
     * driver, no device), ZC_GPU when one is there but cannot be used (a driver too old for
     * this runtime: the sentence gives both versions) or anything else failed; either way
     * nothing stays created and error_text says why. */
    zc_status (*init)(void *state, const zc_gpu_geom *g);
    /* Waits for the provider's stream (the only blocking call) and destroys what init made. */
    void (*fini)(void *state);
    const char *(*error_text)(const void *state);
    /* Kind of [addr, addr+bytes) into *kind (zc_gpu_mem). */
    zc_status (*mem_query)(void *state, const void *addr, size_t bytes, uint32_t *kind);
    /* Fills out (all but creg) for a ZC_GPU_MEM_DEVICE range so that a peer can map it. */
    zc_status (*ipc_export)(void *state, void *addr, size_t bytes, zc_gpu_ipc *out);
    /* Maps a peer's exported range; *mapped is the peer's addr in this process. The record
     * comes from a peer: a range [offset, offset + bytes) outside the allocation its handle
     * names fails (ZC_GPU, error_text says so), so no mapped byte past it is ever addressed. */
    zc_status (*ipc_open)(void *state, const zc_gpu_ipc *in, void **mapped);
    /* Unmaps what ipc_open returned (mapped as returned, offset included). */
    void (*ipc_close)(void *state, const zc_gpu_ipc *in, void *mapped);
    /* A dma-buf file descriptor covering [addr, addr+bytes) for a NIC to register (transport_ib's
     * GPUDirect RDMA path); *offset is addr's offset inside it. The caller closes the fd. Every
     * export of one provider maps the memory the same way (the first successful export picks
     * the PCIe BAR1 mapping where the platform offers one), so that a NIC's writes into it
     * take one path and one ordering domain. */
    zc_status (*dmabuf_export)(void *state, void *addr, size_t bytes, int32_t *fd,
                               uint64_t *offset);
    /* ZC_GPU_CAP_* of the device init opened (0 before a successful init). */
    uint32_t (*caps)(const void *state);
    /* True once a sticky error lost the device: no work enqueued anywhere runs any more. */
    bool (*lost)(const void *state);
    /* Makes the NIC writes into device memory that completed before the call (their messages
     * arrived) visible to work enqueued after it, where the device does not order them already
     * (CUDA: cuFlushGPUDirectRDMAWrites below CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER). The
     * direct path calls it before a launch reads such bytes and before a call whose buffers
     * received them finishes. Never blocks on the stream. */
    zc_status (*rdma_flush)(void *state);
    /* The device init opened, as peers see it. */
    zc_status (*identity)(void *state, zc_gpu_ident *out);
    /* *can = 1 when kernels on this device may read peer's device memory mapped through IPC
     * (the same device, or peer access between the two), 0 when they may not; a device this
     * process cannot see counts as readable (the runtime maps it; the first call says). */
    zc_status (*can_read)(void *state, const zc_gpu_ident *peer, uint32_t *can);
    /* Enqueues dst[i] = srcs[0][i] op srcs[1][i] ... op srcs[nsrc-1][i] for i < count with the
     * host kernels' exact semantics (core/reduce.h: the rank tree, fp32 accumulation of narrow
     * floats rounded once, canonical NaN, AVG divides by nsrc). 1 <= nsrc <= ZC_GPU_MAX_SRCS;
     * dst may equal any srcs[k]; sources may be peers' mapped buffers. */
    zc_status (*reduce)(void *state, void *dst, const void *const *srcs, uint32_t nsrc,
                        size_t count, zc_dtype dtype, zc_op op);
    /* Enqueues a device-to-device copy (either side may be a peer's mapped buffer). */
    zc_status (*copy)(void *state, void *dst, const void *src, size_t bytes);
    /* Records event ev after everything enqueued so far; event_query gives ZC_OK once it
     * completed, ZC_IN_PROGRESS before, or the failure (a fault of the work before it). */
    zc_status (*event_record)(void *state, uint32_t ev);
    zc_status (*event_query)(void *state, uint32_t ev);
    /* The scratch buffer (device memory of scratch_bytes), the flag words' host view and step
     * descriptor i's host view. */
    void *(*scratch)(void *state);
    uint32_t *(*flags)(void *state);
    zc_gpu_desc *(*desc)(void *state, uint32_t i);
    /* Stream-ordered calls on a caller's stream (a cudaStream_t; NULL is the legacy default
     * stream): is it being captured into a graph; enqueue "flag = value"; enqueue "wait until
     * (int32_t)(flag - value) >= 0"; enqueue a step: a kernel that runs step descriptor desc
     * (reductions of dtype and op) as it is when the stream reaches it. Every enqueued
     * operation may be captured, and each is ordered on the caller's stream only, so a
     * stream-ordered call's whole device work is there, in a form the runtime sees. */
    zc_status (*stream_capturing)(void *state, void *stream, bool *capturing);
    zc_status (*stream_write_flag)(void *state, void *stream, uint32_t flag, uint32_t value);
    zc_status (*stream_wait_flag)(void *state, void *stream, uint32_t flag, uint32_t value);
    zc_status (*stream_step)(void *state, void *stream, uint32_t desc, zc_dtype dtype,
                             zc_op op);
    /* What this machine offers, without a state: versions, every device and its attributes,
     * the peer-access matrix. ZC_OK with ndevs 0 and why set on a machine without one. */
    zc_status (*probe)(zc_gpu_probe *out);
} zc_gpu_ops;

#ifdef ZC_HAVE_CUDA
extern const zc_gpu_ops zc_gpu_cuda;
#endif
#ifdef ZC_HAVE_GPU_SIM
extern const zc_gpu_ops zc_gpu_sim; /* gpu/cuda.c over gpu/sim.c, in every hosted build */
#endif

#endif
