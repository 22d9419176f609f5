/* channel.c: one message at a time through a (lane, peer) channel: the turn rule (message
 * numbers reserved at issue), credits, the fingerprint header and its check, and the wire's
 * back-pressure (a post it refuses for now with ZC_AGAIN goes again, first). The only code that
 * calls the wire's data-path functions. Failures are recorded through fail.c. */
#include "engine.h"
#include "platform.h"
#include "text.h"

static zc__chan *zc_chan(const zc_comm *comm, uint32_t lane, uint32_t peer) {
    return &comm->chans[(size_t)lane * comm->nconn + zc__ci(comm, peer)];
}

uint64_t zc__tx_done(const zc_comm *comm, const zc__req *r, uint32_t peer) {
    const zc__chan *c = zc_chan(comm, r->lane, peer);
    uint64_t b = r->base[zc__ci(comm, peer)].tx;
    return c->tx_count > b ? c->tx_count - b : 0;
}

uint64_t zc__rx_done(const zc_comm *comm, const zc__req *r, uint32_t peer) {
    const zc__chan *c = zc_chan(comm, r->lane, peer);
    uint64_t b = r->base[zc__ci(comm, peer)].rx;
    return c->rx_count > b ? c->rx_count - b : 0;
}

bool zc__tx_puts_done(zc_comm *comm, const zc__req *r) {
    for (uint32_t i = 0; i < comm->nconn; i++)
        if (r->pl[i].direct && !comm->wire->put_done(comm->wire_state, comm->conn_peer[i]))
            return false;
    return true;
}

/* The communicator fails when the wire cannot post (what) message k of the call (kind, seq)
 * to peer for good, saying why. */
__attribute__((noinline, cold)) static zc_status
zc_post_failed(zc_comm *comm, uint32_t kind, uint64_t seq, uint32_t peer, uint64_t k,
               const char *what, zc_status st) {
    char why[160];
    why[0] = '\0';
    (void)comm->wire->peer_alive(comm->wire_state, peer, why, sizeof why);
    char msg[48];
    if (k == UINT64_MAX) zc__fmt(msg, sizeof msg, "the ready message"); /* sched.c: placement */
    else zc__fmt(msg, sizeof msg, "message %llu", (unsigned long long)k);
    return zc__fail(comm, st, seq, (int32_t)peer, 0, "%s sequence %llu: the %s wire could not "
                    "%s %s to rank %u (%s)", zc__kind_name(kind), (unsigned long long)seq,
                    comm->wire->name, what, msg, peer, why[0] ? why : zc_status_name(st));
}

/* Where a payload of bytes lies in the slot whose header is h: inline when it fits. */
static uint8_t *zc_payload(zc__hdr *h, size_t bytes) {
    return bytes <= ZC_INLINE_BYTES ? h->inl : (uint8_t *)h + ZC_SLOT_HDR_BYTES;
}

/* Bytes the wire posts for a message of bytes of payload: the header alone when the payload
 * is inline or was put in place already. */
static size_t zc_post_bytes(size_t bytes, uint32_t placed) {
    return ZC_SLOT_HDR_BYTES + (placed || bytes <= ZC_INLINE_BYTES ? 0 : bytes);
}

/* Posts again the message the wire refused for now on (lane, peer); true once it went. The
 * slot still holds it (its header says the size): its slot cannot be reused before the peer
 * consumed it. */
static bool zc_repost(zc_comm *comm, uint32_t lane, uint32_t peer) {
    zc__chan *c = zc_chan(comm, lane, peer);
    uint64_t tag = c->tx_unposted;
    uint32_t slot = (uint32_t)((tag - 1u) & comm->slot_mask);
    const zc__hdr *h = comm->wire->tx_slot(comm->wire_state, lane, peer, slot);
    zc_status st = comm->wire->post(comm->wire_state, lane, peer, slot,
                                    zc_post_bytes(h->bytes, h->placed), tag);
    if (st == ZC_AGAIN) return false;
    c->tx_unposted = 0;
    comm->unposted--;
    if (st != ZC_OK)
        zc_post_failed(comm, h->kind, h->seq, peer, h->step == UINT32_MAX ? UINT64_MAX : h->step,
                       "post", st);
    return st == ZC_OK;
}

void zc__tx_flush(zc_comm *comm) {
    for (uint32_t lane = 0; lane < zc__lanes(&comm->cfg) && comm->unposted && !comm->failed; lane++)
        for (uint32_t i = 0; i < comm->nconn && !comm->failed; i++)
            if (comm->chans[(size_t)lane * comm->nconn + i].tx_unposted)
                (void)zc_repost(comm, lane, comm->conn_peer[i]);
}

/* The peer's credit on channel c (messages of it the peer consumed), as the wire reads it from
 * what the peer wrote: it only grows, and never past the messages written to it; any other
 * count is one no rank writes (the communicator fails; the last good count stands). */
