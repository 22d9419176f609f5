/* cuda.c: the CUDA gpu provider (provider/gpu.h). The only file that calls the CUDA runtime and
 * driver and the only place a cudaError_t / CUresult becomes a zc_status: every failure leaves
 * one sentence "CALL failed: cudaErrorName (description)" in the state's error buffer. A sticky
 * error (the context is lost: illegal address, launch failure, a contained error, ...) is kept
 * and every later call fails with it. The driver (libcuda) is not linked: its functions come
 * through cudaGetDriverEntryPointByVersion, so programs start on machines without it.
 *
 * Compiled twice: against CUDA as zc_gpu_cuda (CUDA builds), and against the simulated runtime
 * of gpu/sim.c as zc_gpu_sim (every build, gpu/sim_provider.c), so that the suite runs every
 * call sequence of this file, and the runtime's rules it must follow, without a GPU.
 *
 * The runtime's rules followed here:
 *   - the calling thread's error slot: a call's error that is not sticky is taken out of the
 *     slot again (only when it is that error), so the caller's next launch check finds nothing
 *     of ours; launches report their own result (kernels.h);
 *   - contexts: every entry makes the provider's device context (its retained primary context)
 *     current with the driver API and puts back whatever was current (nothing, often), so no
 *     call creates a context on another device and a fresh thread's progress works;
 *   - graph capture: every entry switches the thread to the relaxed capture mode for its
 *     calls, so a query or a mapping here never invalidates another thread's global capture;
 *   - a driver older than the runtime needs is a device that cannot be used (ZC_GPU, with
 *     both versions), not an absent one.
 * Objects (stream, events, pinned flag words and step descriptors, the descriptors' device
 * copies, scratch) are created by init only; the data path enqueues and never synchronizes. */
#ifdef ZC_CUDA_SIM
#include "sim_cuda.h"
#define ZC_CUDA_OPS zc_gpu_sim
#define ZC_CUDA_NAME "sim"
#else
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>
#define ZC_CUDA_OPS zc_gpu_cuda
#define ZC_CUDA_NAME "cuda"
#define ZC_HOST_PAGE ((uintptr_t)sysconf(_SC_PAGESIZE))
#endif
#include <string.h>

#include "fmt.h"
#include "gpu.h"
#include "kernels.h"
#include "platform.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == ZC_GPU_IPC_HANDLE_BYTES, "IPC handle size");

#define ZC_CUDA_API_VERSION 12000 /* the driver ABI version of the entry points below */

typedef CUresult (*zc_pfn_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*zc_pfn_range)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*zc_pfn_dmabuf)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
                                  unsigned long long);
typedef CUresult (*zc_pfn_errname)(CUresult, const char **);
typedef CUresult (*zc_pfn_ctxstate)(CUdevice, unsigned int *, int *);
typedef CUresult (*zc_pfn_retain)(CUcontext *, CUdevice);
typedef CUresult (*zc_pfn_release)(CUdevice);
typedef CUresult (*zc_pfn_getcur)(CUcontext *);
typedef CUresult (*zc_pfn_setcur)(CUcontext);
typedef CUresult (*zc_pfn_devget)(CUdevice *, int);
typedef CUresult (*zc_pfn_capmode)(CUstreamCaptureMode *);

/* The driver functions, found once per init. */
typedef struct zc_cu_fns {
    zc_pfn_errname errname;
    zc_pfn_value32 wait32, write32;
    zc_pfn_range range;
    zc_pfn_dmabuf dmabuf;   /* NULL when the driver has none (then dmabuf_export says so) */
    zc_pfn_ctxstate ctxstate;
    zc_pfn_retain retain;
    zc_pfn_release release;
    zc_pfn_getcur getcur;
    zc_pfn_setcur setcur;
    zc_pfn_devget devget;
    zc_pfn_capmode capmode;
} zc_cu_fns;

/* dma-buf mappings (zc_cuda.dmabuf_map): not chosen yet, PCIe BAR1, the platform's default. */
enum { ZC_MAP_UNSET = 0, ZC_MAP_PCIE, ZC_MAP_DEFAULT };

typedef struct zc_cuda {
    int device;             /* ordinal */
    int sms;                /* multiprocessors: sizes reduction grids */
    CUdevice cudev;
    CUcontext ctx;          /* the device's primary context, retained by init */
    cudaStream_t stream;    /* where every launch of the non-stream forms goes */
    cudaError_t sticky;     /* cudaSuccess, or the error that lost the context */
    uint32_t nevents, nflags, ndescs;
    uint32_t caps;          /* ZC_GPU_CAP_RDMA: cudaDevAttrGPUDirectRDMASupported */
    uint32_t flush;         /* 1: NIC writes need a flush before a kernel reads them (writes
                             * ordering below "owner", as the driver documents) */
    uint32_t dmabuf_map;    /* ZC_MAP_*: how every dma-buf export maps the memory */
    uint32_t *flags_host;   /* pinned, mapped: the flag words, then the step descriptors */
    CUdeviceptr flags_dev;  /* the same memory as the GPU addresses it */
    zc_gpu_desc *descs_host;
    zc_gpu_desc *descs_copy; /* device memory: the copies that steps' kernels read */
    void *scratch;
    uint64_t scratch_bytes;
    void *pinned;           /* host memory page-locked at init (geom pin), NULL: none */
    zc_cu_fns fn;
    char err[ZC_ERROR_TEXT_BYTES];
    cudaEvent_t events[];   /* [nevents] */
} zc_cuda;

