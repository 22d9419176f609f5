/* sched_gpu.c: every device-memory schedule, written once against the gpu provider
 * (provider/gpu.h); no CUDA header or call here.
 *
 * Data never travels the channels: every rank reads its peers' registered device buffers, mapped
 * into its own address space at registration (CUDA IPC), with reductions and copies launched on
 * the provider's stream and completion seen by polling an event; a stream-ordered call's
 * launches are instead the steps of its program on the caller's stream (stream.c):
 * zc__gpu_reduce / zc__gpu_copy fill its step descriptor, zc__gpu_launched raises its go flag,
 * zc__gpu_waited reads its kernel-done flag. The channels carry only
 * fingerprinted signals, one message to every peer per step, so every rank agrees on the step:
 *   message 0, READY: my buffers hold their inputs; here is where they are (registration number
 *                     and offset of send and recv) and my round size;
 *   later messages:   done reading your buffers (and, for RS+AG, my reduced block is final).
 * A rank finishes only after every peer said it is done reading its buffers.
 *
 * Schedules (each a state machine of named phases, zc__gphase in engine.h):
 *   GPU_ONESHOT (all_reduce up to gpu_oneshot_max_bytes): per round, reduce all n inputs of the
 *     round's elements; in place, into scratch, copied back once every peer is done reading.
 *   GPU_RSAG (larger all_reduce): per round, reduce block `rank` of the round's region (into
 *     recv, or scratch in place), then copy every peer's reduced block from its recv.
 *   GPU_DIRECT (every other collective): one launch of what this rank needs, then DONE.
 *   GPU_REGISTER (internal, a CUDA registration with more than one rank, issued by gpu_mem.c):
 *     my zc_gpu_ipc record as message 0 to every peer, every peer's into the registration's
 *     row of recs, then MAP (ipc_open of each peer's buffer); for its end (ZC_K_DEREGISTER),
 *     a signal only, each way: this rank unmapped the peers' buffers.
 * Reductions are the provider's kernels: the rank tree, the host kernels' exact semantics,
 * so device and host results are bitwise equal.
 *
 * These are requests of the one engine, the family zc__fam_ipc (engine.h): zc__issue
 * (progress.c) takes their slot, sequence number and channel numbers and calls its begin
 * (zc_gpu_begin); zc_progress calls its step (zc_gpu_step): one budget unit per phase
 * transition; deadlines,
 * liveness and zc__fail are progress.c's and fail.c's, as for host requests. A stream-ordered
 * call (stream.c) is issued "held" (no deadline): progress.c gates it until its stream reaches it.
 * The request's device fields (engine.h: phase, round, rounds, round_elems, ptrs) are all the
 * state a device schedule keeps.
 *
 * Must not: include CUDA headers, block, allocate, or record a CUDA error twice (the provider's
 * sentence reaches the communicator only through zc_gpu_fail, with zc__fail). */
#include "device.h"
#include "gpu.h"

/* READY's payload. */
typedef struct zc_ghello {
    uint32_t send_creg, recv_creg; /* ZC_GPU_NONE: no such buffer at this rank */
    uint64_t send_off, recv_off;   /* offsets inside those registrations */
    uint64_t round_elems;
} zc_ghello;

/* Records the provider's sentence (the one place a gpu failure reaches the communicator),
 * fails the communicator and returns st. */
static zc_status zc_gpu_fail(zc_comm *c, struct zc__gpu *g, zc_status st, const char *what,
                             uint64_t seq) {
    return zc__fail(c, st, seq, -1, 0, "%s: %s", what, g->ops->error_text(g->state));
}

zc_status zc__gpu_failed(zc_comm *c, const zc__req *r, zc_status st) {
    return zc_gpu_fail(c, c->gpu, st, zc__kind_name(r->s.kind), r->seq);
}

/* ---- registrations ---- */

bool zc__gpu_one_space(const zc_comm *c, uint32_t p) {
    return p == c->rank || c->cfg.transport == ZC_TRANSPORT_INPROC;
}