static uint64_t zc_credit(zc_comm *comm, uint32_t lane, const zc__req *r, uint32_t peer,
                          const zc__chan *c) {
    uint64_t v = comm->wire->credits(comm->wire_state, lane, peer);
    if (v >= c->tx_credit && v <= c->tx_count) return v;
    if (r)
        zc__bad_peer(comm, r, peer, "a credit for %llu messages on a channel that carried %llu "
                     "and had credited %llu", (unsigned long long)v,
                     (unsigned long long)c->tx_count, (unsigned long long)c->tx_credit);
    else
        zc__fail(comm, ZC_MISMATCH, comm->seq, (int32_t)peer, 0, "rank %u sent a credit for "
                 "%llu messages on its relay lane, which carried %llu and had credited %llu; no "
                 "rank of this job sends that, so this communicator has failed", peer,
                 (unsigned long long)v, (unsigned long long)c->tx_count,
                 (unsigned long long)c->tx_credit);
    return c->tx_credit;
}

/* Whether peer's credit on channel c has reached want, read again when the count held says
 * not. When it has not: in an in-process group, the credit that comes next wakes this rank
 * (the wire's credit_wake; a credit that came meanwhile is read). */
static bool zc_credit_at(zc_comm *comm, uint32_t lane, const zc__req *r, uint32_t peer,
                         zc__chan *c, uint64_t want) {
    if (c->tx_credit >= want) return true;
    c->tx_credit = zc_credit(comm, lane, r, peer, c);
    if (c->tx_credit >= want) return true;
    if (!comm->wire->credit_wake || !comm->wire->credit_wake(comm->wire_state, lane, peer, want))
        return false;
    c->tx_credit = zc_credit(comm, lane, r, peer, c);
    return c->tx_credit >= want;
}

bool zc__tx_consumed(zc_comm *comm, const zc__req *r, uint32_t peer, uint64_t k) {
    zc__chan *c = zc_chan(comm, r->lane, peer);
    return zc_credit_at(comm, r->lane, r, peer, c, r->base[zc__ci(comm, peer)].tx + k + 1u);
}

uint8_t *zc__tx_begin(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k) {
    return zc__tx_begin_n(comm, r, peer, k, SIZE_MAX);
}

/* A step could not move a message this pass: one to send, or one to receive that is not
 * there yet and that zc_wait_for could not name. progress.c parks on a pass's one wait. */
static inline void zc_blocked(zc_comm *comm) { comm->park_waits = 2u; }

/* The pass waits for the next message of channel c (lane, peer), with park_waits 0 or 1 (the
 * caller's test): named when it is the pass's first wait (its slot, the word of the slot whose
 * low 32 bits turn into the message's tag when it lands, `word` 8-byte words from the slot's
 * start, and the tag; out of line, off the path of a message that is there), else the pass
 * waits on more. A slot's index fits the 10 bits park.where has for it: config.c allows at most
 * 1024 slots. */
__attribute__((noinline)) static void zc_wait_for(zc_comm *comm, uint32_t lane, uint32_t peer,
                                                  const zc__chan *c, uint32_t word) {
    if (comm->park_waits) { /* a second wait: the pass waits on more */
        comm->park_waits = 2u;
        return;
    }
    comm->park_waits = 1u;
    comm->park.where = (uint64_t)peer << 32 | (uint64_t)word << 12 |
                       (uint64_t)(c->rx_count & comm->slot_mask) << 2 | lane;
    comm->park_tag = c->rx_count + 1u;
}

/* The word of a slot that a wait on its header's tag reads (zc_wait_for). */
#define ZC_HDR_TAG_WORD ((uint32_t)(__builtin_offsetof(zc__hdr, tag) / 8u))

/* Message m on r's channel c to peer: its slot's header when it may be written now (its turn,
 * the message before it posted, a credit for its slot), else NULL. Inlined into the one-line
 * send as into zc__tx_begin_n (a small call's hot path). */
#define ZC_HOT static inline __attribute__((always_inline))
ZC_HOT zc__hdr *zc_turn_lane(zc_comm *comm, uint32_t lane, const zc__req *r, uint32_t peer,
                             zc__chan *c, uint64_t m) {
    if (c->tx_count != m) return 0; /* not this message's turn */
    if (c->tx_unposted && !zc_repost(comm, lane, peer)) return 0; /* the one before first */
    if (m - c->tx_credit >= comm->cfg.slots &&
        !zc_credit_at(comm, lane, r, peer, c, m - comm->cfg.slots + 1u))
        return 0; /* the peer's ring is full */
    return comm->wire->tx_slot(comm->wire_state, lane, peer,
                               (uint32_t)(m & comm->slot_mask));
}
ZC_HOT zc__hdr *zc_turn(zc_comm *comm, const zc__req *r, uint32_t peer, zc__chan *c,
                        uint64_t m) {
    return zc_turn_lane(comm, r->lane, r, peer, c, m);
}

uint8_t *zc__tx_begin_n(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes) {
    zc__chan *c = zc_chan(comm, r->lane, peer);
    zc__hdr *h = zc_turn(comm, r, peer, c, r->base[zc__ci(comm, peer)].tx + k);
    if (!h) {
        zc_blocked(comm);
        return 0;
    }
    comm->tx_begun = c;
    comm->tx_hdr = h;
    return zc_payload(h, bytes);
}