/* ---- errors ---- */

/* The errors after which the process must restart (driver_types.h: "leaves the process in an
 * inconsistent state"), and two more that leave the device unusable. */
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
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorExternalDevice:
    case cudaErrorMpsClientTerminated: return true;
    default: return false;
    }
}

/* Takes e out of the calling thread's error slot when it is what the slot holds (an earlier
 * error of the caller's own stays for the caller). */
static void zc_cuda_unslot(cudaError_t e) {
    if (e != cudaSuccess && cudaPeekAtLastError() == e) (void)cudaGetLastError();
}

static zc_status zc_cuda_fail(zc_cuda *st, cudaError_t e, const char *call) {
    bool sticky = zc_cuda_is_sticky(e);
    if (sticky && st->sticky == cudaSuccess) st->sticky = e;
    zc__fmt(st->err, sizeof st->err, "%s failed: %s (%s)%s", call, cudaGetErrorName(e),
            cudaGetErrorString(e),
            sticky ? "; the CUDA context is lost (a sticky error): the process must restart"
                   : "");
    if (!sticky) zc_cuda_unslot(e);
    return ZC_GPU;
}

static zc_status zc_cu_fail(zc_cuda *st, CUresult r, const char *call) {
    const char *name = 0;
    if (!st->fn.errname || st->fn.errname(r, &name) != CUDA_SUCCESS || !name)
        name = "CUDA_ERROR_?";
    zc__fmt(st->err, sizeof st->err, "%s failed: %s (driver error %d)", call, name, (int)r);
    return ZC_GPU;
}

/* Every entry of the data path: a context lost earlier fails the call the same way. */
static zc_status zc_cuda_usable(zc_cuda *st) {
    if (st->sticky == cudaSuccess) return ZC_OK;
    zc__fmt(st->err, sizeof st->err, "the CUDA context was lost earlier by %s (%s; a sticky "
            "error): the process must restart", cudaGetErrorName(st->sticky),
            cudaGetErrorString(st->sticky));
    return ZC_GPU;
}

#define ZC_CU_RT(st, call, name)                                                                \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) return zc_cuda_fail(st, e_, name);                               \
    } while (0)

/* ---- entering the device: its context, the relaxed capture mode ---- */

typedef struct zc_devguard {
    CUcontext prev;         /* what was current before (often nothing) */
    CUstreamCaptureMode mode; /* the thread's capture mode before */
    bool switched;
} zc_devguard;

static zc_status zc_dev_enter(zc_cuda *st, zc_devguard *gd) {
    gd->switched = false;
    gd->mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult r = st->fn.getcur(&gd->prev);
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuCtxGetCurrent");
    if (gd->prev != st->ctx) {
        if ((r = st->fn.setcur(st->ctx)) != CUDA_SUCCESS)
            return zc_cu_fail(st, r, "cuCtxSetCurrent");
        gd->switched = true;
    }
    if ((r = st->fn.capmode(&gd->mode)) != CUDA_SUCCESS) {
        if (gd->switched) (void)st->fn.setcur(gd->prev);
        return zc_cu_fail(st, r, "cuThreadExchangeStreamCaptureMode");
    }
    return ZC_OK;
}

static void zc_dev_leave(zc_cuda *st, zc_devguard *gd) {
    (void)st->fn.capmode(&gd->mode);
    if (gd->switched) (void)st->fn.setcur(gd->prev);
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
        zc__fmt(st->err, sizeof st->err, "the CUDA driver has no %s (entry point query result "
                "%d): a newer driver is needed", sym, (int)q);
        return ZC_GPU;
    }
    return ZC_OK;
}

