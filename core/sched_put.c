/* sched_put.c: the direct path's schedules: device-memory calls over a wire that writes into
 * peers' registered memory (transport_ib's RDMA WRITE: GPUDirect RDMA when the memory is a
 * GPU's), written once against the wire and gpu provider interfaces; no CUDA or verbs here.
 *
 * Bytes go from the sender's registered device buffer straight into the receiver's device
 * memory, by a put (zc__tx_put) ahead of a header-only message (zc__tx_end_placed) on the same
 * channel: the message's arrival says the bytes are there, and its fingerprint is checked
 * before any of them is used. Where they land:
 *   PUT_COPY (broadcast, scatter, gather, all_gather, all_to_all): in the receiver's recv,
 *     which it names first in a READY message (address and key of its registration); puts
 *     go in pieces of at most one landing area;
 *   PUT_ONESHOT (small all_reduce, reduce), PUT_RSAG (large all_reduce, reduce_scatter): in
 *     the reducer's landing area for the sender (its device scratch, registered with the NIC
 *     at init, every rank's address and key learnt then: gpu_mem.c). Per round the reducer
 *     reduces all n inputs in the rank tree with the provider's kernel (bitwise the host kernels),
 *     polls its event, and only then sends the round's "after" message: the done-reading
 *     signal, or, for all_reduce RS+AG, its reduced block put into every peer's recv. A sender
 *     writes a landing area again only after that message, so no area is rewritten while a
 *     kernel reads it; calls take the landing areas in issue order (g->land);
 *   PUT_P2P (send/recv): in the receiver's device slot that mirrors the message's host slot; a
 *     kernel copies it to recv and the message is consumed, returning the slot's credit, only
 *     after that kernel's event completed.
 * Before a kernel reads landed bytes, and before a call whose recv took puts finishes, the
 * provider makes NIC writes visible where the device does not order them (rdma_flush).
 *
 * Channel a -> b of a call carries, in order: READY (when b puts into a's recv), then per round
 * the data messages of a's puts to b and the after message; zc_put_chan counts them, and both
 * ends number them alike from the call alone.
 *
 * These are requests of the one engine: issue, reservation, budget, deadlines, liveness and
 * failures are progress.c's, fail.c's and channel.c's; this file is the family zc__fam_direct
 * (its links, begin and step).
 * Must not: block, allocate, or include CUDA or verbs headers. */
#include "device.h"
#include "gpu.h"

/* Phases (zc__req.phase). */
enum {
    ZC_P_TURN = 0,  /* ONESHOT, RSAG: until the landing areas are this call's */
    ZC_P_READY,     /* READY to and from the peers this rank puts into / takes puts from */
    ZC_P_PUT,       /* the round's data messages, each way */
    ZC_P_MAIN,      /* launch the round's reduction over the landed inputs */
    ZC_P_MAIN_WAIT,
    ZC_P_AFTER,     /* the round's after messages, each way */
    ZC_P_DONE,      /* the own copy completed, the puts read, landed bytes flushed */
    ZC_P_RECV,      /* send/recv, receiving: the next chunk's copy out of its slot */
    ZC_P_RECV_WAIT,
    ZC_P_FINISHED
};

/* zc__req.pflags. */
#define ZC_PUT_OWN 1u    /* COPY: this rank's own block's copy launched (its event pending) */
#define ZC_PUT_LANDED 2u /* puts landed in this call's recv: flushed before it finishes (the
                          * landing areas' bytes are flushed before the kernel that reads them) */

/* READY's payload: this rank's recv, as the peer puts into it (it adds its offset). */
typedef struct zc_pready {
    uint64_t raddr, rkey;
} zc_pready;

/* Messages on channel a -> b of a call: READY (0 or 1), then per round `data` messages and
 * `after` (0 or 1). */
typedef struct zc_pch {
    uint64_t data;
    uint32_t ready, after;
} zc_pch;