zc_status zc__tx_put(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, const void *src,
                     const zc_wire_mr *mr, size_t bytes, uint64_t raddr, uint64_t rkey) {
    uint64_t m = r->base[zc__ci(comm, peer)].tx + k;
    uint32_t slot = (uint32_t)(m & comm->slot_mask);
    const zc__chan *c = zc_chan(comm, r->lane, peer);
    ZC_ASSERT(c->tx_count == m && !c->tx_unposted && comm->wire->put);
    zc_status st = comm->wire->put(comm->wire_state, r->lane, peer, slot, m + 1u, src, mr, bytes,
                                   raddr, rkey);
    if (st == ZC_OK || st == ZC_AGAIN) return st; /* AGAIN: the schedule puts it again */
    return zc_post_failed(comm, r->s.kind, r->seq, peer, k, "put the payload of", st);
}

/* The header's fingerprint is written and compared a word at a time: the call's word (kind,
 * dtype, op, alg, root: 8 bytes from zc__hdr.kind), the message's (step, bytes) and the
 * sender's (src, placed). The call's word says what a receive expects: a receive matches the
 * peer's send, and send and receive carry the tag where other calls carry the root. */
typedef struct zc_call_fp {
    uint8_t kind, dtype, op, alg;
    uint32_t root;
} zc_call_fp;
_Static_assert(sizeof(zc_call_fp) == 8 && __builtin_offsetof(zc__hdr, root) ==
               __builtin_offsetof(zc__hdr, kind) + 4u, "the call's word is kind..root");
_Static_assert(__builtin_offsetof(zc__hdr, bytes) == __builtin_offsetof(zc__hdr, step) + 4u &&
               __builtin_offsetof(zc__hdr, placed) == __builtin_offsetof(zc__hdr, src) + 4u,
               "step/bytes and src/placed are words");

_Static_assert(__builtin_offsetof(zc__sched, kind) == 0 &&
               __builtin_offsetof(zc__sched, dtype) == 1 &&
               __builtin_offsetof(zc__sched, op) == 2 && __builtin_offsetof(zc__sched, alg) == 3 &&
               __builtin_offsetof(zc__sched, root) == 4, "a schedule opens with the call's word");

/* The call's word of r: a schedule's first 8 bytes are laid out as the header's, so one load
 * but for send and receive. */
static uint64_t zc_call_word(const zc__req *r) {
    uint64_t w;
    __builtin_memcpy(&w, &r->s, sizeof w);
    if (r->s.kind != ZC_K_SEND && r->s.kind != ZC_K_RECV) return w;
    zc_call_fp f;
    __builtin_memcpy(&f, &r->s, sizeof f);
    f.kind = ZC_K_SEND;
    f.root = r->s.tag;
    __builtin_memcpy(&w, &f, sizeof w);
    return w;
}

static uint64_t zc_pair_word(uint32_t lo, uint32_t hi) {
    uint32_t f[2] = {lo, hi};
    uint64_t w;
    __builtin_memcpy(&w, f, sizeof w);
    return w;
}

static void zc_put_word(void *at, uint64_t w) { __builtin_memcpy(at, &w, sizeof w); }

static uint64_t zc_get_word(const void *at) {
    uint64_t w;
    __builtin_memcpy(&w, at, sizeof w);
    return w;
}

#ifdef ZC_TEST_HOOKS
void (*zc__test_forge)(const zc_comm *comm, uint32_t peer, zc__hdr *h, uint8_t *payload);
#endif

/* Fills the header h of message k of r with its fingerprint. */
ZC_HOT void zc_fill_hdr(const zc_comm *comm, const zc__req *r, zc__hdr *h, uint64_t k,
                        size_t bytes, uint32_t placed) {
    h->comm_id = comm->comm_id;
    h->seq = r->seq;
    h->count = r->s.count;
    zc_put_word(&h->kind, zc_call_word(r)); /* a receive never sends */
    zc_put_word(&h->step, zc_pair_word((uint32_t)k, (uint32_t)bytes));
    zc_put_word(&h->src, zc_pair_word(comm->rank, placed));
}

/* Posts message k (number m on channel c) of r to peer, its header h filled (zc_fill_hdr) and
 * its payload written: post bytes go to the wire. A request sends only messages it reserved at
 * issue (paired with progress.c's zc_reserve), into a slot the peer's credit freed. */
ZC_HOT zc_status zc_post_msg(zc_comm *comm, zc__req *r, uint32_t peer, zc__chan *c, zc__hdr *h,
                             uint64_t k, uint64_t m, size_t bytes, size_t post) {
    ZC_ASSERT(r->tx_left > 0 && m < c->tx_reserved && m - c->tx_credit < comm->cfg.slots);
#ifdef ZC_TEST_HOOKS
    if (zc__test_forge) zc__test_forge(comm, peer, h, zc_payload(h, bytes));
#else
    (void)h;
    (void)bytes;
#endif
    zc_status st = comm->wire->post(comm->wire_state, r->lane, peer,
                                    (uint32_t)(m & comm->slot_mask), post, m + 1u);
    if (st != ZC_OK && st != ZC_AGAIN)
        return zc_post_failed(comm, r->s.kind, r->seq, peer, k, "post", st);
    if (st == ZC_AGAIN) { /* back-pressure: it goes again before anything else to peer */
        c->tx_unposted = m + 1u;
        comm->unposted++;
    }
    c->tx_count = m + 1u;
    r->tx_left--;
    return ZC_OK;
}

