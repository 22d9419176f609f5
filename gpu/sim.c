/* sim.c: the simulated gpu provider (provider/gpu.h's zc_gpu_sim; test side in sim.h). Needs no
 * CUDA and is built in every build, so the device-memory path of the core (registration and
 * its handle exchange, every device schedule, stream-ordered starts, failures) runs in CI.
 *
 * What it models: device memory that only this provider allocates (zc_gpu_sim_alloc: platform
 * shared memory, mapped by peers through ipc_open like CUDA IPC); one in-order stream per
 * communicator whose work runs later than the call (one operation per event_query unless
 * ZC_GPU_SIM_EAGER=1); events completed when the stream reaches them; an injected fault
 * (ZC_GPU_SIM_FAULT=N) that is sticky like a lost CUDA context; caller streams with flag
 * writes and waits; a device that a NIC may write (GPUDirect RDMA: its memory is host memory a
 * NIC registers by address) unless ZC_GPU_SIM_NO_RDMA=1 says it cannot. Reductions call the host kernel (provider/hostkernel.h's zc__reduce), so results
 * are the host kernels' by construction; the CUDA kernels' equality to them is a GPU run's to
 * show. What it does not model: graph capture (never capturing), concurrency between the
 * stream and the host (work runs inside the host's own calls), peer-access faults. */
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "platform.h"
#include "hostkernel.h"
#include "sim.h"

_Static_assert(ZC_GPU_MAX_SRCS == 64u, "zc_gpu_sim_op.srcs holds ZC_GPU_MAX_SRCS sources");

#define ZC_SIM_STREAM_MAGIC 0x7a6373696d737472ull /* "zcsimstr" */
#define ZC_SIM_BUDGET 1u /* operations one event_query runs */
#define ZC_SIM_NAME_BYTES 48u

enum { ZC_SIM_REDUCE = 1, ZC_SIM_COPY, ZC_SIM_EVENT, ZC_SIM_WRITE, ZC_SIM_WAIT, ZC_SIM_CALL };

typedef struct zc_sim_event {
    uint64_t recorded; /* ticket of the last record (0: never recorded) */
    uint64_t done;     /* ticket the stream reached last */
} zc_sim_event;

typedef struct zc_sim {
    uint32_t nevents, nflags;
    uint32_t eager;       /* ZC_GPU_SIM_EAGER: run at the call */
    uint32_t caps;        /* ZC_GPU_CAP_RDMA unless ZC_GPU_SIM_NO_RDMA */
    uint32_t pad_;
    uint64_t flushes;     /* rdma_flush calls (nothing to flush: host memory is coherent) */
    zc_status sticky;     /* ZC_OK, or ZC_GPU once the injected fault ran */
    uint64_t fault_at;    /* ZC_GPU_SIM_FAULT (0: none) */
    uint64_t numbered;    /* reduces and copies enqueued so far */
    uint64_t tickets;     /* event records so far */
    uint8_t *scratch;
    uint64_t scratch_bytes;
    uint32_t *flags;      /* [nflags + 1], after the events */
    zc_gpu_sim_stream stream;
    char err[ZC_ERROR_TEXT_BYTES];
    char why[ZC_ERROR_TEXT_BYTES]; /* the sticky fault's sentence */
    zc_sim_event events[];
} zc_sim;

/* ---- allocations: the process's table ---- */

typedef struct zc_sim_alloc {
    uint8_t *base;
    size_t bytes;
    zc_plat_shm_ref ref; /* what a peer process maps it by (the "IPC handle") */
} zc_sim_alloc;

static zc_sim_alloc zc_sim_allocs[ZC_GPU_SIM_MAX_ALLOCS];
static uint64_t zc_sim_serial;

void *zc_gpu_sim_alloc(size_t bytes) {
    uint32_t i;
    for (i = 0; i < ZC_GPU_SIM_MAX_ALLOCS && zc_sim_allocs[i].base; i++) {
    }
    if (bytes == 0 || i == ZC_GPU_SIM_MAX_ALLOCS) return NULL;
    zc_sim_alloc *a = &zc_sim_allocs[i];
    void *p = NULL;
    char name[ZC_SIM_NAME_BYTES];
    snprintf(name, sizeof name, "/zcsim-%llu-%llu", (unsigned long long)zc_plat_process_id(),
             (unsigned long long)++zc_sim_serial);
    if (zc_plat_shm_create(name, bytes, &p, &a->ref) != ZC_PLAT_OK) return NULL;
    a->base = p;
    a->bytes = bytes;
    return p;
}

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

