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
_Static_assert(sizeof(zc__chan) == 64, "a channel's counters are one cache line");

/* The 64-byte header of every slot: the fingerprint of the call that sent the message. */
typedef struct zc__hdr {
    uint64_t comm_id;
    uint64_t seq;
    uint64_t count;
    uint8_t kind, dtype, op, alg;
    uint32_t root;       /* the call's root; a send's tag (its sender is src) */
    uint32_t step;       /* message index within the call on this channel */
    uint32_t bytes;      /* payload bytes */
    uint32_t src;        /* sender rank (relay lane: the rank that sent the message first) */
    union {
        uint32_t placed; /* 1: the payload was put at the receiver's destination already */
        uint32_t dst;    /* relay lane: the rank the message goes to (relay.c) */
    };
    uint8_t inl[8];      /* a payload of at most ZC_INLINE_BYTES: in the header's own line */
    uint64_t tag;        /* written by the wire when it publishes */
} zc__hdr;
/* A payload this small travels in the header (zc__hdr.inl): the message is one cache line,
 * which the receiver reads with one transfer instead of two. */
#define ZC_INLINE_BYTES 8u
_Static_assert(sizeof(zc__hdr) == ZC_SLOT_HDR_BYTES, "slot header is 64 bytes");

/* Flagged lines: on a wire whose sender's stores reach the receiver's memory directly
 * (wire.h's rx_mem: shm, in process), a message of ZC_INLINE_BYTES + 1 up to zc__lines_max
 * bytes travels in the slot as lines after its header. Line i (64 bytes at slot +
 * ZC_SLOT_HDR_BYTES + 64 i) holds payload bytes [56 i, 56 i + 56) (the last line padded with
 * zeros) and, in its last 8 bytes, a flag word: low 32 bits the message's tag (its number on
 * the channel + 1, modulo 2^32), high 32 bits a check over the line's data, its index and the
 * message's fingerprint (the header's words). The receiver polls the flags of the lines
 * themselves, never the header (which the sender still fills, for mismatch diagnosis and for a
 * peer that made another protocol choice); a parked pass (progress.c) reads the last line's
 * flag alone. A slot of slot_bytes holds slot_bytes / 128 lines:
 * the rest of it is the receiver's scratch for the payload in one piece. */
#define ZC_LINE_DATA_BYTES 56u
/* Flagged lines up to one line: measured (2 processes on 2 cores, p50, against the header
 * protocol in the same run): 16-32 B all_reduce 0.95-0.97x, sendrecv 0.94-1.00x; two lines
 * (64 B) 1.02-1.24x, 256 B 1.24-1.42x, 1 KiB 1.9x, 4 KiB 2.4x: each line's check and copy on
 * both sides (about 50 instructions a side) cost more than the header line it saves. The
 * protocol itself carries any number of lines the slot holds (tests run it up to 4 KiB). */
#define ZC_LINES_MAX_BYTES ZC_LINE_DATA_BYTES

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
/* A message whose whole payload (bytes of src; none for src NULL and bytes 0) travels in its
 * header's line (at most ZC_INLINE_BYTES) or as flagged lines (up to zc__lines_max):
 * zc__tx_begin_n, the copy and zc__tx_end in one call. ZC_AGAIN: it cannot go yet
 * (zc__tx_begin_n's NULL), nothing written; else zc__tx_end's status. */
zc_status zc__tx_line(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, const void *src,
                      size_t bytes);
/* The largest message that travels as flagged lines on comm's wire (ZC_INLINE_BYTES on a
 * wire without them): the same on every rank (the wire and slot_bytes are). */
size_t zc__lines_max(const zc_comm *comm);
/* Payload of message k from peer, of bytes (over ZC_INLINE_BYTES, at most zc__lines_max),
 * sent by zc__tx_line as flagged lines: NULL while a line is not there (or on a mismatch or
 * a line that fails its check, which failed the communicator); else its payload in one piece,
 * copied into dst (NULL: into the slot's scratch, valid until zc__rx_consume). */
const uint8_t *zc__rx_lines(zc_comm *comm, zc__req *r, uint32_t peer, uint64_t k, size_t bytes,
                            uint8_t *dst);
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
/* Test builds only (progress.c is compiled so for zctest too): when set, called by zc_progress
 * between its step pass and the clock read that checks deadlines and liveness, where a test
 * stalls as a descheduled rank would. */
extern void (*zc__test_clock)(const zc_comm *comm);
/* Test builds only: the fingerprint a message's flagged lines are checked with (from its
 * header's words), and the flag word line i (its 56 data bytes at line) carries for it under
 * tag: what a test needs to forge a line that passes, or one that must not. */
uint64_t zc__lines_fp(const zc__hdr *h);
uint64_t zc__lines_flag(const uint8_t *line, uint32_t i, uint64_t fp, uint64_t tag);
/* Test builds only: when not 0, the largest message zc__lines_max allows on a wire with flagged
 * lines in place of ZC_LINES_MAX_BYTES (at most what the slot holds); the same in every
 * process of a job, set before init. */
extern size_t zc__test_lines_max;
/* Test builds only: every channel's message numbers start at base (a multiple of the ring's
 * slots; the credits every peer wrote say so too) and the collective sequence at seq, as
 * after that many messages and calls: on a fresh communicator of an in-process group, for
 * every rank of it, before its first call. */
void zc__test_numbers(zc_comm *comm, uint64_t base, uint64_t seq);
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

/* ---- the relay lane (ZC_LANE_RELAY, overlay mode with overlay_relay): messages of no request
 * here, each one taken in arrival order (relay.c forwards or delivers them) ---- */
/* The header of the next message to peer on the relay lane, its payload after it
 * (ZC_SLOT_HDR_BYTES on, never inline), when it may be written now (the one before it posted,
 * a credit for its slot); else NULL. */
zc__hdr *zc__relay_tx_slot(zc_comm *comm, uint32_t peer);
/* Posts that message, its header filled by the caller, with bytes of payload. As zc__tx_end:
 * a wire's ZC_AGAIN posts it again first; a failure for good fails the communicator. */
zc_status zc__relay_tx_post(zc_comm *comm, uint32_t peer, size_t bytes);
/* The next message from peer on the relay lane (header, then payload) once it arrived, else
 * NULL; zc__relay_rx_consume takes it (its credit goes back with the half ring's batch). */
const zc__hdr *zc__relay_rx_slot(zc_comm *comm, uint32_t peer);
void zc__relay_rx_consume(zc_comm *comm, uint32_t peer);

#endif
