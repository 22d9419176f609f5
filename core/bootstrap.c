/* bootstrap.c: the init-time rendezvous declared in bootstrap.h: the wire protocol below,
 * SipHash-2-4, and the sockets of a zc__boot. Reaches the OS only through platform.h, calls no
 * libc beyond mem*, allocates nothing; every loop is bounded by ranks, bytes or the deadline
 * given at open. It must not be used after init: it blocks (with that deadline).
 *
 * Protocol, version 2. Integers are little-endian and fixed width; every message has a fixed
 * size, or a length checked against a ceiling before any byte of its payload is read.
 *
 * Rank 0 listens on root_addr's host when it is a numeric IPv4 address, on 127.0.0.1 for
 * "localhost", and on 0.0.0.0 for any other name (it may resolve differently elsewhere).
 *
 * The tree. The parent of rank r > 0 is r - lowbit(r); its children are r + 2^k below n for
 * 2^k < lowbit(r) (every 2^k < n for rank 0); r's subtree is [r, r + lowbit(r)) below n. A
 * rank with children listens on an ephemeral port at the local address of its connection to
 * rank 0 (the address rank 0 saw it from), before it tells rank 0 that address.
 *
 * A handshake, between a listener (rank 0 for every rank, then each parent for its children)
 * and a connecting rank:
 *
 *   listener                                      connecting rank r
 *   greets each connection as it accepts it,      connects; to rank 0, while refused, retries
 *   up to ZC_BOOT_PENDING handshakes at once;     every 5..20 ms until the deadline (to a
 *   drops one whose proof is 2 s late; when       parent: refused means it is gone); a
 *   the table is full (or accept fails, out of    handshake rank 0 did not finish (no HELLO
 *   descriptors) the entry that waited longest    within 2 s, or closed before the VERDICT) is
 *   gives way                                     tried again on a new connection
 *   HELLO    24 B: "ZCB1" u32 version nonce_s[16]  ->
 *                                              <-  PROOF 40 B: "ZCB1" u32 version u32 rank
 *                                                  u32 nranks nonce_c[16] u64 tag_c
 *   VERDICT  16 B: u32 code u32 value u64 tag_s    ->
 *
 *   tag_c = SipHash-2-4(secret, "client" nonce_s nonce_c rank nranks)
 *   tag_s = SipHash-2-4(secret, "server" nonce_c nonce_s rank code value)  (0 for AUTH, VERSION)
 *
 * With rank 0, after an OK verdict:
 *                                              <-  ADDR NOTE{"ZCAD", OK, r, port, ipv4, 0}
 *                                                  (port 0: r has no children)
 *   PARENT NOTE{"ZCPA", OK, parent, port, ipv4, 0} ->  once the parent's ADDR came; rank 0
 *   then closes the connection, unless it is the parent itself (it keeps its children's). Or
 *   NOTE{"ZCPA", AGAIN, ...}: rank 0 let go of this connection (its table was full), join
 *   again; or a failure note. A rank whose parent is not rank 0 then closes and handshakes
 *   with the parent at that address (the greeting waited for until the deadline: the parent
 *   greets once it serves its children). Rank 0 holds only its children's connections, its
 *   listener and its pending table: ZC_BOOT_PENDING + log2(n) + 1 sockets; any other rank its
 *   parent, its children and, while they join, its listener and pending table.
 *
 * After the handshakes every message is a NOTE, 24 B: u32 kind, u32 code, u32 rank, u32 value,
 * u32 expect, u32 len, followed by len payload bytes. Kinds: "ZCRY" ready (the end of open: an
 * exchange of 0 bytes each, so that open returns once every rank is in), "ZCAG" allgather,
 * "ZCBR" barrier (an allgather of one byte under its own kind, so that a barrier facing an
 * allgather is reported, not absorbed). An exchange: every rank reads its children in rank
 * order, each NOTE{kind, OK, child, bytes_each, 0, subtree * bytes_each} + its subtree's blobs,
 * checks kind and size against its own, then sends its own subtree the same way to its parent;
 * rank 0 then sends each child NOTE{kind, OK, 0, bytes_each, 0, n * bytes_each} + the table,
 * and every rank passes it on to its children (each checks that its own blob in the table is
 * what it sent: ZC_MISMATCH otherwise). On any failure a rank sends its parent and children
 * NOTE{its kind, code, culprit rank, value, expect, by} (no payload: the len field names the
 * rank that found it), and each of them passes it on, so no rank waits for the deadline when
 * some rank knows the outcome; a rank serving its children also watches its parent for one.
 *
 * Codes (ZC_CODE_*): OK, AUTH (no proof), VERSION, NRANKS (rank counts differ), RANK (rank
 * outside 1..n-1, or not a child of the listener), DUPLICATE (a rank claimed twice), SIZE (blob
 * sizes differ), CALL (a different call), LOST (a rank closed its connection), TIMEOUT, FAILED
 * (the finder's own error), AGAIN (rank 0 let go of a joining rank: join again).
 *
 * Security. Nonces are fresh from the OS for each connection, so a recorded proof cannot be
 * replayed, and the "client"/"server" labels keep one side's tag from being reflected as the
 * other's. Tags are compared in constant time. A connection that fails the proof gets AUTH
 * and is closed, a WARN line is logged (the first 8 drops one line each, then a summary line
 * a second at most) and the listener goes on accepting: the job never notices. That holds at
 * rank 0 and at every parent's ephemeral listener alike (same handshake, same code). Handshakes
 * overlap: each has its own short deadline, min(job deadline, accept + 2 s), no listener
 * waits on
 * one connection's bytes, garbage is dropped at the first wrong field, and when
 * ZC_BOOT_PENDING handshakes are under way the oldest gives way to a new connection. So
 * silent or slow connections do not delay the rendezvous; only a flood faster than a real
 * rank's one round trip could crowd it out until the deadline, as with any listener on a
 * reachable port. Only the connection is authenticated: later bytes carry
 * no tag, so a party that can inject into an established TCP stream is out of scope (use
 * loopback or a trusted network). A peer that proved the secret belongs to the job, so a
 * disagreement it reveals (rank count, a rank claimed twice) means the job is misconfigured:
 * it gets the code and the listener fails with ZC_MISMATCH too. What a rank can trust after an
 * exchange: its own entry (checked); every other entry was relayed only by ranks that proved
 * the secret (each to rank 0 and to its parent, each parent to its children).
 *
 * Any failure closes every socket of b (open's and an exchange's alike: streams out of step
 * cannot be trusted again), after its neighbours were told; later calls return
 * ZC_INVALID_STATE. nranks == 1 opens nothing and copies. */
#include "bootstrap.h"

#include "config.h"
#include "platform.h"
#include "text.h"

#include <stdarg.h>

#define ZC_FOURCC(a, b, c, d)                                                                  \
    ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

#define ZC_BOOT_MAGIC ZC_FOURCC('Z', 'C', 'B', '1')
#define ZC_BOOT_VERSION 2u
#define ZC_KIND_READY ZC_FOURCC('Z', 'C', 'R', 'Y')
#define ZC_KIND_ADDR ZC_FOURCC('Z', 'C', 'A', 'D')
#define ZC_KIND_PARENT ZC_FOURCC('Z', 'C', 'P', 'A')
#define ZC_KIND_ALLGATHER ZC_FOURCC('Z', 'C', 'A', 'G')
#define ZC_KIND_BARRIER ZC_FOURCC('Z', 'C', 'B', 'R')
#define ZC_KIND_SPARSE ZC_FOURCC('Z', 'C', 'S', 'P')
#define ZC_KIND_REDUCE ZC_FOURCC('Z', 'C', 'R', 'D')

#define ZC_HELLO_BYTES 24u
#define ZC_PROOF_BYTES 40u
#define ZC_VERDICT_BYTES 16u
#define ZC_NOTE_BYTES 24u
#define ZC_NONCE_BYTES 16u
#define ZC_TAG_BYTES 8u

#define ZC_HANDSHAKE_NS 2000000000ull /* each handshake step at the root: 2 s at most */
#define ZC_NOTIFY_NS 200000000ull     /* best-effort failure notes: 200 ms at most */
#define ZC_RETRY_MIN_NS 5000000ull    /* connect retry pause while refused: 5..20 ms */
#define ZC_RETRY_SPAN_NS 15000000ull
#define ZC_SERVE_POLL_NS 200000ull    /* the root reads pending proofs at least this often */
#define ZC_DROPS_LOGGED 8u            /* dropped connections logged one line each; then... */
#define ZC_DROP_SUMMARY_NS 1000000000ull /* ...one summary line a second at most */
#define ZC_STAGE_BYTES 8192u /* a note and a small payload leave in one send (no Nagle stall) */

/* Larger payloads than the stage leave in a second send (wire address blobs, init only). */
_Static_assert(ZC_SECRET_BYTES == 16u, "SipHash takes a 128-bit key");

enum {
    ZC_CODE_OK = 0,
    ZC_CODE_AUTH = 1,
    ZC_CODE_VERSION = 2,
    ZC_CODE_NRANKS = 3,
    ZC_CODE_RANK = 4,
    ZC_CODE_DUPLICATE = 5,
    ZC_CODE_SIZE = 6,
    ZC_CODE_CALL = 7,
    ZC_CODE_LOST = 8,
    ZC_CODE_TIMEOUT = 9,
    ZC_CODE_FAILED = 10,
    ZC_CODE_AGAIN = 11
};

/* Pending entry states (zc__boot_pending.state). */
enum { ZC_PEND_PROOF = 0, ZC_PEND_ADDR = 1, ZC_PEND_PARENT = 2 };

/* rank 0's where[r]: the address is known (ip << 16 | port below), rank r is admitted. */
#define ZC_WHERE_KNOWN (1ull << 63)
#define ZC_WHERE_JOINED (1ull << 62)

/* What went wrong, as the root tells it to every rank (the fields of a failure NOTE). */
typedef struct zc_outcome {
    uint32_t code;   /* ZC_CODE_* */
    uint32_t rank;   /* the rank it is about */
    uint32_t value;  /* what that rank had (size, kind, rank count, ranks joined) */
    uint32_t expect; /* what the rank that found it had */
    uint32_t by;     /* the rank that found it */
} zc_outcome;

/* ---- little-endian fields ---- */

static void zc_put32(uint8_t *p, uint32_t v) {
    for (unsigned i = 0; i < 4u; i++) p[i] = (uint8_t)(v >> (8u * i));
}

static uint32_t zc_get32(const uint8_t *p) {
    uint32_t v = 0;
    for (unsigned i = 0; i < 4u; i++) v |= (uint32_t)p[i] << (8u * i);
    return v;
}

static void zc_put64(uint8_t *p, uint64_t v) {
    for (unsigned i = 0; i < 8u; i++) p[i] = (uint8_t)(v >> (8u * i));
}

static uint64_t zc_get64(const uint8_t *p) {
    uint64_t v = 0;
    for (unsigned i = 0; i < 8u; i++) v |= (uint64_t)p[i] << (8u * i);
    return v;
}

/* ---- SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012) ---- */

static uint64_t zc_rotl(uint64_t x, unsigned b) { return x << b | x >> (64u - b); }

static void zc_sip_round(uint64_t v[4]) {
    v[0] += v[1]; v[1] = zc_rotl(v[1], 13); v[1] ^= v[0]; v[0] = zc_rotl(v[0], 32);
    v[2] += v[3]; v[3] = zc_rotl(v[3], 16); v[3] ^= v[2];
    v[0] += v[3]; v[3] = zc_rotl(v[3], 21); v[3] ^= v[0];
    v[2] += v[1]; v[1] = zc_rotl(v[1], 17); v[1] ^= v[2]; v[2] = zc_rotl(v[2], 32);
}

