/* cuda.c: the CUDA gpu provider (provider/gpu.h's zc_gpu_cuda). The only file that calls the CUDA
 * runtime and driver and the only place a cudaError_t / CUresult becomes a zc_status: every
 * failure leaves one sentence "CALL failed: cudaErrorName (description)" in the state's error
 * buffer. A sticky error (the context is lost: illegal address, launch failure, ...) is kept and
 * every later call fails with it. The driver (libcuda) is not linked: its few functions here
 * come through cudaGetDriverEntryPointByVersion, so programs start on machines without it.
 *
 * Objects (stream, events, pinned flag words, scratch) are created by init only; the data path
 * enqueues on the provider's non-blocking stream and never synchronizes. Calls are made on the
 * provider's device: the caller's current device is switched for the call and restored. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "kernels.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == ZC_GPU_IPC_HANDLE_BYTES, "IPC handle size");

#define ZC_CUDA_API_VERSION 12000 /* the driver ABI version of the entry points below */

typedef CUresult (*zc_pfn_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*zc_pfn_range)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*zc_pfn_dmabuf)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
                                  unsigned long long);
typedef CUresult (*zc_pfn_errname)(CUresult, const char **);
typedef CUresult (*zc_pfn_ctxstate)(CUdevice, unsigned int *, int *);

typedef struct zc_cuda {
    int device;             /* ordinal */
    int sms;                /* multiprocessors: sizes reduction grids */
    cudaStream_t stream;    /* where every launch goes */
    cudaError_t sticky;     /* cudaSuccess, or the error that lost the context */
    uint32_t nevents, nflags;
    uint32_t *flags_host;   /* pinned, mapped */
    CUdeviceptr flags_dev;  /* the same words as the GPU addresses them */
    void *scratch;
    uint64_t scratch_bytes;
    void *pinned;           /* host memory page-locked at init (geom pin), NULL: none */
    uint32_t caps;          /* ZC_GPU_CAP_RDMA: cudaDevAttrGPUDirectRDMASupported */
    uint32_t flush;         /* 1: NIC writes need cudaDeviceFlushGPUDirectRDMAWrites before a
                             * kernel reads them (writes ordering below "owner") */
    zc_pfn_value32 wait32, write32;
    zc_pfn_range range;
    zc_pfn_dmabuf dmabuf;   /* NULL when the driver has none (then dmabuf_export says so) */
    zc_pfn_errname errname;
    zc_pfn_ctxstate ctxstate;
    char err[ZC_ERROR_TEXT_BYTES];
    cudaEvent_t events[];   /* [nevents] */
} zc_cuda;

/* ---- errors ---- */

static bool zc_cuda_is_sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable: return true;
    default: return false;
    }
}

/* No device or no (new enough) driver: this process has no GPU to offer, not a fault. */
static bool zc_cuda_is_absent(cudaError_t e) {
    return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
           e == cudaErrorCallRequiresNewerDriver || e == cudaErrorSystemDriverMismatch ||
           e == cudaErrorCompatNotSupportedOnDevice;
}

static zc_status zc_cuda_fail(zc_cuda *st, cudaError_t e, const char *call) {
    bool sticky = zc_cuda_is_sticky(e);
    if (sticky && st->sticky == cudaSuccess) st->sticky = e;
    snprintf(st->err, sizeof st->err, "%s failed: %s (%s)%s", call, cudaGetErrorName(e),
             cudaGetErrorString(e),
             sticky ? "; the CUDA context is lost (a sticky error): the process must restart"
                    : "");
    if (!sticky) (void)cudaGetLastError(); /* do not leak it into the next call's status */
    return zc_cuda_is_absent(e) ? ZC_UNSUPPORTED : ZC_GPU;
}

