/* coll.c: the public collective calls. Each validates its arguments once (a sentence naming
 * the argument on failure; nothing written; the communicator stays usable), picks the
 * algorithm from the configured thresholds (never from timing, so every rank picks the same;
 * a device algorithm when the buffers are registered ZC_MEM_CUDA) and either issues a request
 * or stores the schedule in a persistent plan. */
#include "device.h"

/* The call's name in an error sentence: looked up only there, off the hot path. */
#define ZC_NAME zc__kind_name(a->kind)

typedef struct zc_call {
    zc__kind kind;
    const void *send;
    void *recv;
    size_t count;
    zc_dtype dtype;
    zc_op op;
    uint32_t root;
    uint32_t tag;        /* send/recv */
    bool any_ok;         /* a receive that may name ZC_ANY_SOURCE (zc_recv, zc_recv_tagged) */
} zc_call;

static bool zc_rooted(zc__kind k) {
    return k == ZC_K_REDUCE || k == ZC_K_BROADCAST || k == ZC_K_GATHER || k == ZC_K_SCATTER ||
           k == ZC_K_SEND || k == ZC_K_RECV;
}

static bool zc_reduces(zc__kind k) {
    return k == ZC_K_ALLREDUCE || k == ZC_K_REDUCE || k == ZC_K_REDUCE_SCATTER;
}

/* The in-place position of send inside recv (or recv inside send) that docs/api.md allows. */
static bool zc_in_place_ok(const zc_comm *c, const zc_call *a, uint64_t es) {
    const uint8_t *s = a->send, *r = a->recv;
    uint64_t blk = a->count * es;
    switch (a->kind) {
    case ZC_K_ALLREDUCE:
    case ZC_K_REDUCE:
    case ZC_K_BROADCAST: return s == r;
    case ZC_K_REDUCE_SCATTER: return r == s + c->rank * blk;
    case ZC_K_ALLGATHER:
    case ZC_K_GATHER: return s == r + c->rank * blk;
    case ZC_K_SCATTER: return r == s + a->root * blk;
    default: return false;
    }
}

static const char *zc_in_place_rule(zc__kind k) {
    switch (k) {
    case ZC_K_REDUCE_SCATTER: return "recv == send + rank*recvcount*size";
    case ZC_K_ALLGATHER:
    case ZC_K_GATHER: return "send == recv + rank*sendcount*size";
    case ZC_K_SCATTER: return "recv == send + root*recvcount*size";
    case ZC_K_ALLTOALL: return "none: alltoall has no in-place form";
    default: return "send == recv";
    }
}

static zc_status zc_check_buffers(zc_comm *c, const zc_call *a, uint64_t es) {
    uint64_t sblk, rblk;
    zc__extents(c, a->kind, a->root, &sblk, &rblk);
    /* count * blocks * es must fit in size_t (checked without a division: this is the hot
     * path of every small call). */
    uint64_t sb, rb;
    if (__builtin_mul_overflow((uint64_t)a->count, sblk * es, &sb) || sb > SIZE_MAX)
        return zc__error(c, ZC_INVALID_ARG, "%s: count %zu overflows the send buffer's size in "
                         "bytes", ZC_NAME, a->count);
    if (__builtin_mul_overflow((uint64_t)a->count, rblk * es, &rb) || rb > SIZE_MAX)
        return zc__error(c, ZC_INVALID_ARG, "%s: count %zu overflows the recv buffer's size in "
                         "bytes", ZC_NAME, a->count);
    uintptr_t s = (uintptr_t)a->send, r = (uintptr_t)a->recv;
    if (sb && !a->send) return zc__error(c, ZC_INVALID_ARG, "%s: send is NULL", ZC_NAME);
    if (rb && !a->recv) return zc__error(c, ZC_INVALID_ARG, "%s: recv is NULL", ZC_NAME);
    if ((sb && s + sb < s) || (rb && r + rb < r))
        return zc__error(c, ZC_INVALID_ARG, "%s: count %zu makes a buffer wrap around the "
                         "address space", ZC_NAME, a->count);
    if (sb && rb && s < r + rb && r < s + sb && !zc_in_place_ok(c, a, es))
        return zc__error(c, ZC_INVALID_ARG, "%s: send and recv overlap but not in the "
                         "in-place layout (%s)", ZC_NAME, zc_in_place_rule(a->kind));
    return ZC_OK;
}


