/* fuzz_boot.c: the bootstrap (core/bootstrap.c) against a peer that sends anything. The first
 * input byte picks the setting: bit 0 the side zcoll plays (0: rank 0 facing a client; 1: a
 * client facing rank 0), bit 1 whether the harness first plays an honest handshake (proof or
 * greeting and verdict with the right tags, computed from what zcoll sent), so that the rest
 * of the input reaches the notes of the rendezvous, allgather and barrier; bits 2..3 the rank
 * count for a client (2..5). The rest is what the peer sends. Every run must end in a status
 * with a sentence (or ZC_OK with the right allgather result), never a crash or a hang. */
#include "fake_plat.h"

#include "bootstrap.h"
#include "zcoll.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static const uint8_t fz_secret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static uint8_t fz_script[8192];
static const uint8_t *fz_rest;
static size_t fz_rest_len;
static int fz_side, fz_scripted;
static uint32_t fz_rank, fz_nranks;

static void fz_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The tag of either side, as bootstrap.c's header defines it. */
static void fz_tag(const char *label, const uint8_t *n1, const uint8_t *n2, const uint32_t *w,
                   int nw, uint8_t *tag) {
    uint8_t msg[6 + 32 + 12];
    memcpy(msg, label, 6);
    memcpy(msg + 6, n1, 16);
    memcpy(msg + 22, n2, 16);
    for (int i = 0; i < nw; i++) fz_put32(msg + 38 + 4 * i, w[i]);
    uint64_t t = zc__siphash(fz_secret, msg, (size_t)(38 + 4 * nw));
    for (int i = 0; i < 8; i++) tag[i] = (uint8_t)(t >> (8 * i));
}

/* Appends the fuzz bytes after len scripted ones and serves them. */
static void fz_serve(fp_state *st, size_t len) {
    size_t rest = fz_rest_len < sizeof fz_script - len ? fz_rest_len : sizeof fz_script - len;
    memcpy(fz_script + len, fz_rest, rest);
    st->in = fz_script;
    st->in_len = len + rest;
}

/* Plays the honest half of the handshake once zcoll's own message is there. */
static void fz_before_recv(fp_state *st) {
    if (fz_scripted) return;
    static const uint8_t nonce_peer[16] = {0xa5, 0x5a, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 9};
    if (fz_side == 0 && st->out_total >= 24) { /* rank 0 greeted: prove rank 1 */
        const uint8_t *nonce_s = st->out + 8;
        uint32_t claim[2] = {1, 2};
        memcpy(fz_script, "ZCB1", 4);
        fz_put32(fz_script + 4, 2); /* protocol version */
        fz_put32(fz_script + 8, 1);
        fz_put32(fz_script + 12, 2);
        memcpy(fz_script + 16, nonce_peer, 16);
        fz_tag("client", nonce_s, nonce_peer, claim, 2, fz_script + 32);
        fz_serve(st, 40);
        fz_scripted = 1;
    } else if (fz_side == 1 && st->out_total >= 40) { /* the client proved: verdict OK */
        const uint8_t *nonce_c = st->out + 16;
        uint32_t said[3] = {fz_rank, 0, fz_nranks};
        memmove(fz_script, fz_script, 24); /* the greeting already served stays first */
        fz_put32(fz_script + 24, 0);
        fz_put32(fz_script + 28, fz_nranks);
        fz_tag("server", nonce_c, nonce_peer, said, 3, fz_script + 32);
        st->in_at = 24;
        fz_serve(st, 40);
        fz_scripted = 1;
    } else if (fz_side == 1 && st->in_len == 0) { /* the greeting, before the proof */
        memcpy(fz_script, "ZCB1", 4);
        fz_put32(fz_script + 4, 2); /* protocol version */
        memcpy(fz_script + 8, nonce_peer, 16);
        st->in = fz_script;
        st->in_len = 24;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
    if (len < 1) return 0;
    fp_state *st = fp_install();
    fz_side = data[0] & 1;
    int honest = (data[0] >> 1) & 1;
    fz_nranks = fz_side ? 2u + ((data[0] >> 2) & 3u) : 2u;
    fz_rank = fz_side ? 1u + (uint32_t)(data[0] >> 4) % (fz_nranks - 1u) : 0u;
    fz_rest = data + 1;
    fz_rest_len = len - 1;
    fz_scripted = 0;
    if (honest) {
        st->before_recv = fz_before_recv;
    } else {
        st->in = fz_rest;
        st->in_len = fz_rest_len;
    }
    zc_config cfg;
    zc_config_default(&cfg);
    cfg.rank = fz_rank;
    cfg.nranks = fz_nranks;
    memcpy(cfg.root_addr, "127.0.0.1:5000", 15);
    memcpy(cfg.secret, fz_secret, sizeof fz_secret);
    cfg.secret_set = true;
    static zc__boot b;
    static uint64_t where[8]; /* rank 0's table: fz_nranks is at most 8 */
    char err[256];
    zc_status s = zc__boot_open(&b, &cfg, where, st->clock_ns + 1000000000ull, err, sizeof err);
    if (s == ZC_OK) {
        uint64_t mine = 0x1111111111111111ull * (fz_rank + 1u), all[8] = {0};
        s = zc__boot_allgather(&b, &mine, all, sizeof mine);
        if (s == ZC_OK && all[fz_rank] != mine) abort();
        if (s == ZC_OK) s = zc__boot_barrier(&b);
        zc__boot_close(&b);
    }
    if (strnlen(err, sizeof err) == sizeof err) abort();
    if (s != ZC_OK && err[0] == '\0') abort(); /* every failure has its sentence */
    return 0;
}