static zc_status zc_cu_fail(zc_cuda *st, CUresult r, const char *call) {
    const char *name = 0;
    if (!st->errname || st->errname(r, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_?";
    snprintf(st->err, sizeof st->err, "%s failed: %s (driver error %d)", call, name, (int)r);
    return ZC_GPU;
}

/* Every entry of the data path: a context lost earlier fails the call the same way. */
static zc_status zc_cuda_usable(zc_cuda *st) {
    if (st->sticky == cudaSuccess) return ZC_OK;
    snprintf(st->err, sizeof st->err, "the CUDA context was lost earlier by %s (%s): the "
             "process must restart", cudaGetErrorName(st->sticky),
             cudaGetErrorString(st->sticky));
    return ZC_GPU;
}

#define ZC_CU_RT(st, call, name)                                                                \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) return zc_cuda_fail(st, e_, name);                               \
    } while (0)

/* The provider's device current for the call; the caller's restored after. */
typedef struct zc_devguard {
    int prev;
    bool switched;
} zc_devguard;

static zc_status zc_dev_enter(zc_cuda *st, zc_devguard *gd) {
    gd->switched = false;
    ZC_CU_RT(st, cudaGetDevice(&gd->prev), "cudaGetDevice");
    if (gd->prev != st->device) {
        ZC_CU_RT(st, cudaSetDevice(st->device), "cudaSetDevice");
        gd->switched = true;
    }
    return ZC_OK;
}

static void zc_dev_leave(const zc_devguard *gd) {
    if (gd->switched) (void)cudaSetDevice(gd->prev);
}

/* ---- init / fini ---- */

static size_t zc_cuda_state_bytes(const zc_gpu_geom *g) {
    return sizeof(zc_cuda) + (size_t)g->events * sizeof(cudaEvent_t);
}

static zc_status zc_cuda_entry(zc_cuda *st, const char *sym, void **fn, bool required) {
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
    cudaError_t e = cudaGetDriverEntryPointByVersion(sym, fn, ZC_CUDA_API_VERSION,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess) return zc_cuda_fail(st, e, "cudaGetDriverEntryPointByVersion");
    if (q != cudaDriverEntryPointSuccess || !*fn) {
        *fn = 0;
        if (!required) return ZC_OK;
        snprintf(st->err, sizeof st->err, "the CUDA driver has no %s (entry point query result "
                 "%d): a newer driver is needed", sym, (int)q);
        return ZC_UNSUPPORTED;
    }
    return ZC_OK;
}

static zc_status zc_cuda_entries(zc_cuda *st) {
    zc_status s = zc_cuda_entry(st, "cuGetErrorName", (void **)&st->errname, false);
    if (s == ZC_OK) s = zc_cuda_entry(st, "cuStreamWaitValue32", (void **)&st->wait32, true);
    if (s == ZC_OK) s = zc_cuda_entry(st, "cuStreamWriteValue32", (void **)&st->write32, true);
    if (s == ZC_OK) s = zc_cuda_entry(st, "cuMemGetAddressRange", (void **)&st->range, true);
    if (s == ZC_OK)
        s = zc_cuda_entry(st, "cuDevicePrimaryCtxGetState", (void **)&st->ctxstate, true);
    if (s == ZC_OK)
        s = zc_cuda_entry(st, "cuMemGetHandleForAddressRange", (void **)&st->dmabuf, false);
    return s;
}

/* Destroys whatever init created (NULL members are skipped). */
static void zc_cuda_release(zc_cuda *st) {
    for (uint32_t i = 0; i < st->nevents; i++)
        if (st->events[i]) (void)cudaEventDestroy(st->events[i]);
    if (st->stream) (void)cudaStreamDestroy(st->stream);
    if (st->flags_host) (void)cudaFreeHost(st->flags_host);
    if (st->scratch) (void)cudaFree(st->scratch);
    if (st->pinned) (void)cudaHostUnregister(st->pinned);
    st->pinned = 0;
    st->stream = 0;
    st->flags_host = 0;
    st->scratch = 0;
    st->nevents = 0;
}

static zc_status zc_cuda_pick_device(zc_cuda *st, const zc_gpu_geom *g) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        static const char lead[] = "this process has no usable CUDA device: ";
        zc_status s = zc_cuda_fail(st, e, "cudaGetDeviceCount");
        size_t n = strlen(st->err), room = sizeof st->err - sizeof lead;
        if (n > room) n = room;
        memmove(st->err + sizeof lead - 1u, st->err, n);
        memcpy(st->err, lead, sizeof lead - 1u);
        st->err[sizeof lead - 1u + n] = '\0';
        return s;
    }
    if (count == 0) {
        snprintf(st->err, sizeof st->err, "this process has no usable CUDA device "
                 "(cudaGetDeviceCount found 0)");
        return ZC_UNSUPPORTED;
    }
    zc_status es = zc_cuda_entries(st);
    if (es != ZC_OK) return es;
    if (g->device >= count) {
        snprintf(st->err, sizeof st->err, "cfg->gpu_device is %d but this process sees %d CUDA "
                 "device(s)", (int)g->device, count);
        return ZC_UNSUPPORTED;
    }
    if (g->device >= 0) {
        st->device = g->device;
        return ZC_OK;
    }
    /* -1: the device this process already uses; a process that has not touched CUDA (a
     * host-only user of a CUDA build) gets no context, no memory and no delay from zcoll. */
    ZC_CU_RT(st, cudaGetDevice(&st->device), "cudaGetDevice");
    unsigned int flags = 0;
    int active = 0;
    CUresult r = st->ctxstate((CUdevice)st->device, &flags, &active);
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuDevicePrimaryCtxGetState");
    if (!active) {
        snprintf(st->err, sizeof st->err, "no CUDA context existed at zc_comm_init "
                 "(cfg->gpu_device -1 takes the device the process already uses: allocate "
                 "device memory or call cudaSetDevice and cudaFree(0) before zc_comm_init, or "
                 "set cfg->gpu_device / ZC_GPU_DEVICE)");
        return ZC_UNSUPPORTED;
    }
    return ZC_OK;
}