/* The registration schedule's last phase: maps the peers' buffers of entry e from the records
 * its exchange brought; false when that failed the communicator. A peer's own address is used
 * only where every rank shares this address space (zc__gpu_one_space), never on a process id
 * the record claims; elsewhere the provider maps the record's handle and refuses a range
 * [offset, offset + bytes) outside the allocation the handle names. */
static bool zc_gpu_map(zc_comm *c, struct zc__gpu *g, zc__req *r) {
    zc__mem_entry *me = &c->mems[r->mem];
    me->gstate = ZC_GMEM_FAILED;
    for (uint32_t p = 0; p < g->nranks; p++) {
        size_t i = (size_t)r->mem * g->nranks + p;
        zc_gpu_ipc *rec = &g->recs[i];
        if (!rec->valid || rec->creg != me->creg) {
            zc__fail(c, ZC_MISMATCH, c->seq, (int32_t)p, 0, "zc_mem_register: rank %u's CUDA "
                     "registration number %u met rank %u's number %u: every rank registers "
                     "its CUDA buffers in the same order", p, rec->creg, g->rank, me->creg);
            return false;
        }
        if (!rec->bytes || !zc__span_in(rec->offset, rec->bytes, UINT64_MAX)) {
            zc__bad_peer(c, r, p, "a CUDA registration record of %llu bytes at offset %llu",
                         (unsigned long long)rec->bytes, (unsigned long long)rec->offset);
            return false;
        }
        if (zc__gpu_one_space(c, p)) {
            g->mapped[i] = (uint8_t *)(uintptr_t)rec->addr;
            continue;
        }
        void *m = 0;
        if (g->ops->ipc_open(g->state, rec, &m) != ZC_OK) {
            char what[64];
            zc__fmt(what, sizeof what, "zc_mem_register: mapping rank %u's buffer", p);
            zc_gpu_fail(c, g, ZC_GPU, what, c->seq);
            return false;
        }
        g->mapped[i] = m;
    }
    me->gstate = ZC_GMEM_MAPPED;
    return true;
}

/* ---- rounds and issue ---- */

/* Rounds and elements per round; the same on every rank with the same scratch size (checked
 * through READY). */
static uint32_t zc_gpu_rounds(const zc_comm *c, const zc__sched *s, uint64_t *round_elems) {
    uint64_t per = c->cfg.gpu_scratch_bytes / (s->esize ? s->esize : 1u);
    if (s->alg == ZC_ALG_GPU_RSAG) per *= c->nranks;
    if (s->alg == ZC_ALG_GPU_DIRECT || s->alg == ZC_ALG_GPU_REGISTER || per == 0 ||
        s->count == 0) {
        *round_elems = s->count;
        return 1;
    }
    *round_elems = per;
    return (uint32_t)((s->count + per - 1) / per);
}

/* Signals to (and from) every peer. */
static uint64_t zc_gpu_msgs(const zc_comm *c, const zc__sched *s) {
    uint64_t re;
    uint32_t rounds = zc_gpu_rounds(c, s, &re);
    switch (s->alg) {
    case ZC_ALG_GPU_ONESHOT: return 1u + (uint64_t)rounds;
    case ZC_ALG_GPU_RSAG: return 2u + 2u * (uint64_t)rounds;
    case ZC_ALG_GPU_REGISTER: return 1;
    default: return 2;
    }
}

static bool zc_gpu_in_place(const zc__sched *s) {
    return s->kind == ZC_K_ALLREDUCE && s->send == s->recv;
}