static zc_status zc_publish(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes,
                            uint32_t placed) {
    zc__chan *c = zc_chan(comm, r->lane, peer);
    uint64_t m = r->base[zc__ci(comm, peer)].tx + k;
    /* Every schedule publishes a message right after zc__tx_begin_n found its slot, before it
     * begins another: the header found there is this message's. */
    ZC_ASSERT(c->tx_count == m && bytes <= comm->cfg.slot_bytes && comm->tx_begun == c);
    comm->tx_begun = 0;
    zc_fill_hdr(comm, r, comm->tx_hdr, k, bytes, placed);
    return zc_post_msg(comm, r, peer, c, comm->tx_hdr, k, m, bytes,
                       zc_post_bytes(bytes, placed));
}

zc_status zc__tx_end(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes) {
    return zc_publish(comm, r, peer, k, bytes, 0);
}

static void zc_lines_write(uint8_t *lines, const uint8_t *src, size_t bytes, uint64_t fp,
                           uint64_t tag);
static uint64_t zc_hdr_fp(const zc__hdr *h);

zc_status zc__tx_line(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, const void *src,
                      size_t bytes) {
    zc__chan *c = zc_chan(comm, r->lane, peer);
    uint64_t m = r->base[zc__ci(comm, peer)].tx + k;
    zc__hdr *h = zc_turn(comm, r, peer, c, m);
    if (!h) {
        zc_blocked(comm);
        return ZC_AGAIN;
    }
    const uint8_t *from = src;
    zc_fill_hdr(comm, r, h, k, bytes, 0);
    if (bytes > ZC_INLINE_BYTES) { /* flagged lines after the header, which goes first */
        ZC_ASSERT(bytes <= zc__lines_max(comm));
        zc_lines_write((uint8_t *)h + ZC_SLOT_HDR_BYTES, from, bytes, zc_hdr_fp(h), m + 1u);
        return zc_post_msg(comm, r, peer, c, h, k, m, bytes,
                           ZC_SLOT_HDR_BYTES + (bytes + ZC_LINE_DATA_BYTES - 1u) /
                                                   ZC_LINE_DATA_BYTES * 64u);
    }
    if (bytes == ZC_INLINE_BYTES) zc__memcpy(h->inl, from, ZC_INLINE_BYTES);
    else
        for (size_t i = 0; i < bytes; i++) h->inl[i] = from[i];
    return zc_post_msg(comm, r, peer, c, h, k, m, bytes, ZC_SLOT_HDR_BYTES);
}

zc_status zc__tx_end_placed(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k,
                            size_t bytes) {
    return zc_publish(comm, r, peer, k, bytes, 1);
}

/* What r's messages carry in the header's root field: a send's (and so a receive's) tag. */
static uint32_t zc_hdr_root(const zc__req *r) {
    return r->s.kind == ZC_K_SEND || r->s.kind == ZC_K_RECV ? r->s.tag : r->s.root;
}

/* Whether h is of the same call as r's but for its algorithm: a receive matches the peer's
 * send with its tag (the sender is checked as the header's src). */
static bool zc_same_call(const zc__req *r, const zc__hdr *h) {
    uint32_t kind = r->s.kind == ZC_K_RECV ? ZC_K_SEND : r->s.kind;
    return h->kind == kind && h->count == r->s.count && h->dtype == r->s.dtype &&
           h->op == r->s.op && h->root == zc_hdr_root(r);
}

/* Whether h is message k of r's call from peer with a payload of expect_bytes (at most
 * slot_bytes, so it fits the header's 32 bits). */
ZC_HOT bool zc_matches(const zc_comm *comm, const zc__req *r, const zc__hdr *h, uint32_t peer,
                       uint64_t k, size_t expect_bytes) {
    return ((h->comm_id ^ comm->comm_id) | (h->seq ^ r->seq) | (h->count ^ r->s.count) |
            (zc_get_word(&h->kind) ^ zc_call_word(r)) |
            (zc_get_word(&h->step) ^ zc_pair_word((uint32_t)k, (uint32_t)expect_bytes)) |
            (h->src ^ peer)) == 0;
}

static void zc_mismatch(zc_comm *comm, zc__req *r, const zc__hdr *h, uint32_t peer, uint64_t k,
                        size_t expect_bytes) {
    char mine[96], theirs[96];
    zc__describe(mine, sizeof mine, r->s.kind, r->s.count, r->s.dtype, r->s.op, zc_hdr_root(r));
    zc__describe(theirs, sizeof theirs, h->kind, h->count, h->dtype, h->op, h->root);
    if (h->seq != r->seq)
        zc__fail(comm, ZC_MISMATCH, r->seq, (int32_t)peer, 0,
                 "mismatch at sequence %llu: rank %u called %s but rank %u sent %s of its "
                 "sequence %llu",
                 (unsigned long long)r->seq, comm->rank, mine, peer, theirs,
                 (unsigned long long)h->seq);
    else if ((h->alg == ZC_ALG_SYM) != (r->s.alg == ZC_ALG_SYM) && zc_same_call(r, h))
        zc__fail(comm, ZC_MISMATCH, r->seq, (int32_t)peer, 0,
                 "mismatch at sequence %llu: rank %u called %s with buffers %sin the symmetric "
                 "region but rank %u with buffers %sin it (the single-copy schedule needs "
                 "every rank's in it)", (unsigned long long)r->seq, comm->rank, mine,
                 r->s.alg == ZC_ALG_SYM ? "" : "not ", peer, h->alg == ZC_ALG_SYM ? "" : "not ");
    else if (h->comm_id == comm->comm_id && h->alg == r->s.alg && zc_same_call(r, h))
        zc__fail(comm, ZC_MISMATCH, r->seq, (int32_t)peer, 0,
                 "mismatch at sequence %llu of %s: rank %u sent a message whose header says "
                 "message %u of %u bytes from rank %u, where rank %u expected message %llu of "
                 "%zu bytes from it", (unsigned long long)r->seq, mine, peer, h->step, h->bytes,
                 h->src, comm->rank, (unsigned long long)(uint32_t)k, expect_bytes);
    else
        zc__fail(comm, ZC_MISMATCH, r->seq, (int32_t)peer, 0,
                 "mismatch at sequence %llu: rank %u called %s but rank %u called %s",
                 (unsigned long long)r->seq, comm->rank, mine, peer, theirs);
}