static zc_status zc_cuda_create(zc_cuda *st, const zc_gpu_geom *g) {
    ZC_CU_RT(st, cudaDeviceGetAttribute(&st->sms, cudaDevAttrMultiProcessorCount, st->device),
             "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
    int rdma = 0, order = 0, opts = 0;
    ZC_CU_RT(st, cudaDeviceGetAttribute(&rdma, cudaDevAttrGPUDirectRDMASupported, st->device),
             "cudaDeviceGetAttribute(cudaDevAttrGPUDirectRDMASupported)");
    ZC_CU_RT(st, cudaDeviceGetAttribute(&order, cudaDevAttrGPUDirectRDMAWritesOrdering,
                                        st->device),
             "cudaDeviceGetAttribute(cudaDevAttrGPUDirectRDMAWritesOrdering)");
    ZC_CU_RT(st, cudaDeviceGetAttribute(&opts, cudaDevAttrGPUDirectRDMAFlushWritesOptions,
                                        st->device),
             "cudaDeviceGetAttribute(cudaDevAttrGPUDirectRDMAFlushWritesOptions)");
    /* A device that needs flushes but offers no host flush cannot take the direct path. */
    st->flush = order < (int)cudaGPUDirectRDMAWritesOrderingOwner;
    st->caps = rdma && (!st->flush || (opts & (int)cudaFlushGPUDirectRDMAWritesOptionHost))
                   ? ZC_GPU_CAP_RDMA : 0u;
    ZC_CU_RT(st, cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags");
    for (; st->nevents < g->events; st->nevents++)
        ZC_CU_RT(st, cudaEventCreateWithFlags(&st->events[st->nevents], cudaEventDisableTiming),
                 "cudaEventCreateWithFlags");
    size_t fb = ((size_t)g->flags + 1u) * sizeof(uint32_t);
    ZC_CU_RT(st, cudaHostAlloc((void **)&st->flags_host, fb,
                               cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    memset(st->flags_host, 0, fb);
    void *dev = 0;
    ZC_CU_RT(st, cudaHostGetDevicePointer(&dev, st->flags_host, 0), "cudaHostGetDevicePointer");
    st->flags_dev = (CUdeviceptr)(uintptr_t)dev;
    st->nflags = g->flags;
    if (g->scratch_bytes)
        ZC_CU_RT(st, cudaMalloc(&st->scratch, (size_t)g->scratch_bytes), "cudaMalloc(scratch)");
    st->scratch_bytes = g->scratch_bytes;
    if (g->pin && g->pin_bytes) { /* copies to and from it run asynchronously */
        cudaError_t e = cudaHostRegister(g->pin, (size_t)g->pin_bytes, cudaHostRegisterPortable);
        if (e == cudaErrorHostMemoryAlreadyRegistered) /* the caller's arena is pinned already */
            (void)cudaGetLastError();
        else if (e != cudaSuccess) return zc_cuda_fail(st, e, "cudaHostRegister(staging)");
        else st->pinned = g->pin;
    }
    return ZC_OK;
}

static zc_status zc_cuda_init(void *state, const zc_gpu_geom *g) {
    zc_cuda *st = state;
    zc_devguard gd;
    memset(st, 0, zc_cuda_state_bytes(g));
    zc_status s = zc_cuda_pick_device(st, g);
    if (s != ZC_OK) return s;
    s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    s = zc_cuda_create(st, g);
    if (s != ZC_OK) zc_cuda_release(st);
    zc_dev_leave(&gd);
    return s;
}

static void zc_cuda_fini(void *state) {
    zc_cuda *st = state;
    zc_devguard gd;
    if (zc_dev_enter(st, &gd) != ZC_OK) return;
    if (st->stream && st->sticky == cudaSuccess) (void)cudaStreamSynchronize(st->stream);
    zc_cuda_release(st);
    zc_dev_leave(&gd);
}

static const char *zc_cuda_error_text(const void *state) {
    return ((const zc_cuda *)state)->err;
}

/* ---- memory ---- */

static zc_status zc_cuda_mem_query(void *state, const void *addr, size_t bytes, uint32_t *kind) {
    zc_cuda *st = state;
    struct cudaPointerAttributes a;
    *kind = ZC_GPU_MEM_HOST;
    cudaError_t e = cudaPointerGetAttributes(&a, addr);
    if (e == cudaErrorInvalidValue) { /* old drivers: a pointer CUDA never saw */
        (void)cudaGetLastError();
        return ZC_OK;
    }
    if (e != cudaSuccess) return zc_cuda_fail(st, e, "cudaPointerGetAttributes");
    if (a.type == cudaMemoryTypeManaged) *kind = ZC_GPU_MEM_MANAGED;
    if (a.type != cudaMemoryTypeDevice) return ZC_OK;
    if (a.device != st->device) {
        *kind = ZC_GPU_MEM_OTHER_DEVICE;
        return ZC_OK;
    }
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = st->range(&base, &size, (CUdeviceptr)(uintptr_t)addr);
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuMemGetAddressRange");
    uintptr_t end = (uintptr_t)base + size, p = (uintptr_t)addr;
    *kind = p + bytes <= end ? ZC_GPU_MEM_DEVICE : ZC_GPU_MEM_PARTIAL;
    return ZC_OK;
}

static zc_status zc_cuda_ipc_export(void *state, void *addr, size_t bytes, zc_gpu_ipc *out) {
    zc_cuda *st = state;
    CUdeviceptr base = 0;
    size_t size = 0;
    cudaIpcMemHandle_t h;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK) return s;
    CUresult r = st->range(&base, &size, (CUdeviceptr)(uintptr_t)addr);
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuMemGetAddressRange");
    cudaError_t e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base);
    if (e != cudaSuccess) {
        zc_cuda_fail(st, e, "cudaIpcGetMemHandle");
        size_t n = strlen(st->err);
        snprintf(st->err + n, sizeof st->err - n, " (only cudaMalloc memory can be shared "
                 "through CUDA IPC; not cudaMallocAsync pools or cuMemCreate)");
        return ZC_GPU;
    }
    memcpy(out->handle, &h, sizeof h);
    out->offset = (uint64_t)((uintptr_t)addr - (uintptr_t)base);
    out->device = (uint32_t)st->device;
    (void)bytes;
    return ZC_OK;
}

static zc_status zc_cuda_ipc_open(void *state, const zc_gpu_ipc *in, void **mapped) {
    zc_cuda *st = state;
    cudaIpcMemHandle_t h;
    void *base = 0;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s == ZC_OK) s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    memcpy(&h, in->handle, sizeof h);
    cudaError_t e = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
    /* The record is a peer's word: its range must lie in the allocation the handle opened. */
    CUdeviceptr alloc = 0;
    size_t size = 0;
    CUresult r = e == cudaSuccess ? st->range(&alloc, &size, (CUdeviceptr)(uintptr_t)base)
                                  : CUDA_SUCCESS;
    uint64_t past = (uint64_t)alloc + size - (uint64_t)(uintptr_t)base;
    bool fits = r == CUDA_SUCCESS && in->offset <= past && in->bytes <= past - in->offset;
    if (e == cudaSuccess && !fits) (void)cudaIpcCloseMemHandle(base);
    zc_dev_leave(&gd);
    if (e != cudaSuccess) return zc_cuda_fail(st, e, "cudaIpcOpenMemHandle");
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuMemGetAddressRange");
    if (!fits) {
        snprintf(st->err, sizeof st->err, "ipc_open: the record of process %llu names bytes "
                 "[%llu, %llu + %llu) of an allocation of %llu bytes",
                 (unsigned long long)in->pid, (unsigned long long)in->offset,
                 (unsigned long long)in->offset, (unsigned long long)in->bytes,
                 (unsigned long long)past);
        return ZC_GPU;
    }
    *mapped = (uint8_t *)base + in->offset;
    return ZC_OK;
}

static void zc_cuda_ipc_close(void *state, const zc_gpu_ipc *in, void *mapped) {
    zc_cuda *st = state;
    zc_devguard gd;
    if (zc_dev_enter(st, &gd) != ZC_OK) return;
    cudaError_t e = cudaIpcCloseMemHandle((uint8_t *)mapped - in->offset);
    if (e != cudaSuccess) zc_cuda_fail(st, e, "cudaIpcCloseMemHandle");
    zc_dev_leave(&gd);
}

static zc_status zc_cuda_dmabuf_export(void *state, void *addr, size_t bytes, int32_t *fd,
                                       uint64_t *offset) {
    zc_cuda *st = state;
    int handle = -1;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK) return s;
    if (!st->dmabuf) {
        snprintf(st->err, sizeof st->err, "the CUDA driver has no cuMemGetHandleForAddressRange "
                 "(dma-buf export needs CUDA 11.7+ and an open kernel module)");
        return ZC_UNSUPPORTED;
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), p = (uintptr_t)addr;
    uintptr_t lo = p & ~(page - 1u), hi = (p + bytes + page - 1u) & ~(page - 1u);
    CUresult r = st->dmabuf(&handle, (CUdeviceptr)lo, (size_t)(hi - lo),
                            CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuMemGetHandleForAddressRange(dma-buf)");
    *fd = handle;
    *offset = (uint64_t)(p - lo);
    return ZC_OK;
}

/* ---- the data path ---- */

static zc_status zc_cuda_reduce(void *state, void *dst, const void *const *srcs, uint32_t nsrc,
                                size_t count, zc_dtype dtype, zc_op op) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK || count == 0) return s;
    if (nsrc == 0 || nsrc > ZC_GPU_MAX_SRCS) {
        snprintf(st->err, sizeof st->err, "reduction over %u inputs (1..%u supported)", nsrc,
                 ZC_GPU_MAX_SRCS);
        return ZC_INTERNAL;
    }
    s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    int e = zc__cuda_reduce(st->stream, dst, srcs, nsrc, count, dtype, op, st->sms);
    zc_dev_leave(&gd);
    return e ? zc_cuda_fail(st, (cudaError_t)e, "zc_reduce_kernel launch") : ZC_OK;
}