/* ---- device routing (the device schedules themselves: sched_gpu.c) ---- */

static zc_status zc_gpu_unregistered(zc_comm *c, const char *name, const char *which,
                                     const void *p, size_t bytes) {
    uint32_t kind = ZC_GPU_MEM_HOST;
    if (!c->gpu || !p || !bytes) return ZC_OK;
    if (c->gpu->ops->mem_query(c->gpu->state, p, bytes, &kind) != ZC_OK ||
        kind == ZC_GPU_MEM_HOST || kind == ZC_GPU_MEM_MANAGED)
        return ZC_OK; /* host code can read it (a failing query is not this call's business) */
    return zc__error(c, ZC_INVALID_ARG, "%s: %s is CUDA device memory that is not registered: "
                     "register it with zc_mem_register(..., ZC_MEM_CUDA, ...) first", name,
                     which);
}

/* Picks the device algorithm when the buffers are registered ZC_MEM_CUDA; refuses unregistered
 * device memory, mixed host/device buffers and what the wire cannot run on device memory. */
static zc_status zc_gpu_route(zc_comm *c, zc__sched *s) {
    uint64_t sblk, rblk;
    /* The hot path of host calls: one load when nothing is registered ZC_MEM_CUDA. */
    if (!c->gpu || !c->gpu->used || s->kind == ZC_K_BARRIER || s->count == 0) return ZC_OK;
    const char *name = zc__kind_name(s->kind);
    zc__extents(c, s->kind, s->root, &sblk, &rblk);
    size_t sb = (size_t)(sblk * s->count * s->esize), rb = (size_t)(rblk * s->count * s->esize);
    bool sp = false, rp = false;
    bool ds = sb && zc__mem_find(c, s->send, sb, ZC_MEM_CUDA, &sp) >= 0;
    bool dr = rb && zc__mem_find(c, s->recv, rb, ZC_MEM_CUDA, &rp) >= 0;
    if (sp || rp)
        return zc__error(c, ZC_INVALID_ARG, "%s: %s runs past the end of its ZC_MEM_CUDA "
                         "registration", name, sp ? "send" : "recv");
    if (!ds && !dr) {
        zc_status st = zc_gpu_unregistered(c, name, "send", s->send, sb);
        return st != ZC_OK ? st : zc_gpu_unregistered(c, name, "recv", s->recv, rb);
    }
    if ((sb && !ds) || (rb && !dr))
        return zc__error(c, ZC_INVALID_ARG, "%s: %s is registered ZC_MEM_CUDA memory but %s is "
                         "not: both buffers of a device collective must be", name,
                         ds ? "send" : "recv", ds ? "recv" : "send");
    if (zc__gpu_path_now(c) == ZC_GPU_PATH_DIRECT) { /* the NIC into device memory */
        zc__put_route(c, s);
        return ZC_OK;
    }
    if (zc__gpu_path_now(c) == ZC_GPU_PATH_STAGED || s->kind == ZC_K_SEND || s->kind == ZC_K_RECV)
        return zc__stage_route(c, s); /* through host staging (sched_stage.c) */
    if (c->wire->mem_register)
        return zc__error(c, ZC_UNSUPPORTED, "%s: cfg->gpu_path is ipc, which needs the shm wire "
                         "(peers' device buffers mapped), and this communicator runs over %s: "
                         "use gpu_path auto or staged", name, c->wire->name);
    if (s->kind == ZC_K_ALLREDUCE && s->send == s->recv && c->cfg.gpu_scratch_bytes == 0)
        return zc__error(c, ZC_LIMIT, "%s: in-place device all_reduce needs scratch and "
                         "cfg->gpu_scratch_bytes is 0", name);
    if (s->kind != ZC_K_ALLREDUCE)
        s->alg = ZC_ALG_GPU_DIRECT;
    else if (s->count * s->esize <= c->cfg.gpu_oneshot_max_bytes || s->count < c->nranks)
        s->alg = ZC_ALG_GPU_ONESHOT;
    else
        s->alg = ZC_ALG_GPU_RSAG;
    return ZC_OK;
}