/* A hint: the lines of the channel's next slot (its header, and as many payload lines as this
 * message used, at most ZC_PREFETCH_LINES in all) are read ahead while this message is
 * processed, so that a sender running ahead costs one cache miss per burst, not per message.
 * Both wires lay a ring's slots out geom.stride bytes apart (header plus slot_bytes); a
 * prefetch never faults, so a wire that did otherwise would only lose the hint. */
#define ZC_PREFETCH_LINES 4u
static void zc_prefetch_next(const zc_comm *comm, const zc__hdr *h, uint32_t slot,
                             size_t bytes) {
    uintptr_t stride = ZC_SLOT_HDR_BYTES + comm->cfg.slot_bytes;
    uintptr_t next = slot + 1u < comm->cfg.slots ? (uintptr_t)h + stride
                                                  : (uintptr_t)h - (uintptr_t)slot * stride;
    size_t lines = 1u + (bytes > ZC_INLINE_BYTES ? (bytes + 63u) / 64u : 0u);
    for (size_t i = 0; i < lines && i < ZC_PREFETCH_LINES; i++)
        __builtin_prefetch((const void *)(next + i * 64u), 0, 3);
}

/* Payload lines the wire may prefetch while a message of bytes is awaited: every line of a
 * small message past the inline bytes, at most 512 B (8 lines; measured, 2 ranks, p50: 32 B
 * sendrecv 1.15 -> 0.6-0.7 us with 2 lines; then up to 512 B: reduce_scatter 512 B 0.95-1.03
 * -> 0.65-0.67 us, all_to_all 1 KiB 0.73-0.80 -> 0.42-0.43, sendrecv 512 B 1.19 -> 0.82-0.89,
 * all_gather 512 B 0.68-0.73 -> 0.39-0.41); none for larger ones, whose sender the prefetches
 * slow (up to 2 KiB: gather 4 KiB 0.47-0.56 -> 0.94-0.95 us, broadcast 2 KiB 0.63 -> 0.85-1.01;
 * 4 KiB all_reduce 1.50 -> 1.80 us when every message prefetched two lines). */
#define ZC_WAIT_PREFETCH_MAX_BYTES 512u
static inline uint32_t zc_wait_lines(size_t bytes) {
    if (bytes <= ZC_INLINE_BYTES || bytes > ZC_WAIT_PREFETCH_MAX_BYTES) return 0;
    return (uint32_t)((bytes + 63u) / 64u);
}

const uint8_t *zc__rx_peek(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k,
                           size_t expect_bytes) {
    zc__chan *c = zc_chan(comm, r->lane, peer);
    uint64_t m = r->base[zc__ci(comm, peer)].rx + k;
    if (c->rx_count != m) {
        zc_blocked(comm);
        return 0;
    }
    uint32_t slot = (uint32_t)(m & comm->slot_mask);
    const zc__hdr *h = comm->wire->rx_slot(comm->wire_state, r->lane, peer, slot, m + 1u,
                                           zc_wait_lines(expect_bytes));
    if (!h) {
        if (comm->park_waits < 2u) zc_wait_for(comm, r->lane, peer, c, ZC_HDR_TAG_WORD);
        return 0;
    }
    if (!zc_matches(comm, r, h, peer, k, expect_bytes)) {
        zc_mismatch(comm, r, h, peer, k, expect_bytes);
        return 0;
    }
    zc_prefetch_next(comm, h, slot, expect_bytes);
    return zc_payload((zc__hdr *)(uintptr_t)h, expect_bytes);
}

/* Credits go back in batches: when the consumed count reaches a multiple of half the ring
 * (one write to the peer instead of one per message; over ib an RDMA write each). A sender is
 * then held back only while more than half its ring waits unconsumed here, so the next
 * message a receiver waits for is always there or sendable: a receiver only ever reads the
 * next message of a channel. The symmetric region's send learns from the credit that its
 * receiver stopped reading its buffer (zc__tx_consumed): its messages credit at once. */
void zc__rx_credit_all(zc_comm *comm) {
    for (uint32_t lane = 0; lane < zc__lanes(&comm->cfg); lane++)
        for (uint32_t i = 0; i < comm->nconn; i++) {
            uint32_t p = comm->conn_peer[i];
            uint64_t n = comm->chans[(size_t)lane * comm->nconn + i].rx_count;
            if (p != comm->rank && n) comm->wire->credit(comm->wire_state, lane, p, n);
        }
}