static zc_status zc_cuda_entries(zc_cuda *st) {
    static const struct { const char *sym; size_t at; bool required; } want[] = {
        {"cuGetErrorName", offsetof(zc_cu_fns, errname), false},
        {"cuStreamWaitValue32", offsetof(zc_cu_fns, wait32), true},
        {"cuStreamWriteValue32", offsetof(zc_cu_fns, write32), true},
        {"cuMemGetAddressRange", offsetof(zc_cu_fns, range), true},
        {"cuMemGetHandleForAddressRange", offsetof(zc_cu_fns, dmabuf), false},
        {"cuDevicePrimaryCtxGetState", offsetof(zc_cu_fns, ctxstate), true},
        {"cuDevicePrimaryCtxRetain", offsetof(zc_cu_fns, retain), true},
        {"cuDevicePrimaryCtxRelease", offsetof(zc_cu_fns, release), true},
        {"cuCtxGetCurrent", offsetof(zc_cu_fns, getcur), true},
        {"cuCtxSetCurrent", offsetof(zc_cu_fns, setcur), true},
        {"cuDeviceGet", offsetof(zc_cu_fns, devget), true},
        {"cuThreadExchangeStreamCaptureMode", offsetof(zc_cu_fns, capmode), true},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        zc_status s = zc_cuda_entry(st, want[i].sym, (void **)((char *)&st->fn + want[i].at),
                                    want[i].required);
        if (s != ZC_OK) return s;
    }
    return ZC_OK;
}

/* Destroys whatever init created (NULL members are skipped). Runs with the context current. */
static void zc_cuda_release(zc_cuda *st) {
    for (uint32_t i = 0; i < st->nevents; i++)
        if (st->events[i]) (void)cudaEventDestroy(st->events[i]);
    if (st->stream) (void)cudaStreamDestroy(st->stream);
    if (st->flags_host) (void)cudaFreeHost(st->flags_host);
    if (st->scratch) (void)cudaFree(st->scratch);
    if (st->descs_copy) (void)cudaFree(st->descs_copy);
    if (st->pinned) (void)cudaHostUnregister(st->pinned);
    st->pinned = 0;
    st->stream = 0;
    st->flags_host = 0;
    st->descs_host = 0;
    st->descs_copy = 0;
    st->scratch = 0;
    st->nevents = 0;
}

/* No device (ZC_UNSUPPORTED), or a device the driver cannot serve to this runtime (ZC_GPU):
 * the sentence of a failed device count, with both versions. */
static zc_status zc_cuda_no_device(zc_cuda *st, cudaError_t e) {
    int drv = 0, rt = 0;
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    zc_cuda_unslot(e);
    bool absent = e == cudaErrorNoDevice || drv == 0;
    zc__fmt(st->err, sizeof st->err, "this process %s (cudaGetDeviceCount: %s; driver %d.%d, "
            "runtime %d.%d%s)", absent ? "has no usable CUDA device" : "cannot use its GPU",
            cudaGetErrorName(e), drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
            absent ? (drv == 0 ? ": no CUDA driver is loaded" : "")
                   : ": the driver is older than this runtime needs (CUDA 13 needs R580 or "
                     "newer); update the driver");
    return absent ? ZC_UNSUPPORTED : ZC_GPU;
}

/* The device init works on: g->device, or (-1) the one whose primary context the process made
 * already; its primary context retained. */
static zc_status zc_cuda_pick_device(zc_cuda *st, const zc_gpu_geom *g) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return zc_cuda_no_device(st, e);
    if (count == 0) {
        zc__fmt(st->err, sizeof st->err, "this process has no usable CUDA device "
                "(cudaGetDeviceCount found 0)");
        return ZC_UNSUPPORTED;
    }
    zc_status es = zc_cuda_entries(st);
    if (es != ZC_OK) return es;
    if (g->device >= count) {
        zc__fmt(st->err, sizeof st->err, "cfg->gpu_device is %d but this process sees %d CUDA "
                "device(s)", (int)g->device, count);
        return ZC_UNSUPPORTED;
    }
    st->device = g->device;
    if (g->device < 0) ZC_CU_RT(st, cudaGetDevice(&st->device), "cudaGetDevice");
    CUresult r = st->fn.devget(&st->cudev, st->device);
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuDeviceGet");
    if (g->device < 0) {
        /* A process that has not touched CUDA (a host-only user of a CUDA build) gets no
         * context, no memory and no delay from zcoll. */
        unsigned int flags = 0;
        int active = 0;
        if ((r = st->fn.ctxstate(st->cudev, &flags, &active)) != CUDA_SUCCESS)
            return zc_cu_fail(st, r, "cuDevicePrimaryCtxGetState");
        if (!active) {
            zc__fmt(st->err, sizeof st->err, "no CUDA context existed at zc_comm_init "
                    "(cfg->gpu_device -1 takes the device the process already uses: allocate "
                    "device memory or call cudaSetDevice and cudaFree(0) before zc_comm_init, "
                    "or set cfg->gpu_device / ZC_GPU_DEVICE)");
            return ZC_UNSUPPORTED;
        }
    }
    if ((r = st->fn.retain(&st->ctx, st->cudev)) != CUDA_SUCCESS)
        return zc_cu_fail(st, r, "cuDevicePrimaryCtxRetain");
    return ZC_OK;
}

/* The device's attributes: multiprocessors, GPUDirect RDMA and whether NIC writes need a
 * flush. The driver documents a flush as a no-op where the writes ordering covers the owner
 * (the device whose kernels read the bytes): Hopper and later report owner or all devices;
 * C2C platforms (Grace Hopper) report all devices for each mapping path, which is why every
 * dma-buf export of one device takes the same path (zc_cuda_dmabuf_export). */