static uint32_t zc_cuda_caps(const void *state) { return ((const zc_cuda *)state)->caps; }

/* Devices that order NIC writes for their own kernels (Hopper and later, by the attribute)
 * need nothing; older ones flush here (a short host call, not a stream synchronization). */
static zc_status zc_cuda_rdma_flush(void *state) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK || !st->flush) return s;
    s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    cudaError_t e = cudaDeviceFlushGPUDirectRDMAWrites(
        cudaFlushGPUDirectRDMAWritesTargetCurrentDevice, cudaFlushGPUDirectRDMAWritesToOwner);
    zc_dev_leave(&gd);
    return e != cudaSuccess ? zc_cuda_fail(st, e, "cudaDeviceFlushGPUDirectRDMAWrites") : ZC_OK;
}

static zc_status zc_cuda_copy(void *state, void *dst, const void *src, size_t bytes) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK || bytes == 0) return s;
    s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st->stream);
    zc_dev_leave(&gd);
    return e != cudaSuccess ? zc_cuda_fail(st, e, "cudaMemcpyAsync") : ZC_OK;
}

static zc_status zc_cuda_event_record(void *state, uint32_t ev) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK) return s;
    if (ev >= st->nevents) {
        snprintf(st->err, sizeof st->err, "event %u of %u", ev, st->nevents);
        return ZC_INTERNAL;
    }
    s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    cudaError_t e = cudaEventRecord(st->events[ev], st->stream);
    zc_dev_leave(&gd);
    return e != cudaSuccess ? zc_cuda_fail(st, e, "cudaEventRecord") : ZC_OK;
}