uint64_t zc__siphash(const uint8_t key[16], const void *data, size_t bytes) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t k0 = zc_get64(key), k1 = zc_get64(key + 8);
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    size_t full = bytes - bytes % 8u;
    for (size_t i = 0; i < full; i += 8u) {
        uint64_t m = zc_get64(p + i);
        v[3] ^= m;
        zc_sip_round(v);
        zc_sip_round(v);
        v[0] ^= m;
    }
    /* The last block: the remaining 0..7 bytes, and the length mod 256 in the top byte. */
    uint64_t last = (uint64_t)(bytes & 0xffu) << 56;
    for (size_t j = 0; j < bytes - full; j++) last |= (uint64_t)p[full + j] << (8u * j);
    v[3] ^= last;
    zc_sip_round(v);
    zc_sip_round(v);
    v[0] ^= last;
    v[2] ^= 0xffu;
    for (unsigned r = 0; r < 4u; r++) zc_sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* SipHash(secret, label(6) | n1 | n2 | words as u32), the tag of either side. */
static void zc_tag(const zc__boot *b, const char *label, const uint8_t *n1, const uint8_t *n2,
                   const uint32_t *words, unsigned nwords, uint8_t tag[ZC_TAG_BYTES]) {
    uint8_t msg[6u + 2u * ZC_NONCE_BYTES + 4u * 3u];
    size_t at = 6u + 2u * ZC_NONCE_BYTES;
    __builtin_memcpy(msg, label, 6u);
    __builtin_memcpy(msg + 6u, n1, ZC_NONCE_BYTES);
    __builtin_memcpy(msg + 6u + ZC_NONCE_BYTES, n2, ZC_NONCE_BYTES);
    for (unsigned i = 0; i < nwords && i < 3u; i++, at += 4u) zc_put32(msg + at, words[i]);
    zc_put64(tag, zc__siphash(b->secret, msg, at));
}

/* Equality whose time does not depend on where the bytes differ. */
static bool zc_same_tag(const uint8_t *a, const uint8_t *b) {
    uint8_t d = 0;
    for (unsigned i = 0; i < ZC_TAG_BYTES; i++) d = (uint8_t)(d | (a[i] ^ b[i]));
    return d == 0;
}

/* ---- error sentences ---- */

__attribute__((format(printf, 3, 4))) static zc_status zc_fail(zc__boot *b, zc_status st,
                                                               const char *fmt, ...) {
    if (b->err && b->err_cap) {
        size_t n = zc__strlcpy(b->err, "bootstrap: ", b->err_cap);
        va_list ap;
        va_start(ap, fmt);
        zc__vfmt(b->err + n, b->err_cap - n, fmt, ap);
        va_end(ap);
    }
    return st;
}

static zc_status zc_rc_status(zc_plat_rc rc) {
    switch (rc) {
    case ZC_PLAT_TIMEOUT: return ZC_TIMED_OUT;
    case ZC_PLAT_CLOSED:
    case ZC_PLAT_REFUSED: return ZC_PEER_LOST;
    case ZC_PLAT_INVALID:
    case ZC_PLAT_NOT_FOUND: return ZC_INVALID_ARG;
    case ZC_PLAT_UNSUPPORTED: return ZC_UNSUPPORTED;
    default: return ZC_SYSTEM;
    }
}

static uint32_t zc_rc_code(zc_plat_rc rc) {
    return rc == ZC_PLAT_CLOSED ? ZC_CODE_LOST
           : rc == ZC_PLAT_TIMEOUT ? ZC_CODE_TIMEOUT : ZC_CODE_FAILED;
}

/* Why a platform call failed, as the end of a sentence. Call it before any other platform
 * call, which would overwrite the OS error. */
static void zc_rc_reason(zc_plat_rc rc, char *buf, size_t cap) {
    char os[96];
    switch (rc) {
    case ZC_PLAT_TIMEOUT: zc__strlcpy(buf, "timed out", cap); return;
    case ZC_PLAT_CLOSED: zc__strlcpy(buf, "the peer closed the connection", cap); return;
    case ZC_PLAT_REFUSED: zc__strlcpy(buf, "connection refused", cap); return;
    case ZC_PLAT_NOT_FOUND: zc__strlcpy(buf, "no such host", cap); return;
    case ZC_PLAT_ERROR: {
        int e = zc_plat_os_error();
        zc_plat_os_error_text(e, os, sizeof os);
        zc__fmt(buf, cap, "%s (os error %d)", os, e);
        return;
    }
    default: zc__fmt(buf, cap, "%s", zc_plat_rc_name(rc)); return;
    }
}

static const char *zc_kind_name(uint32_t kind) {
    return kind == ZC_KIND_READY || kind == ZC_KIND_ADDR || kind == ZC_KIND_PARENT
               ? "the rendezvous"
           : kind == ZC_KIND_ALLGATHER ? "allgather"
           : kind == ZC_KIND_BARRIER   ? "barrier"
           : kind == ZC_KIND_SPARSE    ? "the sparse exchange"
           : kind == ZC_KIND_REDUCE    ? "reduce" : "an unknown call";
}

/* A send or receive with rank `peer` failed during the call `kind`. */
static zc_status zc_io_fail(zc__boot *b, zc_plat_rc rc, uint32_t peer, uint32_t kind) {
    char why[128];
    if (rc == ZC_PLAT_CLOSED)
        return zc_fail(b, ZC_PEER_LOST, "rank %u closed the connection during %s (at rank %u)",
                       peer, zc_kind_name(kind), b->rank);
    if (rc == ZC_PLAT_TIMEOUT)
        return zc_fail(b, ZC_TIMED_OUT,
                       "timed out waiting for rank %u during %s (at rank %u): the bootstrap "
                       "deadline passed", peer, zc_kind_name(kind), b->rank);
    zc_rc_reason(rc, why, sizeof why);
    return zc_fail(b, zc_rc_status(rc), "talking to rank %u during %s (at rank %u): %s", peer,
                   zc_kind_name(kind), b->rank, why);
}

/* The one sentence for an outcome, written the same way at the root that found it and at
 * every rank it told. */
static zc_status zc_outcome_fail(zc__boot *b, uint32_t kind, const zc_outcome *o) {
    const char *call = zc_kind_name(kind);
    switch (o->code) {
    case ZC_CODE_NRANKS:
        return zc_fail(b, ZC_MISMATCH, "rank %u was started for %u ranks but rank 0 for %u",
                       o->rank, o->value, o->expect);
    case ZC_CODE_RANK:
        return zc_fail(b, ZC_MISMATCH, "a process claimed rank %u, outside 1..%u", o->rank,
                       o->expect - 1u);
    case ZC_CODE_DUPLICATE:
        return zc_fail(b, ZC_MISMATCH, "two processes claimed rank %u", o->rank);
    case ZC_CODE_SIZE:
        return zc_fail(b, ZC_MISMATCH,
                       "%s sizes differ: rank %u passed %u bytes, rank %u passed %u", call,
                       o->rank, o->value, o->by, o->expect);
    case ZC_CODE_CALL:
        return zc_fail(b, ZC_MISMATCH, "rank %u called %s while rank %u called %s", o->rank,
                       zc_kind_name(o->value), o->by, zc_kind_name(o->expect));
    case ZC_CODE_LOST:
        return zc_fail(b, ZC_PEER_LOST, "rank %u closed the connection during %s", o->rank,
                       call);
    case ZC_CODE_TIMEOUT:
        if (kind == ZC_KIND_READY)
            return zc_fail(b, ZC_TIMED_OUT,
                           "timed out with %u of %u ranks joined (rank %u never came)",
                           o->value, o->expect, o->rank);
        return zc_fail(b, ZC_TIMED_OUT, "timed out waiting for rank %u during %s", o->rank,
                       call);
    case ZC_CODE_FAILED:
        return zc_fail(b, ZC_PEER_LOST, "rank %u failed during %s (its own error says why)",
                       o->by, call);
    default:
        return zc_fail(b, ZC_MISMATCH, "rank %u sent unknown code %u during %s", o->by,
                       o->code, call);
    }
}

/* ---- the tree ----
 * The parent of rank r > 0 is r - lowbit(r); r's children are r + 2^k for 2^k < lowbit(r)
 * (every 2^k < n for rank 0), and r's subtree is the ranks [r, r + lowbit(r)) below n, so a
 * subtree's blobs are contiguous in the table. */

static uint32_t zc_lowbit(uint32_t r) { return r & (~r + 1u); }

static uint32_t zc_parent_of(uint32_t r) { return r - zc_lowbit(r); }

/* One past the last rank of r's subtree. */
static uint32_t zc_subtree_end(uint32_t r, uint32_t n) {
    uint64_t end = r == 0 ? n : (uint64_t)r + zc_lowbit(r);
    return end < n ? (uint32_t)end : n;
}

/* How many children rank r has. */
static uint32_t zc_kid_count(uint32_t r, uint32_t n) {
    uint32_t k = 0, end = zc_subtree_end(r, n);
    while (k < ZC_BOOT_KIDS && (uint64_t)r + (1ull << k) < end) k++;
    return k;
}

/* k when rank c is child k of rank r, else ZC_BOOT_KIDS. */
static uint32_t zc_kid_index(uint32_t r, uint32_t c, uint32_t n) {
    if (c <= r || c >= n || zc_parent_of(c) != r) return ZC_BOOT_KIDS;
    uint32_t k = 0;
    while (k < ZC_BOOT_KIDS && (1u << k) != c - r) k++;
    return k;
}

/* ---- notes ---- */

static void zc_note_put(uint8_t note[ZC_NOTE_BYTES], uint32_t kind, const zc_outcome *o,
                        uint32_t len) {
    zc_put32(note, kind);
    zc_put32(note + 4, o->code);
    zc_put32(note + 8, o->rank);
    zc_put32(note + 12, o->value);
    zc_put32(note + 16, o->expect);
    zc_put32(note + 20, len);
}

/* A failure note (code not OK) carries no payload: its len field names the rank that found
 * the failure (o->by). */
static void zc_note_get(const uint8_t note[ZC_NOTE_BYTES], uint32_t *kind, zc_outcome *o,
                        uint32_t *len) {
    *kind = zc_get32(note);
    o->code = zc_get32(note + 4);
    o->rank = zc_get32(note + 8);
    o->value = zc_get32(note + 12);
    o->expect = zc_get32(note + 16);
    *len = zc_get32(note + 20);
    o->by = *len;
}

/* A note and its payload; the note and the payload's start leave in one send. */
static zc_plat_rc zc_send_note(int sock, const uint8_t note[ZC_NOTE_BYTES],
                               const uint8_t *payload, size_t len, uint64_t deadline_ns) {
    uint8_t stage[ZC_STAGE_BYTES];
    size_t first = len < ZC_STAGE_BYTES - ZC_NOTE_BYTES ? len : ZC_STAGE_BYTES - ZC_NOTE_BYTES;
    __builtin_memcpy(stage, note, ZC_NOTE_BYTES);
    if (first) __builtin_memcpy(stage + ZC_NOTE_BYTES, payload, first);
    zc_plat_rc rc = zc_plat_tcp_send_all(sock, stage, ZC_NOTE_BYTES + first, deadline_ns);
    if (rc == ZC_PLAT_OK && len > first)
        rc = zc_plat_tcp_send_all(sock, payload + first, len - first, deadline_ns);
    return rc;
}

/* Tells every neighbour this rank still holds (its parent, its children, and at rank 0 the
 * admitted ranks waiting for their parent) what went wrong; best effort, briefly. Each of them
 * passes it on, so the whole tree hears it. */
static void zc_notify(const zc__boot *b, uint32_t kind, const zc_outcome *o) {
    uint8_t note[ZC_NOTE_BYTES];
    uint64_t deadline_ns = zc_plat_now_ns() + ZC_NOTIFY_NS;
    zc_note_put(note, kind, o, o->by);
    if (b->up_sock >= 0) (void)zc_plat_tcp_send_all(b->up_sock, note, sizeof note, deadline_ns);
    for (uint32_t k = 0; k < ZC_BOOT_KIDS; k++)
        if (b->kids[k] >= 0)
            (void)zc_plat_tcp_send_all(b->kids[k], note, sizeof note, deadline_ns);
    for (uint32_t i = 0; i < ZC_BOOT_PENDING; i++)
        if (b->pending[i].sock >= 0 && b->pending[i].state != ZC_PEND_PROOF)
            (void)zc_plat_tcp_send_all(b->pending[i].sock, note, sizeof note, deadline_ns);
}

