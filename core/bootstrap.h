/* bootstrap.h: the init-time rendezvous over the platform's TCP. Rank 0 listens at the root
 * address; every other rank connects to it and both sides prove the job secret by a keyed
 * challenge-response (SipHash keyed by the 128-bit secret over fresh nonces), so a process
 * without the secret learns nothing and is dropped (it gets ZC_AUTH) without disturbing the
 * job. Ranks then form a binomial tree (each proving the secret to its parent and the parent to
 * it) and rank-sized blobs are all-gathered over it. Used only inside zc_comm_init;
 * every call has the deadline given at open. State lives in the caller's zc__boot (init keeps
 * it in the arena's scratch) and, at rank 0, a table of nranks words the caller gives;
 * nothing is allocated. */
#ifndef ZC_CORE_BOOTSTRAP_H
#define ZC_CORE_BOOTSTRAP_H

#include "zcoll.h"

#define ZC_BOOT_MAX_BLOB 65536u /* ceiling of bytes_each in zc__boot_allgather */
#define ZC_BOOT_PENDING 32u     /* handshakes a listening rank runs at once */
#define ZC_BOOT_KIDS 32u        /* children a rank can have in the tree (ranks < 2^32) */

/* A listening rank's view of one connection it has not finished with: a handshake whose proof
 * has not fully arrived, or (rank 0) an admitted rank whose address note or parent is due. */
typedef struct zc__boot_pending {
    int sock;                /* -1: a free entry */
    uint32_t state;          /* what is due: the proof, the address note, the parent */
    uint32_t got;            /* bytes of it read so far */
    uint32_t rank;           /* the rank it proved (admitted states) */
    uint64_t deadline_ns;    /* this handshake's own deadline */
    uint8_t nonce_s[16];     /* the nonce it was greeted with */
    uint8_t proof[40];       /* the proof, then the address note */
} zc__boot_pending;

typedef struct zc__boot {
    uint32_t rank, nranks;
    uint64_t deadline_ns;            /* absolute zc_plat_now_ns() time every call must meet */
    uint8_t secret[ZC_SECRET_BYTES];
    bool open;                       /* the tree is connected and no call failed */
    int listen_sock;                 /* rank 0: the root address; others: their own
                                        ephemeral port while children join; -1 otherwise */
    int up_sock;                     /* rank > 0: to rank 0 while joining, then to its parent */
    uint32_t parent;                 /* rank > 0: rank - lowbit(rank) */
    uint32_t kid_count;              /* children: rank + 2^k for k < kid_count */
    int kids[ZC_BOOT_KIDS];          /* kids[k]: child rank + 2^k's connection */
    uint32_t listen_ip;              /* where this rank's children reach it (IPv4, port) */
    uint16_t listen_port;
    uint32_t up_got;                 /* bytes of a note from the parent read while serving */
    uint8_t up_note[24];
    zc__boot_pending pending[ZC_BOOT_PENDING]; /* handshakes under way (listening ranks) */
    uint32_t drops;                  /* connections dropped so far */
    uint32_t drops_unlogged;         /* of those, not logged one by one */
    uint64_t drops_logged_ns;        /* when the last summary line was logged */
    uint64_t *where;                 /* rank 0: [nranks] rank r's listen address and join
                                        state (the caller's table) */
    char *err;                       /* where a failure's sentence goes (caller's buffer) */
    size_t err_cap;
} zc__boot;

/* Connects all ranks into a binomial tree (collective). Rank 0 admits every rank: it accepts
 * until every rank proved the secret (and it proved the secret back), running up to
 * ZC_BOOT_PENDING handshakes at once, each with its own short deadline, and dropping imposters
 * with a rate-limited log line. A rank with children listens on an ephemeral port at the
 * address it reached rank 0 from and tells rank 0; rank 0 answers each rank with its parent's
 * address (rank - lowbit(rank)) once that parent joined and closes the connection unless it is
 * the parent itself. Each rank then connects to its parent, both proving the secret again, and
 * admits its own children the same way; a wave up and down the tree says everyone is in. So no
 * rank holds more than ZC_BOOT_PENDING + log2(nranks) + 2 sockets. Returns ZC_OK, ZC_AUTH (this
 * process failed to prove the secret or a listener failed to prove it to us), ZC_TIMED_OUT,
 * ZC_MISMATCH (rank count or protocol version differ), ZC_PEER_LOST (a rank went away, named),
 * ZC_SYSTEM, ZC_UNSUPPORTED (from the platform: it cannot report the local address or listen)
 * or ZC_INVALID_ARG (root_addr unusable, zero deadline, where NULL at rank 0), each with a
 * sentence in err. where: rank 0 keeps every rank's address and join state there (nranks
 * words, valid until close); other ranks may pass NULL. On failure every socket is closed. */