/* The rest of zc_build for a receive from any source: the slot path (the symmetric region's
 * single copy is chosen when it is matched); registered device memory is refused. */
static zc_status zc_any_source_host(zc_comm *c, zc__sched *s) {
    bool past = false;
    if (c->gpu && c->gpu->used && s->count &&
        (zc__mem_find(c, s->recv, s->count * s->esize, ZC_MEM_CUDA, &past) >= 0 || past))
        return zc__error(c, ZC_UNSUPPORTED, "zc_recv: a receive from any source takes host "
                         "memory, and recv is registered ZC_MEM_CUDA memory");
    return ZC_OK;
}

static zc_status zc_build(zc_comm *c, const zc_call *a, zc__sched *s) {
    if (!c || c->magic != ZC_COMM_MAGIC) return ZC_INVALID_ARG;
    if (c->failed) return (zc_status)c->failed;
    size_t es = a->kind == ZC_K_BARRIER ? 1 : zc_dtype_bytes(a->dtype);
    if (!es)
        return zc__error(c, ZC_INVALID_ARG, "%s: dtype %d is not a zc_dtype", ZC_NAME,
                         (int)a->dtype);
    if (zc_reduces(a->kind) && (unsigned)a->op >= ZC_OP_COUNT_)
        return zc__error(c, ZC_INVALID_ARG, "%s: op %d is not a zc_op", ZC_NAME, (int)a->op);
    bool any = a->kind == ZC_K_RECV && a->root == ZC_ANY_SOURCE;
    if (any && (!a->any_ok || c->nranks < 2))
        return zc__error(c, a->any_ok ? ZC_INVALID_ARG : ZC_UNSUPPORTED, "%s: peer "
                         "ZC_ANY_SOURCE %s", ZC_NAME, a->any_ok ? "in a communicator of one rank, "
                         "which has no peer to receive from" : "is for zc_recv and zc_recv_tagged "
                         "(persistent and stream-ordered receives name their peer)");
    if (zc_rooted(a->kind) && a->root >= c->nranks && !any)
        return zc__error(c, ZC_INVALID_ARG, "%s: %s %u is not below the communicator's %u ranks",
                         ZC_NAME, a->kind == ZC_K_SEND || a->kind == ZC_K_RECV ? "peer" : "root",
                         a->root, c->nranks);
    if ((a->kind == ZC_K_SEND || a->kind == ZC_K_RECV) && a->root == c->rank)
        return zc__error(c, ZC_INVALID_ARG, "%s: peer %u is this rank itself", ZC_NAME, a->root);
    zc_status st = zc_check_buffers(c, a, es);
    if (st != ZC_OK) return st;
    *s = (zc__sched){0};
    s->kind = (uint8_t)a->kind;
    s->dtype = (uint8_t)(a->kind == ZC_K_BARRIER ? 0 : a->dtype);
    s->op = (uint8_t)(zc_reduces(a->kind) ? a->op : 0);
    s->root = zc_rooted(a->kind) ? a->root : 0;
    s->tag = a->tag;
    s->esize = (uint32_t)es;
    ZC_ASSERT((es & (es - 1)) == 0); /* every dtype is 1, 2, 4 or 8 bytes */
    s->chunk = c->cfg.slot_bytes >> __builtin_ctzll(es);
    s->count = a->kind == ZC_K_BARRIER ? 0 : a->count;
    s->send = a->send;
    s->recv = a->recv;
    zc__alg alg = zc__choose(c, a->kind, a->count, (uint64_t)a->count * es);
    if (alg == ZC_ALG_COUNT_)
        return zc__error(c, ZC_UNSUPPORTED, "%s: overlay mode (%u ranks, overlay_min_ranks "
                         "%u) connects this rank to %u of them and has no algorithm for this "
                         "call over those connections", zc__kind_name(a->kind), c->nranks,
                         c->cfg.overlay_min_ranks, c->nconn - 1u);
    if (alg == ZC_ALG_P2P && !any && zc__ci(c, a->root) == ZC_NO_CONN) {
        if (!c->relay)
            return zc__error(c, ZC_UNSUPPORTED, "%s: overlay mode (%u ranks, overlay_min_ranks "
                             "%u) does not connect this rank to rank %u, and cfg->overlay_relay "
                             "is 0: send/recv reach only connected ranks (the host's and those "
                             "at distance 2^k) unless overlay_relay is 1",
                             zc__kind_name(a->kind), c->nranks, c->cfg.overlay_min_ranks,
                             a->root);
        alg = ZC_ALG_RELAY; /* relayed by the ranks between (relay.c) */
    }
    s->alg = (uint8_t)alg;
    if (any) /* matched later (progress.c), then a receive from that peer, on host memory */
        return zc_any_source_host(c, s);
    if (c->cfg.sym_bytes && s->alg != ZC_ALG_LOCAL && zc__sym_fits(c, s))
        s->alg = ZC_ALG_SYM;
    if (c->gpu && (st = zc_gpu_route(c, s)) != ZC_OK) /* ZC_MEM_CUDA buffers: a device alg */
        return st;
    return ZC_OK;
}