void zc_gpu_sim_free(void *p) {
    zc_sim_alloc *a = p ? zc_sim_find(p, 1, NULL) : NULL;
    if (!a || a->base != p) return;
    (void)zc_plat_shm_unmap(a->base, a->bytes);
    (void)zc_plat_shm_seal(&a->ref);
    *a = (zc_sim_alloc){0};
}

void zc_gpu_sim_free_all(void) {
    for (uint32_t i = 0; i < ZC_GPU_SIM_MAX_ALLOCS; i++)
        if (zc_sim_allocs[i].base) zc_gpu_sim_free(zc_sim_allocs[i].base);
}

/* ---- streams ---- */

void zc_gpu_sim_stream_init(zc_gpu_sim_stream *s) {
    memset(s, 0, sizeof *s);
    s->magic = ZC_SIM_STREAM_MAGIC;
}

static bool zc_sim_wait_holds(const zc_gpu_sim_op *o) {
    return (int32_t)(__atomic_load_n(o->flag, __ATOMIC_ACQUIRE) - o->value) >= 0;
}

/* The injected fault: the operation does not run and the provider is lost. */
static void zc_sim_fault(zc_sim *st, const zc_gpu_sim_op *o) {
    snprintf(st->why, sizeof st->why, "simulated fault injected into operation %llu (a %s; "
             "ZC_GPU_SIM_FAULT): the simulated device is lost (a sticky error)",
             (unsigned long long)o->number, o->kind == ZC_SIM_REDUCE ? "reduce" : "copy");
    st->sticky = ZC_GPU;
}

/* Runs o; false when it is a flag wait that does not hold (it stays queued). */
static bool zc_sim_exec(zc_sim *st, const zc_gpu_sim_op *o) {
    if ((o->kind == ZC_SIM_REDUCE || o->kind == ZC_SIM_COPY) && st && st->fault_at == o->number) {
        zc_sim_fault(st, o);
        return true;
    }
    switch (o->kind) {
    case ZC_SIM_REDUCE:
        zc__reduce(o->dst, o->srcs, o->nsrc, (size_t)o->count, (zc_dtype)o->dtype, (zc_op)o->op);
        break;
    case ZC_SIM_COPY: memmove(o->dst, o->srcs[0], (size_t)o->count); break;
    case ZC_SIM_EVENT: st->events[o->ev].done = o->number; break;
    case ZC_SIM_WRITE: __atomic_store_n(o->flag, o->value, __ATOMIC_RELEASE); break;
    case ZC_SIM_WAIT: return zc_sim_wait_holds(o);
    default: o->fn(o->arg); break;
    }
    return true;
}

/* Runs at most budget operations of s; false when its head is a wait that does not hold. */
static bool zc_sim_run(zc_sim *st, zc_gpu_sim_stream *s, uint32_t budget) {
    for (uint32_t i = 0; i < budget && s->len; i++) {
        if (st && st->sticky != ZC_OK) return true; /* a lost device runs nothing more */
        if (!zc_sim_exec(st, &s->ops[s->head])) return false;
        s->head = (s->head + 1u) % ZC_GPU_SIM_QUEUE;
        s->len--;
    }
    return true;
}

/* The next free operation of s (its oldest run first when full); NULL when s is full and
 * blocked. */
static zc_gpu_sim_op *zc_sim_push(zc_sim *st, zc_gpu_sim_stream *s) {
    if (s->len == ZC_GPU_SIM_QUEUE && (!zc_sim_run(st, s, 1u) || s->len == ZC_GPU_SIM_QUEUE))
        return NULL;
    zc_gpu_sim_op *o = &s->ops[(s->head + s->len) % ZC_GPU_SIM_QUEUE];
    memset(o, 0, sizeof *o);
    s->len++;
    return o;
}

zc_status zc_gpu_sim_stream_call(zc_gpu_sim_stream *s, void (*fn)(void *arg), void *arg) {
    zc_gpu_sim_op *o = zc_sim_push(NULL, s);
    if (!o) return ZC_AGAIN;
    o->kind = ZC_SIM_CALL;
    o->fn = fn;
    o->arg = arg;
    return ZC_OK;
}

zc_status zc_gpu_sim_stream_query(zc_gpu_sim_stream *s) {
    return zc_sim_run(NULL, s, ZC_GPU_SIM_QUEUE + 1u) && s->len == 0 ? ZC_OK : ZC_IN_PROGRESS;
}

/* ---- init / fini ---- */