static zc_status zc_cuda_attrs(zc_cuda *st) {
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
    return ZC_OK;
}

static zc_status zc_cuda_create(zc_cuda *st, const zc_gpu_geom *g) {
    zc_status s = zc_cuda_attrs(st);
    if (s != ZC_OK) return s;
    ZC_CU_RT(st, cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags");
    /* Every kernel loaded now: a first launch behind a stream-ordered call's flag wait would
     * wait for the device to go idle, which that wait never lets it (kernels.h). */
    int le = zc__cuda_preload();
    if (le) return zc_cuda_fail(st, (cudaError_t)le, "loading zcoll's kernels");
    for (; st->nevents < g->events; st->nevents++)
        ZC_CU_RT(st, cudaEventCreateWithFlags(&st->events[st->nevents], cudaEventDisableTiming),
                 "cudaEventCreateWithFlags");
    /* Flag words, then (64-byte aligned) the step descriptors: one pinned, mapped block. */
    size_t fb = (((size_t)g->flags + 1u) * sizeof(uint32_t) + 63u) & ~(size_t)63u;
    size_t bytes = fb + (size_t)g->descs * sizeof(zc_gpu_desc);
    ZC_CU_RT(st, cudaHostAlloc((void **)&st->flags_host, bytes,
                               cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    memset(st->flags_host, 0, bytes);
    void *dev = 0;
    ZC_CU_RT(st, cudaHostGetDevicePointer(&dev, st->flags_host, 0), "cudaHostGetDevicePointer");
    st->flags_dev = (CUdeviceptr)(uintptr_t)dev;
    st->descs_host = (zc_gpu_desc *)(void *)((uint8_t *)st->flags_host + fb);
    st->nflags = g->flags;
    st->ndescs = g->descs;
    if (g->descs)
        ZC_CU_RT(st, cudaMalloc((void **)&st->descs_copy, (size_t)g->descs * sizeof(zc_gpu_desc)),
                 "cudaMalloc(step descriptors)");
    if (g->scratch_bytes)
        ZC_CU_RT(st, cudaMalloc(&st->scratch, (size_t)g->scratch_bytes), "cudaMalloc(scratch)");
    st->scratch_bytes = g->scratch_bytes;
    if (g->pin && g->pin_bytes) { /* copies to and from it run asynchronously */
        cudaError_t e = cudaHostRegister(g->pin, (size_t)g->pin_bytes, cudaHostRegisterPortable);
        if (e == cudaErrorHostMemoryAlreadyRegistered) zc_cuda_unslot(e); /* pinned already */
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
    if (s == ZC_OK) {
        s = zc_cuda_create(st, g);
        if (s != ZC_OK) zc_cuda_release(st);
        zc_dev_leave(st, &gd);
    }
    if (s != ZC_OK) (void)st->fn.release(st->cudev);
    return s;
}

static void zc_cuda_fini(void *state) {
    zc_cuda *st = state;
    zc_devguard gd;
    if (zc_dev_enter(st, &gd) != ZC_OK) return;
    if (st->stream && st->sticky == cudaSuccess) (void)cudaStreamSynchronize(st->stream);
    zc_cuda_release(st);
    zc_dev_leave(st, &gd);
    (void)st->fn.release(st->cudev);
}

static const char *zc_cuda_error_text(const void *state) {
    return ((const zc_cuda *)state)->err;
}

/* ---- memory ---- */

static zc_status zc_cuda_kind(zc_cuda *st, const void *addr, size_t bytes, uint32_t *kind) {
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, addr);
    if (e == cudaErrorInvalidValue) { /* old drivers: a pointer CUDA never saw */
        zc_cuda_unslot(e);
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
    CUresult r = st->fn.range(&base, &size, (CUdeviceptr)(uintptr_t)addr);
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuMemGetAddressRange");
    uintptr_t end = (uintptr_t)base + size, p = (uintptr_t)addr;
    *kind = p + bytes <= end ? ZC_GPU_MEM_DEVICE : ZC_GPU_MEM_PARTIAL;
    return ZC_OK;
}

static zc_status zc_cuda_mem_query(void *state, const void *addr, size_t bytes, uint32_t *kind) {
    zc_cuda *st = state;
    zc_devguard gd;
    *kind = ZC_GPU_MEM_HOST;
    zc_status s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    s = zc_cuda_kind(st, addr, bytes, kind);
    zc_dev_leave(st, &gd);
    return s;
}

/* A random identity of this process, drawn once: equal only within one address space. */
static uint64_t zc_cuda_process(void) {
    static uint64_t id;
    uint64_t v = __atomic_load_n(&id, __ATOMIC_ACQUIRE), mine = 0;
    if (v) return v;
    if (zc_plat_random(&mine, sizeof mine) != ZC_PLAT_OK || !mine)
        mine = zc_plat_process_id() * 0x9e3779b97f4a7c15ull + zc_plat_now_ns();
    mine |= 1u;
    return __atomic_compare_exchange_n(&id, &v, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
               ? mine : v;
}

static zc_status zc_cuda_export(zc_cuda *st, void *addr, zc_gpu_ipc *out) {
    CUdeviceptr base = 0;
    size_t size = 0;
    cudaIpcMemHandle_t h;
    CUresult r = st->fn.range(&base, &size, (CUdeviceptr)(uintptr_t)addr);
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuMemGetAddressRange");
    cudaError_t e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base);
    if (e != cudaSuccess) {
        zc_cuda_fail(st, e, "cudaIpcGetMemHandle");
        size_t n = strlen(st->err);
        zc__fmt(st->err + n, sizeof st->err - n, " (only cudaMalloc memory can be shared "
                "through CUDA IPC; not cudaMallocAsync pools or cuMemCreate)");
        return ZC_GPU;
    }
    memcpy(out->handle, &h, sizeof h);
    out->offset = (uint64_t)((uintptr_t)addr - (uintptr_t)base);
    out->device = (uint32_t)st->device;
    out->process = zc_cuda_process();
    return ZC_OK;
}

static zc_status zc_cuda_ipc_export(void *state, void *addr, size_t bytes, zc_gpu_ipc *out) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s == ZC_OK) s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    s = zc_cuda_export(st, addr, out);
    zc_dev_leave(st, &gd);
    (void)bytes;
    return s;
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
    CUresult r = e == cudaSuccess ? st->fn.range(&alloc, &size, (CUdeviceptr)(uintptr_t)base)
                                  : CUDA_SUCCESS;
    uint64_t past = (uint64_t)alloc + size - (uint64_t)(uintptr_t)base;
    bool fits = r == CUDA_SUCCESS && in->offset <= past && in->bytes <= past - in->offset;
    if (e == cudaSuccess && !fits) (void)cudaIpcCloseMemHandle(base);
    zc_dev_leave(st, &gd);
    if (e != cudaSuccess) return zc_cuda_fail(st, e, "cudaIpcOpenMemHandle");
    if (r != CUDA_SUCCESS) return zc_cu_fail(st, r, "cuMemGetAddressRange");
    if (!fits) {
        zc__fmt(st->err, sizeof st->err, "ipc_open: the record of process %llu names bytes "
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
    zc_dev_leave(st, &gd);
}

/* The first export tries the PCIe BAR1 mapping (what a NIC on PCIe reaches; the flag is
 * refused where the platform has no other path) and keeps whichever worked for every later
 * export: a device's NIC writes then take one path, one ordering domain (the driver's rule for
 * platforms with several, C2C ones). */
static CUresult zc_cuda_dmabuf_map(zc_cuda *st, int *handle, uintptr_t lo, size_t bytes) {
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (st->dmabuf_map != ZC_MAP_DEFAULT) {
        r = st->fn.dmabuf(handle, (CUdeviceptr)lo, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                          CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE);
        if (r == CUDA_SUCCESS) st->dmabuf_map = ZC_MAP_PCIE;
        if (r == CUDA_SUCCESS || st->dmabuf_map == ZC_MAP_PCIE) return r;
    }
    r = st->fn.dmabuf(handle, (CUdeviceptr)lo, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r == CUDA_SUCCESS) st->dmabuf_map = ZC_MAP_DEFAULT;
    return r;
}

static zc_status zc_cuda_dmabuf_export(void *state, void *addr, size_t bytes, int32_t *fd,
                                       uint64_t *offset) {
    zc_cuda *st = state;
    int handle = -1;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK) return s;
    if (!st->fn.dmabuf) {
        zc__fmt(st->err, sizeof st->err, "the CUDA driver has no cuMemGetHandleForAddressRange "
                "(dma-buf export needs CUDA 11.7+ and an open kernel module)");
        return ZC_UNSUPPORTED;
    }
    uintptr_t page = ZC_HOST_PAGE, p = (uintptr_t)addr;
    uintptr_t lo = p & ~(page - 1u), hi = (p + bytes + page - 1u) & ~(page - 1u);
    if ((s = zc_dev_enter(st, &gd)) != ZC_OK) return s;
    CUresult r = zc_cuda_dmabuf_map(st, &handle, lo, (size_t)(hi - lo));
    zc_dev_leave(st, &gd);
    if (r != CUDA_SUCCESS) {
        zc_cu_fail(st, r, st->dmabuf_map == ZC_MAP_PCIE
                              ? "cuMemGetHandleForAddressRange(dma-buf, PCIe mapping like this "
                                "device's earlier exports)"
                              : "cuMemGetHandleForAddressRange(dma-buf)");
        return r == CUDA_ERROR_NOT_SUPPORTED ? ZC_UNSUPPORTED : ZC_GPU;
    }
    *fd = handle;
    *offset = (uint64_t)(p - lo);
    return ZC_OK;
}

static uint32_t zc_cuda_caps(const void *state) { return ((const zc_cuda *)state)->caps; }
static bool zc_cuda_lost(const void *state) {
    return ((const zc_cuda *)state)->sticky != cudaSuccess;
}

/* Devices whose writes ordering covers their own kernels need nothing; older ones flush here
 * (a short host call, not a stream synchronization). */
static zc_status zc_cuda_rdma_flush(void *state) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK || !st->flush) return s;
    if ((s = zc_dev_enter(st, &gd)) != ZC_OK) return s;
    cudaError_t e = cudaDeviceFlushGPUDirectRDMAWrites(
        cudaFlushGPUDirectRDMAWritesTargetCurrentDevice, cudaFlushGPUDirectRDMAWritesToOwner);
    if (e != cudaSuccess) s = zc_cuda_fail(st, e, "cudaDeviceFlushGPUDirectRDMAWrites");
    zc_dev_leave(st, &gd);
    return s;
}

/* ---- which device, and who may read whose ---- */

static zc_status zc_cuda_identity(void *state, zc_gpu_ident *out) {
    zc_cuda *st = state;
    zc_devguard gd;
    memset(out, 0, sizeof *out);
    zc_status s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    cudaError_t e = cudaDeviceGetPCIBusId(out->bus, (int)sizeof out->bus, st->device);
    if (e != cudaSuccess) s = zc_cuda_fail(st, e, "cudaDeviceGetPCIBusId");
    zc_dev_leave(st, &gd);
    out->process = zc_cuda_process();
    out->ordinal = st->device;
    return s;
}

static zc_status zc_cuda_peer(zc_cuda *st, const zc_gpu_ident *peer, uint32_t *can) {
    int other = -1, ok = 0;
    cudaError_t e = cudaDeviceGetByPCIBusId(&other, peer->bus);
    if (e != cudaSuccess) { /* not visible here (CUDA_VISIBLE_DEVICES): IPC maps it anyway */
        zc_cuda_unslot(e);
        *can = 1;
        return ZC_OK;
    }
    if (other == st->device) {
        *can = 1;
        return ZC_OK;
    }
    ZC_CU_RT(st, cudaDeviceCanAccessPeer(&ok, st->device, other), "cudaDeviceCanAccessPeer");
    *can = ok != 0;
    return ZC_OK;
}

static zc_status zc_cuda_can_read(void *state, const zc_gpu_ident *peer, uint32_t *can) {
    zc_cuda *st = state;
    zc_devguard gd;
    *can = 0;
    zc_status s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    s = zc_cuda_peer(st, peer, can);
    zc_dev_leave(st, &gd);
    return s;
}

/* ---- the data path ---- */

static zc_status zc_cuda_reduce(void *state, void *dst, const void *const *srcs, uint32_t nsrc,
                                size_t count, zc_dtype dtype, zc_op op) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK || count == 0) return s;
    if (nsrc == 0 || nsrc > ZC_GPU_MAX_SRCS) {
        zc__fmt(st->err, sizeof st->err, "reduction over %u inputs (1..%u supported)", nsrc,
                ZC_GPU_MAX_SRCS);
        return ZC_INTERNAL;
    }
    if ((s = zc_dev_enter(st, &gd)) != ZC_OK) return s;
    int e = zc__cuda_reduce(st->stream, dst, srcs, nsrc, count, dtype, op, st->sms);
    if (e) s = zc_cuda_fail(st, (cudaError_t)e, "zc_reduce_kernel launch");
    zc_dev_leave(st, &gd);
    return s;
}