static zc_status zc_cuda_event_query(void *state, uint32_t ev) {
    zc_cuda *st = state;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK) return s;
    if (ev >= st->nevents) {
        snprintf(st->err, sizeof st->err, "event %u of %u", ev, st->nevents);
        return ZC_INTERNAL;
    }
    cudaError_t e = cudaEventQuery(st->events[ev]);
    if (e == cudaSuccess) return ZC_OK;
    if (e == cudaErrorNotReady) return ZC_IN_PROGRESS;
    return zc_cuda_fail(st, e, "cudaEventQuery (a kernel or copy of this collective failed)");
}

static void *zc_cuda_scratch(void *state) { return ((zc_cuda *)state)->scratch; }
static uint32_t *zc_cuda_flags(void *state) { return ((zc_cuda *)state)->flags_host; }

static zc_status zc_cuda_stream_capturing(void *state, void *stream, bool *capturing) {
    zc_cuda *st = state;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK) return s;
    ZC_CU_RT(st, cudaStreamIsCapturing((cudaStream_t)stream, &cs), "cudaStreamIsCapturing");
    if (cs == cudaStreamCaptureStatusInvalidated) {
        snprintf(st->err, sizeof st->err, "the stream's capture was invalidated by an earlier "
                 "call (cudaStreamCaptureStatusInvalidated)");
        return ZC_INVALID_ARG;
    }
    *capturing = cs == cudaStreamCaptureStatusActive;
    return ZC_OK;
}