static bool zc_put_reduces(const zc__sched *s, uint32_t rank) {
    return s->kind != ZC_K_REDUCE || rank == s->root;
}

/* PUT_COPY: whether rank a puts a block into rank b's recv. */
static bool zc_put_flows(const zc__sched *s, uint32_t a, uint32_t b) {
    if (a == b) return false;
    switch (s->kind) {
    case ZC_K_BROADCAST:
    case ZC_K_SCATTER: return a == s->root;
    case ZC_K_GATHER: return b == s->root;
    default: return true; /* all_gather, all_to_all */
    }
}

static zc_pch zc_put_chan(const zc_comm *c, const zc__sched *s, uint32_t a, uint32_t b) {
    zc_pch q = {0, 0, 0};
    uint64_t blk = s->count * s->esize, area = c->gpu->area;
    if (a == b) return q;
    switch (s->alg) {
    case ZC_ALG_PUT_ONESHOT: /* a's input into reducer b; reducer a's done-reading to b */
        q.data = zc_put_reduces(s, b) && (s->kind != ZC_K_REDUCE || a != s->root);
        q.after = zc_put_reduces(s, a) && (s->kind != ZC_K_REDUCE || b != s->root);
        break;
    case ZC_ALG_PUT_RSAG:
        q.ready = s->kind == ZC_K_ALLREDUCE; /* b's reduced block goes into a's recv */
        q.data = 1;
        q.after = 1;
        break;
    default: /* PUT_COPY */
        q.ready = zc_put_flows(s, b, a);
        q.data = zc_put_flows(s, a, b) ? (blk + area - 1u) / area : 0u;
        break;
    }
    return q;
}

/* Rounds of s and its elements per round: a landing area's worth of each input (RS+AG
 * all_reduce: a region of one area per rank); PUT_COPY and PUT_P2P: one. */
static uint64_t zc_put_rounds(const zc_comm *c, const zc__sched *s, uint64_t *per) {
    uint64_t e = c->gpu->area / s->esize;
    if (s->alg == ZC_ALG_PUT_ONESHOT || s->alg == ZC_ALG_PUT_RSAG)
        *per = s->alg == ZC_ALG_PUT_RSAG && s->kind == ZC_K_ALLREDUCE ? e * c->nranks : e;
    else
        *per = s->count;
    return (s->count + *per - 1u) / *per;
}

void zc__put_route(const zc_comm *c, zc__sched *s) {
    switch (s->kind) {
    case ZC_K_ALLREDUCE:
        s->alg = s->count * s->esize <= c->cfg.gpu_oneshot_max_bytes || s->count < c->nranks
                     ? ZC_ALG_PUT_ONESHOT : ZC_ALG_PUT_RSAG;
        break;
    case ZC_K_REDUCE: s->alg = ZC_ALG_PUT_ONESHOT; break;
    case ZC_K_REDUCE_SCATTER: s->alg = ZC_ALG_PUT_RSAG; break;
    case ZC_K_SEND:
    case ZC_K_RECV: s->alg = ZC_ALG_PUT_P2P; break;
    default: s->alg = ZC_ALG_PUT_COPY; break;
    }
}

static uint64_t zc_put_msgs(const zc_comm *c, const zc__sched *s, uint32_t peer, bool tx) {
    if (s->alg == ZC_ALG_PUT_P2P) { /* a message per slot of payload, as host send/recv */
        bool mine = tx ? s->kind == ZC_K_SEND : s->kind == ZC_K_RECV;
        return mine && peer == s->root ? zc__msgs(s->count, s->chunk) : 0u;
    }
    uint64_t per, rounds = zc_put_rounds(c, s, &per);
    zc_pch q = tx ? zc_put_chan(c, s, c->rank, peer) : zc_put_chan(c, s, peer, c->rank);
    return q.ready + rounds * (q.data + q.after);
}