/* Launches per round: MAIN, PLACE (in place), GATHER (RS+AG); DIRECT launches once. */
uint32_t zc__gpu_steps(const zc_comm *c, const zc__sched *s) {
    uint64_t re, rounds = zc_gpu_rounds(c, s, &re);
    uint64_t per = 1u + zc_gpu_in_place(s) + (s->alg == ZC_ALG_GPU_RSAG);
    uint64_t n = s->alg == ZC_ALG_GPU_DIRECT ? 1u : rounds * per;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* As many each way with every peer. */
static void zc_gpu_links(const zc_comm *c, const zc__sched *s, zc__link_fn fn, void *ctx) {
    uint64_t m = zc_gpu_msgs(c, s);
    for (uint32_t p = 0; p < c->nranks; p++)
        if (p != c->rank) fn(ctx, p, m, m);
}

static void zc_gpu_begin(zc_comm *c, zc__req *r) {
    struct zc__gpu *g = c->gpu;
    ZC_ASSERT(g && zc__gpu_alg(r->s.alg) && r->lane == 0 && r->place == 0);
    uint64_t re;
    r->rounds = zc_gpu_rounds(c, &r->s, &re);
    r->round_elems = re;
    r->round = 0;
    r->mem = 0;
    r->step = r->fill = 0;
    r->phase = ZC_G_READY;
    for (uint32_t p = 0; p < 2u * g->nranks; p++) r->ptrs[p] = 0;
    r->ptrs[c->rank] = (uint8_t *)(uintptr_t)r->s.send;
    r->ptrs[g->nranks + c->rank] = r->s.recv;
}

/* ---- the signals ---- */

static void zc_gpu_ref(const zc_comm *c, const void *p, uint32_t *creg, uint64_t *off) {
    bool partial = false;
    int32_t e = p ? zc__mem_find(c, p, 1, ZC_MEM_CUDA, &partial) : -1;
    *creg = ZC_GPU_NONE;
    *off = 0;
    if (e < 0) return;
    *creg = c->mems[e].creg;
    *off = (uint64_t)((const uint8_t *)p - (const uint8_t *)c->mems[e].addr);
}

/* The peer's buffer at (creg, off) in this process, where the call addresses bytes of it;
 * false while that registration's exchange is still running here, or when the reference is
 * one no rank of the job sends (no registration of that number, or bytes past the end of the
 * peer's registered range: the communicator failed). */
static bool zc_gpu_resolve(zc_comm *c, const zc__req *r, uint32_t peer, uint32_t creg,
                           uint64_t off, uint64_t bytes, const char *what, uint8_t **out) {
    struct zc__gpu *g = c->gpu;
    *out = 0;
    if (creg == ZC_GPU_NONE && !bytes) return true;
    for (uint32_t e = 0; e < c->cfg.max_mems && creg != ZC_GPU_NONE; e++) {
        const zc__mem_entry *me = &c->mems[e];
        if (!me->addr || me->kind != ZC_MEM_CUDA || me->creg != creg) continue;
        if (me->gstate != ZC_GMEM_MAPPED) return false;
        size_t i = (size_t)e * g->nranks + peer;
        if (!zc__span_in(off, bytes, g->recs[i].bytes)) {
            zc__bad_peer(c, r, peer, "a READY that puts its %s buffer (%llu bytes) at offset "
                         "%llu of its CUDA registration %u of %llu bytes", what,
                         (unsigned long long)bytes, (unsigned long long)off, creg,
                         (unsigned long long)g->recs[i].bytes);
            return false;
        }
        *out = g->mapped[i] + off;
        return true;
    }
    zc__bad_peer(c, r, peer, "a READY that names CUDA registration %d for its %s buffer (%llu "
                 "bytes), which this rank does not hold", creg == ZC_GPU_NONE ? -1 : (int)creg,
                 what, (unsigned long long)bytes);
    return false;
}

/* Takes peer's READY; false when it cannot be used yet (or the communicator failed). */
static bool zc_gpu_take_hello(zc_comm *c, zc__req *r, uint32_t p, const uint8_t *payload) {
    struct zc__gpu *g = c->gpu;
    zc_ghello h;
    uint64_t sblk, rblk, blk = r->s.count * r->s.esize;
    zc__memcpy(&h, payload, sizeof h);
    if (h.round_elems != r->round_elems) {
        zc__fail(c, ZC_MISMATCH, r->seq, (int32_t)p, 0, "%s sequence %llu: rank %u works in "
                 "rounds of %llu elements and rank %u in rounds of %llu: "
                 "cfg->gpu_scratch_bytes must be equal on every rank",
                 zc__kind_name(r->s.kind), (unsigned long long)r->seq, p,
                 (unsigned long long)h.round_elems, c->rank,
                 (unsigned long long)r->round_elems);
        return false;
    }
    zc__extents_at(c, p, r->s.kind, r->s.root, &sblk, &rblk);
    return zc_gpu_resolve(c, r, p, h.send_creg, h.send_off, blk * sblk, "send", &r->ptrs[p]) &&
           zc_gpu_resolve(c, r, p, h.recv_creg, h.recv_off, blk * rblk, "recv",
                          &r->ptrs[g->nranks + p]);
}

/* Sends message k to every peer (READY's payload for k == 0) and consumes message k from every
 * peer; true once both are done for all. */
static bool zc_gpu_exchange(zc_comm *c, zc__req *r, uint64_t k) {
    bool all = true, reg = r->s.alg == ZC_ALG_GPU_REGISTER;
    zc_ghello h = {0};
    if (k == 0 && !reg) {
        zc_gpu_ref(c, r->s.send, &h.send_creg, &h.send_off);
        zc_gpu_ref(c, r->s.recv, &h.recv_creg, &h.recv_off);
        h.round_elems = r->round_elems;
    }
    /* Message 0's payload: READY, a registration's record (the schedule's send), or none (a
     * deregistration's word). */
    const void *out = reg ? (const void *)r->s.send : (const void *)&h;
    size_t bytes = k != 0 || r->s.kind == ZC_K_DEREGISTER ? 0 : reg ? sizeof(zc_gpu_ipc)
                                                                     : sizeof h;
    for (uint32_t p = 0; p < c->nranks && !c->failed; p++) {
        if (p == c->rank) continue;
        if (zc__tx_done(c, r, p) == k) {
            uint8_t *dst = zc__tx_begin(c, r, p, k);
            if (dst && bytes) zc__memcpy(dst, out, bytes);
            if (dst) (void)zc__tx_end(c, r, p, k, bytes);
        }
        if (zc__rx_done(c, r, p) == k) {
            const uint8_t *src = zc__rx_peek(c, r, p, k, bytes);
            if (src && reg && bytes) zc__memcpy(r->s.recv + (size_t)p * bytes, src, bytes);
            if (src && (k != 0 || reg || zc_gpu_take_hello(c, r, p, src)))
                zc__rx_consume(c, r, p);
        }
        if (zc__tx_done(c, r, p) <= k || zc__rx_done(c, r, p) <= k) all = false;
    }
    return all && !c->failed;
}

/* ---- launches ---- */

static zc_status zc_gpu_launch_direct(zc_comm *c, zc__req *r, uint8_t *const *ptrs) {
    const zc__sched *s = &r->s;
    uint32_t n = c->nranks, me = c->rank, root = s->root;
    size_t blk = (size_t)(s->count * s->esize);
    const void *srcs[ZC_GPU_MAX_SRCS];
    zc_status st = ZC_OK;
    switch (s->kind) {
    case ZC_K_REDUCE:
    case ZC_K_REDUCE_SCATTER:
        if (s->kind == ZC_K_REDUCE && me != root) return ZC_OK;
        for (uint32_t p = 0; p < n; p++)
            srcs[p] = ptrs[p] + (s->kind == ZC_K_REDUCE ? 0 : me * blk);
        return zc__gpu_reduce(c, r, s->recv, srcs, (size_t)s->count);
    case ZC_K_BROADCAST:
        if (me != root) return zc__gpu_copy(c, r, s->recv, ptrs[root], blk);
        return s->recv && s->recv != s->send ? zc__gpu_copy(c, r, s->recv, s->send, blk) : ZC_OK;
    case ZC_K_SCATTER:
        if (me != root) return zc__gpu_copy(c, r, s->recv, ptrs[root] + me * blk, blk);
        return s->recv != s->send + me * blk ? zc__gpu_copy(c, r, s->recv, s->send + me * blk, blk)
                                             : ZC_OK;
    case ZC_K_GATHER:
    case ZC_K_ALLGATHER:
    case ZC_K_ALLTOALL:
        if (s->kind == ZC_K_GATHER && me != root) return ZC_OK;
        for (uint32_t p = 0; p < n && st == ZC_OK; p++) {
            const uint8_t *src = ptrs[p] + (s->kind == ZC_K_ALLTOALL ? me * blk : 0);
            if (s->recv + p * blk != src) st = zc__gpu_copy(c, r, s->recv + p * blk, src, blk);
        }
        return st;
    default: return ZC_OK; /* barrier and count 0: signals only */
    }
}

/* Elements [lo, lo+len) of the block of rank b within round r->round's region (RS+AG). */
static void zc_gpu_block(const zc__req *r, uint32_t n, uint32_t b,
                         uint64_t *lo, uint64_t *len) {
    uint64_t base = (uint64_t)r->round * r->round_elems, rest = r->s.count - base;
    uint64_t L = rest < r->round_elems ? rest : r->round_elems;
    *lo = base + zc__block_lo(L, n, b);
    *len = zc__block_lo(L, n, b + 1) - zc__block_lo(L, n, b);
}

/* The round's reduction (ONESHOT, RSAG) or the collective's copies (DIRECT). */
static zc_status zc_gpu_launch_main(zc_comm *c, struct zc__gpu *g, zc__req *r,
                                    uint8_t *const *ptrs) {
    const zc__sched *s = &r->s;
    uint32_t n = c->nranks, es = s->esize;
    const void *srcs[ZC_GPU_MAX_SRCS];
    uint64_t lo, len;
    if (s->alg == ZC_ALG_GPU_DIRECT) return zc_gpu_launch_direct(c, r, ptrs);
    if (s->alg == ZC_ALG_GPU_RSAG) {
        zc_gpu_block(r, n, c->rank, &lo, &len);
    } else {
        lo = (uint64_t)r->round * r->round_elems;
        len = s->count - lo < r->round_elems ? s->count - lo : r->round_elems;
    }
    if (!len) return ZC_OK;
    for (uint32_t p = 0; p < n; p++) srcs[p] = ptrs[p] + lo * es;
    void *dst = zc_gpu_in_place(&r->s) ? (void *)g->scratch : (void *)(s->recv + lo * es);
    return zc__gpu_reduce(c, r, dst, srcs, (size_t)len);
}

/* In place: the round's result from scratch into recv. */
static zc_status zc_gpu_launch_place(zc_comm *c, struct zc__gpu *g, zc__req *r) {
    uint64_t lo, len, es = r->s.esize;
    if (r->s.alg == ZC_ALG_GPU_RSAG) {
        zc_gpu_block(r, c->nranks, c->rank, &lo, &len);
    } else {
        lo = (uint64_t)r->round * r->round_elems;
        len = r->s.count - lo < r->round_elems ? r->s.count - lo : r->round_elems;
    }
    return len ? zc__gpu_copy(c, r, r->s.recv + lo * es, g->scratch, (size_t)(len * es)) : ZC_OK;
}

/* RS+AG: every peer's reduced block of the round from its recv into mine. */
static zc_status zc_gpu_launch_gather(zc_comm *c, struct zc__gpu *g, zc__req *r,
                                      uint8_t *const *ptrs) {
    uint64_t lo, len, es = r->s.esize;
    zc_status st = ZC_OK;
    for (uint32_t p = 0; p < c->nranks && st == ZC_OK; p++) {
        if (p == c->rank) continue;
        zc_gpu_block(r, c->nranks, p, &lo, &len);
        if (len)
            st = zc__gpu_copy(c, r, r->s.recv + lo * es, ptrs[g->nranks + p] + lo * es,
                              (size_t)(len * es));
    }
    return st;
}

/* ---- the state machine of one device request ---- */

static uint32_t zc_gpu_next_round(zc__req *r) {
    r->round++;
    if (r->round < r->rounds) return ZC_G_MAIN;
    return r->s.alg == ZC_ALG_GPU_ONESHOT ? ZC_G_FINISHED : ZC_G_SYNC_DONE;
}

/* ---- launches: on the provider's stream, or a stream-ordered call's steps ---- */

/* The step descriptor r fills (its stream slot's), emptied at its first entry of a step. */
static zc_gpu_desc *zc_gpu_desc_of(zc_comm *c, zc__req *r) {
    struct zc__gpu *g = c->gpu;
    zc_gpu_desc *d = g->ops->desc(g->state, r->bind - 1u);
    if (r->fill++ == 0) {
        d->mode = ZC_GPU_STEP_NONE;
        d->n = 0;
    }
    return d;
}

zc_status zc__gpu_reduce(zc_comm *c, zc__req *r, void *dst, const void *const *srcs,
                         size_t count) {
    struct zc__gpu *g = c->gpu;
    if (!r->bind)
        return g->ops->reduce(g->state, dst, srcs, c->nranks, count, (zc_dtype)r->s.dtype,
                              (zc_op)r->s.op);
    zc_gpu_desc *d = zc_gpu_desc_of(c, r);
    ZC_ASSERT(d->n == 0); /* one reduction per step */
    d->mode = ZC_GPU_STEP_REDUCE;
    d->n = c->nranks;
    d->count = count;
    d->dst[0] = dst;
    for (uint32_t k = 0; k < c->nranks; k++) d->src[k] = srcs[k];
    return ZC_OK;
}

zc_status zc__gpu_copy(zc_comm *c, zc__req *r, void *dst, const void *src, size_t bytes) {
    struct zc__gpu *g = c->gpu;
    if (!r->bind) return g->ops->copy(g->state, dst, src, bytes);
    zc_gpu_desc *d = zc_gpu_desc_of(c, r);
    ZC_ASSERT(d->mode != ZC_GPU_STEP_REDUCE && d->n < ZC_GPU_MAX_SRCS);
    d->mode = ZC_GPU_STEP_COPY;
    d->dst[d->n] = dst;
    d->src[d->n] = src;
    d->bytes[d->n++] = bytes;
    return ZC_OK;
}

/* The provider's event of r: one per request slot. */
static uint32_t zc_gpu_event(const zc_comm *c, const zc__req *r) {
    return (uint32_t)(r - c->reqs);
}

static uint32_t *zc_gpu_bflag(const zc_comm *c, const zc__req *r, uint32_t which) {
    return &c->gpu->flags[ZC_BIND_FLAGS * (r->bind - 1u) + which];
}

/* A stream-ordered call's next step may run: its descriptor (empty when nothing was added)
 * published, then GO raised past it. */
static void zc_gpu_go(zc_comm *c, zc__req *r) {
    const zc__bind *b = &c->gpu->binds[r->bind - 1u];
    if (r->fill == 0) (void)zc_gpu_desc_of(c, r); /* an empty step */
    r->fill = 0;
    r->step++;
    ZC_ASSERT(r->step <= b->steps); /* paired with zc__gpu_steps / zc__put_steps */
    __atomic_store_n(zc_gpu_bflag(c, r, ZC_BF_GO), b->go + r->step, __ATOMIC_RELEASE);
}

bool zc__gpu_launched(zc_comm *c, zc__req *r, zc_status st) {
    struct zc__gpu *g = c->gpu;
    if (st == ZC_OK && r->bind) zc_gpu_go(c, r);
    else if (st == ZC_OK) st = g->ops->event_record(g->state, zc_gpu_event(c, r));
    if (st == ZC_OK) return true;
    zc_gpu_fail(c, g, st, zc__kind_name(r->s.kind), r->seq);
    return false;
}

/* A stream-ordered step ran once its stream wrote KD past it; the provider's query of the
 * (never recorded) event says whether the device was lost meanwhile. */
zc_status zc__gpu_waited(zc_comm *c, zc__req *r) {
    struct zc__gpu *g = c->gpu;
    zc_status st = g->ops->event_query(g->state, zc_gpu_event(c, r));
    if (st == ZC_OK && r->bind) {
        uint32_t kd = __atomic_load_n(zc_gpu_bflag(c, r, ZC_BF_KD), __ATOMIC_ACQUIRE);
        st = (int32_t)(kd - (g->binds[r->bind - 1u].go + r->step)) >= 0 ? ZC_OK
                                                                         : ZC_IN_PROGRESS;
    }
    if (st == ZC_OK || st == ZC_IN_PROGRESS) return st;
    return zc_gpu_fail(c, g, st, zc__kind_name(r->s.kind), r->seq);
}

/* One phase transition; false when the request has to wait (or failed). */
static bool zc_gpu_advance(zc_comm *c, struct zc__gpu *g, zc__req *r) {
    uint8_t *const *ptrs = r->ptrs;
    bool rsag = r->s.alg == ZC_ALG_GPU_RSAG;
    switch (r->phase) {
    case ZC_G_READY:
        if (!zc_gpu_exchange(c, r, 0)) return false;
        r->phase = r->s.alg != ZC_ALG_GPU_REGISTER ? ZC_G_MAIN
                   : r->s.kind == ZC_K_REGISTER   ? ZC_G_MAP
                                                  : ZC_G_FINISHED;
        return true;
    case ZC_G_MAP:
        if (!zc_gpu_map(c, g, r)) return false;
        r->phase = ZC_G_FINISHED;
        return true;
    case ZC_G_MAIN:
        if (!zc__gpu_launched(c, r, zc_gpu_launch_main(c, g, r, ptrs))) return false;
        r->phase = ZC_G_MAIN_WAIT;
        return true;
    case ZC_G_MAIN_WAIT:
        if (zc__gpu_waited(c, r) != ZC_OK) return false;
        r->phase = r->s.alg == ZC_ALG_GPU_DIRECT ? ZC_G_SYNC_DONE : ZC_G_SYNC_A;
        return true;
    case ZC_G_SYNC_A:
        if (!zc_gpu_exchange(c, r, 1u + (rsag ? 2u : 1u) * (uint64_t)r->round))
            return false;
        r->phase = zc_gpu_in_place(&r->s) ? ZC_G_PLACE : rsag ? ZC_G_SYNC_B : zc_gpu_next_round(r);
        return true;
    case ZC_G_PLACE:
        if (!zc__gpu_launched(c, r, zc_gpu_launch_place(c, g, r))) return false;
        r->phase = ZC_G_PLACE_WAIT;
        return true;
    case ZC_G_PLACE_WAIT:
        if (zc__gpu_waited(c, r) != ZC_OK) return false;
        r->phase = rsag ? ZC_G_SYNC_B : zc_gpu_next_round(r);
        return true;
    case ZC_G_SYNC_B:
        if (!zc_gpu_exchange(c, r, 2u + 2u * (uint64_t)r->round)) return false;
        r->phase = ZC_G_GATHER;
        return true;
    case ZC_G_GATHER:
        if (!zc__gpu_launched(c, r, zc_gpu_launch_gather(c, g, r, ptrs))) return false;
        r->phase = ZC_G_GATHER_WAIT;
        return true;
    case ZC_G_GATHER_WAIT:
        if (zc__gpu_waited(c, r) != ZC_OK) return false;
        r->phase = zc_gpu_next_round(r);
        return true;
    case ZC_G_SYNC_DONE:
        if (!zc_gpu_exchange(c, r, rsag ? 1u + 2u * (uint64_t)r->rounds : 1u))
            return false;
        r->phase = ZC_G_FINISHED;
        return true;
    default: return false;
    }
}

static bool zc_gpu_step(zc_comm *c, zc__req *r, uint32_t *budget) {
    struct zc__gpu *g = c->gpu;
    ZC_ASSERT(g && r >= c->reqs && r < c->reqs + c->cfg.max_requests);
    while (*budget && !c->failed && zc_gpu_advance(c, g, r)) (*budget)--;
    if (c->failed || r->phase != ZC_G_FINISHED) return false;
    ZC_ASSERT(!r->bind || r->step == g->binds[r->bind - 1u].steps); /* the program's */
    return true;
}

const zc__family zc__fam_ipc = {"ipc", ZC_FAM_STREAM, zc_gpu_links, zc_gpu_begin, zc_gpu_step};
