/* sched_gpu.c: every device-memory schedule, written once against the gpu provider
 * (provider/gpu.h); no CUDA header or call here.
 *
 * Data never travels the channels: every rank reads its peers' registered device buffers, mapped
 * into its own address space at registration (CUDA IPC), with reductions and copies launched on
 * the provider's stream and completion seen by polling an event. The channels carry only
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
 *     row of recs, then MAP (ipc_open of each peer's buffer).
 * Reductions are the provider's kernels: rank order 0..n-1, the host kernels' exact semantics,
 * so device and host results are bitwise equal.
 *
 * These are requests of the one engine: zc__issue (progress.c) takes their slot, sequence
 * number and channel numbers and calls zc__gpu_begin here; zc_progress steps them through
 * zc__step (sched.c), which calls zc__gpu_step: one budget unit per phase transition; deadlines,
 * liveness and zc__fail are progress.c's and fail.c's, as for host requests. A stream-ordered
 * call (stream.c) is issued "held" (no deadline) and waits in GATE until its stream reaches it.
 * The request's device fields (engine.h: phase, round, rounds, round_elems, ptrs) are all the
 * state a device schedule keeps.
 *
 * Must not: include CUDA headers, block, allocate, or record a CUDA error twice (the provider's
 * sentence reaches the communicator only through zc_gpu_fail, with zc__fail). */
#include "engine.h"
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

int32_t zc__gpu_find(const zc_comm *c, const void *p, size_t bytes, bool *partial) {
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    for (uint32_t i = 0; i < c->cfg.max_mems; i++) {
        const zc__mem_entry *e = &c->mems[i];
        uintptr_t elo = (uintptr_t)e->addr, ehi = elo + e->bytes;
        if (!e->addr || e->kind != ZC_MEM_CUDA || hi <= elo || lo >= ehi) continue;
        if (lo >= elo && hi <= ehi) return (int32_t)i;
        *partial = true;
    }
    return -1;
}

/* The registration schedule's last phase: maps the peers' buffers of entry e from the records
 * its exchange brought; false when that failed the communicator. */