zc_status zc__build(zc_comm *c, uint32_t kind, const void *send, void *recv, size_t count,
                    zc_dtype dtype, zc_op op, uint32_t root, zc__sched *s) {
    return zc_build(c, &(const zc_call){(zc__kind)kind, send, recv, count, dtype, op, root, 0,
                                        false}, s);
}

/* The arguments of a, packed for the memo: every field zc_build reads. */
static void zc_call_key(const zc_call *a, uint64_t key[ZC_CALL_KEY_WORDS]) {
    key[0] = (uint64_t)(uint32_t)a->kind | (uint64_t)(uint32_t)a->dtype << 32;
    key[1] = (uint64_t)(uint32_t)a->op | (uint64_t)a->root << 32;
    key[2] = (uint64_t)a->tag | (uint64_t)a->any_ok << 32;
    key[3] = (uint64_t)(uintptr_t)a->send;
    key[4] = (uint64_t)(uintptr_t)a->recv;
    key[5] = a->count;
}

/* The memo entry of the arguments key: a hash of every word, its top bits. */
static uint32_t zc_call_entry(const uint64_t key[ZC_CALL_KEY_WORDS]) {
    uint64_t h = key[0] ^ key[1] ^ key[2] ^ key[3] ^ (key[4] << 17 | key[4] >> 47) ^
                 (key[5] << 31 | key[5] >> 33);
    _Static_assert((ZC_CALL_MEMOS & (ZC_CALL_MEMOS - 1u)) == 0, "a power of two");
    return (uint32_t)((h * 0x9e3779b97f4a7c15ull) >> 40) & (ZC_CALL_MEMOS - 1u);
}

/* zc_build through the communicator's memo: a call with the arguments of a call that zc_build
 * accepted earlier (and whose memo entry no other call took since) takes its schedule again.
 * zc_build's answer depends on the arguments and on what does not change after init (the
 * configuration, the ranks and connections), except for what the memo stays out of: device
 * memory (registrations decide a device algorithm: no memo once a ZC_MEM_CUDA registration was
 * made), and the symmetric region's allocations and every registration, which forget it
 * (zc__calls_forget). A receive from any source is not kept (matched later). */