/* Every peer, as many as its channel carries each way. */
static void zc_put_links(const zc_comm *c, const zc__sched *s, zc__link_fn fn, void *ctx) {
    for (uint32_t p = 0; p < c->nranks; p++)
        if (p != c->rank) fn(ctx, p, zc_put_msgs(c, s, p, true), zc_put_msgs(c, s, p, false));
}

/* The NIC's registration of the device buffer at p (coll.c's routing checked that the whole
 * buffer lies in one); NULL for none. */
static const zc_wire_mr *zc_put_mr(const zc_comm *c, const void *p) {
    bool partial = false;
    int32_t e = p ? zc__mem_find(c, p, 1, ZC_MEM_CUDA, &partial) : -1;
    return e >= 0 ? &c->mems[e].mr : 0;
}

static bool zc_put_landing(const zc__sched *s) {
    return s->alg == ZC_ALG_PUT_ONESHOT || s->alg == ZC_ALG_PUT_RSAG;
}

/* After the gate: ONESHOT and RSAG wait for the landing areas; the others start at once. */
static uint32_t zc_put_start(const zc__req *r) {
    if (zc_put_landing(&r->s)) return ZC_P_TURN;
    if (r->s.alg == ZC_ALG_PUT_P2P) return r->s.kind == ZC_K_SEND ? ZC_P_PUT : ZC_P_RECV;
    return ZC_P_READY;
}

static void zc_put_begin(zc_comm *c, zc__req *r) {
    struct zc__gpu *g = c->gpu;
    ZC_ASSERT(g && zc__put_alg(r->s.alg) && r->place == 0 && g->area >= r->s.esize);
    uint64_t rounds = zc_put_rounds(c, &r->s, &r->round_elems);
    ZC_ASSERT(rounds <= UINT32_MAX);
    r->rounds = (uint32_t)rounds;
    r->round = 0;
    r->pflags = 0;
    r->smr = zc_put_mr(c, r->s.send);
    r->rmr = zc_put_mr(c, r->s.recv);
    for (uint32_t i = 0; i < c->nconn; i++) r->pl[i] = (zc__place){0};
    if (zc_put_landing(&r->s)) r->ticket = zc__turn_take(&g->land);
    r->step = r->fill = 0;
    r->phase = zc_put_start(r);
    g->direct_calls++;
}

/* ---- one message ---- */

/* Message k to peer p: bytes from src (in this rank's registration mr) put to raddr/rkey first
 * (nothing when bytes is 0), then the header-only message that says they are there. False when
 * it cannot go now (its turn, a credit, a full send queue) or the communicator failed. */
static bool zc_put_one(zc_comm *c, zc__req *r, uint32_t p, uint64_t k, const uint8_t *src,
                       const zc_wire_mr *mr, uint64_t bytes, uint64_t raddr, uint64_t rkey) {
    if (!zc__tx_begin(c, r, p, k)) return false;
    if (bytes) {
        ZC_ASSERT(mr && mr->handle);
        if (zc__tx_put(c, r, p, k, src, mr, (size_t)bytes, raddr, rkey) != ZC_OK) return false;
        r->pl[zc__ci(c, p)].direct = 1; /* finish once the wire read it: zc__tx_puts_done */
        c->gpu->direct_bytes += bytes;
    }
    return zc__tx_end_placed(c, r, p, k, 0) == ZC_OK;
}

/* A signal (no payload) as message k to peer p. */
static bool zc_put_signal(zc_comm *c, zc__req *r, uint32_t p, uint64_t k) {
    return zc__tx_begin(c, r, p, k) && zc__tx_end(c, r, p, k, 0) == ZC_OK;
}

/* True once message k from p, which the schedule expects with bytes put in place (placed) or
 * as a signal, has arrived as expected (not consumed yet); false while it has not, or when it
 * failed the communicator. */
