/* sched_stage.c: device-memory calls staged through host memory: every collective and send/recv
 * on registered ZC_MEM_CUDA buffers over a wire that cannot map peers' device buffers
 * (transport_ib, or any wire with cfg->gpu_path ZC_GPU_PATH_STAGED), and device send/recv on
 * every wire.
 *
 * A staged call is one request of the one engine (ZC_ALG_STAGED): issued like any call, it
 * reserves at issue the channel numbers of all its rounds (the sum of its rounds' host
 * schedules' messages with each peer). Each round moves `per` elements of every block (the
 * last round the rest):
 *   D2H   the round's slice of every block of send: device-to-host copies on the provider's
 *         stream into the staging's in part, the request's event polled (never synchronized);
 *   HOST  the ordinary host schedule of the round (zc__build's choice for the round's count, on
 *         the staging's in and out parts; its reductions are the host kernels, which the device
 *         kernels equal bitwise), stepped by zc__step within progress's budget; its channel
 *         numbers start where the previous round's ended (the bases move by its messages);
 *   H2D   the round's slice of every block of recv from the out part, event polled.
 * Collectives share one staging buffer of the arena (cfg->gpu_stage_bytes) and take it in issue
 * order (a ticket taken at issue), which every rank shares, so waiting for it cannot deadlock:
 * the call holding it never waits for a later one. Send/recv have no order common to all ranks
 * (a recv issued before a send on both ends would wait for each other's staging), so each
 * request slot has a staging of its own for them, of cfg->slot_bytes: one message per round.
 * `per` depends on the call and cfg alone, so every rank runs the same rounds (gpu_stage_bytes
 * must be equal everywhere; a difference shows as a fingerprint mismatch of the first round).
 * Failures are the engine's: a provider fault fails the communicator with its sentence (zc__fail
 * reports it to the peers); deadlines, dead peers and mismatches as for host calls.
 * Must not: block, allocate, or include CUDA headers (the provider does the copies). */
#include "engine.h"
#include "gpu.h"

typedef enum zc_sphase {
    ZC_S_TURN = 0, /* wait until the staging is this call's (its ticket is served) */
    ZC_S_D2H,      /* launch the round's device-to-host copies */
    ZC_S_D2H_WAIT,
    ZC_S_HOST,     /* the round's host schedule */
    ZC_S_H2D,      /* launch the round's host-to-device copies */
    ZC_S_H2D_WAIT,
    ZC_S_DONE
} zc_sphase;

/* Per request slot. */
typedef struct zc_srq {
    uint32_t phase;       /* zc_sphase */
    uint32_t own;         /* 1: send/recv, on the slot's own staging (no ticket) */
    uint8_t *base;        /* the staging it uses */
    uint64_t ticket;      /* its turn at the staging */
    uint64_t round, rounds;
    uint64_t per;         /* elements of every block per round */
    zc__sched dev;        /* the call as issued (device buffers, ZC_ALG_STAGED) */
    zc__sched full, last; /* host schedules of a full round and of the last round */
    uint64_t full_tx, full_rx, last_tx, last_rx; /* their messages, all peers together */
} zc_srq;

struct zc__stage {
    const zc_gpu_ops *ops; /* the communicator's gpu provider (zc__gpu_open's) */
    void *gstate;
    uint32_t path;         /* zc_gpu_path decided at init: IPC or STAGED */
    uint32_t pad_;
    uint8_t *buf;          /* the collectives' staging */
    uint64_t bytes;
    uint8_t *p2p;          /* [max_requests][slot_bytes] send/recv's staging, per request slot */
    uint64_t next, serving; /* tickets: the next one handed out; the one holding the staging */
    uint64_t calls, rounds; /* staged calls issued and rounds run (tests read them) */
    zc_srq pend;           /* the call being issued: zc__stage_msgs reads its rounds */
    zc_srq *rqs;           /* [max_requests] */
};

static size_t zc_salign(size_t v) { return (v + 63u) & ~(size_t)63u; }

size_t zc__stage_bytes(const zc_config *cfg) {
    if (!zc__gpu_provider(cfg)) return 0;
    return zc_salign(sizeof(struct zc__stage)) + zc_salign(cfg->max_requests * sizeof(zc_srq)) +
           (size_t)cfg->max_requests * cfg->slot_bytes + cfg->gpu_stage_bytes;
}