static zc_status zc_build_memo(zc_comm *c, const zc_call *a, zc__sched *s) {
    if (!c || c->magic != ZC_COMM_MAGIC) return ZC_INVALID_ARG;
    if ((c->gpu && c->gpu->used) || (a->kind == ZC_K_RECV && a->root == ZC_ANY_SOURCE))
        return zc_build(c, a, s);
    if (c->failed) return (zc_status)c->failed;
    uint64_t key[ZC_CALL_KEY_WORDS];
    zc_call_key(a, key);
    zc__call_memo *m = &c->calls[zc_call_entry(key)];
    if (m->ok && ((key[0] ^ m->key[0]) | (key[1] ^ m->key[1]) | (key[2] ^ m->key[2]) |
                  (key[3] ^ m->key[3]) | (key[4] ^ m->key[4]) | (key[5] ^ m->key[5])) == 0) {
        *s = m->s;
        return ZC_OK;
    }
    zc_status st = zc_build(c, a, s);
    m->ok = st == ZC_OK;
    if (st != ZC_OK) return st;
    for (uint32_t i = 0; i < ZC_CALL_KEY_WORDS; i++) m->key[i] = key[i];
    m->s = *s;
    return ZC_OK;
}

static zc_status zc_call_issue_locked(zc_comm *c, const zc_call *a, zc_req *req) {
    zc__sched s;
    zc_status st = zc_build_memo(c, a, &s);
    if (st != ZC_OK) return st;
    if (!req) return zc__error(c, ZC_INVALID_ARG, "%s: req is NULL", zc__kind_name(a->kind));
    return zc__issue(c, &s, -1, 0, req);
}

static zc_status zc_call_issue(zc_comm *c, const zc_call *a, zc_req *req) {
    ZC_LOCKED(c, zc_call_issue_locked(c, a, req));
}

/* ---- persistent plans ---- */
#define ZC_PLAN_HANDLE ((uint64_t)ZC_PLAN_MAGIC << 48)

static zc_status zc_call_plan_locked(zc_comm *c, const zc_call *a, zc_plan *plan) {
    zc__sched s;
    zc_status st = zc_build(c, a, &s);
    if (st != ZC_OK) return st;
    if (!plan) return zc__error(c, ZC_INVALID_ARG, "%s_init: plan is NULL",
                                zc__kind_name(a->kind));
    for (uint32_t i = 0; i < c->cfg.max_plans; i++) {
        zc__plan *p = &c->plans[i];
        if (p->used) continue;
        p->used = 1;
        p->running = -1;
        p->s = s;
        plan->opaque_[0] = ZC_PLAN_HANDLE | i;
        plan->opaque_[1] = p->gen;
        plan->opaque_[2] = (uint64_t)(uintptr_t)c;
        plan->opaque_[3] = 0;
        return ZC_OK;
    }
    return zc__error(c, ZC_LIMIT, "%s_init: all %u plan slots are taken (cfg->max_plans)",
                     zc__kind_name(a->kind), c->cfg.max_plans);
}

static zc_status zc_call_plan(zc_comm *c, const zc_call *a, zc_plan *plan) {
    ZC_LOCKED(c, zc_call_plan_locked(c, a, plan));
}

static zc__plan *zc_plan_lookup(zc_comm *c, const zc_plan *plan, uint32_t *index) {
    if (!plan || (plan->opaque_[0] & ~(uint64_t)0xffffffffu) != ZC_PLAN_HANDLE ||
        plan->opaque_[2] != (uint64_t)(uintptr_t)c)
        return 0;
    *index = (uint32_t)(plan->opaque_[0] & 0xffffffffu);
    if (*index >= c->cfg.max_plans) return 0;
    zc__plan *p = &c->plans[*index];
    return p->used && p->gen == plan->opaque_[1] ? p : 0;
}

