/* bootstrap.h: the init-time rendezvous over the platform's TCP. Rank 0 listens at the root
 * address; every other rank connects to it and both sides prove the job secret by a keyed
 * challenge-response (SipHash keyed by the 128-bit secret over fresh nonces), so a process
 * without the secret learns nothing and is dropped (it gets ZC_AUTH) without disturbing the
 * job. Then rank-sized blobs are all-gathered through rank 0. Used only inside zc_comm_init;
 * every call has the deadline given at open. State lives in the caller's zc__boot (on init's
 * stack); nothing is allocated. */
#ifndef ZC_CORE_BOOTSTRAP_H
#define ZC_CORE_BOOTSTRAP_H

#include "zcoll.h"

#define ZC_BOOT_MAX_BLOB 65536u /* ceiling of bytes_each in zc__boot_allgather */
#define ZC_BOOT_PENDING 32u     /* handshakes rank 0 runs at once */

/* Rank 0's view of one connection whose proof has not fully arrived. */
typedef struct zc__boot_pending {
    int sock;                /* -1: a free entry */
    uint32_t got;            /* proof bytes read so far */
    uint64_t deadline_ns;    /* this handshake's own deadline */
    uint8_t nonce_s[16];     /* the nonce rank 0 greeted it with */
    uint8_t proof[40];
} zc__boot_pending;

typedef struct zc__boot {
    uint32_t rank, nranks;
    uint64_t deadline_ns;            /* absolute zc_plat_now_ns() time every call must meet */
    uint8_t secret[ZC_SECRET_BYTES];
    int listen_sock;                 /* rank 0: the listening socket; -1 elsewhere */
    int root_sock;                   /* rank > 0: the connection to rank 0; -1 at rank 0 */
    int socks[ZC_MAX_RANKS];         /* rank 0: socks[r] is rank r's connection (r > 0) */
    zc__boot_pending pending[ZC_BOOT_PENDING]; /* rank 0: handshakes under way */
    uint32_t drops;                  /* rank 0: connections dropped so far */
    uint32_t drops_unlogged;         /* rank 0: of those, not logged one by one */
    uint64_t drops_logged_ns;        /* rank 0: when the last summary line was logged */
    char *err;                       /* where a failure's sentence goes (caller's buffer) */
    size_t err_cap;
} zc__boot;

/* Connects all ranks (collective; rank 0 accepts until every rank proved the secret, running
 * up to ZC_BOOT_PENDING handshakes at once, each with its own short deadline, and dropping
 * imposters with a rate-limited log line; then it tells every rank the outcome). Returns ZC_OK, ZC_AUTH (this
 * process failed to prove the secret or the root failed to prove it to us), ZC_TIMED_OUT,
 * ZC_MISMATCH (rank count or protocol version differ), ZC_PEER_LOST (rank 0 went away),
 * ZC_SYSTEM, ZC_UNSUPPORTED (from the platform) or ZC_INVALID_ARG (root_addr unusable, zero
 * deadline), each with a sentence in err. On failure every socket is closed. */
zc_status zc__boot_open(zc__boot *b, const zc_config *cfg, uint64_t deadline_ns, char *err,
                        size_t err_cap);
/* all[r * bytes_each .. ] = rank r's mine, on every rank (collective). bytes_each is the same
 * on every rank, 1..ZC_BOOT_MAX_BLOB; a rank sending a different size is ZC_MISMATCH. mine may
 * be this rank's own place in all. What it guarantees: this rank's own entry is what it sent
 * (checked as it arrives; a reply that differs is ZC_MISMATCH); the other entries are what
 * rank 0, which proved the secret, relayed (the stream after the handshake carries no tag). */
zc_status zc__boot_allgather(zc__boot *b, const void *mine, void *all, size_t bytes_each);
/* Returns once every rank has entered (collective). */
zc_status zc__boot_barrier(zc__boot *b);
/* Closes every socket. Safe to call twice. */
void zc__boot_close(zc__boot *b);

/* SipHash-2-4 with a 128-bit key, 64-bit output (exposed for tests). */
uint64_t zc__siphash(const uint8_t key[16], const void *data, size_t bytes);

#endif