void zc__stage_open(zc_comm *c, const zc_gpu_ops *ops, void *gstate) {
    size_t at = zc_salign(sizeof(struct zc__stage));
    struct zc__stage *st = (struct zc__stage *)(void *)c->stage_area;
    *st = (struct zc__stage){0};
    st->ops = ops;
    st->gstate = gstate;
    st->rqs = (zc_srq *)(void *)(c->stage_area + at);
    st->p2p = c->stage_area + at + zc_salign(c->cfg.max_requests * sizeof(zc_srq));
    st->buf = st->p2p + (size_t)c->cfg.max_requests * c->cfg.slot_bytes;
    st->bytes = c->cfg.gpu_stage_bytes;
    if (c->cfg.gpu_path != ZC_GPU_PATH_AUTO) st->path = c->cfg.gpu_path;
    else st->path = c->wire->mem_register ? ZC_GPU_PATH_STAGED : ZC_GPU_PATH_IPC;
    c->stage = st;
}

uint32_t zc__stage_path(const zc_comm *c) { return c->stage ? c->stage->path : 0u; }

const char *zc_comm_gpu_path(const zc_comm *c) {
    if (!zc__comm_ok(c) || !c->stage) return "none";
    return c->stage->path == ZC_GPU_PATH_STAGED ? "staged" : "ipc";
}

void zc_comm_gpu_staged(const zc_comm *c, uint64_t *calls, uint64_t *rounds) {
    bool has = zc__comm_ok(c) && c->stage;
    if (calls) *calls = has ? c->stage->calls : 0;
    if (rounds) *rounds = has ? c->stage->rounds : 0;
}

/* Blocks of one round the staging holds at most, at any rank (in and out together). */
static uint64_t zc_stage_blocks(uint32_t kind, uint64_t n) {
    switch (kind) {
    case ZC_K_SEND:
    case ZC_K_RECV: return 1;
    case ZC_K_REDUCE_SCATTER:
    case ZC_K_ALLGATHER:
    case ZC_K_GATHER:
    case ZC_K_SCATTER: return n + 1u;
    case ZC_K_ALLTOALL: return 2u * n;
    default: return 2;
    }
}

static bool zc_stage_p2p(uint32_t kind) { return kind == ZC_K_SEND || kind == ZC_K_RECV; }

/* Elements of every block per round. */
static uint64_t zc_stage_per(const zc_comm *c, const zc__sched *s) {
    uint64_t room = zc_stage_p2p(s->kind) ? c->cfg.slot_bytes : c->stage->bytes;
    return room / (zc_stage_blocks(s->kind, c->nranks) * s->esize);
}

zc_status zc__stage_route(zc_comm *c, zc__sched *s) {
    uint64_t blocks = zc_stage_blocks(s->kind, c->nranks);
    if (zc_stage_per(c, s) == 0)
        return zc__error(c, ZC_LIMIT, "%s: device memory is staged through host memory here and "
                         "cfg->gpu_stage_bytes (%llu) holds less than one element of each of "
                         "its %llu blocks", zc__kind_name(s->kind),
                         (unsigned long long)c->stage->bytes, (unsigned long long)blocks);
    s->alg = ZC_ALG_STAGED;
    return ZC_OK;
}

/* The staging's in and out parts of a round of len elements per block. */
static void zc_stage_parts(const zc_comm *c, const zc__sched *d, uint8_t *base, uint64_t len,
                           uint8_t **in, uint8_t **out) {
    uint64_t sb, rb;
    zc__extents(c, d->kind, d->root, &sb, &rb);
    *in = d->kind == ZC_K_RECV ? 0 : base;
    *out = d->kind == ZC_K_SEND ? 0 : d->kind == ZC_K_RECV ? base
                                     : base + (sb ? sb : 1u) * len * d->esize;
}

/* The host schedule of a round of len elements per block. */
static zc_status zc_stage_sched(zc_comm *c, const zc__sched *d, uint8_t *base, uint64_t len,
                                zc__sched *out) {
    uint8_t *in, *o;
    zc_stage_parts(c, d, base, len, &in, &o);
    return zc__build(c, d->kind, in, o, (size_t)len, (zc_dtype)d->dtype, (zc_op)d->op, d->root,
                     out);
}