/* ---- a listening rank: admitting connections ----
 * Every accepted connection gets its greeting at once and joins the pending table; the
 * listener then reads whatever part of each proof has arrived, judging a proof once it is
 * whole. So handshakes overlap: a silent or slow connection costs a table entry until its own
 * deadline, never the others' time. */

/* One summary line for the drops not logged one by one (latest: the last one's reason, or
 * NULL at the end of the rendezvous). */
static void zc_drop_summary(zc__boot *b, const char *latest) {
    if (!b->drops_unlogged) return;
    char line[320];
    zc__fmt(line, sizeof line, "bootstrap: rank %u dropped %u more connection(s), %u in all%s%s",
            b->rank, b->drops_unlogged, b->drops, latest ? "; the latest: " : "",
            latest ? latest : "");
    zc_plat_log(ZC_PLAT_LOG_WARN, line);
    b->drops_unlogged = 0;
    b->drops_logged_ns = zc_plat_now_ns();
}

/* Closes a connection a listening rank will not admit and logs why: the first
 * ZC_DROPS_LOGGED one line each, later ones in a summary line at most once a second, so that
 * a flood of intruders cannot flood the log. */
__attribute__((format(printf, 3, 4))) static void zc_drop(zc__boot *b, int sock,
                                                         const char *fmt, ...) {
    char line[224];
    size_t n = zc__fmt(line, sizeof line, "bootstrap: rank %u dropped a connection: ", b->rank);
    va_list ap;
    va_start(ap, fmt);
    zc__vfmt(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    zc_plat_tcp_close(sock);
    if (++b->drops <= ZC_DROPS_LOGGED) {
        zc_plat_log(ZC_PLAT_LOG_WARN, line);
        b->drops_logged_ns = zc_plat_now_ns();
        return;
    }
    b->drops_unlogged++;
    if (zc_plat_now_ns() - b->drops_logged_ns >= ZC_DROP_SUMMARY_NS)
        zc_drop_summary(b, line + n);
}

static void zc_drop_io(zc__boot *b, int sock, zc_plat_rc rc, const char *step) {
    char why[128];
    if (rc == ZC_PLAT_TIMEOUT) zc__fmt(why, sizeof why, "nothing within %u ms",
                                       (unsigned)(ZC_HANDSHAKE_NS / 1000000u));
    else zc_rc_reason(rc, why, sizeof why);
    zc_drop(b, sock, "%s: %s", step, why);
}

/* A handshake message is tiny and its socket fresh: it is sent at once or the connection is
 * dropped, so that no peer can make a listener wait on a send. */
static zc_plat_rc zc_send_verdict(int sock, uint32_t code, uint32_t value, const uint8_t *tag) {
    uint8_t v[ZC_VERDICT_BYTES] = {0};
    zc_put32(v, code);
    zc_put32(v + 4, value);
    if (tag) __builtin_memcpy(v + 8, tag, ZC_TAG_BYTES);
    return zc_plat_tcp_send_all(sock, v, sizeof v, 0);
}

/* Rank 0 lets go of an admitted rank's connection before placing it (it gave way in a full
 * table, or failed): the rank may join again. `again` tells it to (it then retries). */
static void zc_unadmit(zc__boot *b, zc__boot_pending *p, bool again) {
    if (again) {
        uint8_t note[ZC_NOTE_BYTES];
        zc_outcome o = {ZC_CODE_AGAIN, p->rank, 0, 0, 0};
        zc_note_put(note, ZC_KIND_PARENT, &o, 0);
        (void)zc_plat_tcp_send_all(p->sock, note, sizeof note, 0);
    }
    zc_plat_tcp_close(p->sock);
    if (p->rank < b->nranks) b->where[p->rank] &= ~ZC_WHERE_JOINED;
    p->sock = -1;
}

/* The entry that has waited longest gives way (with `waiting`, an admitted rank waiting for
 * its parent first: it joins again without a word in the log): a handshake is dropped, an
 * admitted rank told to come again. Returns whether there was one. */
static bool zc_give_way(zc__boot *b, bool waiting) {
    zc__boot_pending *p = NULL;
    bool p_first = false;
    for (uint32_t i = 0; i < ZC_BOOT_PENDING; i++) {
        zc__boot_pending *q = &b->pending[i];
        bool q_first = waiting && q->state == ZC_PEND_PARENT;
        if (q->sock < 0) continue;
        if (!p || (q_first && !p_first) ||
            (q_first == p_first && q->deadline_ns < p->deadline_ns)) {
            p = q;
            p_first = q_first;
        }
    }
    if (!p) return false;
    if (p->state != ZC_PEND_PROOF) zc_unadmit(b, p, true);
    else zc_drop(b, p->sock, "no room for more handshakes (%u entries, or no descriptor "
                 "left); this one had waited longest", ZC_BOOT_PENDING);
    p->sock = -1;
    return true;
}

/* Greets a fresh connection and puts it in the pending table (when the table is full, the
 * entry that has waited longest gives way). A failure only when the OS fails. */
static zc_status zc_greet(zc__boot *b, int sock, zc_outcome *o) {
    zc__boot_pending *p = NULL;
    for (uint32_t i = 0; i < ZC_BOOT_PENDING && !p; i++)
        if (b->pending[i].sock < 0) p = &b->pending[i];
    if (!p) {
        (void)zc_give_way(b, false);
        for (uint32_t i = 0; i < ZC_BOOT_PENDING && !p; i++)
            if (b->pending[i].sock < 0) p = &b->pending[i];
    }
    if (!p) { /* unreachable: a full table always has an entry to give way */
        zc_plat_tcp_close(sock);
        return ZC_OK;
    }
    zc_plat_rc rc = zc_plat_random(p->nonce_s, sizeof p->nonce_s);
    if (rc != ZC_PLAT_OK) {
        char why[128];
        zc_rc_reason(rc, why, sizeof why);
        zc_plat_tcp_close(sock);
        *o = (zc_outcome){ZC_CODE_FAILED, b->rank, 0, 0, b->rank};
        return zc_fail(b, ZC_SYSTEM, "rank %u cannot draw a nonce: %s", b->rank, why);
    }
    uint8_t hello[ZC_HELLO_BYTES];
    zc_put32(hello, ZC_BOOT_MAGIC);
    zc_put32(hello + 4, ZC_BOOT_VERSION);
    __builtin_memcpy(hello + 8, p->nonce_s, ZC_NONCE_BYTES);
    rc = zc_plat_tcp_send_all(sock, hello, sizeof hello, 0);
    if (rc != ZC_PLAT_OK) {
        zc_drop_io(b, sock, rc, "sending the greeting");
        return ZC_OK;
    }
    p->sock = sock;
    p->state = ZC_PEND_PROOF;
    p->got = 0;
    p->rank = UINT32_MAX;
    p->deadline_ns = zc__deadline_after(zc_plat_now_ns(), ZC_HANDSHAKE_NS);
    if (p->deadline_ns > b->deadline_ns) p->deadline_ns = b->deadline_ns;
    return ZC_OK;
}

/* The code a listener gives a proven claim of `rank` of `nranks`: rank 0 admits every rank
 * once, any other rank its own children once. */
static uint32_t zc_claim_code(const zc__boot *b, uint32_t rank, uint32_t nranks) {
    if (nranks != b->nranks) return ZC_CODE_NRANKS;
    if (b->rank == 0) {
        if (rank == 0 || rank >= b->nranks) return ZC_CODE_RANK;
        return (b->where[rank] & ZC_WHERE_JOINED) ? ZC_CODE_DUPLICATE : ZC_CODE_OK;
    }
    uint32_t k = zc_kid_index(b->rank, rank, b->nranks);
    if (k >= b->kid_count) return ZC_CODE_RANK;
    return b->kids[k] >= 0 ? ZC_CODE_DUPLICATE : ZC_CODE_OK;
}

/* Judges a whole proof (p's connection). Returns ZC_OK both when it was admitted (rank 0: the
 * entry now waits for the rank's address note; others: kids[k] = sock, ++*joined) and when it
 * was dropped (an imposter or garbage: logged, the job goes on); a failure only when a peer
 * that proved the secret disagrees with the job (then *o says how). */
static zc_status zc_judge(zc__boot *b, zc__boot_pending *p, uint32_t *joined, zc_outcome *o) {
    const uint8_t *proof = p->proof;
    uint8_t tag[ZC_TAG_BYTES];
    int sock = p->sock;
    p->sock = -1;
    if (zc_get32(proof + 4) != ZC_BOOT_VERSION) {
        (void)zc_send_verdict(sock, ZC_CODE_VERSION, ZC_BOOT_VERSION, NULL);
        zc_drop(b, sock, "it speaks bootstrap protocol version %u, rank %u speaks %u",
                zc_get32(proof + 4), b->rank, ZC_BOOT_VERSION);
        return ZC_OK;
    }
    uint32_t claim[3] = {zc_get32(proof + 8), zc_get32(proof + 12), 0};
    const uint8_t *nonce_c = proof + 16;
    zc_tag(b, "client", p->nonce_s, nonce_c, claim, 2, tag);
    if (!zc_same_tag(tag, proof + 32)) {
        (void)zc_send_verdict(sock, ZC_CODE_AUTH, 0, NULL);
        zc_drop(b, sock, "a process claiming rank %u did not prove the job secret", claim[0]);
        return ZC_OK;
    }
    *o = (zc_outcome){zc_claim_code(b, claim[0], claim[1]), claim[0], claim[1], b->nranks,
                      b->rank};
    uint32_t said[3] = {claim[0], o->code, b->nranks};
    zc_tag(b, "server", nonce_c, p->nonce_s, said, 3, tag);
    zc_plat_rc rc = zc_send_verdict(sock, o->code, b->nranks, tag);
    if (o->code != ZC_CODE_OK) {
        zc_plat_tcp_close(sock);
        return zc_outcome_fail(b, ZC_KIND_READY, o);
    }
    if (rc != ZC_PLAT_OK) {
        zc_drop_io(b, sock, rc, "sending its verdict");
        return ZC_OK;
    }
    if (b->rank == 0) { /* the rank's address note is due next, on the same deadline */
        b->where[claim[0]] |= ZC_WHERE_JOINED;
        p->sock = sock;
        p->state = ZC_PEND_ADDR;
        p->rank = claim[0];
        p->got = 0;
        return ZC_OK;
    }
    b->kids[zc_kid_index(b->rank, claim[0], b->nranks)] = sock;
    ++*joined;
    return ZC_OK;
}

/* Rank 0 places admitted rank p->rank whose parent's address it knows: tells it the parent
 * (rank 0 keeps the connection when that is itself, else closes it). */
static void zc_place(zc__boot *b, zc__boot_pending *p, uint32_t *joined) {
    uint8_t note[ZC_NOTE_BYTES];
    uint32_t r = p->rank, par = zc_parent_of(r);
    uint64_t w = b->where[par];
    zc_outcome o = {ZC_CODE_OK, par, (uint32_t)(w & 0xffffu), (uint32_t)(w >> 16), 0};
    zc_note_put(note, ZC_KIND_PARENT, &o, 0);
    zc_plat_rc rc = zc_plat_tcp_send_all(p->sock, note, sizeof note, 0);
    if (rc != ZC_PLAT_OK) {
        zc_drop_io(b, p->sock, rc, "sending its parent's address");
        b->where[r] &= ~ZC_WHERE_JOINED;
        p->sock = -1;
        return;
    }
    if (par == 0) b->kids[zc_kid_index(0, r, b->nranks)] = p->sock;
    else zc_plat_tcp_close(p->sock);
    p->sock = -1;
    ++*joined;
}

/* Rank 0 reads an admitted rank's address note (whole in p->proof): records where its
 * children reach it, places it when its parent is known, and places the ranks that waited for
 * it. A malformed note from a rank that proved the secret fails the job. */
static zc_status zc_route(zc__boot *b, zc__boot_pending *p, uint32_t *joined, zc_outcome *o) {
    uint32_t kind, len, r = p->rank;
    zc_outcome got;
    zc_note_get(p->proof, &kind, &got, &len);
    bool parent = zc_kid_count(r, b->nranks) > 0;
    if (kind != ZC_KIND_ADDR || got.code != ZC_CODE_OK || got.rank != r || len != 0 ||
        got.value > 0xffffu || (parent && got.value == 0)) {
        *o = (zc_outcome){ZC_CODE_FAILED, r, 0, 0, 0};
        zc_plat_tcp_close(p->sock);
        p->sock = -1;
        return zc_fail(b, ZC_MISMATCH, "rank %u sent a malformed address note (kind 0x%x, "
                       "rank %u, port %u)", r, kind, got.rank, got.value);
    }
    b->where[r] |= ZC_WHERE_KNOWN | (uint64_t)got.expect << 16 | got.value;
    p->state = ZC_PEND_PARENT;
    p->deadline_ns = zc_plat_now_ns();
    if (b->where[zc_parent_of(r)] & ZC_WHERE_KNOWN) zc_place(b, p, joined);
    for (uint32_t i = 0; parent && i < ZC_BOOT_PENDING; i++) {
        zc__boot_pending *q = &b->pending[i];
        if (q->sock >= 0 && q->state == ZC_PEND_PARENT && zc_parent_of(q->rank) == r)
            zc_place(b, q, joined);
    }
    return ZC_OK;
}

/* Reads what has arrived for every pending entry without waiting; drops garbage at its first
 * wrong field and handshakes past their own deadline; judges proofs and routes address notes
 * that are whole. */
static zc_status zc_advance(zc__boot *b, uint32_t *joined, zc_outcome *o) {
    uint64_t now = zc_plat_now_ns();
    for (uint32_t i = 0; i < ZC_BOOT_PENDING; i++) {
        zc__boot_pending *p = &b->pending[i];
        if (p->sock < 0 || p->state == ZC_PEND_PARENT) continue;
        uint32_t want = p->state == ZC_PEND_PROOF ? ZC_PROOF_BYTES : ZC_NOTE_BYTES;
        size_t got = 0;
        zc_plat_rc rc = zc_plat_tcp_recv_some(p->sock, p->proof + p->got, want - p->got, &got);
        p->got += (uint32_t)got;
        if (rc == ZC_PLAT_AGAIN && now >= p->deadline_ns) rc = ZC_PLAT_TIMEOUT;
        zc_status st = ZC_OK;
        if (rc != ZC_PLAT_OK && rc != ZC_PLAT_AGAIN && p->state == ZC_PEND_ADDR) {
            zc_unadmit(b, p, false);
        } else if (rc != ZC_PLAT_OK && rc != ZC_PLAT_AGAIN) {
            zc_drop_io(b, p->sock, rc, "waiting for its proof");
            p->sock = -1;
        } else if (p->state == ZC_PEND_PROOF && p->got >= 4u &&
                   zc_get32(p->proof) != ZC_BOOT_MAGIC) {
            zc_drop(b, p->sock, "it sent bytes that are not a zcoll bootstrap proof");
            p->sock = -1;
        } else if (p->got == want) {
            st = p->state == ZC_PEND_PROOF ? zc_judge(b, p, joined, o)
                                           : zc_route(b, p, joined, o);
        }
        if (st != ZC_OK) return st;
    }
    return ZC_OK;
}

static bool zc_any_pending(const zc__boot *b) {
    for (uint32_t i = 0; i < ZC_BOOT_PENDING; i++)
        if (b->pending[i].sock >= 0 && b->pending[i].state != ZC_PEND_PARENT) return true;
    return false;
}

/* Closes the handshakes still under way (the rendezvous is over: they came too late); returns
 * how many. */
static uint32_t zc_close_pending(zc__boot *b) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < ZC_BOOT_PENDING; i++) {
        if (b->pending[i].sock >= 0) {
            zc_plat_tcp_close(b->pending[i].sock);
            n++;
        }
        b->pending[i].sock = -1;
    }
    return n;
}

