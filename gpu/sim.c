/* sim.c: the simulated CUDA runtime and driver (gpu/sim_cuda.h's zc_simrt_*) and the test-facing
 * side of the simulated GPU (sim.h, which says what it models). gpu/cuda.c compiled against it
 * (gpu/sim_provider.c) is the provider zc_gpu_sim, so the device path of the core and every
 * call sequence of cuda.c run in CI on a machine without a GPU.
 *
 * The "device": memory is platform shared memory (zc_gpu_sim_alloc), mapped by peer processes
 * through the IPC handle like CUDA IPC; kernels are the host reduction kernel
 * (provider/hostkernel.h), so results are the host kernels' by construction (the CUDA kernels'
 * equality to them is a GPU run's to show). Work runs inside the host's own calls (queries,
 * synchronizations), never concurrently with them: what it cannot show is a real race.
 * Hosted builds only (it opens /dev/null for a dma-buf's file descriptor). */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"
#include "gpu.h"
#include "hostkernel.h"
#include "platform.h"
#include "sim_cuda.h"
#include "kernels.h"

_Static_assert(ZC_GPU_MAX_SRCS == 64u, "zc_sim_op.srcs holds ZC_GPU_MAX_SRCS sources");

#define ZC_SIM_STREAM_MAGIC 0x7a6373696d737472ull /* "zcsimstr" */
#define ZC_SIM_RUNTIME 13000   /* the runtime version the simulation is */
#define ZC_SIM_QUEUES 32u      /* CUDA_DEVICE_MAX_CONNECTIONS ceiling */
#define ZC_SIM_QCAP 2048u      /* operations a hardware queue holds */
#define ZC_SIM_GRAPH_OPS 1024u /* operations a captured graph holds */
#define ZC_SIM_GRAPHS 16u
#define ZC_SIM_STREAMS 64u     /* the runtime's own streams (cudaStreamCreate) */
#define ZC_SIM_EVENTS 4096u
#define ZC_SIM_CAPTURES 64u    /* captures active at once */
#define ZC_SIM_RANGES 256u     /* host allocations and registrations; IPC mappings */
#define ZC_SIM_NAME_BYTES 48u
/* An allocation's segment starts with a page the runtime keeps: how many processes have it
 * mapped through IPC now, so that a free while a peer still maps it is seen (UB with CUDA). */
#define ZC_SIM_HDR 4096u

enum { ZC_OP_REDUCE = 1, ZC_OP_COPY, ZC_OP_STEP, ZC_OP_EVENT, ZC_OP_WRITE, ZC_OP_WAIT,
       ZC_OP_CALL };

typedef struct zc_sim_event {
    uint32_t used;
    uint32_t pad_;
    uint64_t recorded; /* ticket of the last record (0: never recorded) */
    uint64_t done;     /* ticket its queue reached last */
} zc_sim_event;

typedef struct zc_sim_op {
    uint32_t kind, nsrc, dtype, op;
    uint32_t value, dev;          /* flag value; the launching device (physical) */
    uint64_t number;              /* kernel/copy: its number (fault injection); event: ticket */
    uint64_t count;               /* elements (reduce) or bytes (copy) */
    zc_gpu_sim_stream *stream;
    void *dst;
    const void *srcs[64];
    volatile uint32_t *flag;
    zc_sim_event *ev;
    const zc_gpu_desc *desc;
    void (*fn)(void *arg);
    void *arg;
} zc_sim_op;

typedef struct zc_sim_queue {
    uint32_t head, len;
    zc_sim_op ops[ZC_SIM_QCAP];
} zc_sim_queue;

struct zc_gpu_sim_graph {
    uint32_t used, len;
    zc_sim_op ops[ZC_SIM_GRAPH_OPS];
};

typedef struct zc_sim_ctx {
    int phys;
    int refs;
} zc_sim_ctx;

typedef struct zc_sim_alloc {
    uint8_t *base;
    size_t bytes;
    int dev;             /* physical device */
    zc_plat_shm_ref ref; /* what a peer process maps it by (the "IPC handle") */
} zc_sim_alloc;

typedef struct zc_sim_range {
    uint8_t *base;
    size_t bytes;
    int dev;    /* IPC mapping: the memory's device; host ranges: -1 */
    int kind;   /* 1 host alloc, 2 host registration, 3 IPC mapping */
} zc_sim_range;

/* The handle layout: the platform's segment ref, the allocation's size, its device. */
typedef struct zc_sim_handle {
    zc_plat_shm_ref ref;
    uint64_t bytes;
    int32_t dev;
    uint32_t pad_;
} zc_sim_handle;
_Static_assert(sizeof(zc_sim_handle) <= 64u, "the simulated IPC handle fits CUDA's");

typedef struct zc_sim_knobs {
    uint32_t read;
    int devices, visible[ZC_GPU_SIM_MAX_DEVICES], nvisible;
    int driver, no_peer, no_rdma, dmabuf, eager, platform; /* platform: 0 hopper 1 ampere 2 c2c */
    int lazy;        /* kernels load at their first launch (CUDA_MODULE_LOADING not EAGER) */
    int fault_error; /* the error the injected fault raises */
    uint32_t queues;
    uint64_t fault_at;
} zc_sim_knobs;

static uint32_t zc_sim_lock_word;
static zc_sim_knobs zc_sim_k;
static zc_sim_queue *zc_sim_q[ZC_SIM_QUEUES];
static struct zc_gpu_sim_graph *zc_sim_graphs[ZC_SIM_GRAPHS];
static zc_gpu_sim_stream zc_sim_streams[ZC_SIM_STREAMS];
static zc_sim_event zc_sim_events[ZC_SIM_EVENTS];
static zc_gpu_sim_stream *zc_sim_captures[ZC_SIM_CAPTURES];
static zc_sim_alloc zc_sim_allocs[ZC_GPU_SIM_MAX_ALLOCS];
static zc_sim_range zc_sim_ranges[ZC_SIM_RANGES];
static zc_sim_ctx zc_sim_ctxs[ZC_GPU_SIM_MAX_DEVICES];
static uint32_t zc_sim_made;          /* bit d: physical device d's primary context was made */
static uint64_t zc_sim_serial, zc_sim_streams_made, zc_sim_numbered, zc_sim_tickets;
static cudaError_t zc_sim_sticky;
static char zc_sim_why[ZC_ERROR_TEXT_BYTES];
static zc_gpu_sim_stats zc_sim_st;
/* [device][family: 0 reduce, 1 step][dtype][op]: that kernel is loaded in the device's context. */
static uint8_t zc_sim_loaded[ZC_GPU_SIM_MAX_DEVICES][2][ZC_DTYPE_COUNT_][ZC_OP_COUNT_];

static _Thread_local cudaError_t zc_sim_slot;  /* the thread's last error */
static _Thread_local zc_sim_ctx *zc_sim_cur;   /* the thread's current context */
static _Thread_local int zc_sim_tdev;          /* cudaSetDevice's ordinal */
static _Thread_local int zc_sim_tmode;         /* the thread's capture mode */
static _Thread_local char zc_sim_thread;       /* its address names the thread */

/* ---- the lock, errors, knobs ---- */

static void zc_sim_lock(void) {
    for (uint32_t spins = 0; __atomic_exchange_n(&zc_sim_lock_word, 1u, __ATOMIC_ACQUIRE);)
        if (++spins % 64u == 0) zc_plat_yield();
        else zc_plat_cpu_relax();
}
static void zc_sim_unlock(void) { __atomic_store_n(&zc_sim_lock_word, 0u, __ATOMIC_RELEASE); }

/* A failed call: the error goes into the thread's slot (a sticky one wins). */
static cudaError_t zc_sim_err(cudaError_t e) {
    if (e != cudaSuccess) zc_sim_slot = zc_sim_sticky ? zc_sim_sticky : e;
    return e;
}

/* Runs under the lock: the call's result, the sticky error first. */
#define ZC_SIM_CALL(expr)                                                                       \
    do {                                                                                        \
        zc_sim_lock();                                                                          \
        cudaError_t r_ = zc_sim_sticky ? zc_sim_sticky : (expr);                                \
        zc_sim_unlock();                                                                        \
        return zc_sim_err(r_);                                                                  \
    } while (0)

