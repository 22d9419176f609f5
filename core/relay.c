/* relay.c: send and receive between ranks without a connection (overlay mode with
 * cfg->overlay_relay), over the relay lane (ZC_LANE_RELAY) such a communicator adds to every
 * connection. The route: the shorter way
 * round the ring, each hop the highest power of two left in the distance, so every hop is a
 * ring link (r +- 2^k) and shorter than the one before (no cycle of relay rings can wait on
 * itself). A send writes its chunks, one slot each, into its first hop's relay ring; every rank's
 * zc_progress takes the next message of its relay rings and forwards it (one slot-to-slot copy
 * into the next hop's ring, when that hop has credit) or, at its destination, copies it into
 * the receive it belongs to: the oldest receive from its source still short of chunks (a pair's
 * messages follow one route, so they arrive in order). A message for which no receive is issued
 * yet waits in its ring, and the ring's later messages behind it. Bounded work per pass, nothing
 * allocated: the relay rings are the buffers; what waits is held by the credits. */
#include "engine.h"
#include "text.h"

#define ZC_RELAY_POLLS 2u /* relay rings whose next message one pass looks at */
#define ZC_RELAY_PASS 16u /* messages one pass moves at most */

static uint32_t zc_high_bit(uint32_t t) { return 1u << (31 - __builtin_clz(t)); }

uint32_t zc__relay_next(uint32_t n, uint32_t me, uint32_t dst) {
    uint32_t t = dst >= me ? dst - me : dst + n - me; /* clockwise distance, 1..n-1 */
    ZC_ASSERT(t != 0 && t < n);
    if (2u * (uint64_t)t <= n) return zc__add_mod(me, zc_high_bit(t), n);
    return zc__add_mod(me, n - zc_high_bit(n - t), n);
}

/* Ring link j of rank me: me + 2^(j/2) for even j, me - 2^(j/2) for odd j; j below
 * zc_links(n). */
static uint32_t zc_links(uint32_t n) { return 2u * (32u - (uint32_t)__builtin_clz(n - 1u)); }
static uint32_t zc_link(uint32_t n, uint32_t me, uint32_t j) {
    uint32_t d = 1u << (j / 2u);
    return j & 1u ? zc__add_mod(me, n - d, n) : zc__add_mod(me, d, n);
}

/* Messages (chunks) of r's call and the payload bytes of chunk k. */
static uint64_t zc_chunks(const zc__req *r) { return zc__msgs(r->s.count, r->s.chunk); }
static size_t zc_chunk_bytes(const zc__req *r, uint64_t k) {
    uint64_t lo = k * r->s.chunk, left = r->s.count - lo;
    return (size_t)((left < r->s.chunk ? left : r->s.chunk) * r->s.esize);
}

/* The active relayed request of kind with peer that the next message of the pair is r's:
 * the oldest one still short of chunks (NULL: none; a receive still waiting its turn, wild,
 * takes nothing yet). */
static zc__req *zc_oldest(zc_comm *comm, uint32_t kind, uint32_t peer) {
    for (uint32_t i = 0; i < comm->nreqs_active; i++) {
        zc__req *r = &comm->reqs[comm->active[i]];
        if (r->s.alg != ZC_ALG_RELAY || r->s.kind != kind || r->s.root != peer ||
            r->a == zc_chunks(r))
            continue;
        return r->wild ? 0 : r;
    }
    return 0;
}

static void zc_relay_links(const zc_comm *c, const zc__sched *s, zc__link_fn fn, void *ctx) {
    (void)c, (void)s, (void)fn, (void)ctx; /* nothing reserved: relay messages are numbered
                                              * as they go */
}

static void zc_relay_begin(zc_comm *c, zc__req *r) {
    (void)c;
    r->a = 0; /* chunks sent, or delivered */
}

/* A send writes its chunks into the first hop's relay ring, once every earlier send of this
 * rank to the same destination wrote all of its own. A receive is done once the passes
 * delivered every chunk. */
static bool zc_relay_step(zc_comm *comm, zc__req *r, uint32_t *budget) {
    uint64_t n = zc_chunks(r);
    if (r->s.kind == ZC_K_RECV) return r->a == n;
    if (r->a < n && zc_oldest(comm, ZC_K_SEND, r->s.root) != r) return false;
    uint32_t hop = zc__relay_next(comm->nranks, comm->rank, r->s.root);
    while (r->a < n && *budget) {
        zc__hdr *h = zc__relay_tx_slot(comm, hop);
        if (!h) return false;
        size_t bytes = zc_chunk_bytes(r, r->a);
        h->comm_id = comm->comm_id;
        h->seq = r->seq;
        h->count = r->s.count;
        h->kind = ZC_K_SEND;
        h->dtype = r->s.dtype;
        h->op = 0;
        h->alg = ZC_ALG_RELAY;
        h->root = r->s.tag;
        h->step = (uint32_t)r->a;
        h->bytes = (uint32_t)bytes;
        h->src = comm->rank;
        h->dst = r->s.root;
        if (bytes)
            zc__memcpy((uint8_t *)h + ZC_SLOT_HDR_BYTES,
                       r->s.send + r->a * r->s.chunk * r->s.esize, bytes);
        if (zc__relay_tx_post(comm, hop, bytes) != ZC_OK) return false;
        r->a++;
        (*budget)--;
    }
    return r->a == n;
}

const zc__family zc__fam_relay = {"relay", ZC_FAM_EAGER, zc_relay_links, zc_relay_begin,
                                  zc_relay_step};