/* "localhost" listens on loopback, a numeric IPv4 address on itself, any other name on every
 * interface (a name may resolve differently here than where the other ranks look it up). */
static const char *zc_listen_host(const char *host) {
    unsigned dots = 0, digits = 0, value = 0;
    if (zc__streq(host, "localhost")) return "127.0.0.1";
    for (size_t i = 0; host[i] && i < ZC_ADDR_BYTES; i++) {
        char c = host[i];
        if (c == '.' && digits) {
            dots++;
            digits = value = 0;
        } else if (c >= '0' && c <= '9' && digits < 3u) {
            digits++;
            value = value * 10u + (unsigned)(c - '0');
            if (value > 255u) return "0.0.0.0";
        } else {
            return "0.0.0.0";
        }
    }
    return dots == 3u && digits ? host : "0.0.0.0";
}

/* A rank serving its children: a note from its parent now can only be a failure (the parent
 * sends nothing else before this rank reports up); reads what has arrived of it. */
static zc_status zc_watch_up(zc__boot *b, zc_outcome *o) {
    if (b->up_sock < 0) return ZC_OK;
    size_t got = 0;
    zc_plat_rc rc = zc_plat_tcp_recv_some(b->up_sock, b->up_note + b->up_got,
                                          ZC_NOTE_BYTES - b->up_got, &got);
    b->up_got += (uint32_t)got;
    if (rc == ZC_PLAT_AGAIN || (rc == ZC_PLAT_OK && b->up_got < ZC_NOTE_BYTES)) return ZC_OK;
    if (rc != ZC_PLAT_OK) {
        *o = (zc_outcome){zc_rc_code(rc), b->parent, 0, 0, b->rank};
        return zc_io_fail(b, rc, b->parent, ZC_KIND_READY);
    }
    uint32_t kind, len;
    zc_note_get(b->up_note, &kind, o, &len);
    if (o->code != ZC_CODE_OK) return zc_outcome_fail(b, ZC_KIND_READY, o);
    *o = (zc_outcome){ZC_CODE_FAILED, b->rank, 0, 0, b->rank};
    return zc_fail(b, ZC_MISMATCH, "rank %u (the parent) sent 0x%x before its children were "
                   "in", b->parent, kind);
}

/* The rendezvous timed out at a listening rank: which rank never came. */
static zc_status zc_serve_timeout(zc__boot *b, uint64_t t0, uint32_t joined, zc_outcome *o) {
    uint32_t missing = 1, want = b->rank == 0 ? b->nranks : b->kid_count;
    if (b->rank == 0)
        while (missing < b->nranks && (b->where[missing] & ZC_WHERE_JOINED)) missing++;
    for (uint32_t k = 0; b->rank != 0 && k < b->kid_count; k++)
        if (b->kids[k] < 0) {
            missing = b->rank + (1u << k);
            break;
        }
    *o = (zc_outcome){ZC_CODE_TIMEOUT, missing, joined, want, b->rank};
    if (b->rank == 0)
        return zc_fail(b, ZC_TIMED_OUT, "timed out after %llu ms with %u of %u ranks joined "
                       "(rank %u never came)",
                       (unsigned long long)((zc_plat_now_ns() - t0) / 1000000u), joined,
                       b->nranks, missing);
    return zc_fail(b, ZC_TIMED_OUT, "rank %u timed out after %llu ms with %u of its %u "
                   "children connected (rank %u never came)", b->rank,
                   (unsigned long long)((zc_plat_now_ns() - t0) / 1000000u), joined,
                   b->kid_count, missing);
}

/* A listening rank accepts until `want` connections are in: rank 0 every rank (placed in the
 * tree), any other rank its children. On failure the neighbours are told. */
static zc_status zc_serve(zc__boot *b, uint32_t want) {
    uint64_t t0 = zc_plat_now_ns();
    zc_status st = ZC_OK;
    zc_outcome o = {ZC_CODE_OK, 0, 0, b->nranks, b->rank};
    uint32_t joined = 0;
    /* Bounded by the deadline: each pass waits for a connection until it at most (while
     * handshakes are under way or a parent may speak, ZC_SERVE_POLL_NS at most) and reads
     * without waiting. */
    while (st == ZC_OK && joined < want) {
        uint64_t now = zc_plat_now_ns(), wait_ns = b->deadline_ns;
        if ((zc_any_pending(b) || b->up_sock >= 0) &&
            zc__deadline_after(now, ZC_SERVE_POLL_NS) < wait_ns)
            wait_ns = now + ZC_SERVE_POLL_NS;
        int sock = -1;
        zc_plat_rc rc = now >= b->deadline_ns
                            ? ZC_PLAT_TIMEOUT
                            : zc_plat_tcp_accept(b->listen_sock, wait_ns, &sock);
        if (rc == ZC_PLAT_TIMEOUT && zc_plat_now_ns() >= b->deadline_ns) {
            st = zc_serve_timeout(b, t0, b->rank == 0 ? joined + 1u : joined, &o);
        } else if (rc == ZC_PLAT_ERROR && zc_give_way(b, true)) {
            /* out of descriptors, likely: the longest-waiting entry made room */
        } else if (rc != ZC_PLAT_OK && rc != ZC_PLAT_TIMEOUT) {
            char why[128];
            zc_rc_reason(rc, why, sizeof why);
            o = (zc_outcome){ZC_CODE_FAILED, b->rank, joined, want, b->rank};
            st = zc_fail(b, zc_rc_status(rc), "rank %u cannot accept: %s", b->rank, why);
        } else if (rc == ZC_PLAT_OK) {
            st = zc_greet(b, sock, &o);
        }
        if (st == ZC_OK) st = zc_advance(b, &joined, &o);
        if (st == ZC_OK) st = zc_watch_up(b, &o);
    }
    if (st != ZC_OK) zc_notify(b, ZC_KIND_READY, &o);
    uint32_t late = zc_close_pending(b);
    zc_drop_summary(b, NULL);
    if (late && st == ZC_OK) {
        char line[160];
        zc__fmt(line, sizeof line, "bootstrap: rank %u closed %u connection(s) that had not "
                "proved the secret when the rendezvous ended", b->rank, late);
        zc_plat_log(ZC_PLAT_LOG_WARN, line);
    }
    zc_plat_tcp_close(b->listen_sock); /* late connectors are refused, not left hanging */
    b->listen_sock = -1;
    return st;
}

/* Rank 0: listens at the root address and admits every rank. */
static zc_status zc_serve_root(zc__boot *b, const char *host, uint16_t port) {
    char why[128];
    uint16_t got_port = 0;
    const char *lhost = zc_listen_host(host);
    zc_plat_rc rc = zc_plat_tcp_listen(lhost, port, &b->listen_sock, &got_port);
    if (rc != ZC_PLAT_OK) {
        b->listen_sock = -1;
        zc_rc_reason(rc, why, sizeof why);
        return zc_fail(b, zc_rc_status(rc), "rank 0 cannot listen on %s:%u: %s", lhost,
                       (unsigned)port, why);
    }
    b->where[0] = ZC_WHERE_KNOWN | ZC_WHERE_JOINED; /* its children keep their connection */
    return zc_serve(b, b->nranks - 1u);
}

/* ---- rank r > 0: joining ---- */

/* Connects to rank `peer` (0: the root address, retried while refused, as rank 0 may not
 * listen yet; a parent listened before rank 0 gave out its address, so refused means gone). */
