/* sym.c: the symmetric region (zcoll.h, "the symmetric region") and the single-copy schedule
 * ZC_ALG_SYM of collectives whose buffers lie in it. The shared-memory wire maps every rank's
 * region into every process at init; zc_sym_alloc carves it by moving a mark (comm->sym_used).
 *
 * ZC_ALG_SYM exchanges two messages each way with every peer: message 0, "ready", carries the
 * offsets of the sender's send and recv buffers in its region (ZC_SYM_NONE when unused) and
 * says its inputs are ready; message 1, "done", says the sender no longer reads or writes any
 * rank's buffers. Between them each rank does its share of the work straight in the peers'
 * buffers: a reduction reduces this rank's block of every input in the rank tree (zc__reduce, as
 * every other algorithm) and writes it where the result goes; a copy collective's chunk copies
 * are numbered over (destination rank, source rank, chunk) and rank r does those numbered
 * r, r + n, r + 2n, ... State: r->a = the next chunk (reductions) or copy number of this rank.
 * A peer's offsets are checked when its ready message is read (zc_sym_take): every byte the
 * call addresses through them lies in that peer's region, whatever the peer wrote.
 *
 * A send and its recv exchange one message, the sender's "ready" with its send buffer's
 * offset: the receiver copies straight from the sender's region into its recv and consumes the
 * message only then, so the credit that returns on the send's channel tells the sender that
 * its buffer is no longer read (no message back: a channel's numbers in each direction follow
 * one rank's issue order, and a rank's sends and recvs to one peer interleave as it likes). */
#include "engine.h"
#include "reduce.h"

#define ZC_SYM_NONE UINT64_MAX /* a buffer this rank does not use */

typedef struct zc_sym_ready {
    uint64_t send_off, recv_off;
} zc_sym_ready;

static uint8_t *zc_sym_base(const zc_comm *c, uint32_t rank) {
    return c->wire && c->wire->sym_base ? c->wire->sym_base(c->wire_state, rank) : 0;
}

static uint64_t zc_sym_bytes(const zc_comm *c) {
    return zc_sym_base(c, c->rank) ? c->cfg.sym_bytes : 0;
}

static zc_status zc_sym_alloc_locked(zc_comm *c, size_t bytes, void **out) {
    zc__calls_forget(c); /* which buffers lie in the region decides a call's schedule */
    if (!out || !bytes)
        return zc__error(c, ZC_INVALID_ARG, "zc_sym_alloc: %s", !out ? "out is NULL"
                                                                     : "bytes is 0");
    *out = 0;
    uint64_t have = zc_sym_bytes(c), want = ((uint64_t)bytes + 63u) & ~(uint64_t)63u;
    if (!have)
        return zc__error(c, ZC_UNSUPPORTED, "zc_sym_alloc: this communicator has no symmetric "
                         "region (cfg->sym_bytes is %llu; only the shared-memory wire has one)",
                         (unsigned long long)c->cfg.sym_bytes);
    if (want < bytes || want > have - c->sym_used)
        return zc__error(c, ZC_LIMIT, "zc_sym_alloc: %zu bytes do not fit: %llu of the region's "
                         "%llu bytes are free (cfg->sym_bytes)", bytes,
                         (unsigned long long)(have - c->sym_used), (unsigned long long)have);
    *out = zc_sym_base(c, c->rank) + c->sym_used;
    c->sym_used += want;
    return ZC_OK;
}

static zc_status zc_sym_free_locked(zc_comm *c, void *p) {
    zc__calls_forget(c);
    uint8_t *base = zc_sym_base(c, c->rank);
    uintptr_t at = (uintptr_t)p, lo = (uintptr_t)base;
    if (!base || !p || at < lo || at - lo >= c->sym_used || (at - lo) % 64u)
        return zc__error(c, ZC_INVALID_ARG, "zc_sym_free: %p is not a live zc_sym_alloc "
                         "block of this communicator", p);
    c->sym_used = at - lo;
    return ZC_OK;
}

zc_status zc_sym_alloc(zc_comm *comm, size_t bytes, void **out) {
    ZC_LOCKED(comm, zc_sym_alloc_locked(comm, bytes, out));
}

zc_status zc_sym_free(zc_comm *comm, void *p) { ZC_LOCKED(comm, zc_sym_free_locked(comm, p)); }

/* Offset of [p, p+bytes) in this rank's region; ZC_SYM_NONE when bytes is 0; false when it
 * does not lie in the region. */