/* A relayed header no rank of this job sends: the communicator fails, nothing of it used. */
__attribute__((noinline, cold)) static void zc_relay_bad(zc_comm *comm, uint32_t from,
                                                        const zc__hdr *h, const char *why) {
    zc__fail(comm, ZC_MISMATCH, comm->seq, (int32_t)from, 0, "rank %u relayed a message whose "
             "header says source %u, destination %u, %u bytes, communicator %llx (%s); no rank "
             "of this job sends that, so this communicator has failed", from, h->src, h->dst,
             h->bytes, (unsigned long long)h->comm_id, why);
}

/* A message for this rank that is not what its receive r expects (call or chunk). */
__attribute__((noinline, cold)) static void zc_relay_mismatch(zc_comm *comm, const zc__req *r,
                                                             const zc__hdr *h) {
    char mine[96], theirs[96];
    zc__describe(mine, sizeof mine, ZC_K_RECV, r->s.count, r->s.dtype, 0, r->s.tag);
    zc__describe(theirs, sizeof theirs, h->kind, h->count, h->dtype, h->op, h->root);
    zc__fail(comm, ZC_MISMATCH, r->seq, (int32_t)h->src, 0, "mismatch: rank %u called %s from "
             "rank %u but rank %u sent %s (relayed; message %u of %u bytes, where message %llu "
             "of %zu bytes was expected)", comm->rank, mine, h->src, h->src, theirs, h->step,
             h->bytes, (unsigned long long)r->a, zc_chunk_bytes(r, r->a));
}

/* Whether h is the next chunk of r's call from its source. */
static bool zc_relay_matches(const zc__req *r, const zc__hdr *h) {
    return h->kind == ZC_K_SEND && h->alg == ZC_ALG_RELAY && h->count == r->s.count &&
           h->dtype == r->s.dtype && h->root == r->s.tag && h->step == r->a &&
           h->bytes == zc_chunk_bytes(r, r->a);
}

/* The next message h from relay ring `from`, taken: forwarded or delivered, then consumed.
 * False while it waits (its hop's credit, or a receive for it), or when it failed the
 * communicator. */
static bool zc_relay_take(zc_comm *comm, uint32_t from, const zc__hdr *h) {
    uint32_t n = comm->nranks, me = comm->rank;
    const uint8_t *payload = (const uint8_t *)h + ZC_SLOT_HDR_BYTES;
    if (h->comm_id != comm->comm_id || h->src >= n || h->dst >= n || h->src == h->dst ||
        h->bytes > comm->cfg.slot_bytes) {
        zc_relay_bad(comm, from, h, "outside this communicator's ranks or slots");
        return false;
    }
    if (h->dst != me) {
        uint32_t hop = zc__relay_next(n, me, h->dst);
        zc__hdr *out = zc__relay_tx_slot(comm, hop);
        if (!out) {
            if (comm->relay_wait != hop + 1u) comm->relay_wait = hop + 1u, comm->relay_wait_ns = 0;
            return false;
        }
        /* Everything but the tag word, which the wire writes when it publishes. */
        zc__memcpy(out, h, __builtin_offsetof(zc__hdr, tag));
        if (h->bytes) zc__memcpy((uint8_t *)out + ZC_SLOT_HDR_BYTES, payload, h->bytes);
        if (comm->relay_wait == hop + 1u) comm->relay_wait = 0;
        if (zc__relay_tx_post(comm, hop, h->bytes) != ZC_OK) return false;
    } else {
        zc__req *r = zc_oldest(comm, ZC_K_RECV, h->src);
        if (!r) return false; /* its receive is not issued yet: it waits here */
        if (!zc_relay_matches(r, h)) {
            zc_relay_mismatch(comm, r, h);
            return false;
        }
        if (h->bytes) zc__memcpy(r->s.recv + r->a * r->s.chunk * r->s.esize, payload, h->bytes);
        r->a++;
        r->moved = 1;
    }
    zc__relay_rx_consume(comm, from);
    return true;
}

void zc__relay_pass(zc_comm *comm, uint32_t *budget) {
    uint32_t n = comm->nranks, links = zc_links(n), moved = 0;
    for (uint32_t k = 0; k < ZC_RELAY_POLLS && k < links && moved < ZC_RELAY_PASS; k++) {
        uint32_t j = comm->relay_cursor, from = zc_link(n, comm->rank, j);
        comm->relay_cursor = j + 1u < links ? j + 1u : 0u;
        for (const zc__hdr *h; moved < ZC_RELAY_PASS && *budget && !comm->failed &&
                               (h = zc__relay_rx_slot(comm, from)) != 0;) {
            if (!zc_relay_take(comm, from, h)) break;
            moved++;
            (*budget)--;
        }
    }
}

uint32_t zc__relay_any(zc_comm *comm) {
    uint32_t n = comm->nranks, best = UINT32_MAX;
    for (uint32_t j = 0; j < zc_links(n); j++) {
        const zc__hdr *h = zc__relay_rx_slot(comm, zc_link(n, comm->rank, j));
        if (h && h->dst == comm->rank && h->src < n && h->src < best &&
            !zc_oldest(comm, ZC_K_RECV, h->src))
            best = h->src;
    }
    return best;
}

void zc__relay_check(zc_comm *comm, uint64_t now) {
    if (!comm->relay_wait) return;
    if (!comm->relay_wait_ns) comm->relay_wait_ns = now;
    if (now - comm->relay_wait_ns <= ZC_LIVENESS_NS) return;
    uint32_t hop = comm->relay_wait - 1u;
    char why[128];
    comm->relay_wait_ns = now; /* checked again a liveness period later */
    if (comm->wire->peer_alive(comm->wire_state, hop, why, sizeof why) == ZC_OK) return;
    zc__fail(comm, ZC_PEER_LOST, comm->seq, (int32_t)hop, 0, "rank %u, the next hop of a "
             "message rank %u relays, is gone (%s)", hop, comm->rank, why);
}