/* One more message of channel c (lane, peer) consumed; its credit goes with the half ring's
 * batch, or at once (now). */
static inline void zc_rx_advance(zc_comm *comm, uint32_t lane, uint32_t peer, zc__chan *c,
                                 bool now) {
    c->rx_count++;
    if ((c->rx_count & ((comm->cfg.slots >> 1) - 1u)) == 0 || now)
        comm->wire->credit(comm->wire_state, lane, peer, c->rx_count);
}

void zc__rx_consume(zc_comm *comm, zc__req *r, uint32_t peer) {
    zc__chan *c = zc_chan(comm, r->lane, peer);
    /* Only messages it reserved at issue (zc_reserve), each once. */
    ZC_ASSERT(r->rx_left > 0 && c->rx_count < c->rx_reserved);
    r->rx_left--;
    zc_rx_advance(comm, r->lane, peer, c, r->s.alg == ZC_ALG_SYM);
}

/* ---- the relay lane: its messages are numbered on arrival, none reserved ---- */

zc__hdr *zc__relay_tx_slot(zc_comm *comm, uint32_t peer) {
    zc__chan *c = zc_chan(comm, ZC_LANE_RELAY, peer);
    return zc_turn_lane(comm, ZC_LANE_RELAY, 0, peer, c, c->tx_count);
}

zc_status zc__relay_tx_post(zc_comm *comm, uint32_t peer, size_t bytes) {
    zc__chan *c = zc_chan(comm, ZC_LANE_RELAY, peer);
    uint64_t m = c->tx_count;
    ZC_ASSERT(!c->tx_unposted && m - c->tx_credit < comm->cfg.slots &&
              bytes <= comm->cfg.slot_bytes);
    const zc__hdr *h = comm->wire->tx_slot(comm->wire_state, ZC_LANE_RELAY, peer,
                                           (uint32_t)(m & comm->slot_mask));
    zc_status st = comm->wire->post(comm->wire_state, ZC_LANE_RELAY, peer,
                                    (uint32_t)(m & comm->slot_mask),
                                    ZC_SLOT_HDR_BYTES + bytes, m + 1u);
    if (st != ZC_OK && st != ZC_AGAIN)
        return zc_post_failed(comm, h->kind, h->seq, peer, h->step, "relay", st);
    if (st == ZC_AGAIN) { /* back-pressure: it goes again before anything else to peer */
        c->tx_unposted = m + 1u;
        comm->unposted++;
    }
    c->tx_count = m + 1u;
    return ZC_OK;
}

const zc__hdr *zc__relay_rx_slot(zc_comm *comm, uint32_t peer) {
    const zc__chan *c = zc_chan(comm, ZC_LANE_RELAY, peer);
    uint64_t m = c->rx_count;
    return comm->wire->rx_slot(comm->wire_state, ZC_LANE_RELAY, peer,
                               (uint32_t)(m & comm->slot_mask), m + 1u, 0);
}

void zc__relay_rx_consume(zc_comm *comm, uint32_t peer) {
    zc_rx_advance(comm, ZC_LANE_RELAY, peer, zc_chan(comm, ZC_LANE_RELAY, peer), false);
}

/* ---- flagged lines (proto.h) ----
 * The memory-model argument. The sender writes a line's seven data words, then its flag word
 * with a release store; the receiver reads the flag with an acquire load and only then the
 * data. A release store that an acquire load reads from makes every store before it (this
 * line's data, the earlier lines, the header) visible to every load after it (C11 7.17.4; on
 * x86-64, TSO orders store after store and load after load, so both are plain moves and the
 * compiler keeps their order). The receiver thus never sees a flag before its data, and the
 * sender writes a slot again only after the receiver's credit said it consumed it (zc_turn).
 * The data words are plain copies (vector moves), read only after the flag's acquire load:
 * the one read that may meet a write is of a line whose old flag only looks current
 * (zc__rx_lines), whose words the check then refuses. */

#ifdef ZC_TEST_HOOKS
size_t zc__test_lines_max;
#endif

size_t zc__lines_max(const zc_comm *comm) {
    size_t fit = (size_t)(comm->cfg.slot_bytes / 128u) * ZC_LINE_DATA_BYTES; /* lines + scratch */
    size_t most = ZC_LINES_MAX_BYTES;
#ifdef ZC_TEST_HOOKS
    if (zc__test_lines_max) most = zc__test_lines_max;
#endif
    if (!comm->wire->rx_mem) return ZC_INLINE_BYTES;
    return fit < most ? fit : most;
}