static zc_status zc_connect(zc__boot *b, uint32_t peer, const char *host, uint16_t port) {
    char why[128];
    uint64_t t0 = zc_plat_now_ns();
    uint64_t tries = b->deadline_ns > t0 ? (b->deadline_ns - t0) / ZC_RETRY_MIN_NS + 2u : 1u;
    zc_plat_rc rc = ZC_PLAT_TIMEOUT;
    bool refused = false;
    for (uint64_t i = 0; i < tries; i++) {
        rc = zc_plat_tcp_connect(host, port, b->deadline_ns, &b->up_sock);
        if (rc == ZC_PLAT_OK) return ZC_OK;
        b->up_sock = -1;
        refused = refused || rc == ZC_PLAT_REFUSED;
        uint64_t now = zc_plat_now_ns();
        if (rc != ZC_PLAT_REFUSED || now >= b->deadline_ns || peer != 0) break;
        uint32_t jitter = 0;
        if (zc_plat_random(&jitter, sizeof jitter) != ZC_PLAT_OK) jitter = 0;
        uint64_t pause = ZC_RETRY_MIN_NS + jitter % ZC_RETRY_SPAN_NS;
        zc_plat_sleep_ns(pause < b->deadline_ns - now ? pause : b->deadline_ns - now);
    }
    unsigned long long ms = (unsigned long long)((zc_plat_now_ns() - t0) / 1000000u);
    if (peer != 0 && rc == ZC_PLAT_REFUSED)
        return zc_fail(b, ZC_PEER_LOST, "rank %u (this rank's parent) refused the connection "
                       "at %s:%u: it is gone", peer, host, (unsigned)port);
    if (rc == ZC_PLAT_REFUSED || rc == ZC_PLAT_TIMEOUT)
        return zc_fail(b, ZC_TIMED_OUT, "connect to %s:%u timed out after %llu ms%s", host,
                       (unsigned)port, ms,
                       refused ? " (refused: nobody listened there)"
                               : " (no answer: is that host up and reachable?)");
    zc_rc_reason(rc, why, sizeof why);
    return zc_fail(b, zc_rc_status(rc), "connect to %s:%u failed: %s", host, (unsigned)port,
                   why);
}

/* A handshake a listener did not finish, for a reason that may pass (rank 0 stalled, or its
 * handshake timer dropped this one over a slow network, or it does not know this rank's parent
 * yet): closes the connection, says why in again[cap] and returns ZC_AGAIN, so that
 * zc_handshake tries once more. */
__attribute__((format(printf, 4, 5))) static zc_status zc_again(zc__boot *b, char *again,
                                                                size_t cap, const char *fmt,
                                                                ...) {
    va_list ap;
    va_start(ap, fmt);
    zc__vfmt(again, cap, fmt, ap);
    va_end(ap);
    zc_plat_tcp_close(b->up_sock);
    b->up_sock = -1;
    return ZC_AGAIN;
}

/* Reads the greeting of rank `peer` and answers with this process's proof; ZC_AGAIN
 * (zc_again) when rank 0's greeting is 2 s late or the listener closed the connection first. */
static zc_status zc_prove(zc__boot *b, uint32_t peer, const char *addr,
                          uint8_t nonce_s[ZC_NONCE_BYTES], uint8_t nonce_c[ZC_NONCE_BYTES],
                          char *again, size_t cap) {
    uint8_t hello[ZC_HELLO_BYTES], proof[ZC_PROOF_BYTES];
    /* Rank 0 greets every connection as it accepts it: a listener silent for a handshake's
     * time is another program holding the port, or a rank 0 that is stalled (a loaded host).
     * Only the deadline tells them apart, so the connection is tried again until it. A parent
     * (its address came from rank 0) greets once it serves its children: wait for it. */
    uint64_t greet_ns = zc__deadline_after(zc_plat_now_ns(), ZC_HANDSHAKE_NS);
    if (peer != 0 || greet_ns > b->deadline_ns) greet_ns = b->deadline_ns;
    zc_plat_rc rc = zc_plat_tcp_recv_all(b->up_sock, hello, sizeof hello, greet_ns);
    if (rc == ZC_PLAT_TIMEOUT && greet_ns < b->deadline_ns)
        return zc_again(b, again, cap, "the listener at %s sent no greeting within %u ms: "
                        "another program is using that port, or rank 0 is stalled", addr,
                        (unsigned)(ZC_HANDSHAKE_NS / 1000000u));
    if (rc == ZC_PLAT_CLOSED)
        return zc_again(b, again, cap, "the listener at %s closed the connection before its "
                        "greeting", addr);
    if (rc != ZC_PLAT_OK) return zc_io_fail(b, rc, peer, ZC_KIND_READY);
    if (zc_get32(hello) != ZC_BOOT_MAGIC) {
        /* A parent that failed before it greeted tells its waiting children why instead (a
         * failure note is as long as a greeting): say its failure, not a bad greeting. */
        uint32_t kind, len;
        zc_outcome o;
        zc_note_get(hello, &kind, &o, &len);
        if (peer != 0 && kind == ZC_KIND_READY && o.code != ZC_CODE_OK &&
            o.code != ZC_CODE_AGAIN)
            return zc_outcome_fail(b, ZC_KIND_READY, &o);
        return zc_fail(b, ZC_AUTH, "the listener at %s is not a zcoll rank %u (bad greeting)",
                       addr, peer);
    }
    if (zc_get32(hello + 4) != ZC_BOOT_VERSION)
        return zc_fail(b, ZC_MISMATCH, "rank %u at %s speaks bootstrap protocol version %u, "
                       "this process %u", peer, addr, zc_get32(hello + 4), ZC_BOOT_VERSION);
    __builtin_memcpy(nonce_s, hello + 8, ZC_NONCE_BYTES);
    rc = zc_plat_random(nonce_c, ZC_NONCE_BYTES);
    if (rc != ZC_PLAT_OK) {
        char why[128];
        zc_rc_reason(rc, why, sizeof why);
        return zc_fail(b, ZC_SYSTEM, "rank %u cannot draw a nonce: %s", b->rank, why);
    }
    uint32_t claim[2] = {b->rank, b->nranks};
    zc_put32(proof, ZC_BOOT_MAGIC);
    zc_put32(proof + 4, ZC_BOOT_VERSION);
    zc_put32(proof + 8, b->rank);
    zc_put32(proof + 12, b->nranks);
    __builtin_memcpy(proof + 16, nonce_c, ZC_NONCE_BYTES);
    zc_tag(b, "client", nonce_s, nonce_c, claim, 2, proof + 32);
    rc = zc_plat_tcp_send_all(b->up_sock, proof, sizeof proof, b->deadline_ns);
    if (rc == ZC_PLAT_CLOSED)
        return zc_again(b, again, cap, "rank %u at %s closed the connection before this "
                        "process's proof", peer, addr);
    return rc == ZC_PLAT_OK ? ZC_OK : zc_io_fail(b, rc, peer, ZC_KIND_READY);
}

/* Reads and checks rank `peer`'s verdict on our proof; ZC_AGAIN (zc_again) when it closed the
 * connection instead (a listener drops a handshake whose proof came 2 s late). */
static zc_status zc_read_verdict(zc__boot *b, uint32_t peer, const char *addr,
                                 const uint8_t nonce_s[ZC_NONCE_BYTES],
                                 const uint8_t nonce_c[ZC_NONCE_BYTES], char *again,
                                 size_t cap) {
    uint8_t v[ZC_VERDICT_BYTES], tag[ZC_TAG_BYTES];
    zc_plat_rc rc = zc_plat_tcp_recv_all(b->up_sock, v, sizeof v, b->deadline_ns);
    if (rc == ZC_PLAT_CLOSED)
        return zc_again(b, again, cap, "rank %u at %s closed the connection before its verdict "
                        "(it drops a handshake not done within %u ms)", peer, addr,
                        (unsigned)(ZC_HANDSHAKE_NS / 1000000u));
    if (rc != ZC_PLAT_OK) return zc_io_fail(b, rc, peer, ZC_KIND_READY);
    uint32_t code = zc_get32(v), value = zc_get32(v + 4);
    if (code == ZC_CODE_AUTH)
        return zc_fail(b, ZC_AUTH, "rank %u at %s rejected this process's proof of the job "
                       "secret (claimed rank %u of %u): is the secret the same on every rank?",
                       peer, addr, b->rank, b->nranks);
    if (code == ZC_CODE_VERSION)
        return zc_fail(b, ZC_MISMATCH, "rank %u at %s speaks bootstrap protocol version %u, "
                       "this process %u", peer, addr, value, ZC_BOOT_VERSION);
    uint32_t said[3] = {b->rank, code, value};
    zc_tag(b, "server", nonce_c, nonce_s, said, 3, tag);
    if (!zc_same_tag(tag, v + 8))
        return zc_fail(b, ZC_AUTH, "rank %u at %s did not prove the job secret", peer, addr);
    if (code == ZC_CODE_OK) return ZC_OK;
    zc_outcome o = {code, b->rank, b->nranks, value, peer};
    return zc_outcome_fail(b, ZC_KIND_READY, &o);
}

/* IPv4 dotted quad <-> u32 (the first octet in the top byte). */
static bool zc_ipv4_parse(const char *s, uint32_t *ip) {
    uint32_t v = 0, octet = 0, dots = 0, digits = 0;
    for (size_t i = 0; i < 16u; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9' && digits < 3u) {
            octet = octet * 10u + (uint32_t)(c - '0');
            digits++;
        } else if ((c == '.' || c == '\0') && digits && octet <= 255u) {
            v = v << 8 | octet;
            octet = digits = 0;
            if (c == '\0') break;
            if (++dots > 3u) return false;
        } else {
            return false;
        }
    }
    *ip = v;
    return dots == 3u && digits == 0;
}

static void zc_ipv4_text(uint32_t ip, char *buf, size_t cap) {
    zc__fmt(buf, cap, "%u.%u.%u.%u", ip >> 24, ip >> 16 & 0xffu, ip >> 8 & 0xffu, ip & 0xffu);
}

/* Once admitted by rank 0: a rank with children listens on an ephemeral port at the address it
 * reached rank 0 from (once per open: a rank told to come again keeps it). */
static zc_status zc_listen_own(zc__boot *b) {
    char host[ZC_ADDR_BYTES], why[128];
    if (b->kid_count == 0 || b->listen_sock >= 0) return ZC_OK;
    zc_plat_rc rc = zc_plat_tcp_local_host(b->up_sock, host, sizeof host);
    if (rc == ZC_PLAT_OK && !zc_ipv4_parse(host, &b->listen_ip)) rc = ZC_PLAT_UNSUPPORTED;
    if (rc == ZC_PLAT_OK) rc = zc_plat_tcp_listen(host, 0, &b->listen_sock, &b->listen_port);
    if (rc == ZC_PLAT_OK) return ZC_OK;
    b->listen_sock = -1;
    zc_rc_reason(rc, why, sizeof why);
    return zc_fail(b, zc_rc_status(rc), "rank %u cannot listen for its %u children at the "
                   "address it reached rank 0 from: %s", b->rank, b->kid_count, why);
}

/* Tells rank 0 where this rank's children reach it and reads where its parent is (ZC_AGAIN:
 * rank 0 does not know yet, or let go of this connection; *quiet: that is routine). */
static zc_status zc_learn_parent(zc__boot *b, const char *addr, char *host, uint16_t *port,
                                 char *again, size_t cap, bool *quiet) {
    uint8_t note[ZC_NOTE_BYTES];
    zc_status st = zc_listen_own(b);
    if (st != ZC_OK) return st;
    zc_outcome o = {ZC_CODE_OK, b->rank, b->listen_port, b->listen_ip, 0};
    zc_note_put(note, ZC_KIND_ADDR, &o, 0);
    zc_plat_rc rc = zc_plat_tcp_send_all(b->up_sock, note, sizeof note, b->deadline_ns);
    if (rc == ZC_PLAT_OK)
        rc = zc_plat_tcp_recv_all(b->up_sock, note, sizeof note, b->deadline_ns);
    if (rc == ZC_PLAT_CLOSED)
        return zc_again(b, again, cap, "rank 0 at %s closed the connection before naming this "
                        "rank's parent", addr);
    if (rc != ZC_PLAT_OK) return zc_io_fail(b, rc, 0, ZC_KIND_READY);
    uint32_t kind, len;
    zc_note_get(note, &kind, &o, &len);
    if (o.code == ZC_CODE_AGAIN) {
        *quiet = true;
        return zc_again(b, again, cap, "rank 0 did not yet know where rank %u (this rank's "
                        "parent) listens", b->parent);
    }
    if (o.code != ZC_CODE_OK) return zc_outcome_fail(b, ZC_KIND_READY, &o);
    if (kind != ZC_KIND_PARENT || o.rank != b->parent || o.value > 0xffffu ||
        (o.rank != 0 && o.value == 0))
        return zc_fail(b, ZC_MISMATCH, "rank 0 sent a malformed parent note (kind 0x%x, "
                       "rank %u where %u was due, port %u)", kind, o.rank, b->parent, o.value);
    zc_ipv4_text(o.expect, host, ZC_ADDR_BYTES);
    *port = (uint16_t)o.value;
    return ZC_OK;
}