static int64_t zc_sim_env(const char *name, int64_t dflt) {
    const char *v = zc_plat_getenv(name);
    int64_t n = 0;
    if (!v || *v < '0' || *v > '9') return dflt;
    for (; *v >= '0' && *v <= '9'; v++) n = n * 10 + (*v - '0');
    return n;
}

static void zc_sim_read_knobs(void) {
    zc_sim_knobs *k = &zc_sim_k;
    k->devices = (int)zc_sim_env("ZC_GPU_SIM_DEVICES", 1);
    if (k->devices < 0 || k->devices > (int)ZC_GPU_SIM_MAX_DEVICES) k->devices = 1;
    k->nvisible = 0;
    const char *vis = zc_plat_getenv("ZC_GPU_SIM_VISIBLE");
    for (int d = 0; !vis && d < k->devices; d++) k->visible[k->nvisible++] = d;
    for (const char *p = vis; p && *p && k->nvisible < (int)ZC_GPU_SIM_MAX_DEVICES; p++) {
        if (*p < '0' || *p > '9') continue;
        if (*p - '0' < k->devices) k->visible[k->nvisible++] = *p - '0';
    }
    k->driver = (int)zc_sim_env("ZC_GPU_SIM_DRIVER", ZC_SIM_RUNTIME);
    k->no_peer = zc_sim_env("ZC_GPU_SIM_NO_PEER", 0) != 0;
    k->no_rdma = zc_sim_env("ZC_GPU_SIM_NO_RDMA", 0) != 0;
    k->dmabuf = zc_sim_env("ZC_GPU_SIM_DMABUF", 0) != 0;
    k->eager = zc_sim_env("ZC_GPU_SIM_EAGER", 0) != 0;
    const char *ml = zc_plat_getenv("CUDA_MODULE_LOADING");
    k->lazy = !(ml && ml[0] == 'E');
    k->fault_at = (uint64_t)zc_sim_env("ZC_GPU_SIM_FAULT", 0);
    k->fault_error = (int)zc_sim_env("ZC_GPU_SIM_FAULT_ERROR", cudaErrorIllegalAddress);
    int64_t q = zc_sim_env("CUDA_DEVICE_MAX_CONNECTIONS", 8);
    k->queues = q < 1 ? 1u : q > (int64_t)ZC_SIM_QUEUES ? ZC_SIM_QUEUES : (uint32_t)q;
    const char *pf = zc_plat_getenv("ZC_GPU_SIM_PLATFORM");
    k->platform = pf && pf[0] == 'a' ? 1 : pf && pf[0] == 'c' ? 2 : 0;
    zc_sim_numbered = 0;
    k->read = 1;
}

static void zc_sim_ready(void) {
    if (!zc_sim_k.read) zc_sim_read_knobs();
}

static bool zc_sim_ordinal_ok(int d) { return d >= 0 && d < zc_sim_k.nvisible; }

/* The physical device of the current context, made (a runtime call's lazy init: the primary
 * context of the thread's device) when none is current. */
static int zc_sim_ctx_dev(void) {
    if (!zc_sim_cur) {
        int d = zc_sim_ordinal_ok(zc_sim_tdev) ? zc_sim_tdev : 0;
        zc_sim_ctx *c = &zc_sim_ctxs[zc_sim_k.visible[d]];
        c->phys = zc_sim_k.visible[d];
        zc_sim_made |= 1u << c->phys;
        zc_sim_cur = c;
    }
    return zc_sim_cur->phys;
}

static bool zc_sim_peer_ok(int from, int to) {
    return from == to || to < 0 || !zc_sim_k.no_peer;
}

/* ---- graph capture ---- */

static bool zc_sim_own_capture(void) {
    for (uint32_t i = 0; i < ZC_SIM_CAPTURES; i++) {
        const zc_gpu_sim_stream *s = zc_sim_captures[i];
        if (s && s->capture == 1 && s->cap_thread == &zc_sim_thread &&
            s->cap_mode != ZC_GPU_SIM_CAPTURE_RELAXED)
            return true;
    }
    return false;
}

static bool zc_sim_global_capture(void) {
    for (uint32_t i = 0; i < ZC_SIM_CAPTURES; i++)
        if (zc_sim_captures[i] && zc_sim_captures[i]->capture == 1 &&
            zc_sim_captures[i]->cap_mode == ZC_GPU_SIM_CAPTURE_GLOBAL)
            return true;
    return false;
}

/* A potentially unsafe call (it may synchronize implicitly): refused, and the captures it would
 * have broken invalidated, when the thread's capture mode forbids it now. */
static cudaError_t zc_sim_unsafe(void) {
    bool own = zc_sim_own_capture();
    bool refused = zc_sim_tmode == ZC_GPU_SIM_CAPTURE_GLOBAL ? own || zc_sim_global_capture()
                   : zc_sim_tmode == ZC_GPU_SIM_CAPTURE_THREAD_LOCAL ? own : false;
    if (!refused) return cudaSuccess;
    for (uint32_t i = 0; i < ZC_SIM_CAPTURES; i++) {
        zc_gpu_sim_stream *s = zc_sim_captures[i];
        if (!s || s->capture != 1) continue;
        if (s->cap_mode == ZC_GPU_SIM_CAPTURE_GLOBAL || s->cap_thread == &zc_sim_thread) {
            s->capture = 2;
            zc_sim_st.capture_invalidations++;
        }
    }
    return cudaErrorStreamCaptureUnsupported;
}

/* ---- memory tables ---- */

static zc_sim_alloc *zc_sim_find(const void *p, size_t bytes, bool *partial) {
    uintptr_t lo = (uintptr_t)p, hi = lo + (bytes ? bytes : 1u);
    for (uint32_t i = 0; i < ZC_GPU_SIM_MAX_ALLOCS; i++) {
        zc_sim_alloc *a = &zc_sim_allocs[i];
        uintptr_t alo = (uintptr_t)a->base, ahi = alo + a->bytes;
        if (!a->base || lo < alo || lo >= ahi) continue;
        if (partial) *partial = hi > ahi;
        return a;
    }
    return NULL;
}

static zc_sim_range *zc_sim_range_of(const void *p, int kind) {
    uintptr_t x = (uintptr_t)p;
    for (uint32_t i = 0; i < ZC_SIM_RANGES; i++) {
        zc_sim_range *r = &zc_sim_ranges[i];
        if (r->base && (kind == 0 || r->kind == kind) && x >= (uintptr_t)r->base &&
            x < (uintptr_t)r->base + r->bytes)
            return r;
    }
    return NULL;
}

static zc_sim_range *zc_sim_range_add(void *p, size_t bytes, int dev, int kind) {
    for (uint32_t i = 0; i < ZC_SIM_RANGES; i++)
        if (!zc_sim_ranges[i].base) {
            zc_sim_ranges[i] = (zc_sim_range){p, bytes, dev, kind};
            return &zc_sim_ranges[i];
        }
    return NULL;
}

/* The device whose memory p is (physical), -1 for host memory. */
static int zc_sim_dev_of(const void *p) {
    const zc_sim_alloc *a = zc_sim_find(p, 1, NULL);
    if (a) return a->dev;
    const zc_sim_range *r = zc_sim_range_of(p, 3);
    return r ? r->dev : -1;
}

/* The importers' count of a mapping whose user memory starts at base. */
static uint64_t *zc_sim_imports(void *base) { return (uint64_t *)(void *)((uint8_t *)base - ZC_SIM_HDR); }

