/* sched.c: the host family (zc__fam_host): every host collective's schedule as a state machine
 * over per-peer message streams. Each algorithm is a row of zc_host_algs: its links (how many
 * messages a call exchanges with each peer: what the issue reserves and the finish checks) and
 * its step (moves a request forward within a message budget). Payloads are chunks of at
 * most s->chunk elements; the k-th message on a channel carries the stream's chunk k. Every
 * reduction is one zc__reduce over all n inputs of a chunk in the rank tree, so results do not
 * depend on the algorithm. State counters: r->a = chunks of local work done (reduced or
 * copied); r->b = barrier round phase.
 *
 * Placement (wires with put, engine.h): a copy stream (chunks the receiver only copies into
 * its result: broadcast, gather, scatter, all-gather, all-to-all, the all-gather half of
 * all_reduce) of at least comm->put_min bytes starts with a ready message from its
 * receiver, naming its registered destination or none; the sender then puts each chunk there
 * and posts the chunk's message with the header only, and the receiver skips the copy. */
#include "engine.h"
#include "reduce.h"

typedef struct zc_ctx {
    zc_comm *comm;
    zc__req *r;
    uint32_t *budget;
    uint32_t me, n, E, es;
    bool stream;         /* copies into the result use streaming stores (a large result) */
} zc_ctx;