/* Connects to rank `peer` and goes through the handshake (with rank 0 also learning the
 * parent: host/port out), on a new connection each time the listener did not finish it
 * (zc_again), until the deadline. The first unexpected retry is logged (a warning: another
 * program on the port shows only as a failure at the deadline). */
static zc_status zc_handshake(zc__boot *b, uint32_t peer, const char *host, uint16_t port,
                              char *parent_host, uint16_t *parent_port) {
    char again[192] = "", addr[ZC_ADDR_BYTES + 8];
    uint8_t nonce_s[ZC_NONCE_BYTES], nonce_c[ZC_NONCE_BYTES];
    uint64_t t0 = zc_plat_now_ns();
    uint64_t passes = b->deadline_ns > t0 ? (b->deadline_ns - t0) / ZC_RETRY_MIN_NS + 2u : 1u;
    uint32_t tries = 0;
    zc_status st = ZC_AGAIN;
    zc__fmt(addr, sizeof addr, "%s:%u", host, (unsigned)port);
    /* Bounded by the deadline: every pass after the first sleeps ZC_RETRY_MIN_NS at least. */
    for (uint64_t i = 0; i < passes && st == ZC_AGAIN; i++) {
        uint64_t now = zc_plat_now_ns();
        bool quiet = false;
        if (i > 0) {
            if (now >= b->deadline_ns) break;
            uint64_t left = b->deadline_ns - now;
            zc_plat_sleep_ns(ZC_RETRY_MIN_NS < left ? ZC_RETRY_MIN_NS : left);
        }
        st = zc_connect(b, peer, host, port);
        if (st == ZC_OK) st = zc_prove(b, peer, addr, nonce_s, nonce_c, again, sizeof again);
        if (st == ZC_OK)
            st = zc_read_verdict(b, peer, addr, nonce_s, nonce_c, again, sizeof again);
        if (st == ZC_OK && peer == 0)
            st = zc_learn_parent(b, addr, parent_host, parent_port, again, sizeof again, &quiet);
        if (st == ZC_AGAIN && !quiet && ++tries == 1) {
            char line[288];
            zc__fmt(line, sizeof line, "bootstrap: rank %u: %s; trying again until the "
                    "deadline", b->rank, again);
            zc_plat_log(ZC_PLAT_LOG_WARN, line);
        }
    }
    if (st != ZC_AGAIN && (tries == 0 || st != ZC_TIMED_OUT)) return st;
    return zc_fail(b, ZC_TIMED_OUT, "no handshake with rank %u at %s finished within %llu ms "
                   "(%u tries; the last: %s)", peer, addr,
                   (unsigned long long)((zc_plat_now_ns() - t0) / 1000000u), tries, again);
}

static zc_status zc_tree_exchange(zc__boot *b, uint32_t kind, const uint8_t *mine,
                                  uint8_t *all, uint32_t bytes);

/* Rank r > 0: joins through rank 0, connects to its parent (unless that is rank 0, whose
 * connection it keeps), admits its own children. */
static zc_status zc_join(zc__boot *b, const char *host, uint16_t port) {
    char parent_host[ZC_ADDR_BYTES] = "";
    uint16_t parent_port = 0;
    zc_status st = zc_handshake(b, 0, host, port, parent_host, &parent_port);
    if (st == ZC_OK && b->parent != 0) {
        zc_plat_tcp_close(b->up_sock);
        b->up_sock = -1;
        st = zc_handshake(b, b->parent, parent_host, parent_port, NULL, NULL);
    }
    if (st != ZC_OK) return st;
    return b->kid_count ? zc_serve(b, b->kid_count) : ZC_OK;
}

/* ---- the interface ---- */

zc_status zc__boot_open(zc__boot *b, const zc_config *cfg, uint64_t *where, uint64_t deadline_ns,
                        char *err, size_t err_cap) {
    char host[ZC_ADDR_BYTES];
    uint16_t port = 0;
    if (err && err_cap) err[0] = '\0';
    if (!b) {
        if (err && err_cap) zc__fmt(err, err_cap, "bootstrap: b is NULL");
        return ZC_INVALID_ARG;
    }
    __builtin_memset(b, 0, sizeof *b);
    b->err = err;
    b->err_cap = err_cap;
    b->listen_sock = -1;
    b->up_sock = -1;
    for (uint32_t k = 0; k < ZC_BOOT_KIDS; k++) b->kids[k] = -1;
    for (uint32_t i = 0; i < ZC_BOOT_PENDING; i++) b->pending[i].sock = -1;
    if (!cfg) return zc_fail(b, ZC_INVALID_ARG, "cfg is NULL");
    if (cfg->nranks < 1 || cfg->nranks > ZC_MAX_RANKS || cfg->rank >= cfg->nranks)
        return zc_fail(b, ZC_INVALID_ARG, "cfg->rank %u / cfg->nranks %u: need rank < nranks "
                       "<= %u", cfg->rank, cfg->nranks, ZC_MAX_RANKS);
    if (!where && cfg->rank == 0)
        return zc_fail(b, ZC_INVALID_ARG, "rank 0 needs a table of %u words for the ranks' "
                       "addresses (where is NULL)", cfg->nranks);
    if (cfg->rank == 0) __builtin_memset(where, 0, (size_t)cfg->nranks * 8u);
    b->where = where;
    if (deadline_ns == 0) return zc_fail(b, ZC_INVALID_ARG, "deadline_ns is 0");
    b->rank = cfg->rank;
    b->nranks = cfg->nranks;
    b->deadline_ns = deadline_ns;
    b->parent = b->rank ? zc_parent_of(b->rank) : 0;
    b->kid_count = zc_kid_count(b->rank, b->nranks);
    if (cfg->nranks == 1) {
        b->open = true;
        return ZC_OK;
    }
    if (!cfg->secret_set)
        return zc_fail(b, ZC_INVALID_ARG, "cfg->secret is not set (needed for %u ranks)",
                       cfg->nranks);
    size_t addr_len = 0;
    while (addr_len < sizeof cfg->root_addr && cfg->root_addr[addr_len]) addr_len++;
    if (addr_len == sizeof cfg->root_addr ||
        !zc__split_addr(cfg->root_addr, host, sizeof host, &port))
        return zc_fail(b, ZC_INVALID_ARG, "cfg->root_addr is not host:port (port 1..65535)");
    __builtin_memcpy(b->secret, cfg->secret, sizeof b->secret);
    zc_status st = b->rank == 0 ? zc_serve_root(b, host, port) : zc_join(b, host, port);
    if (st == ZC_OK) st = zc_tree_exchange(b, ZC_KIND_READY, NULL, NULL, 0);
    if (st != ZC_OK) zc__boot_close(b);
    else b->open = true;
    return st;
}

/* A failed step of an exchange: o says what (o->by: this rank unless relayed); tells every
 * neighbour, returns st. */
static zc_status zc_exchange_fail(zc__boot *b, uint32_t kind, zc_outcome *o, zc_status st) {
    zc_notify(b, kind, o);
    return st;
}

/* Sending to child k failed (rc) during kind: said and told to every neighbour. */
static zc_status zc_kid_failed(zc__boot *b, uint32_t kind, uint32_t k, zc_plat_rc rc) {
    uint32_t c = b->rank + (1u << k);
    zc_status st = zc_io_fail(b, rc, c, kind);
    zc_outcome o = {zc_rc_code(rc), c, 0, 0, b->rank};
    return zc_exchange_fail(b, kind, &o, st);
}

/* Reads child k's note for kind, whose payload must be want bytes of blobs of bytes each (expect
 * the round's first rank lo); a failure it relays or a malformed note is said, told in *o and
 * returned. */
static zc_status zc_kid_note(zc__boot *b, uint32_t kind, uint32_t k, uint32_t lo, uint32_t want,
                             uint32_t bytes, zc_outcome *o) {
    uint8_t note[ZC_NOTE_BYTES];
    uint32_t c = b->rank + (1u << k), their_kind, len;
    zc_outcome theirs;
    zc_plat_rc rc = zc_plat_tcp_recv_all(b->kids[k], note, sizeof note, b->deadline_ns);
    if (rc != ZC_PLAT_OK) {
        *o = (zc_outcome){zc_rc_code(rc), c, 0, 0, b->rank};
        return zc_io_fail(b, rc, c, kind);
    }
    zc_note_get(note, &their_kind, &theirs, &len);
    if (theirs.code != ZC_CODE_OK) { /* relayed from c's subtree */
        *o = theirs;
        return zc_outcome_fail(b, kind, o);
    }
    *o = (zc_outcome){ZC_CODE_OK, c, 0, 0, b->rank};
    if (their_kind != kind) *o = (zc_outcome){ZC_CODE_CALL, c, their_kind, kind, b->rank};
    else if (theirs.value != bytes)
        *o = (zc_outcome){ZC_CODE_SIZE, c, theirs.value, bytes, b->rank};
    else if (theirs.rank != c || theirs.expect != lo || len != want) {
        *o = (zc_outcome){ZC_CODE_FAILED, c, 0, 0, b->rank};
        return zc_fail(b, ZC_MISMATCH, "rank %u sent a malformed %s request (rank %u, round "
                       "from rank %u, %u bytes where rank %u's round from rank %u expects %u)",
                       c, zc_kind_name(kind), theirs.rank, theirs.expect, len, b->rank, lo,
                       want);
    }
    return o->code == ZC_CODE_OK ? ZC_OK : zc_outcome_fail(b, kind, o);
}

/* The ranks of r's subtree inside the round [lo, hi): [*a, *z), empty when *z <= *a. */
static void zc_span(const zc__boot *b, uint32_t r, uint32_t lo, uint32_t hi, uint32_t *a,
                    uint32_t *z) {
    uint32_t end = zc_subtree_end(r, b->nranks);
    *a = r > lo ? r : lo;
    *z = end < hi ? end : hi;
    if (*z < *a) *z = *a;
}

/* Reads child k's note and its subtree's blobs of ranks lo..hi-1 into win (rank u's at
 * (u - lo) * bytes). */
static zc_status zc_gather_kid(zc__boot *b, uint32_t kind, uint32_t k, uint8_t *win,
                               uint32_t lo, uint32_t hi, uint32_t bytes, zc_outcome *o) {
    uint32_t c = b->rank + (1u << k), a, z;
    zc_span(b, c, lo, hi, &a, &z);
    uint32_t len = (z - a) * bytes;
    zc_status st = zc_kid_note(b, kind, k, lo, len, bytes, o);
    if (st != ZC_OK || !len) return st;
    zc_plat_rc rc = zc_plat_tcp_recv_all(b->kids[k], win + (size_t)(a - lo) * bytes, len,
                                         b->deadline_ns);
    if (rc == ZC_PLAT_OK) return ZC_OK;
    *o = (zc_outcome){zc_rc_code(rc), c, 0, 0, b->rank};
    return zc_io_fail(b, rc, c, kind);
}

/* Receives the parent's reply of every rank's blob of bytes into all, but this rank's own
 * entry, which is compared with mine as it arrives instead (mine may lie at that very place)
 * and then copied in: each rank checks its own, cheaply. */
static zc_status zc_recv_reply(zc__boot *b, uint32_t kind, const uint8_t *mine, uint8_t *all,
                               uint32_t bytes) {
    size_t at = (size_t)b->rank * bytes, end = at + bytes, total = (size_t)b->nranks * bytes;
    uint8_t piece[1024];
    bool same = true;
    zc_plat_rc rc = at ? zc_plat_tcp_recv_all(b->up_sock, all, at, b->deadline_ns) : ZC_PLAT_OK;
    for (size_t off = at, n = 0; rc == ZC_PLAT_OK && off < end; off += n) {
        n = end - off < sizeof piece ? end - off : sizeof piece;
        rc = zc_plat_tcp_recv_all(b->up_sock, piece, n, b->deadline_ns);
        same = same && (rc != ZC_PLAT_OK || __builtin_memcmp(piece, mine + (off - at), n) == 0);
    }
    if (rc == ZC_PLAT_OK && end < total)
        rc = zc_plat_tcp_recv_all(b->up_sock, all + end, total - end, b->deadline_ns);
    if (rc != ZC_PLAT_OK) return zc_io_fail(b, rc, b->parent, kind);
    if (!same)
        return zc_fail(b, ZC_MISMATCH, "rank %u answered %s with an entry for rank %u other "
                       "than the %u bytes rank %u sent: the rendezvous stream is corrupt",
                       b->parent, zc_kind_name(kind), b->rank, bytes, b->rank);
    if (bytes) __builtin_memmove(all + at, mine, bytes);
    return ZC_OK;
}