static size_t zc_sim_state_bytes(const zc_gpu_geom *g) {
    return sizeof(zc_sim) + (size_t)g->events * sizeof(zc_sim_event) +
           ((size_t)g->flags + 1u) * sizeof(uint32_t);
}

static uint64_t zc_sim_env_u64(const char *name) {
    const char *v = zc_plat_getenv(name);
    uint64_t n = 0;
    for (; v && *v >= '0' && *v <= '9'; v++) n = n * 10u + (uint64_t)(*v - '0');
    return n;
}

static zc_status zc_sim_init(void *state, const zc_gpu_geom *g) {
    zc_sim *st = state;
    memset(st, 0, zc_sim_state_bytes(g));
    st->nevents = g->events;
    st->nflags = g->flags;
    st->flags = (uint32_t *)(void *)(st->events + g->events);
    st->eager = zc_sim_env_u64("ZC_GPU_SIM_EAGER") != 0;
    st->fault_at = zc_sim_env_u64("ZC_GPU_SIM_FAULT");
    st->caps = zc_sim_env_u64("ZC_GPU_SIM_NO_RDMA") ? 0u : ZC_GPU_CAP_RDMA;
    zc_gpu_sim_stream_init(&st->stream);
    if (g->scratch_bytes) {
        void *p = NULL;
        zc_plat_rc rc = zc_plat_pages_alloc((size_t)g->scratch_bytes, &p);
        if (rc != ZC_PLAT_OK) {
            snprintf(st->err, sizeof st->err, "the simulated device cannot map %llu bytes of "
                     "scratch (%s)", (unsigned long long)g->scratch_bytes, zc_plat_rc_name(rc));
            return ZC_GPU;
        }
        st->scratch = p;
        st->scratch_bytes = g->scratch_bytes;
    }
    return ZC_OK;
}

static void zc_sim_fini(void *state) {
    zc_sim *st = state;
    while (st->stream.len && st->sticky == ZC_OK) (void)zc_sim_run(st, &st->stream, 1u);
    if (st->scratch) (void)zc_plat_pages_free(st->scratch, (size_t)st->scratch_bytes);
    st->scratch = NULL;
}

static const char *zc_sim_error_text(const void *state) { return ((const zc_sim *)state)->err; }

/* Every entry after the fault fails with its sentence. */
static zc_status zc_sim_usable(zc_sim *st) {
    if (st->sticky == ZC_OK) return ZC_OK;
    snprintf(st->err, sizeof st->err, "%s", st->why);
    return st->sticky;
}

/* ---- memory ---- */

static zc_status zc_sim_mem_query(void *state, const void *addr, size_t bytes, uint32_t *kind) {
    bool partial = false;
    (void)state;
    *kind = zc_sim_find(addr, bytes, &partial) == NULL ? ZC_GPU_MEM_HOST
            : partial                                  ? ZC_GPU_MEM_PARTIAL
                                                       : ZC_GPU_MEM_DEVICE;
    return ZC_OK;
}

static zc_status zc_sim_ipc_export(void *state, void *addr, size_t bytes, zc_gpu_ipc *out) {
    zc_sim *st = state;
    zc_status s = zc_sim_usable(st);
    if (s != ZC_OK) return s;
    const zc_sim_alloc *a = zc_sim_find(addr, bytes, NULL);
    if (!a) {
        snprintf(st->err, sizeof st->err, "ipc_export: %p is not memory of zc_gpu_sim_alloc",
                 addr);
        return ZC_GPU;
    }
    uint64_t size = a->bytes;
    _Static_assert(sizeof a->ref + sizeof size <= ZC_GPU_IPC_HANDLE_BYTES, "handle");
    memcpy(out->handle, &a->ref, sizeof a->ref);
    memcpy(out->handle + sizeof a->ref, &size, sizeof size);
    out->offset = (uint64_t)((uint8_t *)addr - a->base);
    out->device = 0;
    return ZC_OK;
}

static uint64_t zc_sim_handle_size(const zc_gpu_ipc *in) {
    uint64_t size;
    memcpy(&size, in->handle + sizeof(zc_plat_shm_ref), sizeof size);
    return size;
}