zc_status zc__stage_prepare(zc_comm *c, const zc__sched *s) {
    struct zc__stage *st = c->stage;
    zc_srq *q = &st->pend;
    ZC_ASSERT(st && s->alg == ZC_ALG_STAGED && s->count);
    *q = (zc_srq){0};
    q->dev = *s;
    q->own = zc_stage_p2p(s->kind);
    q->base = q->own ? st->p2p : st->buf; /* send/recv: moved to the slot's below */
    q->per = zc_stage_per(c, s);
    if (q->per > s->count) q->per = s->count;
    q->rounds = (s->count + q->per - 1u) / q->per;
    uint64_t last = s->count - (q->rounds - 1u) * q->per;
    zc_status rc = zc_stage_sched(c, s, q->base, q->per, &q->full);
    if (rc == ZC_OK) rc = zc_stage_sched(c, s, q->base, last, &q->last);
    return rc;
}

void zc__stage_begin(zc_comm *c, zc__req *r) {
    struct zc__stage *st = c->stage;
    zc_srq *q = &st->pend;
    const zc__sched *s = &q->dev;
    uint32_t i = (uint32_t)(r - c->reqs);
    uint64_t last = s->count - (q->rounds - 1u) * q->per;
    if (q->own) {
        q->base = st->p2p + (size_t)i * c->cfg.slot_bytes;
        (void)zc_stage_sched(c, s, q->base, q->per, &q->full);
        (void)zc_stage_sched(c, s, q->base, last, &q->last);
        q->phase = ZC_S_D2H;
    }
    for (uint32_t p = 0; p < c->nranks; p++) {
        if (p == c->rank) continue;
        q->full_tx += zc__tx_total(c, &q->full, p);
        q->full_rx += zc__rx_total(c, &q->full, p);
        q->last_tx += zc__tx_total(c, &q->last, p);
        q->last_rx += zc__rx_total(c, &q->last, p);
    }
    if (!q->own) q->ticket = st->next++;
    st->rqs[i] = *q;
    st->calls++;
}

uint64_t zc__stage_msgs(const zc_comm *c, const zc__sched *s, uint32_t peer, bool tx) {
    const zc_srq *q = &c->stage->pend;
    ZC_ASSERT(q->dev.count == s->count && q->dev.kind == s->kind && q->dev.send == s->send);
    uint64_t full = tx ? zc__tx_total(c, &q->full, peer) : zc__rx_total(c, &q->full, peer);
    uint64_t last = tx ? zc__tx_total(c, &q->last, peer) : zc__rx_total(c, &q->last, peer);
    return (q->rounds - 1u) * full + last;
}

/* ---- the rounds ---- */

/* Launches the round's copies: device to host (in) or host to device. */
static zc_status zc_stage_copies(zc_comm *c, const zc_srq *q, bool in) {
    const struct zc__stage *st = c->stage;
    const zc__sched *d = &q->dev;
    uint64_t sb, rb, lo = q->round * q->per, es = d->esize;
    uint64_t len = d->count - lo < q->per ? d->count - lo : q->per;
    uint8_t *pin, *pout;
    zc__extents(c, d->kind, d->root, &sb, &rb);
    zc_stage_parts(c, d, q->base, len, &pin, &pout);
    uint8_t *dev = in ? (uint8_t *)(uintptr_t)d->send : d->recv;
    zc_status rc = ZC_OK;
    for (uint64_t b = 0; dev && b < (in ? sb : rb) && rc == ZC_OK; b++) {
        uint8_t *dv = dev + (b * d->count + lo) * es, *hs = (in ? pin : pout) + b * len * es;
        rc = in ? st->ops->copy(st->gstate, hs, dv, (size_t)(len * es))
                : st->ops->copy(st->gstate, dv, hs, (size_t)(len * es));
    }
    return rc == ZC_OK ? st->ops->event_record(st->gstate, (uint32_t)(q - st->rqs)) : rc;
}