/* A rank > 0 sends len bytes of payload up (note: kind, blobs of bytes each, the round's first
 * rank lo) and reads its parent's answer note into *got_kind, *len_back and *o; a failure it
 * names, or one on the way, is told and returned. */
static zc_status zc_up_note(zc__boot *b, uint32_t kind, const uint8_t *payload, uint32_t len,
                            uint32_t bytes, uint32_t lo, uint32_t *got_kind, uint32_t *len_back,
                            zc_outcome *o) {
    uint8_t note[ZC_NOTE_BYTES];
    *o = (zc_outcome){ZC_CODE_OK, b->rank, bytes, lo, b->rank};
    zc_note_put(note, kind, o, len);
    zc_plat_rc rc = zc_send_note(b->up_sock, note, len ? payload : NULL, len, b->deadline_ns);
    if (rc == ZC_PLAT_OK)
        rc = zc_plat_tcp_recv_all(b->up_sock, note, sizeof note, b->deadline_ns);
    if (rc != ZC_PLAT_OK) {
        *o = (zc_outcome){zc_rc_code(rc), b->parent, 0, 0, b->rank};
        return zc_io_fail(b, rc, b->parent, kind);
    }
    zc_note_get(note, got_kind, o, len_back);
    if (o->code != ZC_CODE_OK) return zc_outcome_fail(b, kind, o);
    return ZC_OK;
}

/* Sends this rank's subtree's blobs of ranks lo..hi-1 (from win) up; as zc_up_note. */
static zc_status zc_up_span(zc__boot *b, uint32_t kind, const uint8_t *win, uint32_t lo,
                            uint32_t hi, uint32_t bytes, uint32_t *got_kind, uint32_t *len,
                            zc_outcome *o) {
    uint32_t a, z;
    zc_span(b, b->rank, lo, hi, &a, &z);
    return zc_up_note(b, kind, win ? win + (size_t)(a - lo) * bytes : NULL, (z - a) * bytes,
                      bytes, lo, got_kind, len, o);
}

/* A rank > 0 sends its subtree's blobs up and reads the whole table from its parent. */
static zc_status zc_up_and_back(zc__boot *b, uint32_t kind, const uint8_t *mine, uint8_t *all,
                                uint32_t bytes, zc_outcome *o) {
    uint32_t total = b->nranks * bytes, got_kind, len;
    zc_status st = zc_up_span(b, kind, all, 0, b->nranks, bytes, &got_kind, &len, o);
    if (st != ZC_OK) return st;
    *o = (zc_outcome){ZC_CODE_FAILED, b->rank, 0, 0, b->rank};
    if (got_kind != kind || len != total)
        return zc_fail(b, ZC_MISMATCH, "rank %u answered %s with a malformed reply (kind 0x%x, "
                       "%u bytes where %u were due)", b->parent, zc_kind_name(kind), got_kind,
                       len, total);
    return zc_recv_reply(b, kind, mine, all, bytes);
}

/* Sends every child the same note of kind (blobs of bytes each) and len bytes of payload. */
static zc_status zc_send_down(zc__boot *b, uint32_t kind, const uint8_t *payload, uint32_t len,
                              uint32_t bytes) {
    uint8_t note[ZC_NOTE_BYTES];
    zc_outcome o = {ZC_CODE_OK, b->rank, bytes, 0, b->rank};
    zc_note_put(note, kind, &o, len);
    for (uint32_t k = 0; k < b->kid_count; k++) {
        zc_plat_rc rc = zc_send_note(b->kids[k], note, payload, len, b->deadline_ns);
        if (rc != ZC_PLAT_OK) return zc_kid_failed(b, kind, k, rc);
    }
    return ZC_OK;
}

/* An exchange over the tree: each rank gathers its children's subtrees (in rank order) next to
 * its own blob, sends them up, and the whole table comes down and goes on to the children. Any
 * failure is told to every neighbour, which pass it on. bytes may be 0 (the ready wave). */
static zc_status zc_tree_exchange(zc__boot *b, uint32_t kind, const uint8_t *mine,
                                  uint8_t *all, uint32_t bytes) {
    zc_outcome o = {ZC_CODE_OK, b->rank, 0, 0, b->rank};
    uint32_t total = b->nranks * bytes;
    if (bytes) __builtin_memmove(all + (size_t)b->rank * bytes, mine, bytes);
    for (uint32_t k = 0; k < b->kid_count; k++) {
        zc_status st = zc_gather_kid(b, kind, k, all, 0, b->nranks, bytes, &o);
        if (st != ZC_OK) return zc_exchange_fail(b, kind, &o, st);
    }
    if (b->rank != 0) {
        zc_status st = zc_up_and_back(b, kind, mine, all, bytes, &o);
        if (st != ZC_OK) return zc_exchange_fail(b, kind, &o, st);
    }
    return zc_send_down(b, kind, all, total, bytes);
}

/* Streams out of step after a failure cannot be trusted again: a failed exchange closes b. */
static zc_status zc_exchange(zc__boot *b, uint32_t kind, const uint8_t *mine, uint8_t *all,
                             uint32_t bytes) {
    zc_status st = zc_tree_exchange(b, kind, mine, all, bytes);
    if (st != ZC_OK) zc__boot_close(b);
    return st;
}

/* Checks that b is open; the common entry of allgather and barrier. */
static zc_status zc_check_open(zc__boot *b, const char *call) {
    if (b->nranks < 1 || b->nranks > ZC_MAX_RANKS || b->rank >= b->nranks)
        return zc_fail(b, ZC_INVALID_STATE, "%s on a bootstrap that was never opened", call);
    if (!b->open)
        return zc_fail(b, ZC_INVALID_STATE, "%s on a bootstrap that is closed or failed to "
                       "open", call);
    return ZC_OK;
}

/* The blob arguments of allgather and the sparse exchange (call names which). */
static zc_status zc_check_blobs(zc__boot *b, const char *call, const void *mine,
                                const void *all, size_t bytes_each) {
    if (!mine || !all)
        return zc_fail(b, ZC_INVALID_ARG, "%s: %s is NULL", call, mine ? "all" : "mine");
    if (bytes_each < 1 || bytes_each > ZC_BOOT_MAX_BLOB ||
        (uint64_t)bytes_each * b->nranks > UINT32_MAX)
        return zc_fail(b, ZC_INVALID_ARG, "%s: bytes_each is %zu, must be 1..%u and %u ranks' "
                       "worth at most 4 GiB", call, bytes_each, ZC_BOOT_MAX_BLOB, b->nranks);
    return ZC_OK;
}

zc_status zc__boot_allgather(zc__boot *b, const void *mine, void *all, size_t bytes_each) {
    if (!b) return ZC_INVALID_ARG;
    zc_status st = zc_check_open(b, "allgather");
    if (st != ZC_OK) return st;
    st = zc_check_blobs(b, "allgather", mine, all, bytes_each);
    if (st != ZC_OK) return st;
    uint32_t bytes = (uint32_t)bytes_each;
    if (b->nranks == 1) {
        __builtin_memmove(all, mine, bytes);
        return ZC_OK;
    }
    return zc_exchange(b, ZC_KIND_ALLGATHER, (const uint8_t *)mine, (uint8_t *)all, bytes);
}

/* ---- the sparse exchange ----
 * In rounds of window ranks: round [lo, hi) moves the blobs of ranks lo..hi-1 only, in a
 * window of hi - lo blobs (rank u's at (u - lo) * bytes). Up the tree as allgather's (each
 * rank's subtree's blobs of the round); down, a parent sends each child only the blobs its
 * subtree needs from outside it, as (rank, blob) entries in rank order. need is symmetric, so
 * the parent finds them from the blobs it holds: u goes to child k when need(u) names a rank
 * of k's subtree and u lies outside it. A rank's needs lie in its subtree or in what its
 * parent sent it, so after the round it holds every blob of the round it needs. */

size_t zc__boot_sparse_bytes(uint32_t window, size_t bytes_each) {
    size_t win = ((size_t)window * bytes_each + 3u) & ~(size_t)3u;
    return win + (size_t)window * 4u + ((size_t)window + 7u) / 8u;
}

static void zc_bit_set(uint8_t *map, uint32_t i) { map[i >> 3] |= (uint8_t)(1u << (i & 7u)); }
static bool zc_bit(const uint8_t *map, uint32_t i) { return map[i >> 3] >> (i & 7u) & 1u; }

/* One round's state: its ranks [lo, hi), the window, each held blob's children (a bit per
 * child that gets it), which blobs came from the parent. */
typedef struct zc_round {
    uint32_t lo, hi, bytes;
    uint8_t *win;
    uint32_t *kids; /* [hi - lo] */
    uint8_t *got;   /* [(hi - lo + 7) / 8] */
} zc_round;

/* Child k's index among this rank's children for rank v of its subtree, else ZC_BOOT_KIDS. */
static uint32_t zc_kid_of(const zc__boot *b, uint32_t v) {
    if (v <= b->rank || v >= zc_subtree_end(b->rank, b->nranks)) return ZC_BOOT_KIDS;
    uint32_t k = 0;
    while (k + 1u < ZC_BOOT_KIDS && (uint64_t)b->rank + (2ull << k) <= v) k++;
    return k;
}

/* Marks, for every blob of the round this rank holds, the children whose subtrees need it
 * from outside; need() once per held blob. */
static void zc_mark_kids(const zc__boot *b, const zc_round *R, zc__boot_need need, void *ctx) {
    uint32_t set[ZC_BOOT_NEED_MAX], a, z;
    zc_span(b, b->rank, R->lo, R->hi, &a, &z);
    for (uint32_t u = R->lo; u < R->hi && b->kid_count; u++) {
        R->kids[u - R->lo] = 0;
        if ( ((u < a || u >= z) && !zc_bit(R->got, u - R->lo))) continue;
        uint32_t k = need(ctx, u, set, ZC_BOOT_NEED_MAX), home = zc_kid_of(b, u);
        for (uint32_t i = 0; i < k && i < ZC_BOOT_NEED_MAX; i++) {
            uint32_t j = zc_kid_of(b, set[i]);
            if (j < b->kid_count && j != home) R->kids[u - R->lo] |= 1u << j;
        }
    }
}

/* Sends child k the round's entries marked for it, staged. */
static zc_plat_rc zc_send_needs(zc__boot *b, uint32_t k, const zc_round *R) {
    uint32_t count = 0, bytes = R->bytes;
    for (uint32_t u = R->lo; u < R->hi; u++) count += R->kids[u - R->lo] >> k & 1u;
    uint8_t note[ZC_NOTE_BYTES], stage[ZC_STAGE_BYTES];
    zc_outcome o = {ZC_CODE_OK, b->rank, bytes, count, b->rank};
    zc_note_put(note, ZC_KIND_SPARSE, &o, count * (4u + bytes));
    zc_plat_rc rc = zc_plat_tcp_send_all(b->kids[k], note, sizeof note, b->deadline_ns);
    size_t held = 0;
    for (uint32_t u = R->lo; u < R->hi && rc == ZC_PLAT_OK; u++) {
        if (!(R->kids[u - R->lo] >> k & 1u)) continue;
        const uint8_t *blob = R->win + (size_t)(u - R->lo) * bytes;
        if (held + 4u + bytes > sizeof stage) {
            rc = zc_plat_tcp_send_all(b->kids[k], stage, held, b->deadline_ns);
            held = 0;
        }
        zc_put32(stage + held, u);
        if (4u + bytes <= sizeof stage) {
            __builtin_memcpy(stage + held + 4u, blob, bytes);
            held += 4u + bytes;
        } else if (rc == ZC_PLAT_OK) { /* a blob larger than the stage goes by itself */
            rc = zc_plat_tcp_send_all(b->kids[k], stage, 4u, b->deadline_ns);
            if (rc == ZC_PLAT_OK) rc = zc_plat_tcp_send_all(b->kids[k], blob, bytes,
                                                            b->deadline_ns);
        }
    }
    if (rc == ZC_PLAT_OK && held) rc = zc_plat_tcp_send_all(b->kids[k], stage, held,
                                                             b->deadline_ns);
    return rc;
}