static uint64_t zc_min(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Elements in chunk k of a stream of len elements. */
static uint64_t zc_chunk_len(const zc_ctx *x, uint64_t len, uint64_t k) {
    return zc_min(x->E, len - k * x->E);
}

static uint64_t zc_blen(const zc__sched *s, uint32_t n, uint32_t b) {
    return zc__block_lo(s->count, n, b + 1) - zc__block_lo(s->count, n, b);
}

/* Relative rank in a broadcast from root, and the tree's parent and children. */
static uint32_t zc_rel(uint32_t me, uint32_t root, uint32_t n) {
    return me >= root ? me - root : me + n - root;
}

static uint32_t zc_lowbit(uint32_t v) { return v & (~v + 1u); }

static bool zc_is_child(const zc__sched *s, uint32_t n, uint32_t v, uint32_t c) {
    if (c == 0 || c <= v) return false;
    if (s->alg == ZC_ALG_CHAIN) return c == v + 1;
    uint32_t d = c - v, low = v ? zc_lowbit(v) : 0;
    return zc_lowbit(d) == d && (v == 0 || d < low) && c < n;
}

static uint32_t zc_parent(const zc__sched *s, uint32_t v) {
    return s->alg == ZC_ALG_CHAIN ? v - 1 : v - zc_lowbit(v);
}

static uint32_t zc_barrier_rounds(uint32_t n) { /* ceil(log2(n)) */
    return n > 1u ? 32u - (uint32_t)__builtin_clz(n - 1u) : 0u;
}

/* The tree's children of relative rank v, in order: the first, then the one after child c (n
 * when there is none). Binomial: v + 1, v + 2, v + 4, ... below v's lowest set bit (every power
 * of two for the root); chain: v + 1. */
static uint32_t zc_child_at(const zc__sched *s, uint32_t n, uint32_t v, uint64_t d) {
    bool ok = v + d < n && (s->alg == ZC_ALG_CHAIN ? d == 1 : v == 0 || d < zc_lowbit(v));
    return ok ? v + (uint32_t)d : n;
}

static uint32_t zc_first_child(const zc__sched *s, uint32_t n, uint32_t v) {
    return zc_child_at(s, n, v, 1);
}

static uint32_t zc_next_child(const zc__sched *s, uint32_t n, uint32_t v, uint32_t c) {
    return zc_child_at(s, n, v, 2u * (uint64_t)(c - v));
}

/* ---- the host algorithms' messages: the one rule of how many each call exchanges ---- */

/* links(c, s, C, fn, ctx) calls fn(ctx, peer, tx, rx) once for every peer the call exchanges
 * messages with (tx to it, rx from it; C: messages of one whole stream), never for this rank:
 * what the issue reserves on each channel, and all the schedule moves. */
typedef void (*zc_links_fn)(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                            void *ctx);

static void zc_links_none(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                          void *ctx) {
    (void)c, (void)s, (void)C, (void)fn, (void)ctx;
}

/* Every peer: tx and rx. */
static void zc_links_every(const zc_comm *c, uint64_t tx, uint64_t rx, zc__link_fn fn,
                           void *ctx) {
    for (uint32_t p = 0; p < c->nranks; p++)
        if (p != c->rank) fn(ctx, p, tx, rx);
}

/* A rooted pattern: the root sends root_tx to and receives root_rx from every peer; a non-root
 * the mirror with the root alone. */
static void zc_links_rooted(const zc_comm *c, uint32_t root, uint64_t root_tx, uint64_t root_rx,
                            zc__link_fn fn, void *ctx) {
    if (c->rank == root) zc_links_every(c, root_tx, root_rx, fn, ctx);
    else fn(ctx, root, root_rx, root_tx);
}

/* One-shot all_reduce: every input to every peer. */
static void zc_links_all_c(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                           void *ctx) {
    (void)s;
    zc_links_every(c, C, C, fn, ctx);
}

static void zc_links_direct(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                            void *ctx) {
    switch (s->kind) {
    case ZC_K_REDUCE:
    case ZC_K_GATHER: zc_links_rooted(c, s->root, 0, C, fn, ctx); break;
    case ZC_K_SCATTER: zc_links_rooted(c, s->root, C, 0, fn, ctx); break;
    default: zc_links_every(c, C, C, fn, ctx); break; /* reduce_scatter, allgather, alltoall */
    }
}

/* RS+AG: block p to p, then my reduced block to p; the same back. */
static void zc_links_rsag(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                          void *ctx) {
    uint32_t n = c->nranks;
    uint64_t mine = zc__msgs(zc_blen(s, n, c->rank), s->chunk);
    (void)C;
    for (uint32_t p = 0; p < n; p++) {
        uint64_t m = p == c->rank ? 0 : zc__msgs(zc_blen(s, n, p), s->chunk) + mine;
        if (p != c->rank) fn(ctx, p, m, m);
    }
}

/* RS + gather: block p to p, then, to the root, my reduced block (non-roots). */
static void zc_links_rsgather(const zc_comm *c, const zc__sched *s, uint64_t C,
                              zc__link_fn fn, void *ctx) {
    uint32_t n = c->nranks, me = c->rank, root = s->root;
    uint64_t mine = zc__msgs(zc_blen(s, n, me), s->chunk);
    (void)C;
    for (uint32_t p = 0; p < n; p++) {
        if (p == me) continue;
        uint64_t theirs = zc__msgs(zc_blen(s, n, p), s->chunk);
        fn(ctx, p, theirs + (p == root ? mine : 0), mine + (me == root ? theirs : 0));
    }
}

/* Broadcast down a tree or chain: the whole stream from the parent, to every child. */
static void zc_links_tree(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                          void *ctx) {
    uint32_t n = c->nranks, v = zc_rel(c->rank, s->root, n);
    if (v) fn(ctx, zc__add_mod(zc_parent(s, v), s->root, n), 0, C);
    for (uint32_t k = zc_first_child(s, n, v); k < n; k = zc_next_child(s, n, v, k))
        fn(ctx, zc__add_mod(k, s->root, n), C, 0);
}

/* Dissemination: one message to rank + 2^i and one from rank - 2^i in round i; the targets
 * are distinct, and so are the sources, but a peer may be both. */
static void zc_links_dissem(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                            void *ctx) {
    uint32_t n = c->nranks, me = c->rank, rounds = zc_barrier_rounds(n);
    (void)s, (void)C;
    for (uint32_t i = 0; i < rounds; i++) {
        uint32_t to = zc__add_mod(me, 1u << i, n);
        uint64_t rx = 0;
        for (uint32_t j = 0; j < rounds; j++) rx += zc__add_mod(to, 1u << j, n) == me;
        fn(ctx, to, 1, rx);
    }
    for (uint32_t j = 0; j < rounds; j++) {
        uint32_t from = zc__add_mod(me, n - (1u << j), n);
        bool target = false;
        for (uint32_t i = 0; i < rounds && !target; i++)
            target = zc__add_mod(me, 1u << i, n) == from;
        if (!target) fn(ctx, from, 0, 1);
    }
}

static void zc_links_p2p(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                         void *ctx) {
    (void)c;
    if (s->kind == ZC_K_SEND) fn(ctx, s->root, C, 0);
    else fn(ctx, s->root, 0, C);
}

/* ---- the log-depth algorithms' ranks ----
 * The canonical reduction tree (docs/algorithms.md): p = the largest power of two <= n,
 * e = n - p. Ranks 2i and 2i+1 (i < e) fold into virtual rank i (the odd one hands its input to
 * the even one and gets the result back), rank r >= 2e is virtual rank r - e; in step k virtual
 * rank u combines its partial with that of u ^ 2^k, the lower one's on the left. */
typedef struct zc_vr {
    uint32_t e;     /* folded pairs */
    uint32_t steps; /* log2(p) */
} zc_vr;

static zc_vr zc_vr_of(uint32_t n) { /* n >= 1: steps = floor(log2(n)) */
    uint32_t steps = n ? 31u - (uint32_t)__builtin_clz(n) : 0u;
    return (zc_vr){n - (1u << steps), steps};
}

/* Whether real rank m hands its input to m - 1 (it has no virtual rank). */
static bool zc_vr_folded(const zc_vr *v, uint32_t m) { return m < 2u * v->e && (m & 1u); }
static uint32_t zc_vr_virt(const zc_vr *v, uint32_t m) { return m < 2u * v->e ? m / 2u : m - v->e; }
static uint32_t zc_vr_real(const zc_vr *v, uint32_t u) { return u < v->e ? 2u * u : u + v->e; }

/* Elements of one recursive-doubling chunk: the partial of a chunk, in accumulator format
 * (acc_bytes an element), fills one request's ZC_R_ACC slice at most (which is at most a
 * slot). A host schedule's chunk is one slot of its elements (zc_build), so the slot's bytes
 * come from the schedule, in the request's own lines, not from the configuration's. */
static uint32_t zc_rd_elems_of(const zc__sched *s, size_t acc_bytes) {
    return (uint32_t)(zc__acc_slice_of((uint64_t)s->chunk * s->esize) / acc_bytes);
}
static uint32_t zc_rd_elems(const zc__sched *s) {
    return zc_rd_elems_of(s, zc__acc_bytes((zc_dtype)s->dtype, (zc_op)s->op));
}

/* Recursive doubling over a view of the ranks: view index i is real rank i * stride, this rank
 * is index me (every rank: stride 1; the hierarchical schedule's leaders: stride hblock). */
typedef struct zc_rdv {
    zc_vr v;
    uint32_t me, stride;
} zc_rdv;

/* Its links: C messages each way with the fold partner and with the partner of every step (all
 * distinct ranks). */
static void zc_links_rd_view(const zc_rdv *w, uint64_t C, zc__link_fn fn, void *ctx) {
    if (w->me < 2u * w->v.e) fn(ctx, (w->me ^ 1u) * w->stride, C, C);
    if (zc_vr_folded(&w->v, w->me)) return;
    uint32_t u = zc_vr_virt(&w->v, w->me);
    for (uint32_t k = 0; k < w->v.steps; k++)
        fn(ctx, zc_vr_real(&w->v, u ^ (1u << k)) * w->stride, C, C);
}

static void zc_links_rd(const zc_comm *c, const zc__sched *s, uint64_t C_slots, zc__link_fn fn,
                        void *ctx) {
    zc_rdv w = {zc_vr_of(c->nranks), c->rank, 1};
    (void)C_slots;
    zc_links_rd_view(&w, zc__msgs(s->count, zc_rd_elems(s)), fn, ctx);
}

/* The canonical tree as a reduction toward the root (ZC_ALG_VTREE): virtual rank u's place
 * relative to the root's virtual rank ur is u ^ ur; in step k the ranks whose relative place
 * has its low k bits clear are still in, and of each pair u, u ^ 2^k the one with bit k set
 * sends its partial (message c per chunk c) to the other, which combines the lower virtual
 * rank's on the left: the tree's order at every element. A folded odd rank hands its input to
 * its even rank; when it is the root, the even rank sends it the result back. */
static void zc_links_vtree(const zc_comm *c, const zc__sched *s, uint64_t C_slots,
                           zc__link_fn fn, void *ctx) {
    zc_vr v = zc_vr_of(c->nranks);
    uint32_t me = c->rank, root = s->root;
    uint64_t C = zc__msgs(s->count, zc_rd_elems(s));
    (void)C_slots;
    if (me < 2u * v.e) {
        if (me & 1u) fn(ctx, me - 1u, C, me == root ? C : 0);
        else fn(ctx, me + 1u, me + 1u == root ? C : 0, C);
    }
    if (zc_vr_folded(&v, me)) return;
    uint32_t u = zc_vr_virt(&v, me), rel = u ^ zc_vr_virt(&v, root);
    for (uint32_t k = 0; k < v.steps && !(rel & ((1u << k) - 1u)); k++) {
        bool up = rel >> k & 1u;
        fn(ctx, zc_vr_real(&v, u ^ (1u << k)), up ? C : 0, up ? 0 : C);
    }
}

/* The hierarchical all_reduce and barrier (ZC_ALG_HRD): messages per link, the chunks of an
 * all_reduce (E elements each) or a barrier's one empty message. */
static uint64_t zc_hrd_msgs_of(const zc__sched *s, uint32_t E) {
    return s->kind == ZC_K_BARRIER ? 1u : zc__msgs(s->count, E);
}
static uint64_t zc_hrd_msgs(const zc__sched *s) {
    return zc_hrd_msgs_of(s, s->kind == ZC_K_BARRIER ? 0u : zc_rd_elems(s));
}

/* ZC_ALG_HRD over blocks of q = c->hblock ranks: in the block's tree a rank of block index
 * l > 0 sends C partials to its parent l - lowbit(l) and gets C results back; it gets C
 * partials from each child l + d (d a power of two below lowbit(l), or below q for the leader,
 * l = 0) and sends it C results; the leaders exchange recursive doubling's links over the
 * H = n / q blocks (a leader's view index is its block). */
static void zc_links_hrd(const zc_comm *c, const zc__sched *s, uint64_t C_slots, zc__link_fn fn,
                         void *ctx) {
    uint32_t q = c->hblock, me = c->rank, l = me & (q - 1u), low = l ? zc_lowbit(l) : q;
    uint64_t C = zc_hrd_msgs(s);
    (void)C_slots;
    if (l) fn(ctx, me - low, C, C);
    for (uint32_t d = low >> 1; d; d >>= 1) fn(ctx, me + d, C, C);
    if (l) return;
    zc_rdv w = {zc_vr_of(c->nranks / q), me / q, q};
    zc_links_rd_view(&w, C, fn, ctx);
}

/* Bruck's all_gather: in round k (distance d = 2^k) a rank sends the blocks it holds of ranks
 * me .. me + min(d, n - d) - 1 to me - d and gets those of me + d .. from me + d. Bytes of
 * round k in blocks: */
static uint32_t zc_bruck_blocks(uint32_t n, uint32_t k) {
    uint32_t d = 1u << k;
    return d < n - d ? d : n - d;
}

/* The round's peers (to: me - d, from: me + d) are distinct across rounds in each direction,
 * but the rank sent to in one round may be the one received from in another: one call of fn
 * per peer with both counts. */
static void zc_links_bruck(const zc_comm *c, const zc__sched *s, uint64_t C_slots,
                           zc__link_fn fn, void *ctx) {
    uint32_t n = c->nranks, me = c->rank, rounds = zc_barrier_rounds(n);
    (void)C_slots;
    for (uint32_t k = 0; k < rounds; k++) {
        uint32_t to = zc__add_mod(me, n - (1u << k), n);
        uint64_t tx = zc__msgs(zc_bruck_blocks(n, k) * s->count, s->chunk), rx = 0;
        for (uint32_t j = 0; j < rounds; j++)
            if (zc__add_mod(me, 1u << j, n) == to)
                rx = zc__msgs(zc_bruck_blocks(n, j) * s->count, s->chunk);
        fn(ctx, to, tx, rx);
    }
    for (uint32_t j = 0; j < rounds; j++) {
        uint32_t from = zc__add_mod(me, 1u << j, n);
        bool target = false;
        for (uint32_t k = 0; k < rounds && !target; k++)
            target = zc__add_mod(me, n - (1u << k), n) == from;
        if (!target) fn(ctx, from, 0, zc__msgs(zc_bruck_blocks(n, j) * s->count, s->chunk));
    }
}

/* Bruck's all_to_all: in round k (distance d = 2^k) a rank sends to me + d the blocks whose
 * index (destination - me, mod n) has bit k set and gets the same indices from me - d. Blocks
 * of round k: */
static uint32_t zc_bruck_a2a_blocks(uint32_t n, uint32_t k) {
    uint32_t d = 1u << k, rest = n % (2u * d);
    return (n / (2u * d)) * d + (rest > d ? rest - d : 0);
}

/* As zc_links_bruck, the other way round: to me + d, from me - d. */
static void zc_links_bruck_a2a(const zc_comm *c, const zc__sched *s, zc__link_fn fn,
                               void *ctx) {
    uint32_t n = c->nranks, me = c->rank, rounds = zc_barrier_rounds(n);
    for (uint32_t k = 0; k < rounds; k++) {
        uint32_t to = zc__add_mod(me, 1u << k, n);
        uint64_t tx = zc__msgs(zc_bruck_a2a_blocks(n, k) * s->count, s->chunk), rx = 0;
        for (uint32_t j = 0; j < rounds; j++)
            if (zc__add_mod(me, n - (1u << j), n) == to)
                rx = zc__msgs(zc_bruck_a2a_blocks(n, j) * s->count, s->chunk);
        fn(ctx, to, tx, rx);
    }
    for (uint32_t j = 0; j < rounds; j++) {
        uint32_t from = zc__add_mod(me, n - (1u << j), n);
        bool target = false;
        for (uint32_t k = 0; k < rounds && !target; k++)
            target = zc__add_mod(me, 1u << k, n) == from;
        if (!target) fn(ctx, from, 0, zc__msgs(zc_bruck_a2a_blocks(n, j) * s->count, s->chunk));
    }
}

static void zc_links_bruck_any(const zc_comm *c, const zc__sched *s, uint64_t C_slots,
                               zc__link_fn fn, void *ctx) {
    if (s->kind == ZC_K_ALLTOALL) zc_links_bruck_a2a(c, s, fn, ctx);
    else zc_links_bruck(c, s, C_slots, fn, ctx);
}

/* Binomial gather / scatter: relative rank v's subtree is v .. v + size - 1 (the root's: all
 * n); each block travels as its own C messages (C: messages of one block), so a rank's stream
 * to its parent (gather) or from it (scatter) is its subtree's blocks in relative order: its
 * own, then each child's stream, children in increasing order. */
static uint32_t zc_bino_size(uint32_t n, uint32_t v) {
    return v == 0 ? n : (uint32_t)zc_min(zc_lowbit(v), n - v);
}

static void zc_links_binomial(const zc_comm *c, const zc__sched *s, uint64_t C, zc__link_fn fn,
                              void *ctx) {
    uint32_t n = c->nranks, v = zc_rel(c->rank, s->root, n);
    bool up = s->kind == ZC_K_GATHER;
    if (v) {
        uint64_t m = zc_bino_size(n, v) * C;
        fn(ctx, zc__add_mod(zc_parent(s, v), s->root, n), up ? m : 0, up ? 0 : m);
    }
    for (uint32_t k = zc_first_child(s, n, v); k < n; k = zc_next_child(s, n, v, k)) {
        uint64_t m = zc_bino_size(n, k) * C;
        fn(ctx, zc__add_mod(k, s->root, n), up ? 0 : m, up ? m : 0);
    }
}

/* ---- placement ---- */

typedef struct zc_stream {
    uint64_t len;   /* elements */
    uint64_t dst;   /* where it goes in the receiver's recv buffer (elements) */
} zc_stream;

/* The copy stream from rank `from` to rank `to` of a collective, if it has one. */
static bool zc_copy_stream(const zc__sched *s, uint32_t n, uint32_t from, uint32_t to,
                           zc_stream *o) {
    o->dst = 0;
    o->len = s->count;
    switch (s->alg) {
    case ZC_ALG_TREE:
    case ZC_ALG_CHAIN: return zc_is_child(s, n, zc_rel(from, s->root, n), zc_rel(to, s->root, n));
    case ZC_ALG_RSAG: /* RSGATHER's blocks are reduced straight into the slots: not copies */
        o->len = zc_blen(s, n, from);
        o->dst = zc__block_lo(s->count, n, from);
        return true;
    case ZC_ALG_DIRECT:
        o->dst = (uint64_t)from * s->count;
        switch (s->kind) {
        case ZC_K_ALLGATHER:
        case ZC_K_ALLTOALL: return true;
        case ZC_K_GATHER: return to == s->root;
        case ZC_K_SCATTER: o->dst = 0; return from == s->root;
        default: return false; /* reduce, reduce_scatter: the receiver reduces */
        }
    default: return false;
    }
}

/* Whether the stream from -> to is written in place (ready message and puts), and which.
 * Collectives only: a ready message on the send/recv lane would share a channel with the data
 * of the other direction's sends, and the two ends may issue sends and receives in different
 * orders, so they would number that channel's messages differently. */
static bool zc_placed_stream(const zc_comm *comm, const zc__sched *s, uint32_t from, uint32_t to,
                             zc_stream *o) {
    return zc_copy_stream(s, comm->nranks, from, to, o) && o->len &&
           o->len * s->esize >= comm->put_min &&
           (comm->wire != &zc__wire_hier ||
            zc__hier_puts(comm->wire_state, from == comm->rank ? to : from));
}

void zc__place_plan(zc_comm *comm, zc__req *r) {
    const zc__sched *s = &r->s;
    uint32_t me = comm->rank;
    r->place = 0;
    if (s->alg == ZC_ALG_STAGED) return; /* its rounds' streams go through the slots */
    if (s->alg == ZC_ALG_RD || s->alg == ZC_ALG_BRUCK || s->alg == ZC_ALG_BINOMIAL ||
        s->alg == ZC_ALG_RH || s->alg == ZC_ALG_RAB || s->alg == ZC_ALG_VTREE ||
        s->alg == ZC_ALG_SCAG || s->alg == ZC_ALG_HRD)
        return; /* their streams go through the slots; no O(n) scan */
    for (uint32_t i = 0; i < comm->nconn; i++) {
        uint32_t p = comm->conn_peer[i];
        zc__place *pl = &r->pl[i];
        zc_stream st;
        *pl = (zc__place){0};
        if (p == me) continue;
        pl->ready_out = zc_placed_stream(comm, s, p, me, &st);
        pl->ready_in = zc_placed_stream(comm, s, me, p, &st);
        if (pl->ready_out || pl->ready_in) r->place = ZC_PLACE_ON | ZC_PLACE_HANDSHAKE;
    }
}

/* The registration of the caller's memory holding [p, p+bytes) that the wire can put to and
 * from; NULL when none does. */
static const zc__mem_entry *zc_place_find(const zc_comm *comm, const void *p, uint64_t bytes) {
    int32_t i = zc__mem_find(comm, p, bytes, ZC_MEM_HOST, NULL);
    return i >= 0 && comm->mems[i].mr.handle ? &comm->mems[i] : 0;
}

/* The ready messages: where each stream into this rank goes (its registered destination, or
 * raddr 0) and, read from each peer this rank streams to, where its stream goes. */
typedef struct zc_ready_msg {
    uint64_t raddr, rkey;
} zc_ready_msg;

bool zc__place_take(zc_comm *comm, zc__req *r, uint32_t p, const uint8_t *in) {
    zc_ready_msg msg;
    zc_stream st;
    zc__memcpy(&msg, in, sizeof msg);
    zc_placed_stream(comm, &r->s, comm->rank, p, &st);
    uint64_t bytes = st.len * r->s.esize;
    if (msg.raddr && (!zc__span_in(msg.raddr, bytes, UINT64_MAX) || msg.rkey > UINT32_MAX)) {
        zc__bad_peer(comm, r, p, "a ready message naming address 0x%llx key 0x%llx for a "
                     "stream of %llu bytes", (unsigned long long)msg.raddr,
                     (unsigned long long)msg.rkey, (unsigned long long)bytes);
        return false;
    }
    r->pl[zc__ci(comm, p)].raddr = msg.raddr;
    r->pl[zc__ci(comm, p)].rkey = msg.rkey;
    return true;
}

static void zc_place_handshake(zc_comm *comm, zc__req *r, uint32_t *budget) {
    const zc__sched *s = &r->s;
    bool done = true;
    for (uint32_t i = 0; i < comm->nconn && *budget; i++) {
        uint32_t p = comm->conn_peer[i];
        zc__place *pl = &r->pl[i];
        zc_ready_msg msg;
        if (pl->ready_out && !pl->sent) {
            uint8_t *out = zc__tx_begin(comm, r, p, UINT64_MAX);
            if (out) {
                zc_stream st;
                zc_placed_stream(comm, s, p, comm->rank, &st);
                uint8_t *dst = s->recv + st.dst * s->esize;
                const zc__mem_entry *e = zc_place_find(comm, dst, st.len * s->esize);
                msg.raddr = e ? (uint64_t)(uintptr_t)dst : 0;
                msg.rkey = e ? e->mr.rkey : 0;
                zc__memcpy(out, &msg, sizeof msg);
                if (zc__tx_end(comm, r, p, UINT64_MAX, sizeof msg) != ZC_OK) return;
                pl->sent = 1;
                pl->offered = e != 0;
                (*budget)--;
            }
        }
        if (pl->ready_in && !pl->got) {
            const uint8_t *in = zc__rx_peek(comm, r, p, UINT64_MAX, sizeof msg);
            if (!in) {
                if (comm->failed) return;
            } else {
                if (!zc__place_take(comm, r, p, in)) return;
                zc__rx_consume(comm, r, p);
                pl->got = 1;
                (*budget)--;
            }
        }
        done = done && (!pl->ready_out || pl->sent) && (!pl->ready_in || pl->got);
    }
    if (done && *budget) r->place &= ~ZC_PLACE_HANDSHAKE;
}

/* Overlay mode: only the algorithms whose peers are connections (layout.h's overlay: ranks at
 * distance 2^k, recursive-doubling partners): binomial gather and scatter, Bruck all_to_all at
 * every size, recursive halving (reduce_scatter), Rabenseifner (large all_reduce), reduce down
 * the canonical tree toward the root, van de Geijn broadcast above bcast_tree_max_bytes; a full
 * mesh takes the direct ones, cheaper in CPU (zc__choose); ZC_ALG_COUNT_ for a call that has
 * none. */
static zc__alg zc_choose_overlay(const zc_comm *c, uint32_t kind, uint64_t count,
                                 uint64_t bytes) {
    const zc_config *cfg = &c->cfg;
    switch (kind) {
    case ZC_K_ALLREDUCE:
        if (bytes <= cfg->allreduce_oneshot_max_bytes || count < c->nranks)
            return c->hblock ? ZC_ALG_HRD : ZC_ALG_RD;
        return ZC_ALG_RAB;
    case ZC_K_REDUCE_SCATTER: return ZC_ALG_RH;
    case ZC_K_ALLGATHER:
    case ZC_K_ALLTOALL: return ZC_ALG_BRUCK;
    case ZC_K_GATHER:
    case ZC_K_SCATTER: return ZC_ALG_BINOMIAL;
    case ZC_K_REDUCE: return ZC_ALG_VTREE;
    case ZC_K_BROADCAST: return bytes <= cfg->bcast_tree_max_bytes ? ZC_ALG_TREE : ZC_ALG_SCAG;
    case ZC_K_SEND:
    case ZC_K_RECV: return ZC_ALG_P2P; /* coll.c checks the peer is a connection */
    default: return ZC_ALG_COUNT_;
    }
}

zc__alg zc__choose(const zc_comm *c, uint32_t kind, uint64_t count, uint64_t bytes) {
    const zc_config *cfg = &c->cfg;
    bool logn = zc__log_algs(cfg); /* its ZC_R_ACC slices are carved */
    if (kind == ZC_K_BARRIER) return logn && c->hblock ? ZC_ALG_HRD : ZC_ALG_DISSEM;
    if (count == 0) return ZC_ALG_LOCAL;
    if (cfg->overlay_min_ranks && c->nranks >= cfg->overlay_min_ranks) /* overlay mode */
        return zc_choose_overlay(c, kind, count, bytes);
    switch (kind) {
    case ZC_K_ALLREDUCE:
        if (logn && (bytes <= cfg->allreduce_oneshot_max_bytes || count < c->nranks))
            return c->hblock ? ZC_ALG_HRD : ZC_ALG_RD;
        if (bytes <= cfg->allreduce_oneshot_max_bytes || count < c->nranks)
            return ZC_ALG_ONESHOT;
        return ZC_ALG_RSAG;
    case ZC_K_ALLGATHER: return logn ? ZC_ALG_BRUCK : ZC_ALG_DIRECT;
    case ZC_K_ALLTOALL: /* Bruck sends about n/2 x log2 n blocks per rank against n - 1, in
                         * log2 n streams against n - 1: fewer messages win up to blocks of
                         * about 1 KiB (per-message cost against copy bandwidth at 64 ranks) */
        return logn && bytes <= 1024u ? ZC_ALG_BRUCK : ZC_ALG_DIRECT;
    case ZC_K_REDUCE: /* at 2 ranks direct at every size: the root reduces the input once,
                       * where RS + gather has it reduce half, copy half out and wait between.
                       * A full mesh keeps direct below reduce_direct_max_bytes: the canonical
                       * tree toward the root (overlay mode's) sends as many messages, and costs
                       * 2-3x the CPU in process (8 B to 16 KiB at 16-256 ranks) */
        return bytes <= cfg->reduce_direct_max_bytes || count < c->nranks || c->nranks == 2
                   ? ZC_ALG_DIRECT : ZC_ALG_RSGATHER;
    case ZC_K_BROADCAST: return bytes <= cfg->bcast_tree_max_bytes ? ZC_ALG_TREE : ZC_ALG_CHAIN;
    case ZC_K_SEND:
    case ZC_K_RECV: return ZC_ALG_P2P;
    default: return ZC_ALG_DIRECT;
    }
}

static void zc_send_placed(zc_ctx *x, uint32_t p, const uint8_t *src, uint64_t len,
                           uint64_t first, uint64_t ready);

/* Sends chunks of the stream [src, src+len) as channel messages first..first+msgs-1, but only
 * chunks below `ready`. A copy stream (copy: the receiver only copies it into its result) may
 * be written in place instead. */
static void zc_send_chunks(zc_ctx *x, uint32_t p, const uint8_t *src, uint64_t len,
                           uint64_t first, uint64_t ready, bool copy) {
    if (!x->r->tx_left) return; /* everything sent: a small call's later steps skip the peers */
    if (copy && x->r->place && x->r->pl[zc__ci(x->comm, p)].ready_in) {
        zc_send_placed(x, p, src, len, first, ready);
        return;
    }
    uint64_t k = zc__tx_done(x->comm, x->r, p), total = zc__msgs(len, x->E);
    for (; *x->budget && k >= first && k - first < zc_min(total, ready); k++) {
        uint64_t j = k - first, elems = zc_chunk_len(x, len, j);
        if (elems * x->es <= ZC_INLINE_BYTES) { /* the whole message in one line */
            if (zc__tx_line(x->comm, x->r, p, k, src + j * x->E * x->es, elems * x->es) != ZC_OK)
                return;
            (*x->budget)--;
            continue;
        }
        uint8_t *dst = zc__tx_begin_n(x->comm, x->r, p, k, elems * x->es);
        if (!dst) return;
        zc__memcpy(dst, src + j * x->E * x->es, elems * x->es);
        if (zc__tx_end(x->comm, x->r, p, k, elems * x->es) != ZC_OK) return;
        (*x->budget)--;
    }
}

/* A stream written in place: waits for the receiver's ready message, then puts each chunk where
 * it says (from src itself when src is registered), or goes through the slots when it said
 * none. */
static void zc_send_placed(zc_ctx *x, uint32_t p, const uint8_t *src, uint64_t len,
                           uint64_t first, uint64_t ready) {
    zc__place *pl = &x->r->pl[zc__ci(x->comm, p)];
    if (!pl->got) return; /* the receiver has not said where yet */
    if (!pl->raddr) {
        zc_send_chunks(x, p, src, len, first, ready, false);
        return;
    }
    uint64_t k = zc__tx_done(x->comm, x->r, p), total = zc__msgs(len, x->E);
    if (!*x->budget || k < first || k - first >= zc_min(total, ready)) return;
    const zc__mem_entry *from = zc_place_find(x->comm, src, len * x->es);
    for (; *x->budget && k - first < zc_min(total, ready); k++) {
        uint64_t j = k - first, bytes = zc_chunk_len(x, len, j) * x->es, off = j * x->E * x->es;
        if (!zc__tx_begin(x->comm, x->r, p, k)) return;
        if (zc__tx_put(x->comm, x->r, p, k, src + off, from ? &from->mr : 0, bytes,
                       pl->raddr + off, pl->rkey) != ZC_OK)
            return;
        if (from) {
            pl->direct = 1;
            x->r->place |= ZC_PLACE_DIRECT;
        }
        if (zc__tx_end_placed(x->comm, x->r, p, k, bytes) != ZC_OK) return;
        (*x->budget)--;
    }
}

/* Receives the stream of len elements into dst from channel messages first.. onwards. */
static void zc_recv_chunks(zc_ctx *x, uint32_t p, uint8_t *dst, uint64_t len, uint64_t first) {
    if (!x->r->rx_left) return;
    uint64_t k = zc__rx_done(x->comm, x->r, p), total = zc__msgs(len, x->E);
    for (; *x->budget && k >= first && k - first < total; k++) {
        uint64_t j = k - first, elems = zc_chunk_len(x, len, j);
        const uint8_t *src = zc__rx_peek(x->comm, x->r, p, k, elems * x->es);
        if (!src) return;
        if (zc__rx_placed(src, elems * x->es)) { /* the sender put it in place already */
            if (!x->r->place || !x->r->pl[zc__ci(x->comm, p)].offered) {
                zc__fail(x->comm, ZC_INTERNAL, x->r->seq, (int32_t)p, 0, "%s sequence %llu: "
                         "rank %u put message %llu in place, but rank %u offered no "
                         "destination", zc__kind_name(x->r->s.kind),
                         (unsigned long long)x->r->seq, p, (unsigned long long)k, x->me);
                return;
            }
            x->comm->placed_bytes += elems * x->es;
        } else if (x->stream)
            zc__copy_stream(dst + j * x->E * x->es, src, elems * x->es);
        else
            zc__memcpy(dst + j * x->E * x->es, src, elems * x->es);
        zc__rx_consume(x->comm, x->r, p);
        (*x->budget)--;
    }
}

/* Copies this rank's own block chunk by chunk (r->a counts chunks), unless dst == src. */
static bool zc_copy_own(zc_ctx *x, uint8_t *dst, const uint8_t *src, uint64_t len) {
    uint64_t total = zc__msgs(len, x->E);
    if (dst == src || !dst) return true;
    for (; *x->budget && x->r->a < total; x->r->a++, (*x->budget)--) {
        uint64_t off = x->r->a * x->E * x->es, bytes = zc_chunk_len(x, len, x->r->a) * x->es;
        if (x->stream) zc__copy_stream(dst + off, src + off, bytes); /* blocks never overlap */
        else zc__memmove(dst + off, src + off, bytes);
    }
    return x->r->a == total;
}

/* Reduces chunk r->a of a block of len elements when every peer's chunk arrived as its message
 * first + r->a. mine is this rank's input for the block; out_fn(x, c, bytes, arg) says where
 * the chunk's result of bytes goes (NULL: not writable yet). True, with the payload bytes in
 * *bytes_out, when the chunk was reduced and the peers' messages consumed; false when
 * something is not there yet. */
typedef uint8_t *(*zc_out_fn)(zc_ctx *x, uint64_t c, uint64_t bytes, void *arg);

static bool zc_reduce_chunk(zc_ctx *x, const uint8_t *mine, uint64_t len, uint64_t first,
                            zc_out_fn out_fn, void *arg, uint64_t *bytes_out) {
    const void *ins[ZC_MESH_MAX_RANKS]; /* overlay mode never reduces over every rank */
    uint64_t c = x->r->a, elems = zc_chunk_len(x, len, c), bytes = elems * x->es;
    for (uint32_t p = 0; p < x->n; p++) {
        if (p == x->me) {
            ins[p] = mine + c * x->E * x->es;
        } else {
            ins[p] = zc__rx_peek(x->comm, x->r, p, first + c, bytes);
            if (!ins[p]) return false;
        }
    }
    uint8_t *out = out_fn(x, c, bytes, arg);
    if (!out) return false;
    zc__reduce(out, ins, x->n, elems, (zc_dtype)x->r->s.dtype, (zc_op)x->r->s.op);
    for (uint32_t p = 0; p < x->n; p++)
        if (p != x->me) zc__rx_consume(x->comm, x->r, p);
    *bytes_out = bytes;
    x->r->a++;
    (*x->budget)--;
    return true;
}

static uint8_t *zc_out_local(zc_ctx *x, uint64_t c, uint64_t bytes, void *arg) {
    (void)bytes;
    return (uint8_t *)arg + c * x->E * x->es;
}

/* Reduces as many chunks of this rank's block as have arrived, into dst. */
static void zc_reduce_block(zc_ctx *x, const uint8_t *mine, uint8_t *dst, uint64_t len,
                            uint64_t first) {
    uint64_t total = zc__msgs(len, x->E), bytes;
    while (*x->budget && x->r->a < total &&
           zc_reduce_chunk(x, mine, len, first, zc_out_local, dst, &bytes)) {
    }
}

static bool zc_all_moved(const zc__req *r) { return r->tx_left == 0 && r->rx_left == 0; }

/* One-shot all_reduce; reduce direct to the root (non-roots only send). */
static bool zc_step_oneshot(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    bool reduces = s->kind == ZC_K_ALLREDUCE || x->me == s->root;
    if (s->kind != ZC_K_ALLREDUCE) { /* reduce: a non-root sends to the root alone */
        if (!reduces) zc_send_chunks(x, s->root, s->send, s->count, 0, UINT64_MAX, false);
    } else {
        for (uint32_t p = 0; p < x->n; p++)
            if (p != x->me) zc_send_chunks(x, p, s->send, s->count, 0, UINT64_MAX, false);
    }
    if (reduces) {
        /* In place, chunk c of recv is also our input: reduce it only once sent to all. */
        uint64_t sent = UINT64_MAX;
        for (uint32_t p = 0; p < x->n && s->kind == ZC_K_ALLREDUCE && x->r->tx_left; p++)
            if (p != x->me) sent = zc_min(sent, zc__tx_done(x->comm, x->r, p));
        uint64_t total = zc__msgs(s->count, x->E), bytes;
        while (*x->budget && x->r->a < total && x->r->a < sent &&
               zc_reduce_chunk(x, s->send, s->count, 0, zc_out_local, s->recv, &bytes)) {
        }
    }
    return zc_all_moved(x->r) && (!reduces || x->r->a == zc__msgs(s->count, x->E));
}

static uint8_t *zc_out_to_root(zc_ctx *x, uint64_t c, uint64_t bytes, void *arg) {
    uint64_t first = *(const uint64_t *)arg;
    return zc__tx_begin_n(x->comm, x->r, x->r->s.root, first + c, bytes);
}

/* Direct reduce-scatter of every block to its owner, then all-gather (all_reduce) or gather
 * to the root (reduce) of the reduced blocks; also plain reduce_scatter (equal blocks). */
static bool zc_step_rs(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    bool rs_only = s->kind == ZC_K_REDUCE_SCATTER, to_root = s->alg == ZC_ALG_RSGATHER;
    uint64_t blk_me = rs_only ? s->count : zc_blen(s, x->n, x->me);
    uint64_t lo_me = rs_only ? x->me * s->count : zc__block_lo(s->count, x->n, x->me);
    uint64_t C_me = zc__msgs(blk_me, x->E);
    for (uint32_t p = 0; p < x->n; p++) {
        if (p == x->me) continue;
        uint64_t lo = rs_only ? p * s->count : zc__block_lo(s->count, x->n, p);
        uint64_t len = rs_only ? s->count : zc_blen(s, x->n, p);
        zc_send_chunks(x, p, s->send + lo * x->es, len, 0, UINT64_MAX, false);
        if (s->alg == ZC_ALG_RSAG) /* all-gather phase of our reduced block */
            zc_send_chunks(x, p, s->recv + lo_me * x->es, blk_me, zc__msgs(len, x->E),
                           x->r->a, true);
        if (s->alg == ZC_ALG_RSAG || (to_root && x->me == s->root))
            zc_recv_chunks(x, p, s->recv + lo * x->es, len, C_me);
    }
    if (to_root && x->me != s->root) {
        uint64_t first = zc__msgs(zc_blen(s, x->n, s->root), x->E), bytes;
        while (*x->budget && x->r->a < C_me &&
               zc_reduce_chunk(x, s->send + lo_me * x->es, blk_me, 0, zc_out_to_root, &first,
                               &bytes))
            if (zc__tx_end(x->comm, x->r, s->root, first + x->r->a - 1, bytes) != ZC_OK)
                return false; /* the communicator failed (channel.c recorded why) */
    } else {
        zc_reduce_block(x, s->send + lo_me * x->es, s->recv + (rs_only ? 0 : lo_me * x->es),
                        blk_me, 0);
    }
    return zc_all_moved(x->r) && x->r->a == C_me;
}

static bool zc_step_bcast(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    uint32_t v = zc_rel(x->me, s->root, x->n), c = zc_first_child(s, x->n, v);
    uint64_t C = zc__msgs(s->count, x->E), ready;
    const uint8_t *src;
    if (v == 0) {
        src = s->send;
        ready = C;
        zc_copy_own(x, s->recv, s->send, s->count);
    } else {
        uint32_t parent = zc__add_mod(zc_parent(s, v), s->root, x->n);
        zc_recv_chunks(x, parent, s->recv, s->count, 0);
        src = s->recv;
        ready = zc__rx_done(x->comm, x->r, parent);
    }
    for (; c < x->n; c = zc_next_child(s, x->n, v, c))
        zc_send_chunks(x, zc__add_mod(c, s->root, x->n), src, s->count, 0, ready, true);
    bool own = v != 0 || !s->recv || s->recv == s->send || x->r->a == C;
    return zc_all_moved(x->r) && own;
}

/* gather, scatter, allgather, alltoall: direct streams; own block copied locally. */
static bool zc_step_direct(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    uint64_t blk = s->count * x->es;
    bool own = true;
    switch (s->kind) {
    case ZC_K_GATHER:
        if (x->me != s->root) {
            zc_send_chunks(x, s->root, s->send, s->count, 0, UINT64_MAX, true);
            break;
        }
        for (uint32_t p = 0; p < x->n; p++)
            if (p != x->me) zc_recv_chunks(x, p, s->recv + p * blk, s->count, 0);
        own = zc_copy_own(x, s->recv + x->me * blk, s->send, s->count);
        break;
    case ZC_K_SCATTER:
        if (x->me != s->root) {
            zc_recv_chunks(x, s->root, s->recv, s->count, 0);
            break;
        }
        for (uint32_t p = 0; p < x->n; p++)
            if (p != x->me)
                zc_send_chunks(x, p, s->send + p * blk, s->count, 0, UINT64_MAX, true);
        own = zc_copy_own(x, s->recv, s->send + x->me * blk, s->count);
        break;
    default: { /* allgather, alltoall */
        bool a2a = s->kind == ZC_K_ALLTOALL;
        for (uint32_t p = 0; p < x->n; p++) {
            if (p == x->me) continue;
            zc_send_chunks(x, p, s->send + (a2a ? p * blk : 0), s->count, 0, UINT64_MAX, true);
            zc_recv_chunks(x, p, s->recv + p * blk, s->count, 0);
        }
        own = zc_copy_own(x, s->recv + x->me * blk, s->send + (a2a ? x->me * blk : 0),
                          s->count);
        break;
    }
    }
    return zc_all_moved(x->r) && own;
}

static bool zc_step_p2p(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    if (s->kind == ZC_K_SEND)
        zc_send_chunks(x, s->root, s->send, s->count, 0, UINT64_MAX, false);
    else zc_recv_chunks(x, s->root, s->recv, s->count, 0);
    return zc_all_moved(x->r);
}

/* Direct: reduce to the root as one-shot's send-and-reduce, reduce_scatter as RS's first half,
 * the copy collectives as direct streams. */
static bool zc_step_direct_any(zc_ctx *x) {
    switch (x->r->s.kind) {
    case ZC_K_REDUCE: return zc_step_oneshot(x);
    case ZC_K_REDUCE_SCATTER: return zc_step_rs(x);
    default: return zc_step_direct(x);
    }
}

static bool zc_step_local(zc_ctx *x) {
    (void)x;
    return true;
}

/* ---- the log-depth algorithms ---- */

/* Recursive doubling, one chunk of E elements (zc_rd_elems) at a time through the request's
 * accumulator slice (r->acc): r->a = chunk, r->b = its phase: 0 the leaf (a folded pair: the odd
 * rank's input, sent as accumulators, combined on the right of the even rank's), 1..steps the
 * exchange with the partner of step b - 1 (message a on that channel, sent once: tx_done says
 * so), steps + 1 the store into recv, steps + 2 the result to the odd rank of a pair. A folded
 * odd rank: phase 0 sends, phase 1 copies the result in. It runs over a view of the ranks
 * (zc_rdv; the hierarchical schedule's leaders hold their partial in r->acc already: in NULL).
 * A move says whether it waits, moved, or finished the chunk (the caller counts it). */
enum { ZC_RD_WAIT, ZC_RD_MOVED, ZC_RD_DONE };

static int zc_rd_folded(zc_ctx *x, const zc_rdv *w, uint64_t c, uint64_t elems,
                        const uint8_t *in, uint8_t *out, size_t ab, bool back) {
    const zc__sched *s = &x->r->s;
    uint32_t even = (w->me - 1u) * w->stride;
    int done = ZC_RD_MOVED;
    if (x->r->b == 0) {
        uint8_t *d = zc__tx_begin_n(x->comm, x->r, even, c, elems * ab);
        if (!d) return ZC_RD_WAIT;
        if (in) zc__acc_load(d, in, elems, (zc_dtype)s->dtype, (zc_op)s->op);
        else zc__memcpy(d, x->r->acc, elems * ab);
        if (zc__tx_end(x->comm, x->r, even, c, elems * ab) != ZC_OK) return ZC_RD_WAIT;
        x->r->b = back;
        if (!back) done = ZC_RD_DONE; /* no result comes back */
    } else {
        const uint8_t *res = zc__rx_peek(x->comm, x->r, even, c, elems * x->es);
        if (!res) return ZC_RD_WAIT;
        zc__memcpy(out, res, elems * x->es);
        zc__rx_consume(x->comm, x->r, even);
        done = ZC_RD_DONE;
    }
    (*x->budget)--;
    return done;
}

/* One move of a virtual rank's chunk c (phases above). */
static int zc_rd_virtual(zc_ctx *x, const zc_rdv *w, uint64_t c, uint64_t elems,
                         const uint8_t *in, uint8_t *out, size_t ab) {
    zc__req *r = x->r;
    zc_dtype t = (zc_dtype)r->s.dtype;
    zc_op op = (zc_op)r->s.op;
    const zc_vr *v = &w->v;
    uint32_t u = zc_vr_virt(v, w->me), odd = (w->me + 1u) * w->stride;
    bool pair = w->me < 2u * v->e;
    if (r->b == 0) {
        const uint8_t *got = pair ? zc__rx_peek(x->comm, r, odd, c, elems * ab) : 0;
        if (pair && !got) return ZC_RD_WAIT;
        if (in) zc__acc_load(r->acc, in, elems, t, op);
        if (pair) {
            zc__acc_combine(r->acc, r->acc, got, elems, t, op);
            zc__rx_consume(x->comm, r, odd);
            (*x->budget)--;
        }
        r->b = 1;
    } else if (r->b <= v->steps) {
        uint32_t q = u ^ (1u << (r->b - 1u)), peer = zc_vr_real(v, q) * w->stride;
        if (zc__tx_done(x->comm, r, peer) == c) {
            uint8_t *d = zc__tx_begin_n(x->comm, r, peer, c, elems * ab);
            if (!d) return ZC_RD_WAIT;
            zc__memcpy(d, r->acc, elems * ab);
            if (zc__tx_end(x->comm, r, peer, c, elems * ab) != ZC_OK) return ZC_RD_WAIT;
            if (!--*x->budget) return ZC_RD_WAIT;
        }
        const uint8_t *got = zc__rx_peek(x->comm, r, peer, c, elems * ab);
        if (!got) return ZC_RD_WAIT;
        zc__acc_combine(r->acc, u < q ? r->acc : got, u < q ? got : r->acc, elems, t, op);
        zc__rx_consume(x->comm, r, peer);
        (*x->budget)--;
        r->b++;
    } else if (r->b == v->steps + 1u) {
        zc__acc_store(out, r->acc, elems, t, op, x->n);
        if (!pair) return ZC_RD_DONE;
        r->b++;
    } else {
        uint8_t *d = zc__tx_begin_n(x->comm, r, odd, c, elems * x->es);
        if (!d) return ZC_RD_WAIT;
        zc__memcpy(d, out, elems * x->es);
        if (zc__tx_end(x->comm, r, odd, c, elems * x->es) != ZC_OK) return ZC_RD_WAIT;
        (*x->budget)--;
        return ZC_RD_DONE;
    }
    return ZC_RD_MOVED;
}

/* One move of recursive doubling's chunk c at this rank of view w, folded or virtual. */
static int zc_rd_move(zc_ctx *x, const zc_rdv *w, uint64_t c, uint64_t elems, const uint8_t *in,
                      uint8_t *out, size_t ab) {
    return zc_vr_folded(&w->v, w->me) ? zc_rd_folded(x, w, c, elems, in, out, ab, true)
                                      : zc_rd_virtual(x, w, c, elems, in, out, ab);
}

/* ZC_ALG_VTREE at a virtual rank, chunk c: r->b = 0 the leaf (as recursive doubling's), 1..steps
 * step b - 1 (send the partial and be done with the chunk, or receive and combine), steps + 1
 * the result stored (the root) or sent to the folded root. */
static bool zc_vt_virtual(zc_ctx *x, const zc_vr *v, uint32_t ur, uint64_t c, uint64_t elems,
                          const uint8_t *in, uint8_t *out, size_t ab) {
    zc__req *r = x->r;
    zc_dtype t = (zc_dtype)r->s.dtype;
    zc_op op = (zc_op)r->s.op;
    uint32_t u = zc_vr_virt(v, x->me), rel = u ^ ur, fold = x->me + 1u;
    if (r->b == 0) {
        bool pair = x->me < 2u * v->e;
        const uint8_t *w = pair ? zc__rx_peek(x->comm, r, fold, c, elems * ab) : in;
        if (!w) return false;
        zc__acc_load(r->acc, in, elems, t, op);
        if (pair) {
            zc__acc_combine(r->acc, r->acc, w, elems, t, op);
            zc__rx_consume(x->comm, r, fold);
            (*x->budget)--;
        }
        r->b = 1;
        return true;
    }
    if (r->b <= v->steps) {
        uint32_t k = (uint32_t)r->b - 1u, q = u ^ (1u << k), peer = zc_vr_real(v, q);
        if (rel >> k & 1u) {
            uint8_t *d = zc__tx_begin_n(x->comm, r, peer, c, elems * ab);
            if (!d) return false;
            zc__memcpy(d, r->acc, elems * ab);
            if (zc__tx_end(x->comm, r, peer, c, elems * ab) != ZC_OK) return false;
            r->b = 0, r->a++;
        } else {
            const uint8_t *w = zc__rx_peek(x->comm, r, peer, c, elems * ab);
            if (!w) return false;
            zc__acc_combine(r->acc, u < q ? r->acc : w, u < q ? w : r->acc, elems, t, op);
            zc__rx_consume(x->comm, r, peer);
            r->b++;
        }
        (*x->budget)--;
        return true;
    }
    if (x->me == r->s.root) {
        zc__acc_store(out, r->acc, elems, t, op, x->n);
    } else { /* the root is this rank's folded odd partner */
        uint8_t *d = zc__tx_begin_n(x->comm, r, fold, c, elems * x->es);
        if (!d) return false;
        zc__acc_store(d, r->acc, elems, t, op, x->n);
        if (zc__tx_end(x->comm, r, fold, c, elems * x->es) != ZC_OK) return false;
        (*x->budget)--;
    }
    r->b = 0, r->a++;
    return true;
}

/* Recursive doubling (all_reduce) and the canonical tree toward the root (ZC_ALG_VTREE,
 * reduce), chunk by chunk: r->a = chunk, r->b = its phase (zc_rd_virtual's or zc_vt_virtual's,
 * or zc_rd_folded's: a folded rank gets the result back unless it is a reduce's non-root). A
 * reduce's recv is the root's alone (NULL elsewhere). */
static bool zc_step_rd(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    zc_rdv w = {zc_vr_of(x->n), x->me, 1};
    size_t ab = zc__acc_bytes((zc_dtype)s->dtype, (zc_op)s->op);
    uint64_t E = zc_rd_elems_of(s, ab), C = zc__msgs(s->count, (uint32_t)E);
    bool folded = zc_vr_folded(&w.v, x->me), tree = s->alg == ZC_ALG_VTREE;
    bool result = !tree || x->me == s->root;
    uint32_t ur = zc_vr_virt(&w.v, s->root);
    while (*x->budget && x->r->a < C) {
        uint64_t c = x->r->a, elems = zc_min(E, s->count - c * E);
        const uint8_t *in = s->send + c * E * x->es;
        uint8_t *out = result ? s->recv + c * E * x->es : 0;
        if (tree && !folded) {
            if (!zc_vt_virtual(x, &w.v, ur, c, elems, in, out, ab)) break;
            continue;
        }
        int m = folded ? zc_rd_folded(x, &w, c, elems, in, out, ab, result)
                       : zc_rd_virtual(x, &w, c, elems, in, out, ab);
        if (m == ZC_RD_WAIT) break;
        if (m == ZC_RD_DONE) x->r->b = 0, x->r->a++;
    }
    return zc_all_moved(x->r) && x->r->a == C;
}

/* ---- the hierarchical all_reduce and barrier (ZC_ALG_HRD) ----
 * Blocks of q = comm->hblock consecutive ranks share a place (conn.c's zc__host_blocks), q a
 * power of two that divides n; a block's first rank is its leader. Per accumulator chunk, in
 * three stages (r->phase): up the canonical tree of the block's q ranks toward the leader (at
 * step k a rank whose block index l has lowest set bit 2^k sends its partial to l - 2^k; one
 * whose low k + 1 bits are clear combines that of l + 2^k on the right; r->b = k + 1), then
 * recursive doubling among the H = n / q leaders (zc_rd_move over the view of the leaders,
 * fold included), then the result down the same tree (from the parent, then to each child
 * l + d, the largest subtree first). With q a power of two dividing n, the canonical tree of
 * n is the tree of each block under the canonical tree of H (docs/algorithms.md), so the
 * result has the documented order's bits; the peers are the block's ranks (one place) and the
 * leaders' recursive-doubling partners, connections in overlay mode too (layout.h's (a), (b)).
 * A barrier runs the same stages with no elements (zc_step_hrd). */
enum { ZC_HRD_UP, ZC_HRD_LEADERS, ZC_HRD_DOWN };

static bool zc_hrd_move(zc_ctx *x, const zc_rdv *w, uint32_t q, uint64_t c, uint64_t elems,
                        const uint8_t *in, uint8_t *out, size_t ab) {
    zc__req *r = x->r;
    zc_dtype t = (zc_dtype)r->s.dtype;
    zc_op op = (zc_op)r->s.op;
    uint32_t me = x->me, l = me & (q - 1u), low = l ? zc_lowbit(l) : q;
    if (r->phase == ZC_HRD_UP) {
        if (r->b == 0) {
            zc__acc_load(r->acc, in, elems, t, op);
            r->b = 1;
            return true;
        }
        uint32_t d = 1u << (r->b - 1u);
        if (d == low && l) { /* the partial to the parent; the result comes back down */
            uint8_t *m = zc__tx_begin_n(x->comm, r, me - d, c, elems * ab);
            if (!m) return false;
            zc__memcpy(m, r->acc, elems * ab);
            if (zc__tx_end(x->comm, r, me - d, c, elems * ab) != ZC_OK) return false;
            (*x->budget)--;
            r->phase = ZC_HRD_DOWN;
            return true;
        }
        if (d == q) { /* the leader holds its block's partial */
            r->phase = ZC_HRD_LEADERS;
            r->b = 0;
            return true;
        }
        const uint8_t *got = zc__rx_peek(x->comm, r, me + d, c, elems * ab);
        if (!got) return false;
        zc__acc_combine(r->acc, r->acc, got, elems, t, op);
        zc__rx_consume(x->comm, r, me + d);
        (*x->budget)--;
        r->b++;
        return true;
    }
    if (r->phase == ZC_HRD_LEADERS) {
        int m = zc_rd_move(x, w, c, elems, 0, out, ab);
        if (m == ZC_RD_WAIT) return false;
        if (m == ZC_RD_DONE) r->phase = ZC_HRD_DOWN;
        return true;
    }
    if (l && zc__rx_done(x->comm, r, me - low) == c) { /* the result from the parent */
        const uint8_t *got = zc__rx_peek(x->comm, r, me - low, c, elems * x->es);
        if (!got) return false;
        zc__memcpy(out, got, elems * x->es);
        zc__rx_consume(x->comm, r, me - low);
        (*x->budget)--;
        return true;
    }
    for (uint32_t d = low >> 1; d; d >>= 1) {
        if (zc__tx_done(x->comm, r, me + d) != c) continue; /* sent */
        uint8_t *m = zc__tx_begin_n(x->comm, r, me + d, c, elems * x->es);
        if (!m) return false;
        zc__memcpy(m, out, elems * x->es);
        if (zc__tx_end(x->comm, r, me + d, c, elems * x->es) != ZC_OK) return false;
        (*x->budget)--;
        return true;
    }
    r->phase = ZC_HRD_UP;
    r->b = 0;
    r->a++;
    return true;
}

/* An all_reduce chunk by chunk; a barrier as one chunk of no elements: every message empty, so
 * that a leader hears of its whole block before recursive doubling, a rank returns only once
 * its leader heard of every leader, and those of every rank (the acc slice stands in for the
 * buffers, of which nothing is read or written). */
static bool zc_step_hrd(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    uint32_t q = x->comm->hblock;
    zc_rdv w = {zc_vr_of(x->n / q), x->me / q, q};
    bool barrier = s->kind == ZC_K_BARRIER;
    size_t ab = barrier ? 0u : zc__acc_bytes((zc_dtype)s->dtype, (zc_op)s->op);
    uint64_t E = barrier ? 0u : zc_rd_elems_of(s, ab), C = zc_hrd_msgs_of(s, (uint32_t)E);
    while (*x->budget && x->r->a < C) {
        uint64_t c = x->r->a, elems = barrier ? 0u : zc_min(E, s->count - c * E);
        const uint8_t *in = barrier ? x->r->acc : s->send + c * E * x->es;
        uint8_t *out = barrier ? x->r->acc : s->recv + c * E * x->es;
        if (!zc_hrd_move(x, &w, q, c, elems, in, out, ab)) break;
    }
    return zc_all_moved(x->r) && x->r->a == C;
}

/* Bruck's all_gather works in recv itself, read as a ring of n blocks starting at this rank's:
 * round k sends the ring's first min(d, n - d) blocks and receives the next ones, so no rotation
 * is needed at the end. Chunk j of a stream starting at element `at` of the ring (n * count
 * elements) may wrap around its end once. */
static void zc_ring_copy(const zc_ctx *x, uint64_t N, uint64_t at, uint64_t elems, uint8_t *flat,
                         bool into_ring) {
    uint64_t head = zc_min(elems, N - at);
    uint8_t *ring = x->r->s.recv;
    if (into_ring) {
        zc__memcpy(ring + at * x->es, flat, head * x->es);
        zc__memcpy(ring, flat + head * x->es, (elems - head) * x->es);
    } else {
        zc__memcpy(flat, ring + at * x->es, head * x->es);
        zc__memcpy(flat + head * x->es, ring, (elems - head) * x->es);
    }
}

/* Moves round k's streams: to `to` from the ring's start, from `from` into block d onwards.
 * True once both are complete. */
static bool zc_bruck_round(zc_ctx *x, uint32_t k) {
    const zc__sched *s = &x->r->s;
    uint32_t d = 1u << k, to = zc__add_mod(x->me, x->n - d, x->n);
    uint32_t from = zc__add_mod(x->me, d, x->n);
    uint64_t N = (uint64_t)x->n * s->count, len = zc_bruck_blocks(x->n, k) * s->count;
    uint64_t total = zc__msgs(len, x->E), mine = (uint64_t)x->me * s->count;
    uint64_t k_tx = zc__tx_done(x->comm, x->r, to), k_rx = zc__rx_done(x->comm, x->r, from);
    for (; *x->budget && k_tx < total; k_tx++) {
        uint64_t elems = zc_chunk_len(x, len, k_tx), at = mine + k_tx * x->E;
        uint8_t *dst = zc__tx_begin_n(x->comm, x->r, to, k_tx, elems * x->es);
        if (!dst) break;
        zc_ring_copy(x, N, at >= N ? at - N : at, elems, dst, false);
        if (zc__tx_end(x->comm, x->r, to, k_tx, elems * x->es) != ZC_OK) return false;
        (*x->budget)--;
    }
    for (; *x->budget && k_rx < total; k_rx++) {
        uint64_t elems = zc_chunk_len(x, len, k_rx), at = mine + d * s->count + k_rx * x->E;
        const uint8_t *src = zc__rx_peek(x->comm, x->r, from, k_rx, elems * x->es);
        if (!src) break;
        zc_ring_copy(x, N, at >= N ? at - N : at, elems, (uint8_t *)(uintptr_t)src, true);
        zc__rx_consume(x->comm, x->r, from);
        (*x->budget)--;
    }
    return k_tx >= total && k_rx >= total; /* later calls' messages count on past the round */
}

/* r->a: chunks of this rank's own block copied into recv (first); r->b: the round. */
static bool zc_step_bruck(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    uint32_t rounds = zc_barrier_rounds(x->n);
    if (!zc_copy_own(x, s->recv + (uint64_t)x->me * s->count * x->es, s->send, s->count))
        return false;
    while (*x->budget && x->r->b < rounds && zc_bruck_round(x, (uint32_t)x->r->b)) x->r->b++;
    return x->r->b == rounds && zc_all_moved(x->r);
}

/* ---- one-line calls ---- */

/* A call whose every message is one line (at most ZC_INLINE_BYTES: its whole payload to a peer
 * in the header's line) or, on a wire with them, flagged lines (up to zc__lines_max, proto.h)
 * runs its algorithm's line step instead of the chunk streams: the same messages (the links
 * reserved at issue, message 0 on each channel), the same reduction, in one pass without the
 * chunk loops. Peers are bits of r->b (sent to) and
 * r->a (received from; bit me: this rank's own part copied or reduced), so at most
 * ZC_LINE_MAX_RANKS ranks. */
#define ZC_LINE_MAX_RANKS 64u
typedef bool (*zc_line_fn)(zc_comm *comm, zc__req *r, uint32_t *budget);

/* Sends the one line of bytes at src to p, unless it went already; false: not now. */
static inline bool zc_line_send(zc_comm *comm, zc__req *r, uint32_t *budget, uint32_t p,
                                const uint8_t *src, size_t bytes) {
    uint64_t bit = 1ull << p;
    if (r->b & bit) return true;
    if (!*budget || zc__tx_line(comm, r, p, 0, src, bytes) != ZC_OK) return false;
    r->b |= bit;
    (*budget)--;
    return true;
}

/* p's message of bytes: its payload (copied into dst when that is not NULL and the message
 * came as flagged lines), or NULL while it is not there (or on a mismatch). */
static inline const uint8_t *zc_line_in(zc_comm *comm, zc__req *r, uint32_t p, uint8_t *dst,
                                        size_t bytes) {
    return bytes <= ZC_INLINE_BYTES ? zc__rx_peek(comm, r, p, 0, bytes)
                                    : zc__rx_lines(comm, r, p, 0, bytes, dst);
}

/* Copies p's message of bytes into dst (NULL: nothing to copy) and consumes it, unless that
 * happened already; false: not there yet (or a mismatch, which failed the communicator). */
static inline bool zc_line_recv(zc_comm *comm, zc__req *r, uint32_t *budget, uint32_t p,
                                uint8_t *dst, size_t bytes) {
    uint64_t bit = 1ull << p;
    if (r->a & bit) return true;
    const uint8_t *in = *budget ? zc_line_in(comm, r, p, dst, bytes) : 0;
    if (!in) return false;
    if (dst && in != dst) zc__memcpy(dst, in, bytes);
    zc__rx_consume(comm, r, p);
    r->a |= bit;
    (*budget)--;
    return true;
}

/* Copies this rank's own part (bit me of r->a) unless dst is src or NULL. */
static inline void zc_line_own(zc__req *r, uint32_t me, uint8_t *dst, const uint8_t *src,
                               size_t bytes) {
    if (r->a & (1ull << me)) return;
    if (dst && dst != src) zc__memmove(dst, src, bytes);
    r->a |= 1ull << me;
}

/* Reduces every rank's line (mine: this rank's input) into out once all arrived, in the rank
 * tree as the chunk streams do; true once done. */
static bool zc_line_reduce(zc_comm *comm, zc__req *r, uint32_t *budget, const uint8_t *mine,
                           uint8_t *out, size_t bytes) {
    const void *ins[ZC_LINE_MAX_RANKS];
    uint32_t me = comm->rank, n = comm->nranks;
    if (r->a) return true;
    ZC_ASSERT(n >= 2 && n <= ZC_LINE_MAX_RANKS); /* zc_host_begin's rule */
    for (uint32_t p = 0; p < n; p++) {
        ins[p] = p == me ? mine : zc_line_in(comm, r, p, 0, bytes);
        if (!ins[p]) return false;
    }
    if (!*budget) return false;
    zc__reduce(out, ins, n, r->s.count, (zc_dtype)r->s.dtype, (zc_op)r->s.op);
    for (uint32_t p = 0; p < n; p++)
        if (p != me) zc__rx_consume(comm, r, p);
    r->a = 1;
    (*budget)--;
    return true;
}

/* One-shot all_reduce and direct reduce: every sender's line to every reducer. In place the
 * reduction overwrites the input, so it waits until every line went. */
static bool zc_line_oneshot(zc_comm *comm, zc__req *r, uint32_t *budget) {
    const zc__sched *s = &r->s;
    uint32_t me = comm->rank;
    size_t bytes = (size_t)(s->count * s->esize);
    if (s->kind != ZC_K_ALLREDUCE) {
        if (me != s->root) return zc_line_send(comm, r, budget, s->root, s->send, bytes);
    } else {
        for (uint32_t p = 0; p < comm->nranks; p++)
            if (p != me && !zc_line_send(comm, r, budget, p, s->send, bytes)) return false;
    }
    return zc_line_reduce(comm, r, budget, s->send, s->recv, bytes);
}

/* Direct reduce_scatter: block p to p; this rank's block reduced from every rank's. */
static bool zc_line_rs(zc_comm *comm, zc__req *r, uint32_t *budget) {
    const zc__sched *s = &r->s;
    uint32_t me = comm->rank;
    size_t bytes = (size_t)(s->count * s->esize);
    bool sent = true;
    for (uint32_t p = 0; p < comm->nranks; p++)
        if (p != me) sent &= zc_line_send(comm, r, budget, p, s->send + p * bytes, bytes);
    return zc_line_reduce(comm, r, budget, s->send + me * bytes, s->recv, bytes) && sent;
}

/* gather, scatter, allgather, alltoall: a line to or from each peer; own block copied. */
static bool zc_line_copy(zc_comm *comm, zc__req *r, uint32_t *budget) {
    const zc__sched *s = &r->s;
    uint32_t me = comm->rank, n = comm->nranks;
    size_t blk = (size_t)(s->count * s->esize);
    bool a2a = s->kind == ZC_K_ALLTOALL, ok = true;
    switch (s->kind) {
    case ZC_K_GATHER:
        if (me != s->root) return zc_line_send(comm, r, budget, s->root, s->send, blk);
        for (uint32_t p = 0; p < n; p++)
            if (p != me) ok &= zc_line_recv(comm, r, budget, p, s->recv + p * blk, blk);
        zc_line_own(r, me, s->recv + me * blk, s->send, blk);
        return ok;
    case ZC_K_SCATTER:
        if (me != s->root) return zc_line_recv(comm, r, budget, s->root, s->recv, blk);
        for (uint32_t p = 0; p < n; p++)
            if (p != me) ok &= zc_line_send(comm, r, budget, p, s->send + p * blk, blk);
        zc_line_own(r, me, s->recv, s->send + me * blk, blk);
        return ok;
    default: /* allgather, alltoall */
        for (uint32_t p = 0; p < n; p++) {
            if (p == me) continue;
            ok &= zc_line_send(comm, r, budget, p, s->send + (a2a ? p * blk : 0), blk);
            ok &= zc_line_recv(comm, r, budget, p, s->recv + p * blk, blk);
        }
        zc_line_own(r, me, s->recv + me * blk, s->send + (a2a ? me * blk : 0), blk);
        return ok;
    }
}

static bool zc_line_direct(zc_comm *comm, zc__req *r, uint32_t *budget) {
    switch (r->s.kind) {
    case ZC_K_REDUCE: return zc_line_oneshot(comm, r, budget);
    case ZC_K_REDUCE_SCATTER: return zc_line_rs(comm, r, budget);
    default: return zc_line_copy(comm, r, budget);
    }
}

/* Broadcast tree: the line from the parent (the root's own copy), then on to the children. */
static bool zc_line_bcast(zc_comm *comm, zc__req *r, uint32_t *budget) {
    const zc__sched *s = &r->s;
    uint32_t me = comm->rank, n = comm->nranks, v = zc_rel(me, s->root, n);
    size_t bytes = (size_t)(s->count * s->esize);
    const uint8_t *src = s->send;
    if (v == 0) {
        if (!r->a) zc_line_own(r, me, s->recv, s->send, bytes);
    } else {
        uint32_t parent = zc__add_mod(zc_parent(s, v), s->root, n);
        if (!zc_line_recv(comm, r, budget, parent, s->recv, bytes)) return false;
        src = s->recv;
    }
    bool ok = true;
    for (uint32_t c = zc_first_child(s, n, v); c < n; c = zc_next_child(s, n, v, c))
        ok &= zc_line_send(comm, r, budget, zc__add_mod(c, s->root, n), src, bytes);
    return ok;
}

static bool zc_line_p2p(zc_comm *comm, zc__req *r, uint32_t *budget) {
    const zc__sched *s = &r->s;
    size_t bytes = (size_t)(s->count * s->esize);
    if (s->kind == ZC_K_SEND) return zc_line_send(comm, r, budget, s->root, s->send, bytes);
    return zc_line_recv(comm, r, budget, s->root, s->recv, bytes);
}

/* Dissemination: in round i a line to rank+2^i, then one from rank-2^i. r->a = round, r->b =
 * 1 once this round's line went (each round's peers differ: message 0 on each channel). */
static bool zc_line_barrier(zc_comm *comm, zc__req *r, uint32_t *budget) {
    uint32_t n = comm->nranks, me = comm->rank, rounds = zc_barrier_rounds(n);
    while (*budget && r->a < rounds) {
        uint32_t d = 1u << r->a, to = zc__add_mod(me, d, n), from = zc__add_mod(me, n - d, n);
        if (!r->b) {
            if (zc__tx_line(comm, r, to, 0, 0, 0) != ZC_OK) return false;
            r->b = 1;
        }
        if (!zc__rx_peek(comm, r, from, 0, 0)) return false;
        zc__rx_consume(comm, r, from);
        (*budget)--;
        r->a++;
        r->b = 0;
    }
    return r->a == rounds;
}

/* A barrier's messages are always lines: its chunk-stream step is the line step. */
static bool zc_step_barrier(zc_ctx *x) { return zc_line_barrier(x->comm, x->r, x->budget); }

/* The algorithms with a line step. */
static const zc_line_fn zc_line_algs[ZC_ALG_BRUCK + 1] = {
    [ZC_ALG_ONESHOT] = zc_line_oneshot, [ZC_ALG_DIRECT] = zc_line_direct,
    [ZC_ALG_TREE] = zc_line_bcast,      [ZC_ALG_P2P] = zc_line_p2p,
    [ZC_ALG_DISSEM] = zc_line_barrier,
};

/* The protocol choice, made once at issue for every host call (the family's begin): a line
 * step where its algorithm has one and every message fits the header's line or, on a wire
 * with them, flagged lines; else the chunk streams (header, payload, credit). Both ends of
 * every message decide alike from the call and the communicator's wire and slot size. */
static void zc_host_begin(zc_comm *comm, zc__req *r) {
    const zc__sched *s = &r->s;
    r->phase = ZC_HRD_UP;
    r->line = s->alg <= ZC_ALG_BRUCK && zc_line_algs[s->alg] && !r->place &&
              comm->nranks >= 2 && comm->nranks <= ZC_LINE_MAX_RANKS &&
              (s->count * s->esize <= ZC_INLINE_BYTES ||
               s->count * s->esize <= zc__lines_max(comm));
}

/* Bruck's all_to_all works in recv: the block for rank me + i (its index i) sits at block
 * (me - i) mod n of recv from the start, where the block that arrives with index i (from rank
 * me - i) belongs, so no rotation is needed at the end. Round k's stream is the blocks with bit
 * k of i set, in increasing i; zc_a2a_piece copies elems elements of it from offset `at` out of
 * recv (into_recv false) or into it. */
static void zc_a2a_piece(const zc_ctx *x, uint32_t k, uint64_t at, uint64_t elems, uint8_t *flat,
                         bool into_recv) {
    const zc__sched *s = &x->r->s;
    uint64_t lo = (1ull << k) - 1u;
    while (elems) { /* at most elems / count + 2 blocks */
        uint64_t t = at / s->count, off = at % s->count, len = zc_min(elems, s->count - off);
        uint64_t i = ((t >> k) << (k + 1u)) | (lo + 1u) | (t & lo);
        uint32_t pos = zc__add_mod(x->me, x->n - (uint32_t)i, x->n);
        uint8_t *blk = s->recv + ((uint64_t)pos * s->count + off) * x->es;
        if (into_recv) zc__memcpy(blk, flat, len * x->es);
        else zc__memcpy(flat, blk, len * x->es);
        flat += len * x->es, at += len, elems -= len;
    }
}

/* Round k: chunk j to me + d, then chunk j from me - d into the same places (only once chunk j
 * left: in place). True once both streams are complete. */
static bool zc_bruck_a2a_round(zc_ctx *x, uint32_t k) {
    const zc__sched *s = &x->r->s;
    uint32_t d = 1u << k, to = zc__add_mod(x->me, d, x->n);
    uint32_t from = zc__add_mod(x->me, x->n - d, x->n);
    uint64_t len = zc_bruck_a2a_blocks(x->n, k) * s->count, total = zc__msgs(len, x->E);
    uint64_t k_tx = zc__tx_done(x->comm, x->r, to), k_rx = zc__rx_done(x->comm, x->r, from);
    while (*x->budget && (k_tx < total || k_rx < total)) {
        bool moved = false;
        if (k_tx < total) {
            uint64_t elems = zc_chunk_len(x, len, k_tx);
            uint8_t *dst = zc__tx_begin_n(x->comm, x->r, to, k_tx, elems * x->es);
            if (dst) {
                zc_a2a_piece(x, k, k_tx * x->E, elems, dst, false);
                if (zc__tx_end(x->comm, x->r, to, k_tx, elems * x->es) != ZC_OK) return false;
                (*x->budget)--, k_tx++, moved = true;
            }
        }
        if (*x->budget && k_rx < k_tx) {
            uint64_t elems = zc_chunk_len(x, len, k_rx);
            const uint8_t *src = zc__rx_peek(x->comm, x->r, from, k_rx, elems * x->es);
            if (src) {
                zc_a2a_piece(x, k, k_rx * x->E, elems, (uint8_t *)(uintptr_t)src, true);
                zc__rx_consume(x->comm, x->r, from);
                (*x->budget)--, k_rx++, moved = true;
            }
        }
        if (!moved) break;
    }
    return k_tx >= total && k_rx >= total;
}

/* r->a: blocks placed from send into recv (block me + i to (me - i) mod n, first); r->b: the
 * round. */
static bool zc_step_bruck_a2a(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    uint32_t rounds = zc_barrier_rounds(x->n);
    uint64_t blk = s->count * x->es;
    for (; *x->budget && x->r->a < x->n; x->r->a++, (*x->budget)--) {
        uint32_t i = (uint32_t)x->r->a, dst = zc__add_mod(x->me, x->n - i, x->n);
        zc__memcpy(s->recv + dst * blk, s->send + zc__add_mod(x->me, i, x->n) * blk, blk);
    }
    if (x->r->a < x->n) return false;
    while (*x->budget && x->r->b < rounds && zc_bruck_a2a_round(x, (uint32_t)x->r->b)) x->r->b++;
    return x->r->b == rounds && zc_all_moved(x->r);
}

static bool zc_step_bruck_any(zc_ctx *x) {
    return x->r->s.kind == ZC_K_ALLTOALL ? zc_step_bruck_a2a(x) : zc_step_bruck(x);
}

/* The child of relative rank v whose subtree holds relative block b (v < b < v + size). */
static uint32_t zc_bino_child_of(uint32_t v, uint32_t b) {
    uint32_t d = b - v, top = 1;
    while (top <= d / 2u) top *= 2u; /* at most 31 doublings */
    return v + top;
}

/* Message j of a binomial stream carries chunk j % C of block j / C; its elements: */
static uint64_t zc_bino_elems(const zc_ctx *x, uint64_t C, uint64_t j) {
    return zc_chunk_len(x, x->r->s.count, j % C);
}

/* Where the message j of child c's stream goes in the root's recv (gather) or comes from in
 * its send (scatter): relative block c + j / C is real rank (c + j / C + root) mod n's. */
static uint64_t zc_bino_root_off(const zc_ctx *x, uint64_t C, uint32_t c, uint64_t j) {
    const zc__sched *s = &x->r->s;
    uint32_t b = zc__add_mod(c + (uint32_t)(j / C), s->root, x->n);
    return ((uint64_t)b * s->count + (j % C) * x->E) * x->es;
}

/* Forwards message j_in from peer `in` as message j_out to peer `out` (slot to slot); false
 * when it is not there yet or cannot go yet. */
static bool zc_bino_forward(zc_ctx *x, uint32_t in, uint64_t j_in, uint32_t out, uint64_t j_out,
                            uint64_t bytes) {
    const uint8_t *src = zc__rx_peek(x->comm, x->r, in, j_in, bytes);
    if (!src) return false;
    uint8_t *dst = zc__tx_begin_n(x->comm, x->r, out, j_out, bytes);
    if (!dst) return false;
    zc__memcpy(dst, src, bytes);
    if (zc__tx_end(x->comm, x->r, out, j_out, bytes) != ZC_OK) return false;
    zc__rx_consume(x->comm, x->r, in);
    (*x->budget)--;
    return true;
}

/* A non-root: its stream to the parent (gather: own block from send, then each child's messages
 * forwarded as they arrive) or from it (scatter: own block into recv, the rest forwarded to the
 * children). */
static void zc_bino_relay(zc_ctx *x, uint32_t v, uint64_t C) {
    const zc__sched *s = &x->r->s;
    bool up = s->kind == ZC_K_GATHER;
    uint32_t parent = zc__add_mod(zc_parent(s, v), s->root, x->n);
    uint64_t total = zc_bino_size(x->n, v) * C;
    uint64_t k = up ? zc__tx_done(x->comm, x->r, parent) : zc__rx_done(x->comm, x->r, parent);
    for (; *x->budget && k < total; k++) {
        uint64_t bytes = zc_bino_elems(x, C, k) * x->es;
        if (k >= C) {
            uint32_t c = zc_bino_child_of(v, v + (uint32_t)(k / C));
            uint32_t cr = zc__add_mod(c, s->root, x->n);
            uint64_t j = k - (c - v) * C;
            if (!(up ? zc_bino_forward(x, cr, j, parent, k, bytes)
                     : zc_bino_forward(x, parent, k, cr, j, bytes)))
                return;
        } else if (up) {
            uint8_t *dst = zc__tx_begin_n(x->comm, x->r, parent, k, bytes);
            if (!dst) return;
            zc__memcpy(dst, s->send + k * x->E * x->es, bytes);
            if (zc__tx_end(x->comm, x->r, parent, k, bytes) != ZC_OK) return;
            (*x->budget)--;
        } else {
            const uint8_t *src = zc__rx_peek(x->comm, x->r, parent, k, bytes);
            if (!src) return;
            zc__memcpy(s->recv + k * x->E * x->es, src, bytes);
            zc__rx_consume(x->comm, x->r, parent);
            (*x->budget)--;
        }
    }
}

/* The root: every child's stream into recv (gather) or out of send (scatter), block by block
 * at the real ranks' places; its own block copied. */
static bool zc_bino_root(zc_ctx *x, uint64_t C) {
    const zc__sched *s = &x->r->s;
    bool up = s->kind == ZC_K_GATHER;
    for (uint32_t c = zc_first_child(s, x->n, 0); c < x->n; c = zc_next_child(s, x->n, 0, c)) {
        uint32_t p = zc__add_mod(c, s->root, x->n);
        uint64_t total = zc_bino_size(x->n, c) * C;
        uint64_t j = up ? zc__rx_done(x->comm, x->r, p) : zc__tx_done(x->comm, x->r, p);
        for (; *x->budget && j < total; j++) {
            uint64_t bytes = zc_bino_elems(x, C, j) * x->es, off = zc_bino_root_off(x, C, c, j);
            if (up) {
                const uint8_t *src = zc__rx_peek(x->comm, x->r, p, j, bytes);
                if (!src) break;
                if (x->stream) zc__copy_stream(s->recv + off, src, bytes);
                else zc__memcpy(s->recv + off, src, bytes);
                zc__rx_consume(x->comm, x->r, p);
            } else {
                uint8_t *dst = zc__tx_begin_n(x->comm, x->r, p, j, bytes);
                if (!dst) break;
                zc__memcpy(dst, s->send + off, bytes);
                if (zc__tx_end(x->comm, x->r, p, j, bytes) != ZC_OK) return false;
            }
            (*x->budget)--;
        }
    }
    uint64_t own = (uint64_t)s->root * s->count * x->es;
    return up ? zc_copy_own(x, s->recv + own, s->send, s->count)
              : zc_copy_own(x, s->recv, s->send + own, s->count);
}

static bool zc_step_binomial(zc_ctx *x) {
    const zc__sched *s = &x->r->s;
    uint32_t v = zc_rel(x->me, s->root, x->n);
    uint64_t C = zc__msgs(s->count, x->E);
    bool own = true;
    if (v == 0) own = zc_bino_root(x, C);
    else zc_bino_relay(x, v, C);
    return own && zc_all_moved(x->r);
}

/* ---- recursive halving (reduce_scatter) and Rabenseifner (all_reduce) ----
 * Virtual rank u (zc_vr) owns the blocks of its real ranks: one, or the two of a folded pair,
 * one contiguous range of the send buffer either way (its virtual block). A call works column
 * by column: a column is the elements [c w, c w + w) of the virtual blocks of one group of 2^s
 * owners (g 2^s .. g 2^s + 2^s - 1; G = p / 2^s groups), with 2^s w accumulators at most, so
 * that its partials fit the request's slice (r->acc). In the slice a column's pieces are packed
 * in the bit-reversed order of the owners' low s bits: the owners a rank still holds before step
 * k (those that agree with it on bits 0 .. k-1) are one run of the slice, whose first half is
 * the owners with bit k clear. In step k (distance 2^k, k = 0 .. log2 p - 1) u sends the partial
 * of the held owners whose bit k differs from its own to u ^ 2^k and combines the one it gets
 * for the others with its own, the lower virtual rank's on the left: the canonical tree at
 * every element. From step s on a group leaves a rank one owner at most (the binomial end of
 * the halving). After the last step u holds its own piece when u is in the group. */
typedef struct zc_rh {
    zc_vr v;
    uint32_t s;  /* log2 of the owners of a column (<= v.steps) */
    uint32_t G;  /* groups: 2^(v.steps - s) */
    uint64_t w;  /* column width: elements of each virtual block, >= 1 */
    uint64_t C;  /* columns per group: the longest virtual block (virtual rank 0's) / w */
    uint64_t T;  /* columns of a call, all groups: C * G (column t: c = t / G, g = t % G) */
    uint64_t full; /* columns c < full hold w elements of every virtual block */
    uint64_t base, rem; /* real block b starts at b * base + min(b, rem) */
    size_t ab;   /* accumulator bytes */
} zc_rh;

/* Virtual block u: elements [lo, hi) of the send buffer (reduce_scatter's real blocks are count
 * long, all_reduce's the balanced ones of zc__block_lo). */
static uint64_t zc_rh_blo(const zc_rh *h, uint32_t b) {
    return b * h->base + (b < h->rem ? b : h->rem);
}
static uint64_t zc_rh_vlo(const zc_rh *h, uint32_t u) { return zc_rh_blo(h, zc_vr_real(&h->v, u)); }
static uint64_t zc_rh_vhi(const zc_rh *h, uint32_t u) {
    return zc_rh_blo(h, u < h->v.e ? 2u * u + 2u : u + h->v.e + 1u);
}

/* The low `bits` bits of i reversed. */
static uint32_t zc_rev(uint32_t i, uint32_t bits) {
    i = (i >> 1 & 0x55555555u) | (i & 0x55555555u) << 1;
    i = (i >> 2 & 0x33333333u) | (i & 0x33333333u) << 2;
    i = (i >> 4 & 0x0f0f0f0fu) | (i & 0x0f0f0f0fu) << 4;
    i = (i >> 8 & 0x00ff00ffu) | (i & 0x00ff00ffu) << 8;
    i = i >> 16 | i << 16;
    return bits ? i >> (32u - bits) : 0;
}

static zc_rh zc_rh_of(const zc_comm *c, const zc__sched *s) {
    zc_rh h;
    uint32_t n = c->nranks;
    h.v = zc_vr_of(n);
    h.ab = zc__acc_bytes((zc_dtype)s->dtype, (zc_op)s->op);
    uint64_t A = zc__acc_slice(&c->cfg) / h.ab; /* >= 16: slots are >= 256 bytes */
    bool rs = s->kind == ZC_K_REDUCE_SCATTER;
    h.base = rs ? s->count : s->count / n;
    h.rem = rs ? 0 : s->count % n;
    uint32_t last = (1u << h.v.steps) - 1u; /* the shortest virtual block */
    uint64_t longest = zc_rh_vhi(&h, 0) - zc_rh_vlo(&h, 0);
    h.s = h.v.steps;
    while (h.s && (1ull << h.s) > A) h.s--;
    h.w = zc_min(A >> h.s, longest);
    h.w += !h.w;
    h.C = (longest + h.w - 1u) / h.w;
    h.full = (zc_rh_vhi(&h, last) - zc_rh_vlo(&h, last)) / h.w;
    h.G = 1u << (h.v.steps - h.s);
    h.T = h.C * h.G;
    return h;
}

/* RH messages each way between a rank and its step-k partner: one per column, or from step s
 * on one per column of the groups where both still hold an owner. */
static uint64_t zc_rh_msgs(const zc_rh *h, uint32_t k) {
    return k < h->s ? h->T : h->T >> (k - h->s + 1u);
}

/* Elements of the piece at slot position i of column t. */
static uint64_t zc_rh_len(const zc_ctx *x, const zc_rh *h, uint64_t t, uint32_t i) {
    uint32_t v = (uint32_t)(t % h->G) << h->s | zc_rev(i, h->s);
    uint64_t lo = zc_rh_vlo(h, v), len = zc_rh_vhi(h, v) - lo, at = t / h->G * h->w;
    (void)x;
    return at >= len ? 0 : zc_min(h->w, len - at);
}

/* Elements of the pieces at positions [a, b) of column t (w each before the ragged end). */
static uint64_t zc_rh_span(const zc_ctx *x, const zc_rh *h, uint64_t t, uint32_t a, uint32_t b) {
    uint64_t sum = 0;
    if (t / h->G < h->full) return (uint64_t)(b - a) * h->w;
    for (uint32_t i = a; i < b; i++) sum += zc_rh_len(x, h, t, i);
    return sum;
}

/* Column t of this rank's input, as accumulators packed in slot order, into dst. */
static void zc_rh_load(const zc_ctx *x, const zc_rh *h, uint64_t t, uint8_t *dst) {
    const zc__sched *s = &x->r->s;
    uint64_t at = t / h->G * h->w;
    for (uint32_t i = 0; i < 1u << h->s; i++) {
        uint32_t v = (uint32_t)(t % h->G) << h->s | zc_rev(i, h->s);
        uint64_t len = zc_rh_len(x, h, t, i);
        const uint8_t *in = s->send + (zc_rh_vlo(h, v) + at) * x->es;
        zc__acc_load(dst, in, len, (zc_dtype)s->dtype, (zc_op)s->op);
        dst += len * h->ab;
    }
}

/* The slot positions u keeps in step k of group g (run[0], run[1]) and those it sends (run[2],
 * run[3]); either may be empty. */
static void zc_rh_split(const zc_rh *h, uint32_t u, uint32_t g, uint32_t k, uint32_t run[4]) {
    uint32_t s = h->s, bit = u >> k & 1u;
    if (k < s) {
        uint32_t half = 1u << (s - k - 1u), i0 = zc_rev(u & ((1u << k) - 1u), k) << (s - k);
        run[0] = i0 + bit * half, run[2] = i0 + (1u - bit) * half;
        run[1] = run[0] + half, run[3] = run[2] + half;
        return;
    }
    uint32_t iu = zc_rev(u & ((1u << s) - 1u), s);
    bool held = ((g ^ (u >> s)) & ((1u << (k - s)) - 1u)) == 0;
    bool keep = (g >> (k - s) & 1u) == bit;
    run[0] = run[1] = run[2] = run[3] = iu;
    if (held) run[keep ? 1 : 3] = iu + 1u;
}

/* Whether column t carries a piece of the folded odd rank's block (reduce_scatter: the even rank
 * of pair i sends it after the column). */
static bool zc_rh_odd_piece(const zc_rh *h, const zc__sched *s, uint32_t i, uint64_t t) {
    return s->kind == ZC_K_REDUCE_SCATTER && t % h->G == i >> h->s &&
           t / h->G * h->w + h->w > s->count;
}

/* Phase 0 of column t: the leaf, this rank's input (+) the folded odd rank's on a pair. */
static bool zc_rh_leaf(zc_ctx *x, const zc_rh *h, uint64_t t, bool pair) {
    zc__req *r = x->r;
    uint64_t elems = zc_rh_span(x, h, t, 0, 1u << h->s);
    const uint8_t *w = 0;
    if (pair && !(w = zc__rx_peek(x->comm, r, x->me + 1u, t, elems * h->ab))) return false;
    zc_rh_load(x, h, t, r->acc);
    if (pair) {
        zc__acc_combine(r->acc, r->acc, w, elems, (zc_dtype)r->s.dtype, (zc_op)r->s.op);
        zc__rx_consume(x->comm, r, x->me + 1u);
        (*x->budget)--;
    }
    r->b = 1;
    return true;
}

/* Step k's send (r->b odd) or receive and combine (r->b even) of column t. */
static bool zc_rh_exchange(zc_ctx *x, const zc_rh *h, uint32_t u, uint64_t t) {
    zc__req *r = x->r;
    uint32_t k = (uint32_t)(r->b - 1u) / 2u, q = u ^ (1u << k), peer = zc_vr_real(&h->v, q), run[4];
    bool send = r->b & 1u;
    zc_rh_split(h, u, (uint32_t)(t % h->G), k, run);
    uint32_t a = send ? run[2] : run[0], b = send ? run[3] : run[1];
    if (a < b) {
        uint64_t elems = zc_rh_span(x, h, t, a, b), bytes = elems * h->ab;
        uint8_t *acc = r->acc + zc_rh_span(x, h, t, 0, a) * h->ab;
        if (send) {
            uint64_t m = zc__tx_done(x->comm, r, peer);
            uint8_t *d = zc__tx_begin_n(x->comm, r, peer, m, bytes);
            if (!d) return false;
            zc__memcpy(d, acc, bytes);
            if (zc__tx_end(x->comm, r, peer, m, bytes) != ZC_OK) return false;
        } else {
            const uint8_t *w = zc__rx_peek(x->comm, r, peer, zc__rx_done(x->comm, r, peer), bytes);
            if (!w) return false;
            zc__acc_combine(acc, u < q ? acc : w, u < q ? w : acc, elems, (zc_dtype)r->s.dtype,
                            (zc_op)r->s.op);
            zc__rx_consume(x->comm, r, peer);
        }
        (*x->budget)--;
    }
    r->b++;
    return true;
}

/* After the last step: u's own piece of column t stored into recv (r->b = 1 + 2 log2 p), then
 * on a reduce_scatter pair the odd rank's part sent to it (r->b one more). */
static bool zc_rh_store(zc_ctx *x, const zc_rh *h, uint32_t u, uint64_t t) {
    zc__req *r = x->r;
    const zc__sched *s = &r->s;
    zc_dtype dt = (zc_dtype)s->dtype;
    zc_op op = (zc_op)s->op;
    uint32_t iu = zc_rev(u & ((1u << h->s) - 1u), h->s);
    uint64_t at = t / h->G * h->w, len = zc_rh_len(x, h, t, iu);
    bool mine = t % h->G == u >> h->s, rs = s->kind == ZC_K_REDUCE_SCATTER;
    const uint8_t *acc = r->acc + (mine ? zc_rh_span(x, h, t, 0, iu) * h->ab : 0);
    if (mine && r->b == 1u + 2u * h->v.steps) {
        uint64_t own = rs ? (at < s->count ? zc_min(len, s->count - at) : 0) : len;
        uint64_t to = rs ? at : zc_rh_vlo(h, u) + at;
        zc__acc_store(s->recv + to * x->es, acc, own, dt, op, x->n);
        if (x->me < 2u * h->v.e && zc_rh_odd_piece(h, s, u, t)) {
            r->b++;
            return true;
        }
    } else if (mine) {
        uint64_t from = at > s->count ? at : s->count, elems = at + len - from, bytes = elems * x->es;
        uint64_t m = zc__tx_done(x->comm, r, x->me + 1u);
        uint8_t *d = zc__tx_begin_n(x->comm, r, x->me + 1u, m, bytes);
        if (!d) return false;
        zc__acc_store(d, acc + (from - at) * h->ab, elems, dt, op, x->n);
        if (zc__tx_end(x->comm, r, x->me + 1u, m, bytes) != ZC_OK) return false;
        (*x->budget)--;
    }
    r->b = 0;
    r->a++;
    return true;
}

/* A folded odd rank: column t's input to the even rank (r->b = 0), then on reduce_scatter the
 * piece of its block that the column reduced (r->b = 1). */
static bool zc_rh_folded(zc_ctx *x, const zc_rh *h, uint64_t t) {
    zc__req *r = x->r;
    const zc__sched *s = &r->s;
    uint32_t even = x->me - 1u, i = even / 2u;
    if (r->b == 0) {
        uint64_t bytes = zc_rh_span(x, h, t, 0, 1u << h->s) * h->ab;
        uint8_t *d = zc__tx_begin_n(x->comm, r, even, t, bytes);
        if (!d) return false;
        zc_rh_load(x, h, t, d);
        if (zc__tx_end(x->comm, r, even, t, bytes) != ZC_OK) return false;
        (*x->budget)--;
        r->b = zc_rh_odd_piece(h, s, i, t);
        r->a += !r->b;
        return true;
    }
    uint64_t at = t / h->G * h->w, from = at > s->count ? at : s->count;
    uint64_t elems = at + zc_rh_len(x, h, t, zc_rev(i & ((1u << h->s) - 1u), h->s)) - from;
    const uint8_t *res = zc__rx_peek(x->comm, r, even, zc__rx_done(x->comm, r, even),
                                     elems * x->es);
    if (!res) return false;
    zc__memcpy(s->recv + (from - s->count) * x->es, res, elems * x->es);
    zc__rx_consume(x->comm, r, even);
    (*x->budget)--;
    r->b = 0;
    r->a++;
    return true;
}

/* Rabenseifner's second half at virtual rank u: in step j = r->b (distance 2^j) the reduced
 * blocks of virtual ranks u & ~(2^j - 1) .. + 2^j - 1 (contiguous in recv) go to u ^ 2^j and
 * as many come back, after the step's RH messages on that channel; then the even rank of a
 * pair sends the whole result to the odd one. True once all is handed to the channels. */
static bool zc_rab_gather(zc_ctx *x, const zc_rh *h, uint32_t u) {
    const zc__sched *s = &x->r->s;
    while (*x->budget && x->r->b < h->v.steps) {
        uint32_t j = (uint32_t)x->r->b, d = 1u << j, q = u ^ d, peer = zc_vr_real(&h->v, q);
        uint32_t mine = u & ~(d - 1u), theirs = q & ~(d - 1u);
        uint64_t lo = zc_rh_vlo(h, mine), qlo = zc_rh_vlo(h, theirs);
        uint64_t len = zc_rh_vhi(h, mine + d - 1u) - lo;
        uint64_t qlen = zc_rh_vhi(h, theirs + d - 1u) - qlo, first = zc_rh_msgs(h, j);
        zc_send_chunks(x, peer, s->recv + lo * x->es, len, first, UINT64_MAX, false);
        zc_recv_chunks(x, peer, s->recv + qlo * x->es, qlen, first);
        if (zc__tx_done(x->comm, x->r, peer) < first + zc__msgs(len, x->E) ||
            zc__rx_done(x->comm, x->r, peer) < first + zc__msgs(qlen, x->E))
            return false;
        x->r->b++;
    }
    if (x->r->b < h->v.steps) return false;
    if (x->me < 2u * h->v.e)
        zc_send_chunks(x, x->me + 1u, s->recv, s->count, 0, UINT64_MAX, false);
    return true;
}

/* r->a = column (0 .. T), r->b = its phase (above); after the columns, all_reduce's
 * all-gather step in r->b. */
static bool zc_step_rh(zc_ctx *x) {
    zc__req *r = x->r;
    zc_rh h = zc_rh_of(x->comm, &r->s);
    bool folded = zc_vr_folded(&h.v, x->me);
    uint32_t u = zc_vr_virt(&h.v, x->me);
    while (*x->budget && r->a < h.T) {
        bool moved = folded          ? zc_rh_folded(x, &h, r->a)
                     : r->b == 0     ? zc_rh_leaf(x, &h, r->a, x->me < 2u * h.v.e)
                     : r->b <= 2u * h.v.steps ? zc_rh_exchange(x, &h, u, r->a)
                                     : zc_rh_store(x, &h, u, r->a);
        if (!moved) break;
    }
    if (r->a < h.T) return false;
    if (r->s.kind == ZC_K_ALLREDUCE) {
        if (folded) zc_recv_chunks(x, x->me - 1u, r->s.recv, r->s.count, 0);
        else if (!zc_rab_gather(x, &h, u)) return false;
    }
    return zc_all_moved(r);
}

/* RH / Rabenseifner: T messages from a folded odd rank to its even rank, and back the odd
 * rank's pieces (reduce_scatter) or its whole result (all_reduce); with each step's partner
 * zc_rh_msgs each way, plus (all_reduce) the all-gather's streams. */
static void zc_links_rh(const zc_comm *c, const zc__sched *s, uint64_t C_slots, zc__link_fn fn,
                        void *ctx) {
    zc_rh h = zc_rh_of(c, s);
    uint32_t me = c->rank;
    bool ar = s->kind != ZC_K_REDUCE_SCATTER;
    (void)C_slots;
    if (me < 2u * h.v.e) {
        uint64_t back = ar ? zc__msgs(s->count, s->chunk) : h.C - s->count / h.w;
        if (me & 1u) {
            fn(ctx, me - 1u, h.T, back);
            return;
        }
        fn(ctx, me + 1u, back, h.T);
    }
    uint32_t u = zc_vr_virt(&h.v, me);
    for (uint32_t k = 0; k < h.v.steps; k++) {
        uint32_t d = 1u << k, q = u ^ d, mine = u & ~(d - 1u), theirs = q & ~(d - 1u);
        uint64_t tx = zc_rh_msgs(&h, k), rx = tx;
        if (ar) {
            tx += zc__msgs(zc_rh_vhi(&h, mine + d - 1u) - zc_rh_vlo(&h, mine),
                           s->chunk);
            rx += zc__msgs(zc_rh_vhi(&h, theirs + d - 1u) - zc_rh_vlo(&h, theirs),
                           s->chunk);
        }
        fn(ctx, zc_vr_real(&h.v, q), tx, rx);
    }
}

/* ---- van de Geijn broadcast (ZC_ALG_SCAG) ----
 * The buffer is n balanced blocks (zc__block_lo) in the order of the ranks relative to the
 * root: relative rank v ends up owning block v. First a binomial scatter: v's subtree (v ..
 * v + size - 1, zc_bino_size) owns one contiguous range of the buffer, which v receives from its
 * parent into recv and passes on in its children's ranges as it arrives. Then Bruck's all-gather
 * over the relative ranks with unequal blocks: the buffer read as a ring of count elements
 * starting at block v, round k (d = 2^k) sends the ring's blocks v .. v + min(d, n - d) - 1 to
 * v - d and receives blocks v + d .. from v + d, in place in recv. On a channel the scatter's
 * messages come first, the one Bruck stream after them. Per rank about 2 count elements in and
 * out, 2 ceil(log2 n) steps, peers at ring distances 2^k only. */
static uint64_t zc_scag_lo(const zc__sched *s, uint32_t n, uint32_t b) {
    return zc__block_lo(s->count, n, b);
}

/* Elements of the m blocks from relative block b on, around the ring. */
static uint64_t zc_scag_span(const zc__sched *s, uint32_t n, uint32_t b, uint32_t m) {
    uint64_t lo = zc_scag_lo(s, n, b);
    return b + m <= n ? zc_scag_lo(s, n, b + m) - lo : s->count - lo + zc_scag_lo(s, n, b + m - n);
}

/* Messages of the scatter stream into relative rank v (its subtree's range). */
static uint64_t zc_scag_sc_msgs(const zc__sched *s, uint32_t n, uint32_t v) {
    return zc__msgs(zc_scag_span(s, n, v, zc_bino_size(n, v)), s->chunk);
}

/* Per-peer sums: the links' peers (parent, children, Bruck's to and from), each once. */
typedef struct zc_scag_link {
    uint32_t k;
    uint32_t peer[4u * 32u];
    uint64_t tx[4u * 32u], rx[4u * 32u];
} zc_scag_link;

static void zc_scag_add(zc_scag_link *l, uint32_t peer, uint64_t tx, uint64_t rx) {
    uint32_t i = 0;
    while (i < l->k && l->peer[i] != peer) i++;
    ZC_ASSERT(i < 4u * 32u);
    if (i == l->k) l->peer[l->k++] = peer, l->tx[i] = 0, l->rx[i] = 0;
    l->tx[i] += tx, l->rx[i] += rx;
}

static void zc_links_scag(const zc_comm *c, const zc__sched *s, uint64_t C_slots,
                          zc__link_fn fn, void *ctx) {
    uint32_t n = c->nranks, me = c->rank, v = zc_rel(me, s->root, n);
    uint32_t rounds = zc_barrier_rounds(n);
    zc_scag_link l;
    (void)C_slots;
    l.k = 0;
    if (v) zc_scag_add(&l, zc__add_mod(zc_parent(s, v), s->root, n), 0, zc_scag_sc_msgs(s, n, v));
    for (uint32_t k = zc_first_child(s, n, v); k < n; k = zc_next_child(s, n, v, k))
        zc_scag_add(&l, zc__add_mod(k, s->root, n), zc_scag_sc_msgs(s, n, k), 0);
    for (uint32_t k = 0; k < rounds; k++) {
        uint32_t d = 1u << k, m = zc_bruck_blocks(n, k), from = zc__add_mod(v, d, n);
        zc_scag_add(&l, zc__add_mod(me, n - d, n), zc__msgs(zc_scag_span(s, n, v, m), s->chunk),
                    0);
        zc_scag_add(&l, zc__add_mod(me, d, n), 0, zc__msgs(zc_scag_span(s, n, from, m), s->chunk));
    }
    for (uint32_t i = 0; i < l.k; i++) fn(ctx, l.peer[i], l.tx[i], l.rx[i]);
}

/* The scatter: true once this rank's subtree range is in recv (the root: copied) and every
 * child's range went. */
static bool zc_scag_scatter(zc_ctx *x, uint32_t v) {
    const zc__sched *s = &x->r->s;
    uint32_t n = x->n;
    uint64_t lo = zc_scag_lo(s, n, v), len = zc_scag_span(s, n, v, zc_bino_size(n, v));
    uint64_t got = len;
    bool done = true;
    const uint8_t *src = s->send;
    if (v == 0) {
        done = zc_copy_own(x, s->recv, s->send, s->count);
    } else {
        uint32_t parent = zc__add_mod(zc_parent(s, v), s->root, n);
        zc_recv_chunks(x, parent, s->recv + lo * x->es, len, 0);
        got = zc_min(zc__rx_done(x->comm, x->r, parent) * x->E, len);
        done = got == len;
        src = s->recv;
    }
    for (uint32_t c = zc_first_child(s, n, v); c < n; c = zc_next_child(s, n, v, c)) {
        uint32_t p = zc__add_mod(c, s->root, n);
        uint64_t clo = zc_scag_lo(s, n, c), clen = zc_scag_span(s, n, c, zc_bino_size(n, c));
        uint64_t off = clo - lo, ready = got >= off + clen ? UINT64_MAX
                                         : got > off ? (got - off) / x->E : 0;
        zc_send_chunks(x, p, src + clo * x->es, clen, 0, ready, false);
        done = done && zc__tx_done(x->comm, x->r, p) >= zc__msgs(clen, x->E);
    }
    return done;
}

/* Bruck's round k: true once both its streams are complete. The streams start after the
 * scatter's messages on their channels. */
static bool zc_scag_round(zc_ctx *x, uint32_t v, uint32_t k) {
    const zc__sched *s = &x->r->s;
    uint32_t n = x->n, d = 1u << k, m = zc_bruck_blocks(n, k), vf = zc__add_mod(v, d, n);
    uint32_t to = zc__add_mod(x->me, n - d, n), from = zc__add_mod(x->me, d, n);
    uint32_t tv = zc__add_mod(v, n - d, n);
    uint64_t tx0 = tv > v && zc_is_child(s, n, v, tv) ? zc_scag_sc_msgs(s, n, tv) : 0;
    uint64_t rx0 = v && vf == zc_parent(s, v) ? zc_scag_sc_msgs(s, n, v) : 0;
    uint64_t tlen = zc_scag_span(s, n, v, m), rlen = zc_scag_span(s, n, vf, m);
    uint64_t tat = zc_scag_lo(s, n, v), rat = zc_scag_lo(s, n, vf);
    uint64_t k_tx = zc__tx_done(x->comm, x->r, to), k_rx = zc__rx_done(x->comm, x->r, from);
    uint64_t T = zc__msgs(tlen, x->E), R = zc__msgs(rlen, x->E);
    for (; *x->budget && k_tx - tx0 < T; k_tx++) {
        uint64_t elems = zc_chunk_len(x, tlen, k_tx - tx0), at = tat + (k_tx - tx0) * x->E;
        uint8_t *dst = zc__tx_begin_n(x->comm, x->r, to, k_tx, elems * x->es);
        if (!dst) break;
        zc_ring_copy(x, s->count, at >= s->count ? at - s->count : at, elems, dst, false);
        if (zc__tx_end(x->comm, x->r, to, k_tx, elems * x->es) != ZC_OK) return false;
        (*x->budget)--;
    }
    for (; *x->budget && k_rx - rx0 < R; k_rx++) {
        uint64_t elems = zc_chunk_len(x, rlen, k_rx - rx0), at = rat + (k_rx - rx0) * x->E;
        const uint8_t *src = zc__rx_peek(x->comm, x->r, from, k_rx, elems * x->es);
        if (!src) break;
        zc_ring_copy(x, s->count, at >= s->count ? at - s->count : at, elems,
                     (uint8_t *)(uintptr_t)src, true);
        zc__rx_consume(x->comm, x->r, from);
        (*x->budget)--;
    }
    return k_tx - tx0 >= T && k_rx - rx0 >= R;
}

/* r->a: the root's own copy (chunks); r->b: 0 the scatter, then 1 + Bruck's round. */
static bool zc_step_scag(zc_ctx *x) {
    uint32_t v = zc_rel(x->me, x->r->s.root, x->n), rounds = zc_barrier_rounds(x->n);
    if (x->r->b == 0) {
        if (!zc_scag_scatter(x, v)) return false;
        x->r->b = 1;
    }
    while (*x->budget && x->r->b <= rounds && zc_scag_round(x, v, (uint32_t)x->r->b - 1u))
        x->r->b++;
    return x->r->b > rounds && zc_all_moved(x->r);
}

/* ---- the host family: one row per algorithm ---- */

typedef struct zc_host_alg {
    zc_links_fn links; /* the messages it exchanges, per peer (the rule the issue reserves) */
    bool (*step)(zc_ctx *x); /* moves it within the budget; true once its work is done */
} zc_host_alg;

static const zc_host_alg zc_host_algs[ZC_ALG_HRD + 1] = {
    [ZC_ALG_LOCAL] = {zc_links_none, zc_step_local},
    [ZC_ALG_ONESHOT] = {zc_links_all_c, zc_step_oneshot},
    [ZC_ALG_RSAG] = {zc_links_rsag, zc_step_rs},
    [ZC_ALG_DIRECT] = {zc_links_direct, zc_step_direct_any},
    [ZC_ALG_RSGATHER] = {zc_links_rsgather, zc_step_rs},
    [ZC_ALG_TREE] = {zc_links_tree, zc_step_bcast},
    [ZC_ALG_CHAIN] = {zc_links_tree, zc_step_bcast},
    [ZC_ALG_DISSEM] = {zc_links_dissem, zc_step_barrier},
    [ZC_ALG_P2P] = {zc_links_p2p, zc_step_p2p},
    [ZC_ALG_RD] = {zc_links_rd, zc_step_rd},
    [ZC_ALG_BRUCK] = {zc_links_bruck_any, zc_step_bruck_any},
    [ZC_ALG_BINOMIAL] = {zc_links_binomial, zc_step_binomial},
    [ZC_ALG_RH] = {zc_links_rh, zc_step_rh},
    [ZC_ALG_RAB] = {zc_links_rh, zc_step_rh},
    [ZC_ALG_VTREE] = {zc_links_vtree, zc_step_rd},
    [ZC_ALG_SCAG] = {zc_links_scag, zc_step_scag},
    [ZC_ALG_HRD] = {zc_links_hrd, zc_step_hrd},
};

static const zc_host_alg *zc_host_alg_of(uint32_t alg) {
    ZC_ASSERT(alg <= ZC_ALG_HRD && zc_host_algs[alg].step);
    return &zc_host_algs[alg];
}

static void zc_host_links(const zc_comm *c, const zc__sched *s, zc__link_fn fn, void *ctx) {
    zc_host_alg_of(s->alg)->links(c, s, zc__msgs(s->count, s->chunk), fn, ctx);
}

/* The chunk streams' step (kept out of line: a line step's call does not pay its frame). */
__attribute__((noinline)) static bool zc_stream_step(zc_comm *comm, zc__req *r,
                                                     uint32_t *budget) {
    zc_ctx x = {comm, r, budget, comm->rank, comm->nranks, r->s.chunk, r->s.esize,
                zc__result_bytes(&r->s, comm->nranks) >= ZC_STREAM_COPY_MIN_BYTES};
    if (r->place & ZC_PLACE_HANDSHAKE) {
        zc_place_handshake(comm, r, budget);
        if (comm->failed) return false;
    }
    if (!zc_host_algs[r->s.alg].step(&x)) return false; /* its links were found at issue */
    /* A put from the caller's memory: done once the wire no longer reads the source. */
    return !(r->place & ZC_PLACE_DIRECT) || zc__tx_puts_done(comm, r);
}

bool zc__line_step(zc_comm *comm, zc__req *r, uint32_t *budget) {
    return zc_line_algs[r->s.alg](comm, r, budget);
}

static bool zc_host_step(zc_comm *comm, zc__req *r, uint32_t *budget) {
    return r->line ? zc__line_step(comm, r, budget) : zc_stream_step(comm, r, budget);
}

const zc__family zc__fam_host = {"host", ZC_FAM_EAGER | ZC_FAM_PLACE, zc_host_links,
                                 zc_host_begin, zc_host_step};

void zc_comm_messages(const zc_comm *comm, uint64_t *sent, uint64_t *received) {
    uint64_t tx = 0, rx = 0;
    bool ok = zc__comm_ok(comm);
    for (uint32_t i = 0; ok && i < zc__lanes(&comm->cfg) * comm->nconn; i++)
        tx += comm->chans[i].tx_count, rx += comm->chans[i].rx_count;
    if (sent) *sent = tx;
    if (received) *received = rx;
}