static void *zc_sim_alloc_on(size_t bytes, int dev) {
    uint32_t i;
    for (i = 0; i < ZC_GPU_SIM_MAX_ALLOCS && zc_sim_allocs[i].base; i++) {
    }
    if (bytes == 0 || i == ZC_GPU_SIM_MAX_ALLOCS) return NULL;
    zc_sim_alloc *a = &zc_sim_allocs[i];
    void *p = NULL;
    char name[ZC_SIM_NAME_BYTES];
    zc__fmt(name, sizeof name, "/zcsim-%llu-%llu", (unsigned long long)zc_plat_process_id(),
            (unsigned long long)++zc_sim_serial);
    if (zc_plat_shm_create(name, bytes + ZC_SIM_HDR, &p, &a->ref) != ZC_PLAT_OK) return NULL;
    a->base = (uint8_t *)p + ZC_SIM_HDR;
    a->bytes = bytes;
    a->dev = dev;
    return a->base;
}

void *zc_gpu_sim_alloc(size_t bytes) {
    zc_sim_lock();
    zc_sim_ready();
    int d = zc_sim_ordinal_ok(zc_sim_tdev) ? zc_sim_tdev : 0;
    void *p = zc_sim_alloc_on(bytes, zc_sim_k.nvisible ? zc_sim_k.visible[d] : 0);
    zc_sim_unlock();
    return p;
}

static void zc_sim_free_locked(void *p) {
    zc_sim_alloc *a = p ? zc_sim_find(p, 1, NULL) : NULL;
    if (!a || a->base != p) return;
    if (__atomic_load_n(zc_sim_imports(a->base), __ATOMIC_ACQUIRE))
        zc_sim_st.frees_while_mapped++; /* undefined behaviour with CUDA */
    (void)zc_plat_shm_unmap(a->base - ZC_SIM_HDR, a->bytes + ZC_SIM_HDR);
    (void)zc_plat_shm_seal(&a->ref);
    *a = (zc_sim_alloc){0};
}

void zc_gpu_sim_free(void *p) {
    zc_sim_lock();
    zc_sim_free_locked(p);
    zc_sim_unlock();
}

void zc_gpu_sim_free_all(void) {
    zc_sim_lock();
    for (uint32_t i = 0; i < ZC_GPU_SIM_MAX_ALLOCS; i++)
        if (zc_sim_allocs[i].base) zc_sim_free_locked(zc_sim_allocs[i].base);
    zc_sim_unlock();
}

/* ---- queues: where enqueued work waits, and how it runs ---- */

static zc_sim_queue *zc_sim_queue_of(uint32_t q) {
    if (!zc_sim_q[q]) {
        void *p = NULL;
        if (zc_plat_pages_alloc(sizeof(zc_sim_queue), &p) != ZC_PLAT_OK) return NULL;
        zc_sim_q[q] = p;
    }
    return zc_sim_q[q];
}

static const char *zc_sim_text(cudaError_t e);

/* The injected fault (its error ZC_GPU_SIM_FAULT_ERROR), or a kernel reading another device's
 * memory without peer access (an illegal address): the operation does not run and the device
 * is lost (sticky). */
static void zc_sim_fault(const zc_sim_op *o, const char *what, cudaError_t e) {
    static const char *const kinds[] = {"", "reduce", "copy", "step"};
    zc__fmt(zc_sim_why, sizeof zc_sim_why, "%s (simulated fault: %s in operation %llu, a %s)",
            zc_sim_text(e), what, (unsigned long long)o->number,
            kinds[o->kind <= ZC_OP_STEP ? o->kind : 0]);
    zc_sim_sticky = e;
}

static bool zc_sim_reachable(const zc_sim_op *o, const void *p) {
    return zc_sim_peer_ok((int)o->dev, zc_sim_dev_of(p));
}

static void zc_sim_reduce_run(void *dst, const void *const *srcs, uint32_t n, uint64_t count,
                              uint32_t dtype, uint32_t op) {
    const void *ptrs[ZC_GPU_MAX_SRCS + 1];
    uint64_t head, vecs;
    memcpy(ptrs, srcs, n * sizeof ptrs[0]);
    ptrs[n] = dst;
    uint32_t es = (uint32_t)zc_dtype_bytes((zc_dtype)dtype);
    zc__vec_split(ptrs, n + 1u, count, es, &head, &vecs);
    zc_sim_st.vec_elems += vecs * (16u / es);
    zc_sim_st.scalar_elems += count - vecs * (16u / es);
    zc__reduce(dst, srcs, n, (size_t)count, (zc_dtype)dtype, (zc_op)op);
}

/* A step: what its descriptor says now. */
static void zc_sim_step_run(const zc_sim_op *o) {
    const zc_gpu_desc *d = o->desc;
    uint32_t n = d->n < ZC_GPU_MAX_SRCS ? d->n : ZC_GPU_MAX_SRCS;
    for (uint32_t k = 0; k < n && d->mode != ZC_GPU_STEP_NONE; k++)
        if (!zc_sim_reachable(o, d->src[k]) || !zc_sim_reachable(o, d->dst[k]))
            return zc_sim_fault(o, "a kernel read another device's memory without peer access",
                                cudaErrorIllegalAddress);
    if (d->mode == ZC_GPU_STEP_REDUCE && n && d->count)
        zc_sim_reduce_run(d->dst[0], d->src, n, d->count, o->dtype, o->op);
    if (d->mode == ZC_GPU_STEP_COPY)
        for (uint32_t k = 0; k < n; k++) memmove(d->dst[k], d->src[k], (size_t)d->bytes[k]);
}

static void zc_sim_kernel(const zc_sim_op *o) {
    if (zc_sim_k.fault_at && o->number == zc_sim_k.fault_at)
        return zc_sim_fault(o, "ZC_GPU_SIM_FAULT injected it", zc_sim_k.fault_error);
    if (o->kind == ZC_OP_STEP) return zc_sim_step_run(o);
    for (uint32_t k = 0; k < o->nsrc; k++)
        if (!zc_sim_reachable(o, o->srcs[k]))
            return zc_sim_fault(o, "a kernel read another device's memory without peer access",
                                cudaErrorIllegalAddress);
    if (!zc_sim_reachable(o, o->dst))
        return zc_sim_fault(o, "a kernel wrote another device's memory without peer access",
                            cudaErrorIllegalAddress);
    if (o->kind == ZC_OP_REDUCE) zc_sim_reduce_run(o->dst, o->srcs, o->nsrc, o->count, o->dtype,
                                                   o->op);
    else memmove(o->dst, o->srcs[0], (size_t)o->count);
}

/* Runs o; false when it is a flag wait that does not hold (it stays queued). */
static bool zc_sim_exec(zc_sim_op *o) {
    switch (o->kind) {
    case ZC_OP_REDUCE:
    case ZC_OP_COPY:
    case ZC_OP_STEP: zc_sim_kernel(o); break;
    case ZC_OP_EVENT: o->ev->done = o->number; break;
    case ZC_OP_WRITE: __atomic_store_n(o->flag, o->value, __ATOMIC_RELEASE); break;
    case ZC_OP_WAIT:
        if ((int32_t)(__atomic_load_n(o->flag, __ATOMIC_ACQUIRE) - o->value) < 0) return false;
        break;
    default: o->fn(o->arg); break;
    }
    zc_sim_st.ops_run++;
    return true;
}

/* Runs at most budget operations of queue q; the number run. A lost device runs nothing: its
 * queues are dropped. */
static uint32_t zc_sim_run_queue(uint32_t q, uint32_t budget) {
    zc_sim_queue *Q = zc_sim_q[q];
    uint32_t ran = 0;
    for (; Q && ran < budget && Q->len; ran++) {
        zc_sim_op *o = &Q->ops[Q->head];
        if (!zc_sim_sticky && !zc_sim_exec(o)) break;
        if (o->stream) o->stream->pending--;
        Q->head = (Q->head + 1u) % ZC_SIM_QCAP;
        Q->len--;
    }
    return ran;
}

/* Every queue until nothing moves (bounded: each pass runs at least one operation). */
static void zc_sim_drain(void) {
    for (uint32_t pass = 0; pass < ZC_SIM_QUEUES * ZC_SIM_QCAP + 1u; pass++) {
        uint32_t ran = 0;
        for (uint32_t q = 0; q < ZC_SIM_QUEUES; q++) ran += zc_sim_run_queue(q, ZC_SIM_QCAP);
        if (!ran) return;
    }
}