static zc_status zc_cuda_flag_check(zc_cuda *st, uint32_t flag) {
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK || flag < st->nflags) return s;
    snprintf(st->err, sizeof st->err, "flag word %u of %u", flag, st->nflags);
    return ZC_INTERNAL;
}

static zc_status zc_cuda_stream_write_flag(void *state, void *stream, uint32_t flag,
                                           uint32_t value) {
    zc_cuda *st = state;
    zc_status s = zc_cuda_flag_check(st, flag);
    if (s != ZC_OK) return s;
    CUresult r = st->write32((CUstream)stream, st->flags_dev + flag * sizeof(uint32_t), value,
                             CU_STREAM_WRITE_VALUE_DEFAULT);
    return r != CUDA_SUCCESS ? zc_cu_fail(st, r, "cuStreamWriteValue32") : ZC_OK;
}

static zc_status zc_cuda_stream_wait_flag(void *state, void *stream, uint32_t flag,
                                          uint32_t value) {
    zc_cuda *st = state;
    zc_status s = zc_cuda_flag_check(st, flag);
    if (s != ZC_OK) return s;
    CUresult r = st->wait32((CUstream)stream, st->flags_dev + flag * sizeof(uint32_t), value,
                            CU_STREAM_WAIT_VALUE_GEQ);
    return r != CUDA_SUCCESS ? zc_cu_fail(st, r, "cuStreamWaitValue32") : ZC_OK;
}

const zc_gpu_ops zc_gpu_cuda = {
    .struct_bytes = sizeof(zc_gpu_ops),
    .version = ZC_GPU_VERSION,
    .name = "cuda",
    .state_bytes = zc_cuda_state_bytes,
    .init = zc_cuda_init,
    .fini = zc_cuda_fini,
    .error_text = zc_cuda_error_text,
    .mem_query = zc_cuda_mem_query,
    .ipc_export = zc_cuda_ipc_export,
    .ipc_open = zc_cuda_ipc_open,
    .ipc_close = zc_cuda_ipc_close,
    .dmabuf_export = zc_cuda_dmabuf_export,
    .caps = zc_cuda_caps,
    .rdma_flush = zc_cuda_rdma_flush,
    .reduce = zc_cuda_reduce,
    .copy = zc_cuda_copy,
    .event_record = zc_cuda_event_record,
    .event_query = zc_cuda_event_query,
    .scratch = zc_cuda_scratch,
    .flags = zc_cuda_flags,
    .stream_capturing = zc_cuda_stream_capturing,
    .stream_write_flag = zc_cuda_stream_write_flag,
    .stream_wait_flag = zc_cuda_stream_wait_flag,
};