static bool zc_put_arrived(zc_comm *c, zc__req *r, uint32_t p, uint64_t k, bool placed) {
    const uint8_t *in = zc__rx_peek(c, r, p, k, 0);
    if (!in) return false;
    if (zc__rx_placed(in, 0) == placed) return true;
    zc__fail(c, ZC_INTERNAL, r->seq, (int32_t)p, 0, "%s sequence %llu: message %llu from rank "
             "%u is %s but the direct path expects %s", zc__kind_name(r->s.kind),
             (unsigned long long)r->seq, (unsigned long long)k, p,
             placed ? "a signal" : "data put in place", placed ? "data" : "a signal");
    return false;
}

/* zc_put_arrived, then the message consumed. */
static bool zc_put_take(zc_comm *c, zc__req *r, uint32_t p, uint64_t k, bool placed) {
    if (!zc_put_arrived(c, r, p, k, placed)) return false;
    zc__rx_consume(c, r, p);
    return true;
}

/* ---- what goes where ---- */

/* Elements [lo, lo + len) of rank b's block in RS+AG all_reduce's round region. */
static void zc_put_block(const zc__req *r, uint32_t n, uint32_t b, uint64_t *lo,
                         uint64_t *len) {
    uint64_t base = (uint64_t)r->round * r->round_elems, rest = r->s.count - base;
    uint64_t L = rest < r->round_elems ? rest : r->round_elems;
    *lo = base + zc__block_lo(L, n, b);
    *len = zc__block_lo(L, n, b + 1) - zc__block_lo(L, n, b);
}

/* The round's slice [lo, lo + len) of every input (ONESHOT, reduce_scatter). */
static void zc_put_slice(const zc__req *r, uint64_t *lo, uint64_t *len) {
    *lo = (uint64_t)r->round * r->round_elems;
    *len = r->s.count - *lo < r->round_elems ? r->s.count - *lo : r->round_elems;
}

/* Data message j of the round from this rank to p: what it puts and where. */
static bool zc_put_data(zc_comm *c, zc__req *r, uint32_t p, uint64_t j, uint64_t k) {
    const zc__sched *s = &r->s;
    const struct zc__gpu *g = c->gpu;
    uint64_t es = s->esize, blk = s->count * es, lo, len;
    uint32_t me = c->rank;
    if (s->alg == ZC_ALG_PUT_COPY) { /* piece j of my block for p, into p's recv */
        uint64_t off = j * g->area, bytes = blk - off < g->area ? blk - off : g->area;
        bool by_peer = s->kind == ZC_K_SCATTER || s->kind == ZC_K_ALLTOALL;
        bool at_me = s->kind != ZC_K_BROADCAST && s->kind != ZC_K_SCATTER;
        const uint8_t *src = s->send + (by_peer ? p * blk : 0) + off;
        const zc__place *pl = &r->pl[zc__ci(c, p)];
        return zc_put_one(c, r, p, k, src, r->smr, bytes,
                          pl->raddr + (at_me ? me * blk : 0) + off, pl->rkey);
    }
    const uint8_t *src;
    if (s->alg == ZC_ALG_PUT_RSAG && s->kind == ZC_K_ALLREDUCE) {
        zc_put_block(r, c->nranks, p, &lo, &len);
        src = s->send + lo * es;
    } else {
        zc_put_slice(r, &lo, &len);
        src = s->send + ((s->kind == ZC_K_REDUCE_SCATTER ? p * s->count : 0) + lo) * es;
    }
    return zc_put_one(c, r, p, k, src, r->smr, len * es, g->peers[p].addr + me * g->area,
                      g->peers[p].rkey);
}

/* The round's after message to p: RS+AG all_reduce's reduced block into p's recv, else the
 * done-reading signal. */
static bool zc_put_after(zc_comm *c, zc__req *r, uint32_t p, uint64_t k) {
    uint64_t lo, len, es = r->s.esize;
    if (r->s.alg != ZC_ALG_PUT_RSAG || r->s.kind != ZC_K_ALLREDUCE)
        return zc_put_signal(c, r, p, k);
    zc_put_block(r, c->nranks, c->rank, &lo, &len);
    const zc__place *pl = &r->pl[zc__ci(c, p)];
    return zc_put_one(c, r, p, k, r->s.recv + lo * es, r->rmr, len * es, pl->raddr + lo * es,
                      pl->rkey);
}