static zc_status zc_cuda_copy(void *state, void *dst, const void *src, size_t bytes) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK || bytes == 0) return s;
    if ((s = zc_dev_enter(st, &gd)) != ZC_OK) return s;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st->stream);
    if (e != cudaSuccess) s = zc_cuda_fail(st, e, "cudaMemcpyAsync");
    zc_dev_leave(st, &gd);
    return s;
}

/* The sticky check, then thing i of n (an event, a flag word, a step descriptor: what). */
static zc_status zc_cuda_index(zc_cuda *st, uint32_t i, uint32_t n, const char *what) {
    zc_status s = zc_cuda_usable(st);
    if (s != ZC_OK || i < n) return s;
    zc__fmt(st->err, sizeof st->err, "%s %u of %u", what, i, n);
    return ZC_INTERNAL;
}

static zc_status zc_cuda_event_record(void *state, uint32_t ev) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_index(st, ev, st->nevents, "event");
    if (s == ZC_OK) s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    cudaError_t e = cudaEventRecord(st->events[ev], st->stream);
    if (e != cudaSuccess) s = zc_cuda_fail(st, e, "cudaEventRecord");
    zc_dev_leave(st, &gd);
    return s;
}

/* "Not ready" is no failure, but the runtime puts it in the thread's error slot like one: it
 * is taken out again, or the caller's next launch check would report it. */
