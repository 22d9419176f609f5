/* sched_stage.c: device-memory calls staged through host memory: every collective and send/recv
 * on registered ZC_MEM_CUDA buffers over transport_ib when the direct path is not possible (or
 * any wire with cfg->gpu_path ZC_GPU_PATH_STAGED), and device send/recv on the ipc path.
 *
 * A staged call is one request of the one engine (ZC_ALG_STAGED): issued like any call, it
 * reserves at issue the channel numbers of all its rounds (the sum of its rounds' host
 * schedules' messages with each peer). Each round moves `per` elements of every block (the
 * last round the rest):
 *   D2H   the round's slice of every block of send: device-to-host copies on the provider's
 *         stream into the staging's in part, the request's event polled (never synchronized);
 *   HOST  the ordinary host schedule of the round (zc__choose's for the round's count, on
 *         the staging's in and out parts; its reductions are the host kernels, which the device
 *         kernels equal bitwise), stepped by the host family within progress's budget; its channel
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
#include "device.h"
#include "gpu.h"

void zc__stage_open(zc_comm *c, const zc_gpu_ops *ops, void *gstate) {
    struct zc__stage *st = c->stage_area; /* carved, with its buffers, by comm.c */
    st->ops = ops;
    st->gstate = gstate;
    st->bytes = c->cfg.gpu_stage_bytes;
    c->stage = st;
}

void zc_comm_gpu_staged(const zc_comm *c, uint64_t *calls, uint64_t *rounds) {
    bool has = zc__comm_ok(c) && c->stage;
    if (calls) *calls = has ? c->stage->calls : 0;
    if (rounds) *rounds = has ? c->stage->rounds : 0;
}