/* ---- the phases' message work ---- */

bool zc__put_take_ready(zc_comm *c, zc__req *r, uint32_t p, const uint8_t *src) {
    uint64_t sblk, rblk;
    zc_pready m;
    zc__memcpy(&m, src, sizeof m);
    zc__extents_at(c, p, r->s.kind, r->s.root, &sblk, &rblk);
    uint64_t bytes = r->s.count * r->s.esize * rblk;
    if (!m.raddr || !zc__span_in(m.raddr, bytes, UINT64_MAX) || m.rkey > UINT32_MAX) {
        zc__bad_peer(c, r, p, "a READY naming address 0x%llx key 0x%llx for a recv of %llu "
                     "bytes", (unsigned long long)m.raddr, (unsigned long long)m.rkey,
                     (unsigned long long)bytes);
        return false;
    }
    r->pl[zc__ci(c, p)].raddr = m.raddr;
    r->pl[zc__ci(c, p)].rkey = m.rkey;
    return true;
}

/* READY to every peer that puts into this rank's recv, and from every peer this rank puts
 * into; true once all went both ways. */
static bool zc_put_ready(zc_comm *c, zc__req *r, uint32_t *budget) {
    bool all = true;
    for (uint32_t p = 0; p < c->nranks && !c->failed; p++) {
        zc_pch out = zc_put_chan(c, &r->s, c->rank, p), in = zc_put_chan(c, &r->s, p, c->rank);
        if (out.ready && zc__tx_done(c, r, p) == 0 && *budget) {
            uint8_t *dst = zc__tx_begin(c, r, p, 0);
            zc_pready m = {(uint64_t)(uintptr_t)r->s.recv, r->rmr ? r->rmr->rkey : 0};
            if (dst) {
                zc__memcpy(dst, &m, sizeof m);
                if (zc__tx_end(c, r, p, 0, sizeof m) != ZC_OK) return false;
                (*budget)--;
            }
        }
        if (in.ready && zc__rx_done(c, r, p) == 0 && *budget) {
            const uint8_t *src = zc__rx_peek(c, r, p, 0, sizeof(zc_pready));
            if (src) {
                if (!zc__put_take_ready(c, r, p, src)) return false;
                zc__rx_consume(c, r, p);
                (*budget)--;
            }
        }
        if ((out.ready && zc__tx_done(c, r, p) == 0) || (in.ready && zc__rx_done(c, r, p) == 0))
            all = false;
    }
    return all && !c->failed;
}

/* The round's data (after: its after messages) to and from every peer within *budget; true
 * once every one went and arrived. */
static bool zc_put_round(zc_comm *c, zc__req *r, uint32_t *budget, bool after) {
    bool all = true;
    for (uint32_t p = 0; p < c->nranks && !c->failed; p++) {
        zc_pch out = zc_put_chan(c, &r->s, c->rank, p), in = zc_put_chan(c, &r->s, p, c->rank);
        uint64_t t0 = out.ready + r->round * (out.data + out.after) + (after ? out.data : 0u);
        uint64_t t1 = t0 + (after ? out.after : out.data);
        uint64_t i0 = in.ready + r->round * (in.data + in.after) + (after ? in.data : 0u);
        uint64_t i1 = i0 + (after ? in.after : in.data);
        bool rsag = r->s.alg == ZC_ALG_PUT_RSAG && r->s.kind == ZC_K_ALLREDUCE;
        bool placed = !after || rsag; /* after messages are signals but RS+AG's block */
        bool into_recv = after ? rsag : r->s.alg == ZC_ALG_PUT_COPY;
        for (uint64_t k = zc__tx_done(c, r, p); k < t1 && *budget; k = zc__tx_done(c, r, p)) {
            if (!(after ? zc_put_after(c, r, p, k) : zc_put_data(c, r, p, k - t0, k))) break;
            (*budget)--;
        }
        for (uint64_t k = zc__rx_done(c, r, p); k < i1 && *budget; k = zc__rx_done(c, r, p)) {
            if (!zc_put_take(c, r, p, k, placed)) break;
            if (into_recv) r->pflags |= ZC_PUT_LANDED; /* flushed before the call finishes */
            (*budget)--;
        }
        if (zc__tx_done(c, r, p) < t1 || zc__rx_done(c, r, p) < i1) all = false;
    }
    return all && !c->failed;
}