static bool zc_sym_off(const zc_comm *c, const void *p, uint64_t bytes, uint64_t *off) {
    uintptr_t at = (uintptr_t)p, lo = (uintptr_t)zc_sym_base(c, c->rank);
    *off = ZC_SYM_NONE;
    if (!bytes) return true;
    if (!lo || at < lo || at - lo > c->sym_used || bytes > c->sym_used - (at - lo)) return false;
    *off = at - lo;
    return true;
}

/* The offsets of the buffers this rank uses, when every one lies in the region. */
static bool zc_sym_offsets(const zc_comm *c, const zc__sched *s, zc_sym_ready *o) {
    uint64_t sblk, rblk;
    zc__extents(c, s->kind, s->root, &sblk, &rblk);
    uint64_t blk = s->count * s->esize;
    return zc_sym_off(c, s->send, blk * sblk, &o->send_off) &&
           zc_sym_off(c, s->recv, blk * rblk, &o->recv_off);
}

bool zc__sym_fits(const zc_comm *c, const zc__sched *s) {
    zc_sym_ready o;
    switch (s->kind) {
    case ZC_K_ALLTOALL:
        if (s->send == s->recv) return false; /* peers would read what this rank writes */
        break;
    case ZC_K_ALLREDUCE:
    case ZC_K_REDUCE:
    case ZC_K_REDUCE_SCATTER:
        if (s->count < c->nranks) return false;
        break;
    case ZC_K_BROADCAST:
    case ZC_K_ALLGATHER:
    case ZC_K_GATHER:
    case ZC_K_SCATTER:
    case ZC_K_SEND: /* the receiver needs its recv in the region too, so both ends choose alike */
    case ZC_K_RECV: break;
    default: return false;
    }
    return c->nranks > 1 && s->count * s->esize >= ZC_SYM_MIN_BYTES && zc_sym_offsets(c, s, &o);
}

/* ---- the schedule ---- */

typedef struct zc_sym_ctx {
    zc_comm *c;
    zc__req *r;
    uint32_t *budget;
    uint32_t me, n, E, es;
    bool stream;
} zc_sym_ctx;

/* Rank p's send (recv) buffer as mapped here, from its ready message (r->pl[p].raddr and
 * .rkey hold its send and recv offsets: ZC_ALG_SYM has no placement). */
static const uint8_t *zc_sym_src(const zc_sym_ctx *x, uint32_t p) {
    return zc_sym_base(x->c, p) + x->r->pl[zc__ci(x->c, p)].raddr;
}

static uint8_t *zc_sym_dst(const zc_sym_ctx *x, uint32_t p) {
    return zc_sym_base(x->c, p) + x->r->pl[zc__ci(x->c, p)].rkey;
}

/* Sends message k (0 ready, 1 done) to every peer that has not had it; true once all have. */
static bool zc_sym_signal(zc_sym_ctx *x, uint64_t k) {
    bool all = true;
    for (uint32_t p = 0; p < x->n; p++) {
        if (p == x->me || zc__tx_done(x->c, x->r, p) > k) continue;
        uint8_t *out = *x->budget ? zc__tx_begin(x->c, x->r, p, k) : 0;
        if (!out) {
            all = false;
            continue;
        }
        size_t bytes = 0;
        if (k == 0) {
            zc_sym_ready o;
            zc_sym_offsets(x->c, &x->r->s, &o);
            zc__memcpy(out, &o, sizeof o);
            bytes = sizeof o;
        }
        if (zc__tx_end(x->c, x->r, p, k, bytes) != ZC_OK) return false;
        (*x->budget)--;
    }
    return all;
}

/* Peer p's ready message in: the offsets of its send and recv buffers, each checked against
 * the region for the bytes this call reads or writes there (p's extents), before any is used
 * (r->pl[p]: raddr the send's, rkey the recv's). False when that failed the communicator. */