static zc_status zc_cuda_event_query(void *state, uint32_t ev) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_index(st, ev, st->nevents, "event");
    if (s == ZC_OK) s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    cudaError_t e = cudaEventQuery(st->events[ev]);
    if (e == cudaErrorNotReady) {
        zc_cuda_unslot(e);
        s = ZC_IN_PROGRESS;
    } else if (e != cudaSuccess) {
        s = zc_cuda_fail(st, e, "cudaEventQuery (a kernel or copy of this collective failed)");
    }
    zc_dev_leave(st, &gd);
    return s;
}

static void *zc_cuda_scratch(void *state) { return ((zc_cuda *)state)->scratch; }
static uint32_t *zc_cuda_flags(void *state) { return ((zc_cuda *)state)->flags_host; }
static zc_gpu_desc *zc_cuda_desc(void *state, uint32_t i) {
    zc_cuda *st = state;
    return i < st->ndescs ? &st->descs_host[i] : 0;
}

/* ---- stream-ordered calls on the caller's stream ---- */

static zc_status zc_cuda_stream_capturing(void *state, void *stream, bool *capturing) {
    zc_cuda *st = state;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    zc_devguard gd;
    zc_status s = zc_cuda_usable(st);
    if (s == ZC_OK) s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    cudaError_t e = cudaStreamIsCapturing((cudaStream_t)stream, &cs);
    zc_dev_leave(st, &gd);
    if (e != cudaSuccess) return zc_cuda_fail(st, e, "cudaStreamIsCapturing");
    if (cs == cudaStreamCaptureStatusInvalidated) {
        zc__fmt(st->err, sizeof st->err, "the stream's capture was invalidated by an earlier "
                "call (cudaStreamCaptureStatusInvalidated)");
        return ZC_INVALID_ARG;
    }
    *capturing = cs == cudaStreamCaptureStatusActive;
    return ZC_OK;
}