static zc_status zc_sim_ipc_open(void *state, const zc_gpu_ipc *in, void **mapped) {
    zc_sim *st = state;
    zc_plat_shm_ref ref;
    void *base = NULL;
    zc_status s = zc_sim_usable(st);
    if (s != ZC_OK) return s;
    uint64_t size = zc_sim_handle_size(in);
    if (in->offset > size || in->bytes > size - in->offset) {
        snprintf(st->err, sizeof st->err, "ipc_open: the record of process %llu names bytes "
                 "[%llu, %llu + %llu) of a simulated allocation of %llu bytes",
                 (unsigned long long)in->pid, (unsigned long long)in->offset,
                 (unsigned long long)in->offset, (unsigned long long)in->bytes,
                 (unsigned long long)size);
        return ZC_GPU;
    }
    memcpy(&ref, in->handle, sizeof ref);
    zc_plat_rc rc = zc_plat_shm_open(&ref, (size_t)size, &base);
    if (rc != ZC_PLAT_OK) {
        snprintf(st->err, sizeof st->err, "ipc_open of a simulated allocation of process %llu "
                 "failed: %s", (unsigned long long)in->pid, zc_plat_rc_name(rc));
        return ZC_GPU;
    }
    *mapped = (uint8_t *)base + in->offset;
    return ZC_OK;
}

static void zc_sim_ipc_close(void *state, const zc_gpu_ipc *in, void *mapped) {
    (void)state;
    (void)zc_plat_shm_unmap((uint8_t *)mapped - in->offset, (size_t)zc_sim_handle_size(in));
}

static zc_status zc_sim_dmabuf_export(void *state, void *addr, size_t bytes, int32_t *fd,
                                      uint64_t *offset) {
    zc_sim *st = state;
    (void)addr, (void)bytes, (void)fd, (void)offset;
    snprintf(st->err, sizeof st->err, "the simulated device has no dma-buf export");
    return ZC_UNSUPPORTED;
}

static uint32_t zc_sim_caps(const void *state) { return ((const zc_sim *)state)->caps; }

/* The simulated device is host memory, which the NIC's writes reach coherently: nothing to
 * flush but the call, counted. */
static zc_status zc_sim_rdma_flush(void *state) {
    zc_sim *st = state;
    st->flushes++;
    return zc_sim_usable(st);
}

/* ---- the data path ---- */

/* Enqueues o (filled by the caller after this returns it) on the provider's stream. */
static zc_gpu_sim_op *zc_sim_enqueue(zc_sim *st, uint32_t kind) {
    zc_gpu_sim_op *o = zc_sim_push(st, &st->stream); /* never blocked: no waits here */
    o->kind = kind;
    if (kind == ZC_SIM_REDUCE || kind == ZC_SIM_COPY) o->number = ++st->numbered;
    return o;
}

/* After an enqueue: eager runs everything now. */
static zc_status zc_sim_enqueued(zc_sim *st) {
    while (st->eager && st->stream.len && st->sticky == ZC_OK)
        (void)zc_sim_run(st, &st->stream, 1u);
    return ZC_OK;
}

static zc_status zc_sim_reduce(void *state, void *dst, const void *const *srcs, uint32_t nsrc,
                               size_t count, zc_dtype dtype, zc_op op) {
    zc_sim *st = state;
    zc_status s = zc_sim_usable(st);
    if (s != ZC_OK || count == 0) return s;
    if (nsrc == 0 || nsrc > ZC_GPU_MAX_SRCS) {
        snprintf(st->err, sizeof st->err, "reduction over %u inputs (1..%u supported)", nsrc,
                 ZC_GPU_MAX_SRCS);
        return ZC_INTERNAL;
    }
    zc_gpu_sim_op *o = zc_sim_enqueue(st, ZC_SIM_REDUCE);
    o->dst = dst;
    o->nsrc = nsrc;
    o->count = count;
    o->dtype = (uint32_t)dtype;
    o->op = (uint32_t)op;
    memcpy(o->srcs, srcs, nsrc * sizeof srcs[0]);
    return zc_sim_enqueued(st);
}

static zc_status zc_sim_copy(void *state, void *dst, const void *src, size_t bytes) {
    zc_sim *st = state;
    zc_status s = zc_sim_usable(st);
    if (s != ZC_OK || bytes == 0) return s;
    zc_gpu_sim_op *o = zc_sim_enqueue(st, ZC_SIM_COPY);
    o->dst = dst;
    o->srcs[0] = src;
    o->count = bytes;
    return zc_sim_enqueued(st);
}

static zc_status zc_sim_event_check(zc_sim *st, uint32_t ev) {
    zc_status s = zc_sim_usable(st);
    if (s != ZC_OK || ev < st->nevents) return s;
    snprintf(st->err, sizeof st->err, "event %u of %u", ev, st->nevents);
    return ZC_INTERNAL;
}