static bool zc_sym_take(const zc_sym_ctx *x, uint32_t p, const uint8_t *in) {
    const zc__sched *s = &x->r->s;
    uint64_t sblk, rblk, blk = s->count * x->es, region = zc_sym_bytes(x->c);
    zc_sym_ready o;
    zc__memcpy(&o, in, sizeof o);
    /* A recv's peer is the send of the pair: its send buffer, no recv. */
    zc__extents_at(x->c, p, s->kind == ZC_K_RECV ? ZC_K_SEND : s->kind, s->root, &sblk, &rblk);
    uint64_t off[2] = {o.send_off, o.recv_off}, bytes[2] = {blk * sblk, blk * rblk};
    for (int b = 0; b < 2; b++)
        if (!zc__span_in(off[b], bytes[b], region)) {
            zc__bad_peer(x->c, x->r, p, "a ready message that puts its %s buffer (%llu bytes) "
                         "at offset %llu of its symmetric region, which has %llu bytes",
                         b ? "recv" : "send", (unsigned long long)bytes[b],
                         (unsigned long long)off[b], (unsigned long long)region);
            return false;
        }
    x->r->pl[zc__ci(x->c, p)].raddr = o.send_off;
    x->r->pl[zc__ci(x->c, p)].rkey = o.recv_off;
    return true;
}

/* Consumes message k from every peer that has sent it; true once all have. */
static bool zc_sym_await(zc_sym_ctx *x, uint64_t k) {
    bool all = true;
    for (uint32_t p = 0; p < x->n; p++) {
        if (p == x->me || zc__rx_done(x->c, x->r, p) > k) continue;
        const uint8_t *in = *x->budget ? zc__rx_peek(x->c, x->r, p, k,
                                                     k == 0 ? sizeof(zc_sym_ready) : 0) : 0;
        if (!in) {
            all = false;
            continue;
        }
        if (k == 0 && !zc_sym_take(x, p, in)) return false;
        zc__rx_consume(x->c, x->r, p);
        (*x->budget)--;
    }
    return all;
}

static void zc_sym_copy(const zc_sym_ctx *x, uint8_t *dst, const uint8_t *src, uint64_t bytes) {
    if (dst == src) return;
    if (x->stream) zc__copy_stream(dst, src, bytes);
    else zc__memcpy(dst, src, bytes);
}

/* all_reduce, reduce, reduce_scatter: chunk r->a of this rank's block of every input. */
static bool zc_sym_reduce(zc_sym_ctx *x) {
    const zc__sched *s = &x->r->s;
    bool rs = s->kind == ZC_K_REDUCE_SCATTER;
    uint64_t lo = rs ? x->me * s->count : zc__block_lo(s->count, x->n, x->me);
    uint64_t len = rs ? s->count : zc__block_lo(s->count, x->n, x->me + 1) - lo;
    uint64_t total = zc__msgs(len, x->E);
    const void *ins[ZC_MESH_MAX_RANKS]; /* overlay mode has no symmetric region */
    for (; *x->budget && x->r->a < total; x->r->a++, (*x->budget)--) {
        uint64_t at = x->r->a * x->E, elems = len - at < x->E ? len - at : x->E;
        uint64_t bytes = elems * x->es, in_off = (lo + at) * x->es;
        uint64_t out_off = rs ? at * x->es : in_off;
        for (uint32_t p = 0; p < x->n; p++) ins[p] = zc_sym_src(x, p) + in_off;
        uint32_t owner = s->kind == ZC_K_REDUCE ? s->root : x->me;
        uint8_t *out = zc_sym_dst(x, owner) + out_off;
        zc__reduce(out, ins, x->n, elems, (zc_dtype)s->dtype, (zc_op)s->op);
        for (uint32_t q = 0; q < x->n && s->kind == ZC_K_ALLREDUCE; q++)
            if (q != x->me) zc_sym_copy(x, zc_sym_dst(x, q) + out_off, out, bytes);
    }
    return x->r->a == total;
}

/* The copy of chunk c of rank p's block to rank q, if the collective has one. */
static void zc_sym_copy_one(const zc_sym_ctx *x, uint32_t q, uint32_t p, uint64_t c) {
    const zc__sched *s = &x->r->s;
    uint64_t blk = s->count * x->es, at = c * x->E * x->es;
    uint64_t bytes = (s->count - c * x->E < x->E ? s->count - c * x->E : x->E) * x->es;
    uint64_t src_off = 0, dst_off = 0;
    switch (s->kind) {
    case ZC_K_ALLTOALL: src_off = q * blk; dst_off = p * blk; break;
    case ZC_K_ALLGATHER: dst_off = p * blk; break;
    case ZC_K_GATHER:
        if (q != s->root) return;
        dst_off = p * blk;
        break;
    case ZC_K_SCATTER:
        if (p != s->root) return;
        src_off = q * blk;
        break;
    default: /* broadcast */
        if (p != s->root) return;
        break;
    }
    zc_sym_copy(x, zc_sym_dst(x, q) + dst_off + at, zc_sym_src(x, p) + src_off + at, bytes);
}

