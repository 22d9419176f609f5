/* fake_plat.h: the platform a fuzz target runs zcoll on. It installs freestanding hooks
 * (platform/freestanding.c) that serve everything from memory: a clock that advances 1 ms per
 * read (so every deadline passes after a bounded number of calls), deterministic randomness,
 * an environment from a table, and scripted TCP: the bytes a peer "sends" come from a buffer
 * the target fills (from the fuzz input), and what zcoll sends is recorded. Nothing touches
 * the OS, so one input runs in microseconds and the same input always runs the same way. */
#ifndef ZC_FAKE_PLAT_H
#define ZC_FAKE_PLAT_H

#include <stddef.h>
#include <stdint.h>

#define FP_MAX_ENV 32
#define FP_SOCK 10 /* the one scripted connection's socket number */

typedef struct fp_state {
    /* environment: names[i]=values[i], NUL-terminated, pointing into env_store */
    const char *names[FP_MAX_ENV], *values[FP_MAX_ENV];
    uint32_t nenv;
    char env_store[4096];
    /* what the peer sends: in[0..in_len), read from in_at on */
    const uint8_t *in;
    size_t in_len, in_at;
    /* what zcoll sent on the connection (the last 4096 bytes), and how much in all */
    uint8_t out[4096];
    size_t out_len, out_total;
    uint32_t accepts;    /* connections accept has handed out */
    uint64_t clock_ns;
    uint64_t rand_ctr;
    /* Called before each recv with the state, so a target can script a reply that depends
     * on what zcoll sent (a handshake); may be NULL. */
    void (*before_recv)(struct fp_state *st);
} fp_state;

/* Installs the hooks over st (zeroed here) and returns it. */
fp_state *fp_install(void);
/* Fills the environment table from "NAME=VALUE\n" lines of data (at most FP_MAX_ENV). */
void fp_set_env(fp_state *st, const uint8_t *data, size_t len);

#endif