zc_status zc__boot_open(zc__boot *b, const zc_config *cfg, uint64_t *where, uint64_t deadline_ns,
                        char *err, size_t err_cap);
/* all[r * bytes_each .. ] = rank r's mine, on every rank (collective): gathered up the tree,
 * the whole table sent down. bytes_each is the same on every rank, 1..ZC_BOOT_MAX_BLOB, and
 * nranks * bytes_each at most UINT32_MAX; a rank
 * sending a different size is ZC_MISMATCH. mine may be this rank's own place in all. What it
 * guarantees: this rank's own entry is what it sent (checked as it arrives; a reply that
 * differs is ZC_MISMATCH); every other entry was relayed only by ranks that proved the secret
 * (to rank 0 or to their parent), unchanged as far as they are honest (the stream after the
 * handshake carries no tag). */
zc_status zc__boot_allgather(zc__boot *b, const void *mine, void *all, size_t bytes_each);
/* The ranks whose blobs rank r needs (its connections), at most cap of them, into out;
 * returns how many. The same function of r on every rank, and symmetric: u is among r's iff r
 * is among u's. */
#define ZC_BOOT_NEED_MAX 256u
typedef uint32_t (*zc__boot_need)(void *ctx, uint32_t r, uint32_t *out, uint32_t cap);
/* Bytes of the sparse exchange's scratch for a window of window ranks of bytes_each blobs: the
 * window, 4 bytes per rank of it (which children get each blob) and a bit per rank. */
size_t zc__boot_sparse_bytes(uint32_t window, size_t bytes_each);
/* A sparse all-gather (collective): rank r's mine (bytes_each, as allgather's) reaches only the
 * ranks that need it (need(ctx, q, ...) names r) and the ranks between them in the bootstrap
 * tree. On return out[i * bytes_each ..] holds the blob of the i-th rank need(ctx, this rank)
 * names (mine may be this rank's own entry there). It runs in rounds of window ranks (the
 * last may be shorter): a round moves the blobs of its ranks only, up the tree to each
 * subtree's root and down only to the children whose subtrees need them from outside, so a
 * rank holds at most window blobs at a time in scratch (zc__boot_sparse_bytes(window,
 * bytes_each) bytes, 4-byte aligned) and out; every blob travels at most 2 log2 n hops.
 * Failures as allgather's (the window must be the same on every rank: a rank whose round
 * differs is ZC_MISMATCH); a need that is not symmetric leaves some blob out, ZC_MISMATCH
 * with b still open (every rank finished the exchange). */
zc_status zc__boot_sparse(zc__boot *b, const void *mine, void *out, size_t bytes_each,
                          zc__boot_need need, void *ctx, void *scratch, uint32_t window);
/* Folds in (another rank's or subtree's result, bytes as reduce's) into acc; associative, so the
 * tree's order of folding gives what every rank agrees on. */
#define ZC_BOOT_REDUCE_MAX 256u
typedef void (*zc__boot_fold)(void *ctx, void *acc, const void *in);
/* A reduce to every rank (collective): out = every rank's mine folded together, on every rank;
 * each rank sends and receives bytes (1..ZC_BOOT_REDUCE_MAX, the same on every rank: a
 * different size is ZC_MISMATCH) per tree neighbour. Failures as allgather's. */
zc_status zc__boot_reduce(zc__boot *b, const void *mine, void *out, size_t bytes,
                          zc__boot_fold fold, void *ctx);
/* Returns once every rank has entered (collective). */
zc_status zc__boot_barrier(zc__boot *b);
/* Closes every socket. Safe to call twice. */
void zc__boot_close(zc__boot *b);

/* SipHash-2-4 with a 128-bit key, 64-bit output (exposed for tests). */
uint64_t zc__siphash(const uint8_t key[16], const void *data, size_t bytes);

#endif