static zc_status zc_sim_event_record(void *state, uint32_t ev) {
    zc_sim *st = state;
    zc_status s = zc_sim_event_check(st, ev);
    if (s != ZC_OK) return s;
    zc_gpu_sim_op *o = zc_sim_enqueue(st, ZC_SIM_EVENT);
    o->ev = ev;
    o->number = st->events[ev].recorded = ++st->tickets;
    return zc_sim_enqueued(st);
}

/* Runs a bounded amount of the stream, then says whether it reached the event. */
static zc_status zc_sim_event_query(void *state, uint32_t ev) {
    zc_sim *st = state;
    zc_status s = zc_sim_event_check(st, ev);
    if (s != ZC_OK) return s;
    (void)zc_sim_run(st, &st->stream, ZC_SIM_BUDGET);
    s = zc_sim_usable(st);
    if (s != ZC_OK) return s;
    return st->events[ev].done == st->events[ev].recorded ? ZC_OK : ZC_IN_PROGRESS;
}

static void *zc_sim_scratch(void *state) { return ((zc_sim *)state)->scratch; }
static uint32_t *zc_sim_flags(void *state) { return ((zc_sim *)state)->flags; }

/* The caller's stream: one of zc_gpu_sim_stream_init's, never a CUDA stream. */
static zc_status zc_sim_caller_stream(zc_sim *st, void *stream, zc_gpu_sim_stream **out) {
    zc_status s = zc_sim_usable(st);
    if (s != ZC_OK) return s;
    *out = stream;
    if (stream && (*out)->magic == ZC_SIM_STREAM_MAGIC) return ZC_OK;
    snprintf(st->err, sizeof st->err, "cuda_stream is not a zc_gpu_sim_stream (the simulated "
             "device takes streams made by zc_gpu_sim_stream_init; it has no default stream)");
    return ZC_INVALID_ARG;
}

static zc_status zc_sim_stream_capturing(void *state, void *stream, bool *capturing) {
    zc_gpu_sim_stream *s;
    *capturing = false; /* the simulation has no graphs */
    return zc_sim_caller_stream(state, stream, &s);
}

static zc_status zc_sim_stream_flag(zc_sim *st, void *stream, uint32_t kind, uint32_t flag,
                                    uint32_t value) {
    zc_gpu_sim_stream *s;
    zc_status r = zc_sim_caller_stream(st, stream, &s);
    if (r != ZC_OK) return r;
    if (flag >= st->nflags) {
        snprintf(st->err, sizeof st->err, "flag word %u of %u", flag, st->nflags);
        return ZC_INTERNAL;
    }
    zc_gpu_sim_op *o = zc_sim_push(NULL, s);
    if (!o) {
        snprintf(st->err, sizeof st->err, "the stream's %u queued operations wait on a flag "
                 "(query it until they ran)", ZC_GPU_SIM_QUEUE);
        return ZC_AGAIN;
    }
    o->kind = kind;
    o->flag = &st->flags[flag];
    o->value = value;
    return ZC_OK;
}

static zc_status zc_sim_stream_write_flag(void *state, void *stream, uint32_t flag,
                                          uint32_t value) {
    return zc_sim_stream_flag(state, stream, ZC_SIM_WRITE, flag, value);
}

static zc_status zc_sim_stream_wait_flag(void *state, void *stream, uint32_t flag,
                                         uint32_t value) {
    return zc_sim_stream_flag(state, stream, ZC_SIM_WAIT, flag, value);
}

const zc_gpu_ops zc_gpu_sim = {
    .struct_bytes = sizeof(zc_gpu_ops),
    .version = ZC_GPU_VERSION,
    .name = "sim",
    .state_bytes = zc_sim_state_bytes,
    .init = zc_sim_init,
    .fini = zc_sim_fini,
    .error_text = zc_sim_error_text,
    .mem_query = zc_sim_mem_query,
    .ipc_export = zc_sim_ipc_export,
    .ipc_open = zc_sim_ipc_open,
    .ipc_close = zc_sim_ipc_close,
    .dmabuf_export = zc_sim_dmabuf_export,
    .caps = zc_sim_caps,
    .rdma_flush = zc_sim_rdma_flush,
    .reduce = zc_sim_reduce,
    .copy = zc_sim_copy,
    .event_record = zc_sim_event_record,
    .event_query = zc_sim_event_query,
    .scratch = zc_sim_scratch,
    .flags = zc_sim_flags,
    .stream_capturing = zc_sim_stream_capturing,
    .stream_write_flag = zc_sim_stream_write_flag,
    .stream_wait_flag = zc_sim_stream_wait_flag,
};