void zc_comm_gpu_direct(const zc_comm *c, uint64_t *calls, uint64_t *bytes) {
    bool has = zc__comm_ok(c) && c->gpu;
    if (calls) *calls = has ? c->gpu->direct_calls : 0;
    if (bytes) *bytes = has ? c->gpu->direct_bytes : 0;
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

/* The host schedule of a round of len elements per block: the call as issued, on the staging's
 * parts, with the host algorithm that len elements get (zc__choose's, as for a host call of
 * that size; the arguments were checked at the call). */
static void zc_stage_sched(const zc_comm *c, const zc__sched *d, uint8_t *base, uint64_t len,
                           zc__sched *out) {
    uint8_t *in, *o;
    zc_stage_parts(c, d, base, len, &in, &o);
    *out = *d;
    out->count = len;
    out->send = in;
    out->recv = o;
    out->alg = (uint8_t)zc__choose(c, d->kind, len, len * d->esize);
}

/* A staged call's rounds: elements per round, the host schedules of a full and of the last
 * round, at base; the same on every rank (from the call and cfg alone). */
static void zc_stage_plan(const zc_comm *c, const zc__sched *s, uint8_t *base, zc__stage_req *q) {
    ZC_ASSERT(c->stage && s->alg == ZC_ALG_STAGED && s->count);
    *q = (zc__stage_req){0};
    q->dev = *s;
    q->own = zc_stage_p2p(s->kind);
    q->base = base;
    q->per = zc_stage_per(c, s);
    if (q->per > s->count) q->per = s->count;
    q->rounds = (s->count + q->per - 1u) / q->per;
    uint64_t last = s->count - (q->rounds - 1u) * q->per;
    zc_stage_sched(c, s, q->base, q->per, &q->full);
    zc_stage_sched(c, s, q->base, last, &q->last);
}

/* Per-peer sums of the host schedules' messages, for the rounds of a staged call (at most
 * ZC_GPU_MAX_SRCS ranks: there is no device state beyond). */
typedef struct zc_stage_sum {
    uint64_t tx[ZC_GPU_MAX_SRCS], rx[ZC_GPU_MAX_SRCS];
    uint64_t times; /* how many rounds the schedule being visited stands for */
} zc_stage_sum;

static void zc_stage_add(void *ctx, uint32_t peer, uint64_t tx, uint64_t rx) {
    zc_stage_sum *m = ctx;
    m->tx[peer] += m->times * tx;
    m->rx[peer] += m->times * rx;
}

/* Every peer's messages over all of q's rounds. */
static void zc_stage_sums(const zc_comm *c, const zc__stage_req *q, zc_stage_sum *m) {
    ZC_ASSERT(c->nranks <= ZC_GPU_MAX_SRCS);
    zc__memset(m, 0, sizeof *m);
    m->times = q->rounds - 1u;
    if (m->times) zc__fam_host.links(c, &q->full, zc_stage_add, m);
    m->times = 1;
    zc__fam_host.links(c, &q->last, zc_stage_add, m);
}

static void zc_stage_links(const zc_comm *c, const zc__sched *s, zc__link_fn fn, void *ctx) {
    zc__stage_req q;
    zc_stage_sum m;
    zc_stage_plan(c, s, c->stage->buf, &q);
    zc_stage_sums(c, &q, &m);
    for (uint32_t p = 0; p < c->nranks; p++)
        if (p != c->rank) fn(ctx, p, m.tx[p], m.rx[p]);
}

/* Totals, all peers together, of one round's schedule. */
static void zc_stage_total(void *ctx, uint32_t peer, uint64_t tx, uint64_t rx) {
    uint64_t *t = ctx;
    (void)peer;
    t[0] += tx;
    t[1] += rx;
}

static void zc_stage_begin(zc_comm *c, zc__req *r) {
    struct zc__stage *st = c->stage;
    zc__stage_req *q = r->stg;
    uint32_t i = (uint32_t)(r - c->reqs);
    bool own = zc_stage_p2p(r->s.kind);
    /* Send/recv on the request slot's own staging; collectives on the shared one, in turn. */
    zc_stage_plan(c, &r->s, own ? st->p2p + (size_t)i * c->cfg.slot_bytes : st->buf, q);
    uint64_t t[2] = {0, 0};
    zc__fam_host.links(c, &q->full, zc_stage_total, t);
    q->full_tx = t[0];
    q->full_rx = t[1];
    t[0] = t[1] = 0;
    zc__fam_host.links(c, &q->last, zc_stage_total, t);
    q->last_tx = t[0];
    q->last_rx = t[1];
    if (own) q->phase = ZC_S_D2H;
    else q->ticket = zc__turn_take(&st->turn);
    st->calls++;
}

/* ---- the rounds ---- */

/* Launches the round's copies: device to host (in) or host to device. */
static zc_status zc_stage_copies(zc_comm *c, const zc__stage_req *q, bool in) {
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
    return rc;
}

static const zc__sched *zc_stage_round(const zc__stage_req *q) {
    return q->round + 1u == q->rounds ? &q->last : &q->full;
}

/* The round's host schedule within *budget; true once it finished. It sees the round as a
 * whole call: its schedule and, as messages left, only the round's. */
static bool zc_stage_host(zc_comm *c, zc__req *r, zc__stage_req *q, uint32_t *budget) {
    uint64_t later = q->rounds - q->round - 1u; /* rounds after this one */
    uint64_t tx = later ? (later - 1u) * q->full_tx + q->last_tx : 0;
    uint64_t rx = later ? (later - 1u) * q->full_rx + q->last_rx : 0;
    r->s = *zc_stage_round(q);
    r->tx_left -= tx;
    r->rx_left -= rx;
    bool done = zc__fam_host.step(c, r, budget);
    r->s = q->dev;
    r->tx_left += tx;
    r->rx_left += rx;
    return done && !c->failed;
}

/* Moves a peer's channel numbers past one round's messages. */
typedef struct zc_shift {
    const zc_comm *c;
    zc__req *r;
} zc_shift;
static void zc_stage_shift(void *ctx, uint32_t peer, uint64_t tx, uint64_t rx) {
    const zc_comm *c = ((zc_shift *)ctx)->c;
    zc__req *r = ((zc_shift *)ctx)->r;
    r->base[zc__ci(c, peer)].tx += tx;
    r->base[zc__ci(c, peer)].rx += rx;
}

/* After a round: the next round's channel numbers start after this one's; the next phase. */
static uint32_t zc_stage_next(zc_comm *c, zc__req *r, zc__stage_req *q) {
    zc_shift x = {c, r};
    zc__fam_host.links(c, zc_stage_round(q), zc_stage_shift, &x);
    r->a = r->b = 0;
    c->stage->rounds++;
    if (++q->round < q->rounds) return ZC_S_D2H;
    if (!q->own) zc__turn_pass(&c->stage->turn); /* the staging: to the next staged call */
    return ZC_S_DONE;
}

/* One phase transition; false when the request has to wait (or failed). The copies' launch
 * and wait are sched_gpu.c's (the request's event, the provider's sentence on a failure). */
static bool zc_stage_advance(zc_comm *c, zc__req *r, zc__stage_req *q, uint32_t *budget) {
    switch (q->phase) {
    case ZC_S_TURN:
        if (!zc__turn_mine(&c->stage->turn, q->ticket)) return false;
        q->phase = ZC_S_D2H;
        break;
    case ZC_S_D2H:
    case ZC_S_H2D:
        if (!zc__gpu_launched(c, r, zc_stage_copies(c, q, q->phase == ZC_S_D2H))) return false;
        q->phase++;
        break;
    case ZC_S_D2H_WAIT:
        if (zc__gpu_waited(c, r) != ZC_OK) return false;
        q->phase = ZC_S_HOST;
        break;
    case ZC_S_HOST:
        if (!zc_stage_host(c, r, q, budget)) return false;
        q->phase = ZC_S_H2D;
        return true; /* the schedule spent its own budget */
    case ZC_S_H2D_WAIT:
        if (zc__gpu_waited(c, r) != ZC_OK) return false;
        q->phase = zc_stage_next(c, r, q);
        break;
    default: return false;
    }
    (*budget)--;
    return true;
}

static bool zc_stage_step(zc_comm *c, zc__req *r, uint32_t *budget) {
    zc__stage_req *q = r->stg;
    while (*budget && !c->failed && q->phase != ZC_S_DONE && zc_stage_advance(c, r, q, budget)) {
    }
    return !c->failed && q->phase == ZC_S_DONE;
}

const zc__family zc__fam_staged = {"staged", 0, zc_stage_links, zc_stage_begin, zc_stage_step};