/* ---- launches ---- */

/* Makes landed bytes visible to the device; false when that failed the communicator. */
static bool zc_put_flush(zc_comm *c, const zc__req *r) {
    zc_status st = c->gpu->ops->rdma_flush(c->gpu->state);
    if (st == ZC_OK) return true;
    zc__gpu_failed(c, r, st);
    return false;
}

/* COPY: this rank's own block from send to recv, where it has one and it is not in place. */
static zc_status zc_put_own_copy(zc_comm *c, zc__req *r, bool *launched) {
    const zc__sched *s = &r->s;
    uint32_t me = c->rank;
    uint64_t blk = s->count * s->esize;
    const uint8_t *from = s->send;
    uint8_t *to = s->recv;
    *launched = false;
    switch (s->kind) {
    case ZC_K_BROADCAST: if (me != s->root || !to) return ZC_OK; break;
    case ZC_K_SCATTER:
        if (me != s->root) return ZC_OK;
        from += me * blk;
        break;
    case ZC_K_GATHER: if (me != s->root) return ZC_OK; to += me * blk; break;
    case ZC_K_ALLGATHER: to += me * blk; break;
    default: from += me * blk; to += me * blk; break; /* all_to_all */
    }
    if (from == to) return ZC_OK; /* in place */
    *launched = true;
    return zc__gpu_copy(c, r, to, from, (size_t)blk);
}

/* The round's reduction at a reducer: the rank tree, landed inputs from the landing areas, this
 * rank's own from send. *launched is false when there is nothing to reduce. */
static zc_status zc_put_reduce(zc_comm *c, zc__req *r, bool *launched) {
    const zc__sched *s = &r->s;
    struct zc__gpu *g = c->gpu;
    const void *srcs[ZC_GPU_MAX_SRCS];
    uint64_t lo, len, es = s->esize, own, dst;
    if (s->alg == ZC_ALG_PUT_RSAG && s->kind == ZC_K_ALLREDUCE) {
        zc_put_block(r, c->nranks, c->rank, &lo, &len);
        own = dst = lo * es;
    } else {
        zc_put_slice(r, &lo, &len);
        own = ((s->kind == ZC_K_REDUCE_SCATTER ? c->rank * s->count : 0) + lo) * es;
        dst = lo * es;
    }
    *launched = len != 0;
    if (!len) return ZC_OK;
    for (uint32_t q = 0; q < c->nranks; q++)
        srcs[q] = q == c->rank ? s->send + own : g->scratch + q * g->area;
    return zc__gpu_reduce(c, r, s->recv + dst, srcs, (size_t)len);
}

/* ---- send/recv ---- */

/* Where channel message m from sender lands in the receiver's device slots: the offset in its
 * scratch of the slot that mirrors the message's host slot, in the sender's ring. */
static uint64_t zc_put_slot(const zc_comm *c, uint32_t sender, uint64_t m) {
    const struct zc__gpu *g = c->gpu;
    uint64_t slot = m & c->slot_mask;
    return g->p2p_at + ((uint64_t)sender * c->cfg.slots + slot) * c->cfg.slot_bytes;
}