/* Rank > 0: sends its subtree's blobs of the round up, then reads the entries its parent
 * sends (checked: ranks ascending, in the round, outside its subtree) into the window. */
static zc_status zc_sparse_up(zc__boot *b, const zc_round *R, zc_outcome *o) {
    uint32_t got_kind, len, a, z, bytes = R->bytes;
    zc_status st = zc_up_span(b, ZC_KIND_SPARSE, R->win, R->lo, R->hi, bytes, &got_kind, &len,
                              o);
    if (st != ZC_OK) return st;
    zc_span(b, b->rank, R->lo, R->hi, &a, &z);
    uint32_t count = o->expect, each = o->value;
    *o = (zc_outcome){ZC_CODE_FAILED, b->rank, 0, 0, b->rank};
    if (got_kind != ZC_KIND_SPARSE || each != bytes || count > (R->hi - R->lo) - (z - a) ||
        (uint64_t)count * (4u + bytes) != len)
        return zc_fail(b, ZC_MISMATCH, "rank %u answered the sparse exchange with a malformed "
                       "reply (kind 0x%x, %u entries in %u bytes)", b->parent, got_kind, count,
                       len);
    for (uint32_t i = 0, prev = 0; i < count; i++) {
        uint8_t head[4];
        zc_plat_rc rc = zc_plat_tcp_recv_all(b->up_sock, head, sizeof head, b->deadline_ns);
        if (rc != ZC_PLAT_OK) return zc_io_fail(b, rc, b->parent, ZC_KIND_SPARSE);
        uint32_t u = zc_get32(head);
        if (u < R->lo || u >= R->hi || (u >= a && u < z) || (i && u <= prev))
            return zc_fail(b, ZC_MISMATCH, "rank %u sent an entry for rank %u out of order or "
                           "place in the sparse exchange (round of ranks %u..%u)", b->parent,
                           u, R->lo, R->hi - 1u);
        prev = u;
        rc = zc_plat_tcp_recv_all(b->up_sock, R->win + (size_t)(u - R->lo) * bytes, bytes,
                                  b->deadline_ns);
        if (rc != ZC_PLAT_OK) return zc_io_fail(b, rc, b->parent, ZC_KIND_SPARSE);
        zc_bit_set(R->got, u - R->lo);
    }
    *o = (zc_outcome){ZC_CODE_OK, b->rank, 0, 0, b->rank};
    return ZC_OK;
}

/* One round: up, down, then this rank's own needs of the round copied from the window into
 * out (set[i]'s at i * bytes); *found counts them. */
static zc_status zc_sparse_round(zc__boot *b, const zc_round *R, const uint8_t *mine,
                                 zc__boot_need need, void *ctx, const uint32_t *set,
                                 uint32_t nset, uint8_t *out, uint32_t *found) {
    zc_outcome o = {ZC_CODE_OK, b->rank, 0, 0, b->rank};
    uint32_t a, z, bytes = R->bytes;
    __builtin_memset(R->got, 0, (R->hi - R->lo + 7u) / 8u);
    if (b->rank >= R->lo && b->rank < R->hi)
        __builtin_memmove(R->win + (size_t)(b->rank - R->lo) * bytes, mine, bytes);
    for (uint32_t k = 0; k < b->kid_count; k++) {
        zc_status st = zc_gather_kid(b, ZC_KIND_SPARSE, k, R->win, R->lo, R->hi, bytes, &o);
        if (st != ZC_OK) return zc_exchange_fail(b, ZC_KIND_SPARSE, &o, st);
    }
    if (b->rank != 0) {
        zc_status st = zc_sparse_up(b, R, &o);
        if (st != ZC_OK) return zc_exchange_fail(b, ZC_KIND_SPARSE, &o, st);
    }
    zc_mark_kids(b, R, need, ctx);
    for (uint32_t k = 0; k < b->kid_count; k++) {
        zc_plat_rc rc = zc_send_needs(b, k, R);
        if (rc != ZC_PLAT_OK) return zc_kid_failed(b, ZC_KIND_SPARSE, k, rc);
    }
    zc_span(b, b->rank, R->lo, R->hi, &a, &z);
    for (uint32_t i = 0; i < nset; i++) {
        uint32_t u = set[i];
        if (u < R->lo || u >= R->hi || ((u < a || u >= z) && !zc_bit(R->got, u - R->lo)))
            continue;
        __builtin_memmove(out + (size_t)i * bytes, R->win + (size_t)(u - R->lo) * bytes, bytes);
        (*found)++;
    }
    return ZC_OK;
}

zc_status zc__boot_sparse(zc__boot *b, const void *mine, void *out, size_t bytes_each,
                          zc__boot_need need, void *ctx, void *scratch, uint32_t window) {
    if (!b) return ZC_INVALID_ARG;
    zc_status st = zc_check_open(b, "sparse exchange");
    if (st != ZC_OK) return st;
    if (!need || !scratch || window < 1)
        return zc_fail(b, ZC_INVALID_ARG, "sparse exchange: need or scratch is NULL or the "
                       "window is 0 ranks");
    st = zc_check_blobs(b, "sparse exchange", mine, out, bytes_each);
    if (st != ZC_OK) return st;
    uint32_t set[ZC_BOOT_NEED_MAX], bytes = (uint32_t)bytes_each, found = 0;
    uint32_t nset = need(ctx, b->rank, set, ZC_BOOT_NEED_MAX);
    nset = nset < ZC_BOOT_NEED_MAX ? nset : ZC_BOOT_NEED_MAX;
    uint32_t w = window < b->nranks ? window : b->nranks;
    zc_round R = {0, 0, bytes, scratch, 0, 0};
    R.kids = (uint32_t *)(void *)((uint8_t *)scratch + (((size_t)w * bytes + 3u) & ~(size_t)3u));
    R.got = (uint8_t *)(R.kids + w);
    for (uint32_t lo = 0; lo < b->nranks && st == ZC_OK; lo += w) {
        R.lo = lo;
        R.hi = b->nranks - lo > w ? lo + w : b->nranks;
        st = zc_sparse_round(b, &R, mine, need, ctx, set, nset, out, &found);
    }
    if (st != ZC_OK) {
        zc__boot_close(b);
        return st;
    }
    if (found != nset)
        return zc_fail(b, ZC_MISMATCH, "sparse exchange: %u of the %u blobs rank %u needs "
                       "never reached it (its need names ranks that do not name it back)",
                       nset - found, nset, b->rank);
    return ZC_OK;
}

/* ---- reduce ----
 * Each rank folds its children's results into its own (child 0 first) and sends the result up;
 * rank 0's final one comes down the tree to every rank. */

/* Rank > 0: sends acc up and reads the result from its parent into acc. */
static zc_status zc_reduce_up(zc__boot *b, uint8_t *acc, uint32_t bytes, zc_outcome *o) {
    uint32_t got_kind, len;
    zc_status st = zc_up_note(b, ZC_KIND_REDUCE, acc, bytes, bytes, 0, &got_kind, &len, o);
    if (st != ZC_OK) return st;
    uint32_t each = o->value;
    *o = (zc_outcome){ZC_CODE_FAILED, b->rank, 0, 0, b->rank};
    if (got_kind != ZC_KIND_REDUCE || each != bytes || len != bytes)
        return zc_fail(b, ZC_MISMATCH, "rank %u answered reduce with a malformed reply (kind "
                       "0x%x, %u bytes where %u were due)", b->parent, got_kind, len, bytes);
    zc_plat_rc rc = zc_plat_tcp_recv_all(b->up_sock, acc, bytes, b->deadline_ns);
    if (rc != ZC_PLAT_OK) return zc_io_fail(b, rc, b->parent, ZC_KIND_REDUCE);
    *o = (zc_outcome){ZC_CODE_OK, b->rank, 0, 0, b->rank};
    return ZC_OK;
}

static zc_status zc_reduce_tree(zc__boot *b, uint8_t *acc, uint32_t bytes, zc__boot_fold fold,
                                void *ctx) {
    zc_outcome o = {ZC_CODE_OK, b->rank, 0, 0, b->rank};
    uint8_t theirs[ZC_BOOT_REDUCE_MAX];
    for (uint32_t k = 0; k < b->kid_count; k++) {
        zc_status st = zc_kid_note(b, ZC_KIND_REDUCE, k, 0, bytes, bytes, &o);
        zc_plat_rc rc = ZC_PLAT_OK;
        if (st == ZC_OK) rc = zc_plat_tcp_recv_all(b->kids[k], theirs, bytes, b->deadline_ns);
        if (st == ZC_OK && rc != ZC_PLAT_OK) {
            o = (zc_outcome){zc_rc_code(rc), b->rank + (1u << k), 0, 0, b->rank};
            st = zc_io_fail(b, rc, o.rank, ZC_KIND_REDUCE);
        }
        if (st != ZC_OK) return zc_exchange_fail(b, ZC_KIND_REDUCE, &o, st);
        fold(ctx, acc, theirs);
    }
    if (b->rank != 0) {
        zc_status st = zc_reduce_up(b, acc, bytes, &o);
        if (st != ZC_OK) return zc_exchange_fail(b, ZC_KIND_REDUCE, &o, st);
    }
    return zc_send_down(b, ZC_KIND_REDUCE, acc, bytes, bytes);
}

zc_status zc__boot_reduce(zc__boot *b, const void *mine, void *out, size_t bytes,
                          zc__boot_fold fold, void *ctx) {
    if (!b) return ZC_INVALID_ARG;
    zc_status st = zc_check_open(b, "reduce");
    if (st != ZC_OK) return st;
    if (!mine || !out || !fold || bytes < 1 || bytes > ZC_BOOT_REDUCE_MAX)
        return zc_fail(b, ZC_INVALID_ARG, "reduce: mine, out or fold is NULL or bytes is %zu "
                       "(1..%u)", bytes, ZC_BOOT_REDUCE_MAX);
    __builtin_memmove(out, mine, bytes);
    if (b->nranks == 1) return ZC_OK;
    st = zc_reduce_tree(b, (uint8_t *)out, (uint32_t)bytes, fold, ctx);
    if (st != ZC_OK) zc__boot_close(b);
    return st;
}

zc_status zc__boot_barrier(zc__boot *b) {
    if (!b) return ZC_INVALID_ARG;
    zc_status st = zc_check_open(b, "barrier");
    if (st != ZC_OK || b->nranks == 1) return st;
    return zc_exchange(b, ZC_KIND_BARRIER, NULL, NULL, 0); /* the wave, no payload */
}

/* Reads what has already arrived, then closes: a socket closed with unread bytes sends a
 * reset, which can destroy the failure note just sent to that peer before it reads it. */
static void zc_drain_close(int sock) {
    uint8_t sink[1024];
    for (unsigned i = 0; i < 64u; i++) { /* 64 KiB at most */
        size_t got = 0;
        if (zc_plat_tcp_recv_some(sock, sink, sizeof sink, &got) != ZC_PLAT_OK || got == 0)
            break;
    }
    zc_plat_tcp_close(sock);
}

void zc__boot_close(zc__boot *b) {
    if (!b) return;
    b->open = false;
    if (b->listen_sock >= 0) zc_plat_tcp_close(b->listen_sock);
    if (b->up_sock >= 0) zc_drain_close(b->up_sock);
    b->listen_sock = -1;
    b->up_sock = -1;
    (void)zc_close_pending(b);
    for (uint32_t k = 0; k < ZC_BOOT_KIDS; k++) {
        if (b->kids[k] >= 0) zc_drain_close(b->kids[k]);
        b->kids[k] = -1;
    }
}