/* Fails the communicator with the provider's sentence; false. */
static bool zc_stage_fail(zc_comm *c, const zc__req *r, zc_status rc) {
    zc__fail(c, rc, r->seq, -1, 0, "%s (staged through host memory): %s",
             zc__kind_name(r->s.kind), c->stage->ops->error_text(c->stage->gstate));
    return false;
}

/* True once the request's event completed; false before, or when it failed. */
static bool zc_stage_waited(zc_comm *c, const zc__req *r, uint32_t idx) {
    zc_status rc = c->stage->ops->event_query(c->stage->gstate, idx);
    if (rc == ZC_OK) return true;
    return rc == ZC_IN_PROGRESS ? false : zc_stage_fail(c, r, rc);
}

static const zc__sched *zc_stage_round(const zc_srq *q) {
    return q->round + 1u == q->rounds ? &q->last : &q->full;
}

/* The round's host schedule within *budget; true once it finished. It sees the round as a
 * whole call: its schedule and, as messages left, only the round's. */
static bool zc_stage_host(zc_comm *c, zc__req *r, zc_srq *q, uint32_t *budget) {
    uint64_t later = q->rounds - q->round - 1u; /* rounds after this one */
    uint64_t tx = later ? (later - 1u) * q->full_tx + q->last_tx : 0;
    uint64_t rx = later ? (later - 1u) * q->full_rx + q->last_rx : 0;
    r->s = *zc_stage_round(q);
    r->tx_left -= tx;
    r->rx_left -= rx;
    zc__step(c, r, budget);
    r->s = q->dev;
    r->tx_left += tx;
    r->rx_left += rx;
    if (c->failed || r->status != ZC_OK) return false;
    r->status = ZC_IN_PROGRESS;
    return true;
}

/* After a round: the next round's channel numbers start after this one's; the next phase. */
static uint32_t zc_stage_next(zc_comm *c, zc__req *r, zc_srq *q) {
    const zc__sched *R = zc_stage_round(q);
    for (uint32_t p = 0; p < c->nranks; p++) {
        if (p == c->rank) continue;
        r->tx_base[p] += zc__tx_total(c, R, p);
        r->rx_base[p] += zc__rx_total(c, R, p);
    }
    r->a = r->b = 0;
    c->stage->rounds++;
    if (++q->round < q->rounds) return ZC_S_D2H;
    if (!q->own) c->stage->serving++; /* the staging passes to the next staged call */
    return ZC_S_DONE;
}

/* One phase transition; false when the request has to wait (or failed). */
static bool zc_stage_advance(zc_comm *c, zc__req *r, zc_srq *q, uint32_t idx,
                             uint32_t *budget) {
    zc_status rc;
    switch (q->phase) {
    case ZC_S_TURN:
        if (c->stage->serving != q->ticket) return false;
        q->phase = ZC_S_D2H;
        break;
    case ZC_S_D2H:
    case ZC_S_H2D:
        rc = zc_stage_copies(c, q, q->phase == ZC_S_D2H);
        if (rc != ZC_OK) return zc_stage_fail(c, r, rc);
        q->phase++;
        break;
    case ZC_S_D2H_WAIT:
        if (!zc_stage_waited(c, r, idx)) return false;
        q->phase = ZC_S_HOST;
        break;
    case ZC_S_HOST:
        if (!zc_stage_host(c, r, q, budget)) return false;
        q->phase = ZC_S_H2D;
        return true; /* the schedule spent its own budget */
    case ZC_S_H2D_WAIT:
        if (!zc_stage_waited(c, r, idx)) return false;
        q->phase = zc_stage_next(c, r, q);
        break;
    default: return false;
    }
    (*budget)--;
    return true;
}

void zc__stage_step(zc_comm *c, zc__req *r, uint32_t *budget) {
    uint32_t idx = (uint32_t)(r - c->reqs);
    zc_srq *q = &c->stage->rqs[idx];
    while (*budget && !c->failed && q->phase != ZC_S_DONE &&
           zc_stage_advance(c, r, q, idx, budget)) {
    }
    if (!c->failed && q->phase == ZC_S_DONE) {
        ZC_ASSERT(r->tx_left == 0 && r->rx_left == 0);
        r->status = ZC_OK;
    }
}