static zc_sim_op *zc_sim_graph_slot(zc_gpu_sim_stream *s) {
    struct zc_gpu_sim_graph *g = s->graph;
    if (g->len == ZC_SIM_GRAPH_OPS) {
        s->capture = 2; /* a graph too large for the simulation: the capture fails */
        return NULL;
    }
    return &g->ops[g->len++];
}

/* A new operation at the end of s (its queue, or its graph while captured); NULL when the queue
 * is full behind a wait that does not hold. */
static zc_sim_op *zc_sim_push(zc_gpu_sim_stream *s, uint32_t kind) {
    zc_sim_op *o;
    if (s->capture == 1) {
        o = zc_sim_graph_slot(s);
    } else {
        zc_sim_queue *Q = zc_sim_queue_of(s->queue);
        if (Q && Q->len == ZC_SIM_QCAP) (void)zc_sim_run_queue(s->queue, 1u);
        if (!Q || Q->len == ZC_SIM_QCAP) return NULL;
        o = &Q->ops[(Q->head + Q->len++) % ZC_SIM_QCAP];
        s->pending++;
    }
    if (!o) return NULL;
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->stream = s->capture == 1 ? NULL : s;
    o->dev = zc_sim_cur ? (uint32_t)zc_sim_cur->phys : 0u;
    if (kind == ZC_OP_REDUCE || kind == ZC_OP_COPY || kind == ZC_OP_STEP)
        o->number = ++zc_sim_numbered;
    return o;
}

/* After a push: eager runs everything now. */
static void zc_sim_pushed(void) {
    if (zc_sim_k.eager) zc_sim_drain();
}

static bool zc_sim_stream_ok(const zc_gpu_sim_stream *s) {
    return s && s->magic == ZC_SIM_STREAM_MAGIC;
}

/* ---- the runtime: errors and versions ---- */

cudaError_t zc_simrt_get_last_error(void) {
    cudaError_t e = zc_sim_sticky ? zc_sim_sticky : zc_sim_slot;
    zc_sim_slot = cudaSuccess;
    return e;
}

cudaError_t zc_simrt_peek_at_last_error(void) {
    return zc_sim_sticky ? zc_sim_sticky : zc_sim_slot;
}

static const struct { cudaError_t e; const char *name, *text; } zc_sim_names[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported",
     "peer access is not supported between these two devices"},
    {cudaErrorContained, "cudaErrorContained",
     "a contained error: an exception on the device, contained to this process"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "invalid resource handle (the simulated runtime takes streams of zc_gpu_sim_stream_init "
     "or cudaStreamCreate and has no legacy default stream)"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error (simulated: it would never return on "
     "a GPU: a synchronize, a kernel's lazy load or a push blocked by a flag wait)"},
};

const char *zc_simrt_error_name(cudaError_t e) {
    for (size_t i = 0; i < sizeof zc_sim_names / sizeof zc_sim_names[0]; i++)
        if (zc_sim_names[i].e == e) return zc_sim_names[i].name;
    return "cudaError?";
}

static const char *zc_sim_text(cudaError_t e) {
    for (size_t i = 0; i < sizeof zc_sim_names / sizeof zc_sim_names[0]; i++)
        if (zc_sim_names[i].e == e) return zc_sim_names[i].text;
    return "unknown error";
}

const char *zc_simrt_error_string(cudaError_t e) {
    return e == zc_sim_sticky && zc_sim_why[0] ? zc_sim_why : zc_sim_text(e);
}

cudaError_t zc_simrt_driver_version(int *v) {
    zc_sim_lock();
    zc_sim_ready();
    *v = zc_sim_k.driver;
    zc_sim_unlock();
    return cudaSuccess;
}

cudaError_t zc_simrt_runtime_version(int *v) {
    *v = ZC_SIM_RUNTIME;
    return cudaSuccess;
}

/* Reads the knobs again (a provider's init starts here): no driver or one too old fails as
 * with CUDA. */
static cudaError_t zc_sim_device_count(int *n) {
    zc_sim_read_knobs();
    *n = 0;
    if (zc_sim_k.driver < ZC_SIM_RUNTIME) return cudaErrorInsufficientDriver;
    if (zc_sim_k.nvisible == 0) return cudaErrorNoDevice;
    *n = zc_sim_k.nvisible;
    return cudaSuccess;
}

cudaError_t zc_simrt_device_count(int *n) { ZC_SIM_CALL(zc_sim_device_count(n)); }

cudaError_t zc_simrt_get_device(int *d) {
    *d = zc_sim_tdev;
    return cudaSuccess;
}

zc_status zc_gpu_sim_set_device(int ordinal) {
    zc_sim_lock();
    zc_sim_ready();
    bool ok = zc_sim_ordinal_ok(ordinal);
    if (ok) {
        zc_sim_tdev = ordinal;
        zc_sim_cur = NULL;
        (void)zc_sim_ctx_dev(); /* cudaSetDevice makes the context, CUDA 12 on */
    }
    zc_sim_unlock();
    return ok ? ZC_OK : ZC_INVALID_ARG;
}

/* ---- devices ---- */