/* Chunk k of a send/recv: its bytes and offset in the buffer. */
static uint64_t zc_put_chunk(const zc__req *r, uint64_t k, uint64_t *off) {
    uint64_t lo = k * r->s.chunk, left = r->s.count - lo;
    *off = lo * r->s.esize;
    return (left < r->s.chunk ? left : r->s.chunk) * r->s.esize;
}

/* send: every chunk put into the peer's device slot, within *budget; true once all went. */
static bool zc_put_send(zc_comm *c, zc__req *r, uint32_t *budget) {
    const struct zc__gpu *g = c->gpu;
    uint32_t p = r->s.root;
    uint64_t total = zc__msgs(r->s.count, r->s.chunk), off;
    for (uint64_t k = zc__tx_done(c, r, p); k < total && *budget; k = zc__tx_done(c, r, p)) {
        uint64_t bytes = zc_put_chunk(r, k, &off);
        uint64_t at = zc_put_slot(c, c->rank, r->base[zc__ci(c, p)].tx + k);
        if (!zc_put_one(c, r, p, k, r->s.send + off, r->smr, bytes, g->peers[p].addr + at,
                        g->peers[p].rkey))
            return false;
        (*budget)--;
    }
    return zc__tx_done(c, r, p) == total;
}

/* recv: the next chunk, once its message arrived, copied out of its slot (ZC_P_RECV_WAIT
 * consumes it when the copy completed); false while it has not (or on failure). */
static bool zc_put_recv(zc_comm *c, zc__req *r) {
    struct zc__gpu *g = c->gpu;
    uint32_t p = r->s.root;
    uint64_t k = zc__rx_done(c, r, p), off;
    if (!zc_put_arrived(c, r, p, k, true)) return false;
    uint64_t bytes = zc_put_chunk(r, k, &off);
    const uint8_t *slot = g->scratch + zc_put_slot(c, p, r->base[zc__ci(c, p)].rx + k);
    return zc_put_flush(c, r) &&
           zc__gpu_launched(c, r, zc__gpu_copy(c, r, r->s.recv + off, slot, (size_t)bytes));
}

/* ---- the state machine ---- */

/* After a round's after messages: the next round, or the end. */
static uint32_t zc_put_next_round(zc__req *r) {
    return ++r->round < r->rounds ? ZC_P_PUT : ZC_P_DONE;
}

/* The end: the own copy completed, every put read by the wire, landed bytes flushed, and the
 * landing areas passed on. */
static bool zc_put_done(zc_comm *c, zc__req *r) {
    if (r->pflags & ZC_PUT_OWN) {
        if (zc__gpu_waited(c, r) != ZC_OK) return false;
        r->pflags &= ~ZC_PUT_OWN;
    }
    if (!zc__tx_puts_done(c, r)) return false;
    if ((r->pflags & ZC_PUT_LANDED) && !zc_put_flush(c, r)) return false;
    if (zc_put_landing(&r->s)) zc__turn_pass(&c->gpu->land);
    return true;
}