static bool zc_gpu_map(zc_comm *c, struct zc__gpu *g, uint32_t e) {
    zc__mem_entry *me = &c->mems[e];
    me->gstate = ZC_GMEM_FAILED;
    for (uint32_t p = 0; p < g->nranks; p++) {
        size_t i = (size_t)e * g->nranks + p;
        zc_gpu_ipc *rec = &g->recs[i];
        if (!rec->valid || rec->creg != me->creg) {
            zc__fail(c, ZC_MISMATCH, c->seq, (int32_t)p, 0, "zc_mem_register: rank %u's CUDA "
                     "registration number %u met rank %u's number %u: every rank registers "
                     "its CUDA buffers in the same order", p, rec->creg, g->rank, me->creg);
            return false;
        }
        if (p == g->rank || rec->pid == g->pid) {
            g->mapped[i] = (uint8_t *)(uintptr_t)rec->addr; /* one address space */
            continue;
        }
        void *m = 0;
        if (g->ops->ipc_open(g->state, rec, &m) != ZC_OK) {
            zc_gpu_fail(c, g, ZC_GPU, "zc_mem_register: mapping a peer's buffer", c->seq);
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

static bool zc_gpu_in_place(const zc__req *r) {
    return r->s.kind == ZC_K_ALLREDUCE && r->s.send == r->s.recv;
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
    r->phase = ZC_G_READY;
    for (uint32_t p = 0; p < 2u * g->nranks; p++) r->ptrs[p] = 0;
    r->ptrs[c->rank] = (uint8_t *)(uintptr_t)r->s.send;
    r->ptrs[g->nranks + c->rank] = r->s.recv;
}

/* ---- the signals ---- */

static void zc_gpu_ref(const zc_comm *c, const void *p, uint32_t *creg, uint64_t *off) {
    bool partial = false;
    int32_t e = p ? zc__gpu_find(c, p, 1, &partial) : -1;
    *creg = ZC_GPU_NONE;
    *off = 0;
    if (e < 0) return;
    *creg = c->mems[e].creg;
    *off = (uint64_t)((const uint8_t *)p - (const uint8_t *)c->mems[e].addr);
}

/* The peer's buffer at (creg, off) in this process; false while that registration is not
 * mapped here yet. */
static bool zc_gpu_resolve(const zc_comm *c, uint32_t peer, uint32_t creg, uint64_t off,
                           uint8_t **out) {
    struct zc__gpu *g = c->gpu;
    *out = 0;
    if (creg == ZC_GPU_NONE) return true;
    for (uint32_t e = 0; e < c->cfg.max_mems; e++) {
        const zc__mem_entry *me = &c->mems[e];
        if (!me->addr || me->kind != ZC_MEM_CUDA || me->creg != creg) continue;
        if (me->gstate != ZC_GMEM_MAPPED) return false;
        *out = g->mapped[(size_t)e * g->nranks + peer] + off;
        return true;
    }
    return false; /* its exchange has not been issued here yet: wait */
}

/* Takes peer's READY; false when it cannot be used yet (or the communicator failed). */
static bool zc_gpu_take_hello(zc_comm *c, zc__req *r, uint32_t p, const uint8_t *payload) {
    struct zc__gpu *g = c->gpu;
    zc_ghello h;
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
    return zc_gpu_resolve(c, p, h.send_creg, h.send_off, &r->ptrs[p]) &&
           zc_gpu_resolve(c, p, h.recv_creg, h.recv_off, &r->ptrs[g->nranks + p]);
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
    /* Message 0's payload: READY, or a registration's record (the schedule's send). */
    const void *out = reg ? (const void *)r->s.send : (const void *)&h;
    size_t bytes = k != 0 ? 0 : reg ? sizeof(zc_gpu_ipc) : sizeof h;
    for (uint32_t p = 0; p < c->nranks && !c->failed; p++) {
        if (p == c->rank) continue;
        if (zc__tx_done(c, r, p) == k) {
            uint8_t *dst = zc__tx_begin(c, r, p, k);
            if (dst && bytes) zc__memcpy(dst, out, bytes);
            if (dst) (void)zc__tx_end(c, r, p, k, bytes);
        }
        if (zc__rx_done(c, r, p) == k) {
            const uint8_t *src = zc__rx_peek(c, r, p, k, bytes);
            if (src && reg) zc__memcpy(r->s.recv + (size_t)p * bytes, src, bytes);
            if (src && (k != 0 || reg || zc_gpu_take_hello(c, r, p, src)))
                zc__rx_consume(c, r, p);
        }
        if (zc__tx_done(c, r, p) <= k || zc__rx_done(c, r, p) <= k) all = false;
    }
    return all && !c->failed;
}

/* ---- launches ---- */

static zc_status zc_gpu_launch_direct(zc_comm *c, struct zc__gpu *g, zc__req *r,
                                      uint8_t *const *ptrs) {
    const zc__sched *s = &r->s;
    const zc_gpu_ops *o = g->ops;
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
        return o->reduce(g->state, s->recv, srcs, n, (size_t)s->count, (zc_dtype)s->dtype,
                         (zc_op)s->op);
    case ZC_K_BROADCAST:
        if (me != root) return o->copy(g->state, s->recv, ptrs[root], blk);
        return s->recv && s->recv != s->send ? o->copy(g->state, s->recv, s->send, blk) : ZC_OK;
    case ZC_K_SCATTER:
        if (me != root) return o->copy(g->state, s->recv, ptrs[root] + me * blk, blk);
        return s->recv != s->send + me * blk ? o->copy(g->state, s->recv, s->send + me * blk, blk)
                                             : ZC_OK;
    case ZC_K_GATHER:
    case ZC_K_ALLGATHER:
    case ZC_K_ALLTOALL:
        if (s->kind == ZC_K_GATHER && me != root) return ZC_OK;
        for (uint32_t p = 0; p < n && st == ZC_OK; p++) {
            const uint8_t *src = ptrs[p] + (s->kind == ZC_K_ALLTOALL ? me * blk : 0);
            if (s->recv + p * blk != src) st = o->copy(g->state, s->recv + p * blk, src, blk);
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
    if (s->alg == ZC_ALG_GPU_DIRECT) return zc_gpu_launch_direct(c, g, r, ptrs);
    if (s->alg == ZC_ALG_GPU_RSAG) {
        zc_gpu_block(r, n, c->rank, &lo, &len);
    } else {
        lo = (uint64_t)r->round * r->round_elems;
        len = s->count - lo < r->round_elems ? s->count - lo : r->round_elems;
    }
    if (!len) return ZC_OK;
    for (uint32_t p = 0; p < n; p++) srcs[p] = ptrs[p] + lo * es;
    void *dst = zc_gpu_in_place(r) ? (void *)g->scratch : (void *)(s->recv + lo * es);
    return g->ops->reduce(g->state, dst, srcs, n, (size_t)len, (zc_dtype)s->dtype, (zc_op)s->op);
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
    return len ? g->ops->copy(g->state, r->s.recv + lo * es, g->scratch, (size_t)(len * es))
               : ZC_OK;
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
            st = g->ops->copy(g->state, r->s.recv + lo * es, ptrs[g->nranks + p] + lo * es,
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

/* The provider's event of r: one per request slot. */
static uint32_t zc_gpu_event(const zc_comm *c, const zc__req *r) {
    return (uint32_t)(r - c->reqs);
}

bool zc__gpu_launched(zc_comm *c, zc__req *r, zc_status st) {
    struct zc__gpu *g = c->gpu;
    if (st == ZC_OK) st = g->ops->event_record(g->state, zc_gpu_event(c, r));
    if (st == ZC_OK) return true;
    zc_gpu_fail(c, g, st, zc__kind_name(r->s.kind), r->seq);
    return false;
}

zc_status zc__gpu_waited(zc_comm *c, zc__req *r) {
    struct zc__gpu *g = c->gpu;
    zc_status st = g->ops->event_query(g->state, zc_gpu_event(c, r));
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
        r->phase = r->s.alg == ZC_ALG_GPU_REGISTER ? ZC_G_MAP : ZC_G_MAIN;
        return true;
    case ZC_G_MAP:
        if (!zc_gpu_map(c, g, r->mem)) return false;
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
        r->phase = zc_gpu_in_place(r) ? ZC_G_PLACE : rsag ? ZC_G_SYNC_B : zc_gpu_next_round(r);
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
    return !c->failed && r->phase == ZC_G_FINISHED;
}

const zc__family zc__fam_ipc = {"ipc", ZC_FAM_STREAM, zc_gpu_links, zc_gpu_begin, zc_gpu_step};