static uint64_t zc_fmix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* The fingerprint of a message: the header's words (communicator, sequence, count, the call's
 * word, message and bytes, sender), each multiplied by its own odd constant (independent
 * multiplies: a short chain on the message's critical path), summed and mixed once. */
static uint64_t zc_fp(uint64_t comm_id, uint64_t seq, uint64_t count, uint64_t call,
                      uint64_t step, uint32_t src) {
    return zc_fmix(comm_id * 0x9e3779b97f4a7c15ull + seq * 0xbf58476d1ce4e5b9ull +
                   count * 0x94d049bb133111ebull + call * 0xd6e8feb86659fd93ull +
                   step * 0xa0761d6478bd642full + (uint64_t)src * 0xe7037ed1a0b428dbull);
}

static uint64_t zc_hdr_fp(const zc__hdr *h) {
    return zc_fp(h->comm_id, h->seq, h->count, zc_get_word(&h->kind), zc_get_word(&h->step),
                 h->src);
}

/* The key of line i of a message of fingerprint fp. */
static inline uint64_t zc_line_key(uint64_t fp, uint32_t i) {
    return fp + (uint64_t)i * 0x589965cc75374cc3ull;
}

/* The flag word of a line holding the data words w under key (zc_line_key) and tag: any change
 * of one word moves the sum (every multiplier is odd), and the multiply by an odd constant
 * carries the change into the check's 32 bits (the product's high half). Cheap on purpose:
 * seven multiplies by 32-bit constants and one more, per 56 bytes, on each side. */
static inline uint64_t zc_line_flag(const uint64_t w[7], uint64_t key, uint64_t tag) {
    uint64_t s = w[0] * 0x2545f491u + w[1] * 0x4f6cdd1du + w[2] * 0x6c8e9cf5u +
                 w[3] * 0x1b873593u + w[4] * 0x5bd1e995u + w[5] * 0x7feb352du +
                 w[6] * 0x3c6ef373u;
    uint64_t x = (s ^ key) * 0x9e3779b97f4a7c15ull;
    return (x & 0xffffffff00000000ull) | (uint32_t)tag;
}

static uint32_t zc_nlines(size_t bytes) {
    return (uint32_t)((bytes + ZC_LINE_DATA_BYTES - 1u) / ZC_LINE_DATA_BYTES);
}

/* Writes bytes of src as flagged lines from lines on (proto.h), each line's flag last. */
static void zc_lines_write(uint8_t *lines, const uint8_t *src, size_t bytes, uint64_t fp,
                           uint64_t tag) {
    uint32_t n = zc_nlines(bytes);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t w[7] = {0, 0, 0, 0, 0, 0, 0};
        size_t at = (size_t)i * ZC_LINE_DATA_BYTES;
        if (bytes - at >= ZC_LINE_DATA_BYTES) zc__memcpy(w, src + at, ZC_LINE_DATA_BYTES);
        else zc__memcpy(w, src + at, bytes - at);
        uint8_t *line = lines + (size_t)i * 64u;
        zc__memcpy(line, w, ZC_LINE_DATA_BYTES);
        __atomic_store_n((uint64_t *)(void *)(line + ZC_LINE_DATA_BYTES),
                         zc_line_flag(w, zc_line_key(fp, i), tag), __ATOMIC_RELEASE);
    }
}

/* Line i of lines: 0 when its flag carries tag and its check holds (its data words in w), 1
 * while its flag carries another tag (not written yet), 2 when the tag is there but the check
 * fails. */
static inline int zc_line_take(const uint8_t *lines, uint32_t i, uint64_t fp, uint64_t tag,
                               uint64_t w[7]) {
    const uint8_t *line = lines + (size_t)i * 64u;
    uint64_t f = __atomic_load_n((const uint64_t *)(const void *)(line + ZC_LINE_DATA_BYTES),
                                 __ATOMIC_ACQUIRE);
    if ((uint32_t)f != (uint32_t)tag) return 1;
    zc__memcpy(w, line, ZC_LINE_DATA_BYTES);
    return zc_line_flag(w, zc_line_key(fp, i), tag) == f ? 0 : 2;
}

/* Line i of message k from peer fails where the sender wrote it (zc_line_take's st): its tag
 * there but its check failing (2), or an older tag where the sender's later lines are there
 * already (1). The header (written before any line's flag, so visible now) says whether the
 * peer sent another call (a mismatch, named as zc__rx_peek names it) or this one with a line
 * that is not what it wrote: either way r fails and nothing of it is taken. */
__attribute__((noinline, cold)) static void
zc_lines_failed(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes,
                const zc__hdr *h, uint32_t i, int st) {
    if (!zc_matches(comm, r, h, peer, k, bytes)) {
        zc_mismatch(comm, r, h, peer, k, bytes);
        return;
    }
    char mine[96];
    zc__describe(mine, sizeof mine, r->s.kind, r->s.count, r->s.dtype, r->s.op, zc_hdr_root(r));
    zc__fail(comm, ZC_MISMATCH, r->seq, (int32_t)peer, 0,
             "%s sequence %llu: line %u of the message from rank %u %s: not taken", mine,
             (unsigned long long)r->seq, i, peer,
             st == 2 ? "carries the message's tag but data its check does not match (a torn "
                       "or forged line)"
                     : "is an older message's (a stale line) where its later lines are there");
}

/* A message's last line is not there: every 32nd such poll on comm reads the header,
 * which fails r, once its tag is there (the sender posts it after the lines), if it is another
 * call's: one whose last line never comes (the peer chose the header protocol, or sent fewer
 * lines). Otherwise the message's lines are prefetched (at most ZC_PREFETCH_LINES), as the
 * header protocol prefetches a small payload while it waits. */
static void zc_lines_absent(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes,
                            const uint8_t *slot, uint64_t m) {
    uint32_t n = zc_nlines(bytes) - 1u;
    for (uint32_t i = 0; i < n && i < ZC_PREFETCH_LINES; i++)
        __builtin_prefetch(slot + ZC_SLOT_HDR_BYTES + (size_t)i * 64u, 0, 3);
    if (++comm->lines_waits & 31u) return;
    const zc__hdr *h = (const zc__hdr *)(const void *)slot;
    if (__atomic_load_n(&h->tag, __ATOMIC_ACQUIRE) == m + 1u &&
        !zc_matches(comm, r, h, peer, k, bytes))
        zc_mismatch(comm, r, h, peer, k, bytes);
}

