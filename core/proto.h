/* proto.h: the message protocol: a channel's counters, the 64-byte slot header every message
 * carries (the fingerprint of the call that sent it), and channel.c's functions that move one
 * message. Included by engine.h; only channel.c writes the counters and headers. */
#ifndef ZC_CORE_PROTO_H
#define ZC_CORE_PROTO_H

#include "req.h"

/* One direction of one lane with one peer is a channel; counters are message numbers. */
typedef struct zc__chan {
    uint64_t tx_count;     /* messages posted to the peer */
    uint64_t tx_reserved;  /* messages promised to the peer by issued requests */
    uint64_t rx_count;     /* messages consumed from the peer */
    uint64_t rx_reserved;  /* messages expected from the peer by issued requests */
    uint64_t tx_credit;    /* last credit value read (messages the peer consumed) */
    uint64_t p2p_sent;     /* lane 1: send operations issued to the peer */
    uint64_t p2p_recvd;    /* lane 1: receive operations issued from the peer */
    uint64_t tx_unposted;  /* tag of the last message, written but refused by the wire for now
                            * (ZC_AGAIN): posted again before anything else; 0: none */
} zc__chan;

/* The 64-byte header of every slot: the fingerprint of the call that sent the message. */
typedef struct zc__hdr {
    uint64_t comm_id;
    uint64_t seq;
    uint64_t count;
    uint8_t kind, dtype, op, alg;
    uint32_t root;       /* the call's root; a send's tag (its sender is src) */
    uint32_t step;       /* message index within the call on this channel */
    uint32_t bytes;      /* payload bytes */
    uint32_t src;        /* sender rank */
    uint32_t placed;     /* 1: the payload was put at the receiver's destination already */
    uint8_t inl[8];      /* a payload of at most ZC_INLINE_BYTES: in the header's own line */
    uint64_t tag;        /* written by the wire when it publishes */
} zc__hdr;
/* A payload this small travels in the header (zc__hdr.inl): the message is one cache line,
 * which the receiver reads with one transfer instead of two. */
#define ZC_INLINE_BYTES 8u
_Static_assert(sizeof(zc__hdr) == ZC_SLOT_HDR_BYTES, "slot header is 64 bytes");

/* ---- channel.c: moving one message ---- */
/* Payload pointer of message k (0-based within r) to peer for a payload of bytes, or NULL when
 * it cannot be written yet (an earlier message on the channel is unsent, or no credit). */
uint8_t *zc__tx_begin_n(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes);
/* zc__tx_begin_n for a payload of none or over ZC_INLINE_BYTES. */
uint8_t *zc__tx_begin(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k);
/* Fills the header of message k and publishes it with bytes of payload. A wire without room
 * for it now (ZC_AGAIN) gets it again before any later message of the channel (zc__tx_begin,
 * zc__tx_flush): it counts as sent. A wire that cannot post it for good fails the communicator
 * (status and sentence recorded); the status is returned. */
zc_status zc__tx_end(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes);
/* A message whose whole payload (bytes of src, at most ZC_INLINE_BYTES; none for src NULL and
 * bytes 0) travels in its header's line: zc__tx_begin_n, the copy and zc__tx_end in one call.
 * ZC_AGAIN: it cannot go yet (zc__tx_begin_n's NULL), nothing written; else zc__tx_end's
 * status. */
zc_status zc__tx_line(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, const void *src,
                      size_t bytes);
/* True once the wire has read every put r made from the caller's memory (zc__place.direct
 * marks the peers it put to): the sources may change. */
bool zc__tx_puts_done(zc_comm *comm, const zc__req *r);
/* True once peer has consumed message k of r (its credit came back): the symmetric schedule's
 * send learns so that the receiver stopped reading its buffer (sym.c). */
bool zc__tx_consumed(zc_comm *comm, const zc__req *r, uint32_t peer, uint64_t k);
/* Messages of r already sent to peer / consumed from peer. */
uint64_t zc__tx_done(const zc_comm *comm, const zc__req *r, uint32_t peer);
uint64_t zc__rx_done(const zc_comm *comm, const zc__req *r, uint32_t peer);
/* Payload of message k from peer when it arrived and its fingerprint matches r; NULL when not
 * there yet; on a mismatch r fails (r->status set) and NULL is returned. expect_bytes is the
 * payload size the schedule expects. */
const uint8_t *zc__rx_peek(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k,
                           size_t expect_bytes);
/* Placement: writes bytes from src (registered as mr, or NULL: staged) to the peer's memory at
 * raddr/rkey ahead of message k, which zc__tx_end_placed then publishes with the header only.
 * ZC_AGAIN: the wire had no room, nothing was written; the schedule tries again at its next
 * step. Other failures fail the communicator (as zc__tx_end). */
zc_status zc__tx_put(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, const void *src,
                     const zc_wire_mr *mr, size_t bytes, uint64_t raddr, uint64_t rkey);
zc_status zc__tx_end_placed(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k,
                            size_t bytes);
/* True when the payload of bytes that zc__rx_peek returned was put in place by the sender. */
static inline bool zc__rx_placed(const uint8_t *payload, size_t bytes) {
    size_t at = bytes <= ZC_INLINE_BYTES ? __builtin_offsetof(zc__hdr, inl) : ZC_SLOT_HDR_BYTES;
    return ((const zc__hdr *)(const void *)(payload - at))->placed != 0;
}
#ifdef ZC_TEST_HOOKS
/* Test builds only (configure.py compiles channel.c so for zctest, never for the library): when
 * set, called with every message this process publishes, header filled and payload written,
 * just before the wire posts it; it may change any byte (tests/test_hostile.c plays a hostile
 * rank with it). */
extern void (*zc__test_forge)(const zc_comm *comm, uint32_t peer, zc__hdr *h, uint8_t *payload);
#endif
/* Posts again the messages the wire refused for now (ZC_AGAIN), before the steps of every
 * zc_progress: a message the peer waits for must not wait on this rank's next send. */
void zc__tx_flush(zc_comm *comm);
/* Credits every channel's peer with all its messages consumed here, the last batch's too
 * (zc__rx_consume returns credit every half ring): zc_comm_fini's first word to the wire
 * between processes, so that a wire that waits at close for its messages to be credited
 * (transport_ib) does not wait for a credit that would never come. */
void zc__rx_credit_all(zc_comm *comm);
/* Consumes the message peeked last from peer; its credit goes back with the half ring's
 * batch (see channel.c). */
void zc__rx_consume(zc_comm *comm, zc__req *r, uint32_t peer);

#endif