/* "flag = value" (write) or "wait until flag >= value" on the caller's stream. */
static zc_status zc_cuda_stream_flag(zc_cuda *st, void *stream, uint32_t flag, uint32_t value,
                                     bool write) {
    zc_devguard gd;
    zc_status s = zc_cuda_index(st, flag, st->nflags, "flag word");
    if (s == ZC_OK) s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    CUdeviceptr at = st->flags_dev + flag * sizeof(uint32_t);
    CUresult r = write ? st->fn.write32((CUstream)stream, at, value,
                                        CU_STREAM_WRITE_VALUE_DEFAULT)
                       : st->fn.wait32((CUstream)stream, at, value, CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS)
        s = zc_cu_fail(st, r, write ? "cuStreamWriteValue32" : "cuStreamWaitValue32");
    zc_dev_leave(st, &gd);
    return s;
}

static zc_status zc_cuda_stream_write_flag(void *state, void *stream, uint32_t flag,
                                           uint32_t value) {
    return zc_cuda_stream_flag(state, stream, flag, value, true);
}

static zc_status zc_cuda_stream_wait_flag(void *state, void *stream, uint32_t flag,
                                          uint32_t value) {
    return zc_cuda_stream_flag(state, stream, flag, value, false);
}

static zc_status zc_cuda_stream_step(void *state, void *stream, uint32_t desc, zc_dtype dtype,
                                     zc_op op) {
    zc_cuda *st = state;
    zc_devguard gd;
    zc_status s = zc_cuda_index(st, desc, st->ndescs, "step descriptor");
    if (s == ZC_OK) s = zc_dev_enter(st, &gd);
    if (s != ZC_OK) return s;
    /* The stream copies the descriptor (filled by then: the copy runs after the wait for go)
     * into device memory, where every block of the step's device-wide grid reads it; blocks
     * reading pinned host memory themselves made thousands of PCIe reads, milliseconds a step. */
    zc_gpu_desc *at = &st->descs_copy[desc];
    cudaError_t e = cudaMemcpyAsync(at, &st->descs_host[desc], sizeof(zc_gpu_desc),
                                    cudaMemcpyDefault, (cudaStream_t)stream);
    if (e != cudaSuccess) s = zc_cuda_fail(st, e, "cudaMemcpyAsync(step descriptor)");
    int k = s == ZC_OK ? zc__cuda_step(stream, at, dtype, op, st->sms) : 0;
    if (k) s = zc_cuda_fail(st, (cudaError_t)k, "zc_step_kernel launch");
    zc_dev_leave(st, &gd);
    return s;
}

/* ---- the probe ---- */