static zc_status zc_start_locked(zc_comm *comm, zc_plan *plan, zc_req *req) {
    uint32_t i;
    zc__plan *p = zc_plan_lookup(comm, plan, &i);
    if (!p || !req)
        return zc__error(comm, ZC_INVALID_ARG, "zc_start: %s", !p ? "plan is not a live plan "
                         "of this communicator" : "req is NULL");
    if (p->running >= 0)
        return zc__error(comm, ZC_INVALID_STATE, "zc_start: the plan's previous start has not "
                         "finished (test or wait for it first)");
    zc_status st = zc__issue(comm, &p->s, (int32_t)i, 0, req);
    if (st == ZC_OK) p->running = (int32_t)(req->opaque_[0] & 0xffffffffu);
    return st;
}

zc_status zc_start(zc_comm *comm, zc_plan *plan, zc_req *req) {
    ZC_LOCKED(comm, zc_start_locked(comm, plan, req));
}

static zc_status zc_plan_release_locked(zc_comm *comm, zc_plan *plan) {
    uint32_t i;
    zc__plan *p = zc_plan_lookup(comm, plan, &i);
    if (!p)
        return zc__error(comm, ZC_INVALID_ARG, "zc_plan_release: plan is not a live plan of "
                         "this communicator");
    if (p->running >= 0)
        return zc__error(comm, ZC_INVALID_STATE, "zc_plan_release: the plan is running");
    p->used = 0;
    p->gen++;
    plan->opaque_[0] = 0;
    return ZC_OK;
}

zc_status zc_plan_release(zc_comm *comm, zc_plan *plan) {
    ZC_LOCKED(comm, zc_plan_release_locked(comm, plan));
}

/* ---- the public calls: one line each over zc_call ---- */
#define ZC_CALL(kind, send, recv, count, dtype, op, root)                                     \
    (&(const zc_call){kind, send, recv, count, dtype, op, root, 0, false})

/* A send or receive with its tag; a receive may name ZC_ANY_SOURCE, and source gets its peer:
 * a named one now, the matched one when progress matches it (progress.c). */
static zc_status zc_p2p_issue_locked(zc_comm *c, const zc_call *a, uint32_t *source,
                                     zc_req *req) {
    zc__sched s;
    zc_status st = zc_build(c, a, &s);
    if (st != ZC_OK) return st;
    if (!req) return zc__error(c, ZC_INVALID_ARG, "%s: req is NULL", zc__kind_name(a->kind));
    st = zc__issue(c, &s, -1, 0, req);
    if (st != ZC_OK || !source) return st;
    *source = a->root;
    zc__req *r = zc__lookup(c, req);
    if (r && a->root == ZC_ANY_SOURCE) r->source = source;
    return ZC_OK;
}