/* One phase transition (or a batch of messages); false when the request has to wait. */
static bool zc_put_advance(zc_comm *c, zc__req *r, uint32_t *budget) {
    bool launched = false;
    zc_status st;
    switch (r->phase) {
    case ZC_P_TURN:
        if (!zc__turn_mine(&c->gpu->land, r->ticket)) return false;
        r->phase = r->s.kind == ZC_K_ALLREDUCE && r->s.alg == ZC_ALG_PUT_RSAG ? ZC_P_READY
                                                                              : ZC_P_PUT;
        break;
    case ZC_P_READY:
        if (r->s.alg == ZC_ALG_PUT_COPY && !(r->pflags & ZC_PUT_OWN)) {
            st = zc_put_own_copy(c, r, &launched);
            if (st != ZC_OK || launched || r->bind) { /* a stream's program has the step */
                if (!zc__gpu_launched(c, r, st)) return false;
                r->pflags |= ZC_PUT_OWN;
            }
        }
        if (!zc_put_ready(c, r, budget)) return false;
        r->phase = ZC_P_PUT;
        return true; /* the messages spent their own budget */
    case ZC_P_PUT:
        if (r->s.alg == ZC_ALG_PUT_P2P) {
            if (!zc_put_send(c, r, budget)) return false;
            r->phase = ZC_P_DONE;
            return true;
        }
        if (!zc_put_round(c, r, budget, false)) return false;
        r->phase = r->s.alg == ZC_ALG_PUT_COPY ? ZC_P_DONE : ZC_P_MAIN;
        return true;
    case ZC_P_MAIN:
        if (!zc_put_reduces(&r->s, c->rank)) { /* a stream's program has the step: empty */
            if (r->bind && !zc__gpu_launched(c, r, ZC_OK)) return false;
            r->phase = r->bind ? ZC_P_MAIN_WAIT : ZC_P_AFTER;
            break;
        }
        /* In place, the result overwrites what this rank put: the wire must have read it. */
        if (r->s.send == r->s.recv && r->s.alg == ZC_ALG_PUT_ONESHOT && !zc__tx_puts_done(c, r))
            return false;
        if (!zc_put_flush(c, r)) return false;
        st = zc_put_reduce(c, r, &launched);
        if (st != ZC_OK || launched || r->bind) {
            if (!zc__gpu_launched(c, r, st)) return false;
            r->phase = ZC_P_MAIN_WAIT;
        } else {
            r->phase = ZC_P_AFTER;
        }
        break;
    case ZC_P_MAIN_WAIT:
        if (zc__gpu_waited(c, r) != ZC_OK) return false;
        r->phase = ZC_P_AFTER;
        break;
    case ZC_P_AFTER:
        if (!zc_put_round(c, r, budget, true)) return false;
        r->phase = zc_put_next_round(r);
        return true;
    case ZC_P_RECV:
        if (zc__rx_done(c, r, r->s.root) == zc__msgs(r->s.count, r->s.chunk)) {
            r->phase = ZC_P_DONE;
            break;
        }
        if (!zc_put_recv(c, r)) return false;
        r->phase = ZC_P_RECV_WAIT;
        break;
    case ZC_P_RECV_WAIT:
        if (zc__gpu_waited(c, r) != ZC_OK) return false;
        zc__rx_consume(c, r, r->s.root); /* the slot's credit: the copy has read it */
        r->phase = ZC_P_RECV;
        break;
    case ZC_P_DONE:
        if (!zc_put_done(c, r)) return false;
        r->phase = ZC_P_FINISHED;
        break;
    default: return false;
    }
    (*budget)--;
    return true;
}

static bool zc_put_step(zc_comm *c, zc__req *r, uint32_t *budget) {
    ZC_ASSERT(c->gpu && r >= c->reqs && r < c->reqs + c->cfg.max_requests);
    while (*budget && !c->failed && r->phase != ZC_P_FINISHED && zc_put_advance(c, r, budget)) {
    }
    if (c->failed || r->phase != ZC_P_FINISHED) return false;
    ZC_ASSERT(!r->bind || r->step == c->gpu->binds[r->bind - 1u].steps); /* the program's */
    return true;
}

/* Launch points per call: COPY's own copy, a reduction per round (ONESHOT, RSAG; an empty step
 * where this rank reduces nothing), a copy per chunk received (P2P). */
uint32_t zc__put_steps(const zc_comm *c, const zc__sched *s) {
    uint64_t per, n;
    switch (s->alg) {
    case ZC_ALG_PUT_COPY: n = 1; break;
    case ZC_ALG_PUT_P2P: n = s->kind == ZC_K_RECV ? zc__msgs(s->count, s->chunk) : 0u; break;
    default: n = zc_put_rounds(c, s, &per); break;
    }
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

const zc__family zc__fam_direct = {"direct", ZC_FAM_STREAM, zc_put_links, zc_put_begin,
                                   zc_put_step};