/* all_gather, all_to_all, gather, scatter, broadcast: copies r->a, r->a + n, ... */
static bool zc_sym_copies(zc_sym_ctx *x) {
    uint64_t C = zc__msgs(x->r->s.count, x->E), total = (uint64_t)x->n * x->n * C;
    for (; *x->budget && x->r->a < total; x->r->a += x->n, (*x->budget)--) {
        uint64_t pair = x->r->a / C;
        zc_sym_copy_one(x, (uint32_t)(pair / x->n), (uint32_t)(pair % x->n), x->r->a % C);
    }
    return x->r->a >= total;
}

/* send, recv: the sender's ready message out, then its credit back; the receiver reads the
 * offset (r->b = 1), copies chunk r->a on, and consumes the message after the last. */
static bool zc_sym_p2p(zc_sym_ctx *x) {
    zc__req *r = x->r;
    const zc__sched *s = &r->s;
    uint32_t p = s->root;
    if (s->kind == ZC_K_SEND) {
        if (zc__tx_done(x->c, r, p) == 0) {
            uint8_t *out = *x->budget ? zc__tx_begin(x->c, r, p, 0) : 0;
            if (!out) return false;
            zc_sym_ready o;
            zc_sym_offsets(x->c, s, &o);
            zc__memcpy(out, &o, sizeof o);
            if (zc__tx_end(x->c, r, p, 0, sizeof o) != ZC_OK) return false;
            (*x->budget)--;
        }
        return zc__tx_consumed(x->c, r, p, 0);
    }
    if (!r->b) {
        const uint8_t *in = *x->budget ? zc__rx_peek(x->c, r, p, 0, sizeof(zc_sym_ready)) : 0;
        if (!in || !zc_sym_take(x, p, in)) return false;
        r->b = 1;
        (*x->budget)--;
    }
    uint64_t total = zc__msgs(s->count, x->E);
    for (; *x->budget && r->a < total; r->a++, (*x->budget)--) {
        uint64_t at = r->a * x->E, elems = s->count - at < x->E ? s->count - at : x->E;
        zc_sym_copy(x, s->recv + at * x->es, zc_sym_src(x, p) + at * x->es, elems * x->es);
    }
    if (r->a < total) return false;
    zc__rx_consume(x->c, r, p); /* the sender's buffer is free from here */
    return true;
}

static bool zc_sym_step(zc_comm *c, zc__req *r, uint32_t *budget) {
    zc_sym_ctx x = {c, r, budget, c->rank, c->nranks, r->s.chunk, r->s.esize,
                    zc__result_bytes(&r->s, c->nranks) >= ZC_STREAM_COPY_MIN_BYTES};
    uint32_t k = r->s.kind;
    bool reduces = k == ZC_K_ALLREDUCE || k == ZC_K_REDUCE || k == ZC_K_REDUCE_SCATTER;
    if (k == ZC_K_SEND || k == ZC_K_RECV) return zc_sym_p2p(&x);
    if (!zc_sym_signal(&x, 0) || c->failed || !zc_sym_await(&x, 0)) return false;
    if (!r->b) { /* every peer is ready: this rank's own offsets, and where its work starts */
        zc_sym_ready o;
        zc_sym_offsets(c, &r->s, &o);
        r->pl[zc__ci(c, c->rank)].raddr = o.send_off;
        r->pl[zc__ci(c, c->rank)].rkey = o.recv_off;
        r->a = reduces ? 0 : c->rank;
        r->b = 1;
    }
    if (!(reduces ? zc_sym_reduce(&x) : zc_sym_copies(&x))) return false;
    if (!zc_sym_signal(&x, 1) || c->failed || !zc_sym_await(&x, 1)) return false;
    return r->tx_left == 0 && r->rx_left == 0;
}

/* Ready and done each way with every peer; a send's ready to its recv alone. */
static void zc_sym_links(const zc_comm *c, const zc__sched *s, zc__link_fn fn, void *ctx) {
    if (s->kind == ZC_K_SEND || s->kind == ZC_K_RECV) {
        fn(ctx, s->root, s->kind == ZC_K_SEND, s->kind == ZC_K_RECV);
        return;
    }
    for (uint32_t p = 0; p < c->nranks; p++)
        if (p != c->rank) fn(ctx, p, 2, 2);
}

const zc__family zc__fam_sym = {"symmetric", ZC_FAM_EAGER, zc_sym_links, 0, zc_sym_step};