zc_status zc_allreduce(zc_comm *comm, const void *send, void *recv, size_t count, zc_dtype dtype,
                       zc_op op, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_ALLREDUCE, send, recv, count, dtype, op, 0), req);
}
zc_status zc_reduce(zc_comm *comm, const void *send, void *recv, size_t count, zc_dtype dtype,
                    zc_op op, uint32_t root, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_REDUCE, send, recv, count, dtype, op, root), req);
}
zc_status zc_broadcast(zc_comm *comm, const void *send, void *recv, size_t count,
                       zc_dtype dtype, uint32_t root, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_BROADCAST, send, recv, count, dtype, 0, root), req);
}
zc_status zc_reduce_scatter(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                            zc_dtype dtype, zc_op op, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_REDUCE_SCATTER, send, recv, recvcount, dtype, op, 0),
                         req);
}
zc_status zc_allgather(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                       zc_dtype dtype, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_ALLGATHER, send, recv, sendcount, dtype, 0, 0), req);
}
zc_status zc_gather(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                    zc_dtype dtype, uint32_t root, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_GATHER, send, recv, sendcount, dtype, 0, root), req);
}
zc_status zc_scatter(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                     zc_dtype dtype, uint32_t root, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_SCATTER, send, recv, recvcount, dtype, 0, root), req);
}
zc_status zc_alltoall(zc_comm *comm, const void *send, void *recv, size_t count,
                      zc_dtype dtype, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_ALLTOALL, send, recv, count, dtype, 0, 0), req);
}
zc_status zc_send(zc_comm *comm, const void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                  zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_SEND, buf, 0, count, dtype, 0, peer), req);
}
zc_status zc_recv(zc_comm *comm, void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                  zc_req *req) {
    const zc_call a = {ZC_K_RECV, 0, buf, count, dtype, 0, peer, 0, true};
    ZC_LOCKED(comm, zc_p2p_issue_locked(comm, &a, 0, req));
}
zc_status zc_send_tagged(zc_comm *comm, const void *buf, size_t count, zc_dtype dtype,
                         uint32_t peer, uint32_t tag, zc_req *req) {
    const zc_call a = {ZC_K_SEND, buf, 0, count, dtype, 0, peer, tag, false};
    ZC_LOCKED(comm, zc_p2p_issue_locked(comm, &a, 0, req));
}
zc_status zc_recv_tagged(zc_comm *comm, void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                         uint32_t tag, uint32_t *source, zc_req *req) {
    const zc_call a = {ZC_K_RECV, 0, buf, count, dtype, 0, peer, tag, true};
    ZC_LOCKED(comm, zc_p2p_issue_locked(comm, &a, source, req));
}
zc_status zc_barrier(zc_comm *comm, zc_req *req) {
    return zc_call_issue(comm, ZC_CALL(ZC_K_BARRIER, 0, 0, 0, ZC_UINT8, 0, 0), req);
}

zc_status zc_allreduce_init(zc_comm *comm, const void *send, void *recv, size_t count,
                            zc_dtype dtype, zc_op op, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_ALLREDUCE, send, recv, count, dtype, op, 0), plan);
}
zc_status zc_reduce_init(zc_comm *comm, const void *send, void *recv, size_t count,
                         zc_dtype dtype, zc_op op, uint32_t root, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_REDUCE, send, recv, count, dtype, op, root), plan);
}
zc_status zc_broadcast_init(zc_comm *comm, const void *send, void *recv, size_t count,
                            zc_dtype dtype, uint32_t root, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_BROADCAST, send, recv, count, dtype, 0, root), plan);
}
zc_status zc_reduce_scatter_init(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                                 zc_dtype dtype, zc_op op, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_REDUCE_SCATTER, send, recv, recvcount, dtype, op, 0),
                        plan);
}
zc_status zc_allgather_init(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                            zc_dtype dtype, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_ALLGATHER, send, recv, sendcount, dtype, 0, 0), plan);
}
zc_status zc_gather_init(zc_comm *comm, const void *send, void *recv, size_t sendcount,
                         zc_dtype dtype, uint32_t root, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_GATHER, send, recv, sendcount, dtype, 0, root), plan);
}
zc_status zc_scatter_init(zc_comm *comm, const void *send, void *recv, size_t recvcount,
                          zc_dtype dtype, uint32_t root, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_SCATTER, send, recv, recvcount, dtype, 0, root), plan);
}
zc_status zc_alltoall_init(zc_comm *comm, const void *send, void *recv, size_t count,
                           zc_dtype dtype, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_ALLTOALL, send, recv, count, dtype, 0, 0), plan);
}
zc_status zc_send_init(zc_comm *comm, const void *buf, size_t count, zc_dtype dtype,
                       uint32_t peer, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_SEND, buf, 0, count, dtype, 0, peer), plan);
}
zc_status zc_recv_init(zc_comm *comm, void *buf, size_t count, zc_dtype dtype, uint32_t peer,
                       zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_RECV, 0, buf, count, dtype, 0, peer), plan);
}
zc_status zc_barrier_init(zc_comm *comm, zc_plan *plan) {
    return zc_call_plan(comm, ZC_CALL(ZC_K_BARRIER, 0, 0, 0, ZC_UINT8, 0, 0), plan);
}