static void zc_cuda_probe_dev(zc_gpu_probe_dev *d, int i) {
    struct { int *v; enum cudaDeviceAttr a; } attrs[] = {
        {&d->cc_major, cudaDevAttrComputeCapabilityMajor},
        {&d->cc_minor, cudaDevAttrComputeCapabilityMinor},
        {&d->sms, cudaDevAttrMultiProcessorCount},
        {&d->rdma, cudaDevAttrGPUDirectRDMASupported},
        {&d->ordering, cudaDevAttrGPUDirectRDMAWritesOrdering},
        {&d->flush_opts, cudaDevAttrGPUDirectRDMAFlushWritesOptions},
    };
    cudaError_t e;
    for (size_t k = 0; k < sizeof attrs / sizeof attrs[0]; k++)
        if ((e = cudaDeviceGetAttribute(attrs[k].v, attrs[k].a, i)) != cudaSuccess) {
            *attrs[k].v = -1;
            zc_cuda_unslot(e);
        }
    zc_cuda_unslot(cudaDeviceGetPCIBusId(d->bus, (int)sizeof d->bus, i));
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, i)) == cudaSuccess) {
        zc__fmt(d->name, sizeof d->name, "%s", p.name);
        d->mem_bytes = (uint64_t)p.totalGlobalMem;
    }
    zc_cuda_unslot(e);
}

/* A driver function for the probe (NULL: none; the error slot left clean). */
static void *zc_cuda_probe_entry(const char *sym) {
    void *fn = 0;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(sym, &fn, ZC_CUDA_API_VERSION,
                                                     cudaEnableDefault, &q);
    zc_cuda_unslot(e);
    return e == cudaSuccess && q == cudaDriverEntryPointSuccess ? fn : 0;
}

/* What only the driver says: dma-buf export, stream memory operations (32-bit flag writes and
 * waits are there whenever the driver has the functions, CUDA 12 on). */
static void zc_cuda_probe_driver(zc_gpu_probe *out) {
    typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
    attr_fn get = (attr_fn)zc_cuda_probe_entry("cuDeviceGetAttribute");
    zc_pfn_devget devget = (zc_pfn_devget)zc_cuda_probe_entry("cuDeviceGet");
    bool memops = zc_cuda_probe_entry("cuStreamWaitValue32") &&
                  zc_cuda_probe_entry("cuStreamWriteValue32");
    for (uint32_t i = 0; i < out->ndevs; i++) {
        zc_gpu_probe_dev *d = &out->devs[i];
        CUdevice dev;
        d->memops = memops;
        d->dmabuf = -1;
        if (get && devget && devget(&dev, (int)i) == CUDA_SUCCESS &&
            get(&d->dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) != CUDA_SUCCESS)
            d->dmabuf = -1;
    }
}

static zc_status zc_cuda_probe(zc_gpu_probe *out) {
    int count = 0;
    memset(out, 0, sizeof *out);
    (void)cudaDriverGetVersion(&out->driver);
    (void)cudaRuntimeGetVersion(&out->runtime);
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        zc_cuda st_;
        memset(&st_, 0, sizeof st_);
        out->unusable = zc_cuda_no_device(&st_, e) == ZC_GPU;
        zc__fmt(out->why, sizeof out->why, "%s", st_.err);
        return ZC_OK;
    }
    if (count == 0) zc__fmt(out->why, sizeof out->why, "cudaGetDeviceCount found 0 devices");
    out->ndevs = count < (int)ZC_GPU_PROBE_DEVS ? (uint32_t)count : ZC_GPU_PROBE_DEVS;
    for (uint32_t i = 0; i < out->ndevs; i++) zc_cuda_probe_dev(&out->devs[i], (int)i);
    for (uint32_t i = 0; i < out->ndevs; i++)
        for (uint32_t j = 0; j < out->ndevs; j++) {
            int ok = i == j;
            cudaError_t pe = i == j ? cudaSuccess : cudaDeviceCanAccessPeer(&ok, (int)i, (int)j);
            if (pe != cudaSuccess) ok = 0;
            zc_cuda_unslot(pe);
            if (ok) out->devs[i].peers |= 1u << j;
        }
    zc_cuda_probe_driver(out);
    return ZC_OK;
}

const zc_gpu_ops ZC_CUDA_OPS = {
    .struct_bytes = sizeof(zc_gpu_ops),
    .version = ZC_GPU_VERSION,
    .name = ZC_CUDA_NAME,
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
    .lost = zc_cuda_lost,
    .rdma_flush = zc_cuda_rdma_flush,
    .identity = zc_cuda_identity,
    .can_read = zc_cuda_can_read,
    .reduce = zc_cuda_reduce,
    .copy = zc_cuda_copy,
    .event_record = zc_cuda_event_record,
    .event_query = zc_cuda_event_query,
    .scratch = zc_cuda_scratch,
    .flags = zc_cuda_flags,
    .desc = zc_cuda_desc,
    .stream_capturing = zc_cuda_stream_capturing,
    .stream_write_flag = zc_cuda_stream_write_flag,
    .stream_wait_flag = zc_cuda_stream_wait_flag,
    .stream_step = zc_cuda_stream_step,
    .probe = zc_cuda_probe,
};