/* Copies the data words of a line into out, the payload's bytes [at, at + ZC_LINE_DATA_BYTES)
 * clipped to bytes. */
static inline void zc_line_out(uint8_t *out, const uint64_t w[7], size_t at, size_t bytes) {
    if (bytes - at >= ZC_LINE_DATA_BYTES) zc__memcpy(out + at, w, ZC_LINE_DATA_BYTES);
    else zc__memcpy(out + at, w, bytes - at);
}

/* The receive polls one line, the last (the sender writes it last): polling lines while the
 * sender writes them moves each back and forth between the two cores, one transfer at a time
 * (measured: every line polled in turn cost 0.05-0.2 us more per line than one poll). Once the
 * last line holds the message's tag and data, the sender wrote every line before it (the
 * acquire), so the rest are read at once: a line there that fails its check, or shows an older
 * tag (stale), is final, and zc_lines_failed says whether the peer sent another call or a line
 * it did not write. A last line whose tag is there but whose check fails is final too, unless
 * the channel carried 2^32 messages or more: then it may be a line left that many messages
 * before whose tag looks current, and reads as "not there yet" (the sender's write will replace
 * it; a forged one meets the deadline). */
const uint8_t *zc__rx_lines(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes,
                            uint8_t *dst) {
    zc__chan *c = zc_chan(comm, r->lane, peer);
    uint64_t m = r->base[zc__ci(comm, peer)].rx + k, tag = m + 1u;
    if (c->rx_count != m) {
        zc_blocked(comm);
        return 0;
    }
    const uint8_t *slot = comm->wire->rx_mem(comm->wire_state, r->lane, peer,
                                             (uint32_t)(m & comm->slot_mask));
    const uint8_t *lines = slot + ZC_SLOT_HDR_BYTES;
    const zc__hdr *h = (const zc__hdr *)(const void *)slot;
    uint32_t n = zc_nlines(bytes), last = n - 1u;
    const uint64_t *fl = (const uint64_t *)(const void *)(lines + (size_t)last * 64u + 56u);
    if ((uint32_t)__atomic_load_n(fl, __ATOMIC_ACQUIRE) != (uint32_t)tag) {
        /* A parked pass reads the last line's flag, whose low 32 bits are the tag (not the
         * header, which the sender writes around the lines: polled, it would move between
         * the cores while the sender fills it). */
        if (comm->park_waits < 2u)
            zc_wait_for(comm, r->lane, peer, c,
                        (uint32_t)(((const uint8_t *)(const void *)fl - slot) / 8));
        zc_lines_absent(comm, r, peer, k, bytes, slot, m);
        return 0;
    }
    uint64_t fp = zc_fp(comm->comm_id, r->seq, r->s.count, zc_call_word(r),
                        zc_pair_word((uint32_t)k, (uint32_t)bytes), peer);
    uint64_t w[7], wl[7];
    int st = zc_line_take(lines, last, fp, tag, wl);
    if (st == 2 && (m + 1u) >> 32 != 0) { /* maybe a line 2^32 messages old */
        zc_blocked(comm);
        return 0;
    }
    uint8_t *out = dst ? dst : (uint8_t *)(uintptr_t)(lines + (size_t)n * 64u);
    for (uint32_t i = 0; i < last && !st; i++) {
        st = zc_line_take(lines, i, fp, tag, w);
        if (st) zc_lines_failed(comm, r, peer, k, bytes, h, i, st);
        else zc_line_out(out, w, (size_t)i * ZC_LINE_DATA_BYTES, bytes);
    }
    if (st) {
        if (!comm->failed) zc_lines_failed(comm, r, peer, k, bytes, h, last, st);
        return 0;
    }
    zc_line_out(out, wl, (size_t)last * ZC_LINE_DATA_BYTES, bytes);
    return out;
}

#ifdef ZC_TEST_HOOKS
uint64_t zc__lines_fp(const zc__hdr *h) { return zc_hdr_fp(h); }

uint64_t zc__lines_flag(const uint8_t *line, uint32_t i, uint64_t fp, uint64_t tag) {
    uint64_t w[7];
    zc__memcpy(w, line, sizeof w);
    return zc_line_flag(w, zc_line_key(fp, i), tag);
}

void zc__test_numbers(zc_comm *comm, uint64_t base, uint64_t seq) {
    ZC_ASSERT(base % comm->cfg.slots == 0 && comm->nreqs_active == 0);
    for (uint32_t lane = 0; lane < zc__lanes(&comm->cfg); lane++)
        for (uint32_t i = 0; i < comm->nconn; i++) {
            zc__chan *c = &comm->chans[(size_t)lane * comm->nconn + i];
            c->tx_count = c->tx_reserved = c->rx_count = c->rx_reserved = c->tx_credit = base;
            if (comm->conn_peer[i] != comm->rank)
                comm->wire->credit(comm->wire_state, lane, comm->conn_peer[i], base);
        }
    comm->seq = seq;
}
#endif