static cudaError_t zc_sim_attribute(int *v, enum cudaDeviceAttr a, int d) {
    if (!zc_sim_ordinal_ok(d)) return cudaErrorInvalidDevice;
    const zc_sim_knobs *k = &zc_sim_k;
    switch (a) {
    case cudaDevAttrComputeCapabilityMajor: *v = k->platform == 1 ? 8 : 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMultiProcessorCount: *v = 4; break;
    case cudaDevAttrGPUDirectRDMASupported: *v = !k->no_rdma; break;
    case cudaDevAttrGPUDirectRDMAFlushWritesOptions:
        *v = cudaFlushGPUDirectRDMAWritesOptionHost | cudaFlushGPUDirectRDMAWritesOptionMemOps;
        break;
    case cudaDevAttrGPUDirectRDMAWritesOrdering:
        *v = k->platform == 1 ? cudaGPUDirectRDMAWritesOrderingNone
             : k->platform == 2 ? cudaGPUDirectRDMAWritesOrderingAllDevices
                                : cudaGPUDirectRDMAWritesOrderingOwner;
        break;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: *v = k->dmabuf; break;
    default: return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

cudaError_t zc_simrt_device_attribute(int *v, enum cudaDeviceAttr a, int d) {
    ZC_SIM_CALL(zc_sim_attribute(v, a, d));
}

static cudaError_t zc_sim_properties(struct cudaDeviceProp *p, int d) {
    if (!zc_sim_ordinal_ok(d)) return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    static const char *const names[] = {"hopper", "ampere", "c2c"};
    zc__fmt(p->name, sizeof p->name, "zcoll simulated GPU %d (%s platform)",
            zc_sim_k.visible[d], names[zc_sim_k.platform]);
    p->totalGlobalMem = (size_t)1 << 30;
    return cudaSuccess;
}

cudaError_t zc_simrt_device_properties(struct cudaDeviceProp *p, int d) {
    ZC_SIM_CALL(zc_sim_properties(p, d));
}

static cudaError_t zc_sim_bus(char *bus, int len, int d) {
    if (!zc_sim_ordinal_ok(d)) return cudaErrorInvalidDevice;
    zc__fmt(bus, (size_t)len, "0000:%x:00.0", (unsigned)(0x10 + zc_sim_k.visible[d]));
    return cudaSuccess;
}

cudaError_t zc_simrt_bus_id(char *bus, int len, int d) { ZC_SIM_CALL(zc_sim_bus(bus, len, d)); }

static cudaError_t zc_sim_by_bus(int *d, const char *bus) {
    char mine[ZC_GPU_BUS_BYTES];
    for (int i = 0; i < zc_sim_k.nvisible; i++) {
        (void)zc_sim_bus(mine, (int)sizeof mine, i);
        if (strcmp(mine, bus) == 0) {
            *d = i;
            return cudaSuccess;
        }
    }
    return cudaErrorInvalidDevice;
}

cudaError_t zc_simrt_by_bus_id(int *d, const char *bus) { ZC_SIM_CALL(zc_sim_by_bus(d, bus)); }

static cudaError_t zc_sim_can_access(int *can, int d, int peer) {
    if (!zc_sim_ordinal_ok(d) || !zc_sim_ordinal_ok(peer)) return cudaErrorInvalidDevice;
    *can = d != peer && zc_sim_peer_ok(zc_sim_k.visible[d], zc_sim_k.visible[peer]);
    return cudaSuccess;
}

cudaError_t zc_simrt_can_access_peer(int *can, int d, int peer) {
    ZC_SIM_CALL(zc_sim_can_access(can, d, peer));
}

uint32_t zc_gpu_sim_contexts(void) {
    zc_sim_lock();
    uint32_t m = zc_sim_made;
    zc_sim_unlock();
    return m;
}

/* ---- streams and events ---- */

void zc_gpu_sim_stream_init(zc_gpu_sim_stream *s) {
    zc_sim_lock();
    zc_sim_ready();
    memset(s, 0, sizeof *s);
    s->magic = ZC_SIM_STREAM_MAGIC;
    s->queue = (uint32_t)(zc_sim_streams_made++ % zc_sim_k.queues);
    zc_sim_unlock();
}

static cudaError_t zc_sim_stream_create(cudaStream_t *out) {
    (void)zc_sim_ctx_dev();
    for (uint32_t i = 0; i < ZC_SIM_STREAMS; i++) {
        zc_gpu_sim_stream *s = &zc_sim_streams[i];
        if (s->used) continue;
        memset(s, 0, sizeof *s);
        s->magic = ZC_SIM_STREAM_MAGIC;
        s->used = 1;
        s->queue = (uint32_t)(zc_sim_streams_made++ % zc_sim_k.queues);
        *out = s;
        return cudaSuccess;
    }
    return cudaErrorUnknown;
}

cudaError_t zc_simrt_stream_create(cudaStream_t *s, unsigned int flags) {
    (void)flags;
    ZC_SIM_CALL(zc_sim_stream_create(s));
}

static cudaError_t zc_sim_stream_destroy(cudaStream_t s) {
    if (!zc_sim_stream_ok(s) || !s->used) return cudaErrorInvalidResourceHandle;
    for (uint32_t q = 0; q < ZC_SIM_QUEUES; q++) /* what it still holds runs without it */
        for (uint32_t i = 0; zc_sim_q[q] && i < zc_sim_q[q]->len; i++) {
            zc_sim_op *o = &zc_sim_q[q]->ops[(zc_sim_q[q]->head + i) % ZC_SIM_QCAP];
            if (o->stream == s) o->stream = NULL;
        }
    s->magic = 0;
    s->used = 0;
    return cudaSuccess;
}

cudaError_t zc_simrt_stream_destroy(cudaStream_t s) { ZC_SIM_CALL(zc_sim_stream_destroy(s)); }

/* Runs until s is empty; a wait that can never hold would hang a real synchronize: reported. */
static cudaError_t zc_sim_stream_sync(cudaStream_t s) {
    if (!zc_sim_stream_ok(s)) return cudaErrorInvalidResourceHandle;
    cudaError_t e = zc_sim_unsafe();
    if (e != cudaSuccess) return e;
    zc_sim_drain();
    if (zc_sim_sticky) return zc_sim_sticky;
    return s->pending ? cudaErrorUnknown : cudaSuccess;
}

cudaError_t zc_simrt_stream_synchronize(cudaStream_t s) { ZC_SIM_CALL(zc_sim_stream_sync(s)); }

static cudaError_t zc_sim_is_capturing(cudaStream_t s, enum cudaStreamCaptureStatus *cs) {
    if (!zc_sim_stream_ok(s)) return cudaErrorInvalidResourceHandle;
    *cs = s->capture == 1 ? cudaStreamCaptureStatusActive
          : s->capture == 2 ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

cudaError_t zc_simrt_stream_is_capturing(cudaStream_t s, enum cudaStreamCaptureStatus *cs) {
    ZC_SIM_CALL(zc_sim_is_capturing(s, cs));
}

zc_status zc_gpu_sim_stream_call(zc_gpu_sim_stream *s, void (*fn)(void *arg), void *arg) {
    zc_sim_lock();
    zc_sim_op *o = zc_sim_stream_ok(s) && !zc_sim_sticky ? zc_sim_push(s, ZC_OP_CALL) : NULL;
    if (o) {
        o->fn = fn;
        o->arg = arg;
        zc_sim_pushed();
    }
    zc_sim_unlock();
    return o ? ZC_OK : ZC_AGAIN;
}

zc_status zc_gpu_sim_stream_query(zc_gpu_sim_stream *s) {
    zc_sim_lock();
    zc_sim_drain();
    zc_status st = zc_sim_sticky ? ZC_GPU : s->pending ? ZC_IN_PROGRESS : ZC_OK;
    zc_sim_unlock();
    return st;
}

static cudaError_t zc_sim_event_create(cudaEvent_t *out) {
    (void)zc_sim_ctx_dev();
    for (uint32_t i = 0; i < ZC_SIM_EVENTS; i++)
        if (!zc_sim_events[i].used) {
            zc_sim_events[i] = (zc_sim_event){1, 0, 0, 0};
            *out = &zc_sim_events[i];
            return cudaSuccess;
        }
    return cudaErrorUnknown;
}

cudaError_t zc_simrt_event_create(cudaEvent_t *e, unsigned int flags) {
    (void)flags;
    ZC_SIM_CALL(zc_sim_event_create(e));
}

cudaError_t zc_simrt_event_destroy(cudaEvent_t e) {
    zc_sim_lock();
    if (e) e->used = 0;
    zc_sim_unlock();
    return cudaSuccess;
}

static cudaError_t zc_sim_event_record(cudaEvent_t e, cudaStream_t s) {
    if (!e || !zc_sim_stream_ok(s)) return cudaErrorInvalidResourceHandle;
    (void)zc_sim_ctx_dev();
    zc_sim_op *o = zc_sim_push(s, ZC_OP_EVENT);
    if (!o) return cudaErrorUnknown;
    o->ev = e;
    o->number = e->recorded = ++zc_sim_tickets;
    zc_sim_pushed();
    return cudaSuccess;
}

cudaError_t zc_simrt_event_record(cudaEvent_t e, cudaStream_t s) {
    ZC_SIM_CALL(zc_sim_event_record(e, s));
}

/* Runs one operation of every queue, then says whether the event's work is done: "not ready"
 * is an error of the slot like any other. */
static cudaError_t zc_sim_event_query(cudaEvent_t e) {
    if (!e) return cudaErrorInvalidResourceHandle;
    (void)zc_sim_ctx_dev();
    cudaError_t u = zc_sim_unsafe();
    if (u != cudaSuccess) return u;
    for (uint32_t q = 0; q < ZC_SIM_QUEUES; q++) (void)zc_sim_run_queue(q, 1u);
    if (zc_sim_sticky) return zc_sim_sticky;
    return e->done == e->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t zc_simrt_event_query(cudaEvent_t e) { ZC_SIM_CALL(zc_sim_event_query(e)); }

/* ---- memory ---- */

static cudaError_t zc_sim_host_alloc(void **p, size_t bytes) {
    (void)zc_sim_ctx_dev();
    cudaError_t e = zc_sim_unsafe();
    if (e != cudaSuccess) return e;
    if (zc_plat_pages_alloc(bytes, p) != ZC_PLAT_OK) return cudaErrorUnknown;
    if (!zc_sim_range_add(*p, bytes, -1, 1)) {
        (void)zc_plat_pages_free(*p, bytes);
        return cudaErrorUnknown;
    }
    return cudaSuccess;
}

cudaError_t zc_simrt_host_alloc(void **p, size_t bytes, unsigned int flags) {
    (void)flags;
    ZC_SIM_CALL(zc_sim_host_alloc(p, bytes));
}

static cudaError_t zc_sim_free_host(void *p) {
    zc_sim_range *r = zc_sim_range_of(p, 1);
    if (!r || r->base != p) return cudaErrorInvalidValue;
    (void)zc_plat_pages_free(r->base, r->bytes);
    *r = (zc_sim_range){0};
    return cudaSuccess;
}

cudaError_t zc_simrt_free_host(void *p) { ZC_SIM_CALL(zc_sim_free_host(p)); }

/* Pinned host memory is the same address on the simulated device. */
cudaError_t zc_simrt_host_device_pointer(void **dev, void *host, unsigned int flags) {
    (void)flags;
    *dev = host;
    return cudaSuccess;
}

static cudaError_t zc_sim_host_register(void *p, size_t bytes) {
    (void)zc_sim_ctx_dev();
    if (zc_sim_range_of(p, 2) || zc_sim_range_of((uint8_t *)p + bytes - 1, 2))
        return cudaErrorHostMemoryAlreadyRegistered;
    return zc_sim_range_add(p, bytes, -1, 2) ? cudaSuccess : cudaErrorUnknown;
}

cudaError_t zc_simrt_host_register(void *p, size_t bytes, unsigned int flags) {
    (void)flags;
    ZC_SIM_CALL(zc_sim_host_register(p, bytes));
}

static cudaError_t zc_sim_host_unregister(void *p) {
    zc_sim_range *r = zc_sim_range_of(p, 2);
    if (!r || r->base != p) return cudaErrorHostMemoryNotRegistered;
    *r = (zc_sim_range){0};
    return cudaSuccess;
}

cudaError_t zc_simrt_host_unregister(void *p) { ZC_SIM_CALL(zc_sim_host_unregister(p)); }

static cudaError_t zc_sim_malloc(void **p, size_t bytes) {
    int dev = zc_sim_ctx_dev();
    cudaError_t e = zc_sim_unsafe();
    if (e != cudaSuccess) return e;
    *p = zc_sim_alloc_on(bytes, dev);
    return *p ? cudaSuccess : cudaErrorUnknown;
}

cudaError_t zc_simrt_malloc(void **p, size_t bytes) { ZC_SIM_CALL(zc_sim_malloc(p, bytes)); }

static cudaError_t zc_sim_cuda_free(void *p) {
    (void)zc_sim_ctx_dev();
    cudaError_t e = zc_sim_unsafe();
    if (e == cudaSuccess) zc_sim_free_locked(p);
    return e;
}

cudaError_t zc_simrt_free(void *p) { ZC_SIM_CALL(zc_sim_cuda_free(p)); }

static cudaError_t zc_sim_attributes(struct cudaPointerAttributes *a, const void *p) {
    (void)zc_sim_ctx_dev();
    memset(a, 0, sizeof *a);
    const zc_sim_alloc *al = zc_sim_find(p, 1, NULL);
    const zc_sim_range *r = al ? NULL : zc_sim_range_of(p, 0);
    int dev = al ? al->dev : r && r->kind == 3 ? r->dev : -1;
    a->type = dev >= 0 ? cudaMemoryTypeDevice : r ? cudaMemoryTypeHost : 0;
    a->device = -1;
    for (int d = 0; dev >= 0 && d < zc_sim_k.nvisible; d++)
        if (zc_sim_k.visible[d] == dev) a->device = d;
    return cudaSuccess;
}

cudaError_t zc_simrt_pointer_attributes(struct cudaPointerAttributes *a, const void *p) {
    ZC_SIM_CALL(zc_sim_attributes(a, p));
}

/* ---- IPC ---- */

static cudaError_t zc_sim_ipc_get(cudaIpcMemHandle_t *h, void *p) {
    (void)zc_sim_ctx_dev();
    const zc_sim_alloc *a = zc_sim_find(p, 1, NULL);
    if (!a || a->base != p) return cudaErrorInvalidValue;
    zc_sim_handle sh = {a->ref, a->bytes, a->dev, 0};
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &sh, sizeof sh);
    return cudaSuccess;
}

cudaError_t zc_simrt_ipc_get(cudaIpcMemHandle_t *h, void *p) { ZC_SIM_CALL(zc_sim_ipc_get(h, p)); }

/* Maps a peer's allocation: only where the current device can reach its device. */
static cudaError_t zc_sim_ipc_open(void **p, cudaIpcMemHandle_t h) {
    int dev = zc_sim_ctx_dev();
    cudaError_t e = zc_sim_unsafe();
    if (e != cudaSuccess) return e;
    zc_sim_handle sh;
    memcpy(&sh, h.reserved, sizeof sh);
    if (!zc_sim_peer_ok(dev, sh.dev)) return cudaErrorPeerAccessUnsupported;
    void *seg = NULL;
    if (zc_plat_shm_open(&sh.ref, (size_t)sh.bytes + ZC_SIM_HDR, &seg) != ZC_PLAT_OK)
        return cudaErrorInvalidValue;
    uint8_t *base = (uint8_t *)seg + ZC_SIM_HDR;
    if (!zc_sim_range_add(base, (size_t)sh.bytes, sh.dev, 3)) {
        (void)zc_plat_shm_unmap(seg, (size_t)sh.bytes + ZC_SIM_HDR);
        return cudaErrorUnknown;
    }
    __atomic_add_fetch(zc_sim_imports(base), 1u, __ATOMIC_ACQ_REL);
    *p = base;
    return cudaSuccess;
}

cudaError_t zc_simrt_ipc_open(void **p, cudaIpcMemHandle_t h, unsigned int flags) {
    (void)flags;
    ZC_SIM_CALL(zc_sim_ipc_open(p, h));
}

static cudaError_t zc_sim_ipc_close(void *p) {
    (void)zc_sim_ctx_dev();
    cudaError_t e = zc_sim_unsafe();
    if (e != cudaSuccess) return e;
    zc_sim_range *r = zc_sim_range_of(p, 3);
    if (!r || r->base != p) return cudaErrorInvalidValue;
    __atomic_sub_fetch(zc_sim_imports(r->base), 1u, __ATOMIC_ACQ_REL);
    (void)zc_plat_shm_unmap(r->base - ZC_SIM_HDR, r->bytes + ZC_SIM_HDR);
    *r = (zc_sim_range){0};
    return cudaSuccess;
}

cudaError_t zc_simrt_ipc_close(void *p) { ZC_SIM_CALL(zc_sim_ipc_close(p)); }

cudaError_t zc_simrt_flush_rdma(int target, int scope) {
    (void)target, (void)scope;
    zc_sim_lock();
    zc_sim_st.flushes++;
    zc_sim_unlock();
    return zc_sim_err(zc_sim_sticky);
}

/* ---- work: copies and kernels ---- */

static cudaError_t zc_sim_memcpy(void *dst, const void *src, size_t bytes, cudaStream_t s) {
    if (!zc_sim_stream_ok(s)) return cudaErrorInvalidResourceHandle;
    (void)zc_sim_ctx_dev();
    zc_sim_op *o = zc_sim_push(s, ZC_OP_COPY);
    if (!o) return cudaErrorUnknown;
    o->dst = dst;
    o->srcs[0] = src;
    o->nsrc = 1;
    o->count = bytes;
    zc_sim_pushed();
    return cudaSuccess;
}

cudaError_t zc_simrt_memcpy_async(void *dst, const void *src, size_t bytes, int kind,
                                  cudaStream_t s) {
    (void)kind;
    ZC_SIM_CALL(zc_sim_memcpy(dst, src, bytes, s));
}

/* Lazy loading: a kernel's first launch loads it, and a load may wait for the whole device to
 * go idle (a context synchronize). Work that can run runs; if a flag wait still holds any queue
 * of the device, the launch would wait inside cudaLaunchKernel for good: refused (counted in
 * lazy_blocks) instead of hanging. An unknown dtype or op is left to the launch's own checks. */
static cudaError_t zc_sim_load(uint32_t family, zc_dtype dtype, zc_op op) {
    int dev = zc_sim_ctx_dev();
    if ((unsigned)dtype >= ZC_DTYPE_COUNT_ || (unsigned)op >= ZC_OP_COUNT_) return cudaSuccess;
    uint8_t *loaded = &zc_sim_loaded[dev][family][dtype][op];
    if (*loaded || !zc_sim_k.lazy) return (void)(*loaded = 1), cudaSuccess;
    zc_sim_drain();
    for (uint32_t q = 0; q < ZC_SIM_QUEUES; q++) {
        const zc_sim_queue *Q = zc_sim_q[q];
        for (uint32_t k = 0; Q && k < Q->len; k++)
            if (Q->ops[(Q->head + k) % ZC_SIM_QCAP].dev == (uint32_t)dev) {
                zc_sim_st.lazy_blocks++;
                return cudaErrorUnknown;
            }
    }
    *loaded = 1;
    return cudaSuccess;
}

static cudaError_t zc_sim_preload(void) {
    for (uint32_t t = 0; t < ZC_DTYPE_COUNT_; t++)
        for (uint32_t o = 0; o < ZC_OP_COUNT_; o++) {
            cudaError_t e = zc_sim_load(0, (zc_dtype)t, (zc_op)o);
            if (e == cudaSuccess) e = zc_sim_load(1, (zc_dtype)t, (zc_op)o);
            if (e != cudaSuccess) return e;
        }
    return cudaSuccess;
}

int zc_simrt_preload(void) {
    zc_sim_lock();
    cudaError_t e = zc_sim_sticky ? zc_sim_sticky : zc_sim_preload();
    zc_sim_unlock();
    return (int)zc_sim_err(e);
}

void zc_gpu_sim_unload(void) {
    zc_sim_lock();
    memset(zc_sim_loaded, 0, sizeof zc_sim_loaded);
    zc_sim_unlock();
}

static cudaError_t zc_sim_launch_reduce(zc_gpu_sim_stream *s, void *dst,
                                        const void *const *srcs, uint32_t n, size_t count,
                                        zc_dtype dtype, zc_op op) {
    if (!zc_sim_stream_ok(s)) return cudaErrorInvalidResourceHandle;
    if (n == 0 || n > ZC_GPU_MAX_SRCS) return cudaErrorInvalidValue;
    cudaError_t e = zc_sim_load(0, dtype, op);
    if (e != cudaSuccess) return e;
    zc_sim_op *o = zc_sim_push(s, ZC_OP_REDUCE);
    if (!o) return cudaErrorUnknown;
    o->dst = dst;
    o->nsrc = n;
    o->count = count;
    o->dtype = (uint32_t)dtype;
    o->op = (uint32_t)op;
    memcpy(o->srcs, srcs, n * sizeof srcs[0]);
    zc_sim_pushed();
    return cudaSuccess;
}

/* A launch returns its own result, as cudaLaunchKernel does (reduce.cu). */
int zc_simrt_launch_reduce(void *stream, void *dst, const void *const *srcs, uint32_t nsrc,
                           size_t count, zc_dtype dtype, zc_op op, int sms) {
    (void)sms;
    zc_sim_lock();
    cudaError_t e = zc_sim_sticky ? zc_sim_sticky
                                  : zc_sim_launch_reduce(stream, dst, srcs, nsrc, count, dtype,
                                                         op);
    zc_sim_unlock();
    return (int)zc_sim_err(e);
}

static cudaError_t zc_sim_launch_step(zc_gpu_sim_stream *s, const void *desc, zc_dtype dtype,
                                      zc_op op) {
    if (!zc_sim_stream_ok(s)) return cudaErrorInvalidResourceHandle;
    cudaError_t e = zc_sim_load(1, dtype, op);
    if (e != cudaSuccess) return e;
    zc_sim_op *o = zc_sim_push(s, ZC_OP_STEP);
    if (!o) return cudaErrorUnknown;
    zc_sim_st.steps++;
    if (zc_sim_dev_of(desc) < 0) zc_sim_st.steps_host_desc++;
    o->desc = desc;
    o->dtype = (uint32_t)dtype;
    o->op = (uint32_t)op;
    zc_sim_pushed();
    return cudaSuccess;
}

int zc_simrt_launch_step(void *stream, const void *desc, zc_dtype dtype, zc_op op, int sms) {
    (void)sms;
    zc_sim_lock();
    cudaError_t e = zc_sim_sticky ? zc_sim_sticky : zc_sim_launch_step(stream, desc, dtype, op);
    zc_sim_unlock();
    return (int)zc_sim_err(e);
}

/* ---- the driver ---- */

static CUresult zc_cu_error_name(CUresult r, const char **name) {
    static const char *const names[] = {"CUDA_SUCCESS", "CUDA_ERROR_INVALID_VALUE",
                                        "CUDA_ERROR_INVALID_CONTEXT", "CUDA_ERROR_NOT_SUPPORTED",
                                        "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "CUDA_ERROR_?"};
    *name = names[r == CUDA_SUCCESS ? 0 : r == CUDA_ERROR_INVALID_VALUE ? 1
                  : r == CUDA_ERROR_INVALID_CONTEXT ? 2 : r == CUDA_ERROR_NOT_SUPPORTED ? 3
                  : r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ? 4 : 5];
    return CUDA_SUCCESS;
}

/* Driver calls on a stream or memory need a current context. */
#define ZC_CU_NEED_CTX()                                                                        \
    do {                                                                                        \
        if (!zc_sim_cur) {                                                                      \
            zc_sim_unlock();                                                                    \
            return CUDA_ERROR_INVALID_CONTEXT;                                                  \
        }                                                                                       \
    } while (0)

static CUresult zc_cu_stream_value(CUstream s, CUdeviceptr at, cuuint32_t v, uint32_t kind) {
    zc_sim_lock();
    ZC_CU_NEED_CTX();
    zc_sim_op *o = zc_sim_stream_ok(s) && !zc_sim_sticky ? zc_sim_push(s, kind) : NULL;
    if (o) {
        o->flag = (volatile uint32_t *)at;
        o->value = v;
        zc_sim_pushed();
    }
    zc_sim_unlock();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult zc_cu_wait32(CUstream s, CUdeviceptr at, cuuint32_t v, unsigned int flags) {
    (void)flags;
    return zc_cu_stream_value(s, at, v, ZC_OP_WAIT);
}

static CUresult zc_cu_write32(CUstream s, CUdeviceptr at, cuuint32_t v, unsigned int flags) {
    (void)flags;
    return zc_cu_stream_value(s, at, v, ZC_OP_WRITE);
}

static CUresult zc_cu_range(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    zc_sim_lock();
    ZC_CU_NEED_CTX();
    /* An allocation of this process, or a peer's mapped through IPC (as CUDA: its whole range). */
    const zc_sim_alloc *a = zc_sim_find((const void *)p, 1, NULL);
    const zc_sim_range *m = a ? NULL : zc_sim_range_of((const void *)p, 3);
    if (a) {
        *base = (CUdeviceptr)a->base;
        *size = a->bytes;
    } else if (m) {
        *base = (CUdeviceptr)m->base;
        *size = m->bytes;
    }
    zc_sim_unlock();
    return a || m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A dma-buf: where the platform has a PCIe BAR1 mapping besides the default (c2c) the flag is
 * taken, elsewhere refused; /dev/null stands for the buffer's file. */
static CUresult zc_cu_dmabuf(void *handle, CUdeviceptr p, size_t bytes, CUmemRangeHandleType t,
                             unsigned long long flags) {
    zc_sim_lock();
    ZC_CU_NEED_CTX();
    bool pcie = flags & CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE;
    CUresult r = !zc_sim_k.dmabuf ? CUDA_ERROR_NOT_SUPPORTED
                 : t != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || (p | bytes) % ZC_HOST_PAGE ||
                           !zc_sim_find((const void *)p, bytes, NULL) ||
                           (pcie && zc_sim_k.platform != 2)
                     ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) {
        *(int *)handle = open("/dev/null", O_RDONLY | O_CLOEXEC);
        zc_sim_st.exports++;
        zc_sim_st.exports_pcie += pcie;
    }
    zc_sim_unlock();
    return r;
}

static CUresult zc_cu_ctx_state(CUdevice dev, unsigned int *flags, int *active) {
    zc_sim_lock();
    *flags = 0;
    *active = dev >= 0 && dev < (int)ZC_GPU_SIM_MAX_DEVICES && (zc_sim_made >> dev & 1u);
    zc_sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult zc_cu_retain(CUcontext *ctx, CUdevice dev) {
    if (dev < 0 || dev >= (int)ZC_GPU_SIM_MAX_DEVICES) return CUDA_ERROR_INVALID_VALUE;
    zc_sim_lock();
    zc_sim_ctxs[dev].phys = dev;
    zc_sim_ctxs[dev].refs++;
    zc_sim_made |= 1u << dev;
    *ctx = &zc_sim_ctxs[dev];
    zc_sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult zc_cu_release(CUdevice dev) {
    if (dev < 0 || dev >= (int)ZC_GPU_SIM_MAX_DEVICES) return CUDA_ERROR_INVALID_VALUE;
    zc_sim_lock();
    if (zc_sim_ctxs[dev].refs) zc_sim_ctxs[dev].refs--;
    zc_sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult zc_cu_get_current(CUcontext *ctx) {
    *ctx = zc_sim_cur;
    return CUDA_SUCCESS;
}

static CUresult zc_cu_set_current(CUcontext ctx) {
    zc_sim_cur = ctx;
    return CUDA_SUCCESS;
}

/* cuDeviceGet: the physical device behind an ordinal of this process. */
static CUresult zc_cu_device_get(CUdevice *dev, int ordinal) {
    zc_sim_lock();
    bool ok = zc_sim_ordinal_ok(ordinal);
    if (ok) *dev = zc_sim_k.visible[ordinal];
    zc_sim_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult zc_cu_capture_mode(CUstreamCaptureMode *mode) {
    int old = zc_sim_tmode;
    zc_sim_tmode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

static CUresult zc_cu_attribute(int *v, CUdevice_attribute a, CUdevice dev) {
    zc_sim_lock();
    int ord = -1;
    for (int d = 0; d < zc_sim_k.nvisible; d++)
        if (zc_sim_k.visible[d] == dev) ord = d;
    cudaError_t e = ord < 0 ? cudaErrorInvalidDevice : zc_sim_attribute(v, (enum cudaDeviceAttr)a, ord);
    zc_sim_unlock();
    return e == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static const struct { const char *sym; void *fn; } zc_sim_entries[] = {
    {"cuGetErrorName", (void *)zc_cu_error_name},
    {"cuStreamWaitValue32", (void *)zc_cu_wait32},
    {"cuStreamWriteValue32", (void *)zc_cu_write32},
    {"cuMemGetAddressRange", (void *)zc_cu_range},
    {"cuMemGetHandleForAddressRange", (void *)zc_cu_dmabuf},
    {"cuDevicePrimaryCtxGetState", (void *)zc_cu_ctx_state},
    {"cuDevicePrimaryCtxRetain", (void *)zc_cu_retain},
    {"cuDevicePrimaryCtxRelease", (void *)zc_cu_release},
    {"cuCtxGetCurrent", (void *)zc_cu_get_current},
    {"cuCtxSetCurrent", (void *)zc_cu_set_current},
    {"cuDeviceGet", (void *)zc_cu_device_get},
    {"cuThreadExchangeStreamCaptureMode", (void *)zc_cu_capture_mode},
    {"cuDeviceGetAttribute", (void *)zc_cu_attribute},
};

static cudaError_t zc_sim_entry(const char *sym, void **fn, enum cudaDriverEntryPointQueryResult *q) {
    *fn = NULL;
    *q = cudaDriverEntryPointSymbolNotFound;
    if (zc_sim_k.driver == 0) return cudaErrorInsufficientDriver;
    for (size_t i = 0; i < sizeof zc_sim_entries / sizeof zc_sim_entries[0]; i++)
        if (strcmp(zc_sim_entries[i].sym, sym) == 0) {
            *fn = zc_sim_entries[i].fn;
            *q = cudaDriverEntryPointSuccess;
        }
    return cudaSuccess;
}

cudaError_t zc_simrt_entry_point(const char *sym, void **fn, int version, unsigned long long flags,
                                 enum cudaDriverEntryPointQueryResult *q) {
    (void)version, (void)flags;
    zc_sim_lock();
    zc_sim_ready();
    cudaError_t e = zc_sim_entry(sym, fn, q);
    zc_sim_unlock();
    return zc_sim_err(e);
}

/* ---- graph capture (test-facing) ---- */

zc_status zc_gpu_sim_capture_begin(zc_gpu_sim_stream *s, int mode) {
    zc_status st = ZC_INVALID_ARG;
    zc_sim_lock();
    uint32_t gi = 0, ci = 0;
    for (; gi < ZC_SIM_GRAPHS && zc_sim_graphs[gi] && zc_sim_graphs[gi]->used; gi++) {
    }
    for (; ci < ZC_SIM_CAPTURES && zc_sim_captures[ci]; ci++) {
    }
    if (zc_sim_stream_ok(s) && s->capture == 0 && gi < ZC_SIM_GRAPHS && ci < ZC_SIM_CAPTURES) {
        void *p = zc_sim_graphs[gi];
        if (p || zc_plat_pages_alloc(sizeof(struct zc_gpu_sim_graph), &p) == ZC_PLAT_OK) {
            zc_sim_graphs[gi] = p;
            zc_sim_graphs[gi]->used = 1;
            zc_sim_graphs[gi]->len = 0;
            s->graph = zc_sim_graphs[gi];
            s->capture = 1;
            s->cap_mode = (uint32_t)mode;
            s->cap_thread = &zc_sim_thread;
            zc_sim_captures[ci] = s;
            st = ZC_OK;
        }
    }
    zc_sim_unlock();
    return st;
}

zc_status zc_gpu_sim_capture_end(zc_gpu_sim_stream *s, zc_gpu_sim_graph **out) {
    zc_sim_lock();
    zc_status st = zc_sim_stream_ok(s) && s->capture == 1 ? ZC_OK : ZC_INVALID_STATE;
    for (uint32_t i = 0; i < ZC_SIM_CAPTURES; i++)
        if (zc_sim_captures[i] == s) zc_sim_captures[i] = NULL;
    if (zc_sim_stream_ok(s)) {
        *out = st == ZC_OK ? s->graph : NULL;
        if (st != ZC_OK && s->graph) s->graph->used = 0;
        s->capture = 0;
        s->graph = NULL;
    }
    zc_sim_unlock();
    return st;
}

zc_status zc_gpu_sim_graph_launch(zc_gpu_sim_graph *g, zc_gpu_sim_stream *s) {
    zc_status st = ZC_OK;
    zc_sim_lock();
    for (uint32_t i = 0; i < g->len && st == ZC_OK; i++) {
        zc_sim_op *o = zc_sim_stream_ok(s) ? zc_sim_push(s, g->ops[i].kind) : NULL;
        if (!o) {
            st = ZC_AGAIN;
            break;
        }
        uint64_t number = o->number;
        *o = g->ops[i];
        o->stream = s->capture == 1 ? NULL : s;
        if (o->kind == ZC_OP_REDUCE || o->kind == ZC_OP_COPY || o->kind == ZC_OP_STEP)
            o->number = number;
        if (o->kind == ZC_OP_EVENT) o->number = o->ev->recorded = ++zc_sim_tickets;
    }
    zc_sim_pushed();
    zc_sim_unlock();
    return st;
}

void zc_gpu_sim_graph_free(zc_gpu_sim_graph *g) {
    zc_sim_lock();
    if (g) g->used = 0;
    zc_sim_unlock();
}

/* ---- the test's view of the thread and the runtime ---- */

int zc_gpu_sim_peek_error(void) { return (int)zc_simrt_peek_at_last_error(); }
int zc_gpu_sim_take_error(void) { return (int)zc_simrt_get_last_error(); }
const char *zc_gpu_sim_error_name(int e) { return zc_simrt_error_name((cudaError_t)e); }

void zc_gpu_sim_get_stats(zc_gpu_sim_stats *out) {
    zc_sim_lock();
    *out = zc_sim_st;
    zc_sim_unlock();
}
