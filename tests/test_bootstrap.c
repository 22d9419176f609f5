/* test_bootstrap.c: the init-time rendezvous (core/bootstrap.c): SipHash against the paper's
 * vectors, argument checks, the single-rank shortcut, allgather, the sparse exchange and
 * barrier across real processes under zcrun, imposters (wrong secret, silent, garbage) that must not disturb the
 * job, a fake rank 0 that checks the documented wire format byte by byte and one without the
 * secret, deadlines, and every ZC_MISMATCH / ZC_PEER_LOST a rank can cause. Loopback only. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "zt.h"

#include "../core/bootstrap.h"
#include "../core/config.h"
#include "platform.h"
#include "zcoll.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* Rank 0's bootstrap table (the addresses and join state of every rank) for the tests that
 * open the bootstrap without an arena; one per process, as each rank is a process. */
static uint64_t zt_where[1024];

#define ZT_MS 1000000ull

/* ---- helpers ---- */

static uint64_t zt_ms_since(uint64_t t0_ns) { return (zc_plat_now_ns() - t0_ns) / ZT_MS; }

static void zt_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t zt_get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void zt_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t zt_get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The rank program's config: zcrun's environment, as an application would read it. */
static void zt_boot_cfg(zc_config *cfg) {
    zc_config_default(cfg);
    zc_status st = zc_config_from_env(cfg);
    if (st != ZC_OK) printf("config_from_env: %s\n", cfg->error_text);
    ZT_CHECK_ST(st, ZC_OK);
}

/* Counts the occurrences of needle in hay. */
static unsigned zt_count(const char *hay, const char *needle) {
    unsigned n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Runs a rank program under zcrun; prints its output when the result is not the expected. */
static void zt_boot_job(uint32_t nranks, const char *fn, uint32_t timeout_s, const char *env0,
                        char *out, size_t cap) {
    const char *env[] = {env0, NULL};
    int rc = zt_run_ranks(nranks, fn, timeout_s, env0 ? env : NULL, out, cap);
    if (rc != 0) printf("---- %s x%u output:\n%s\n----\n", fn, nranks, out);
    ZT_CHECK_EQ(rc, 0);
}

/* A local TCP port that nobody listens on (it was free a moment ago). */
static uint16_t zt_closed_port(void) {
    int s = -1;
    uint16_t port = 0;
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &s, &port), ZC_PLAT_OK);
    zc_plat_tcp_close(s);
    ZT_CHECK(port != 0);
    return port;
}

/* A two-rank config for rank 1 at 127.0.0.1:port with the secret 00 01 .. 0f. */
static void zt_client_cfg(zc_config *cfg, uint16_t port) {
    zc_config_default(cfg);
    cfg->nranks = 2;
    cfg->rank = 1;
    snprintf(cfg->root_addr, sizeof cfg->root_addr, "127.0.0.1:%u", (unsigned)port);
    for (uint8_t i = 0; i < 16; i++) cfg->secret[i] = i;
    cfg->secret_set = true;
}

/* ---- SipHash ---- */

void siphash_matches_reference_vectors(void) {
    /* SipHash-2-4, key 00 01 .. 0f, message 00 01 .. (len-1): the 64-bit outputs of the
     * paper's test vectors (len 0 is 0x726fdb47dd0e0e31, len 15 is 0xa129ca6149be45e5, the
     * paper's Appendix A example); computed again by an independent implementation. */
    static const struct {
        size_t len;
        uint64_t want;
    } v[] = {
        {0, 0x726fdb47dd0e0e31ull},  {1, 0x74f839c593dc67fdull},  {2, 0x0d6c8009d9a94f5aull},
        {3, 0x85676696d7fb7e2dull},  {4, 0xcf2794e0277187b7ull},  {5, 0x18765564cd99a68dull},
        {6, 0xcbc9466e58fee3ceull},  {7, 0xab0200f58b01d137ull},  {8, 0x93f5f5799a932462ull},
        {9, 0x9e0082df0ba9e4b0ull},  {10, 0x7a5dbbc594ddb9f3ull}, {11, 0xf4b32f46226bada7ull},
        {12, 0x751e8fbc860ee5fbull}, {13, 0x14ea5627c0843d90ull}, {14, 0xf723ca908e7af2eeull},
        {15, 0xa129ca6149be45e5ull}, {16, 0x3f2acc7f57c29bdbull}, {17, 0x699ae9f52cbe4794ull},
        {31, 0x32d892fad841c342ull}, {63, 0x958a324ceb064572ull},
    };
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++) key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++) msg[i] = (uint8_t)i;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint64_t got = zc__siphash(key, msg, v[i].len);
        if (got != v[i].want)
            printf("    len %zu: got 0x%016llx want 0x%016llx\n", v[i].len,
                   (unsigned long long)got, (unsigned long long)v[i].want);
        ZT_CHECK(got == v[i].want);
    }
    /* One key bit or one message bit changes the tag. */
    uint64_t base = zc__siphash(key, msg, 15);
    key[7] ^= 0x10;
    ZT_CHECK(zc__siphash(key, msg, 15) != base);
    key[7] ^= 0x10;
    msg[3] ^= 1;
    ZT_CHECK(zc__siphash(key, msg, 15) != base);
}

/* ---- in-process checks ---- */

void boot_single_rank_opens_no_socket_and_copies(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    zc_config_default(&cfg);
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, zt_where, zc_plat_now_ns() + 1000 * ZT_MS, err,
                              sizeof err),
                ZC_OK);
    ZT_CHECK_EQ(b.listen_sock, -1);
    ZT_CHECK_EQ(b.up_sock, -1);
    uint8_t mine[5] = {1, 2, 3, 4, 5}, all[5] = {0};
    ZT_CHECK_ST(zc__boot_allgather(&b, mine, all, sizeof mine), ZC_OK);
    ZT_CHECK(memcmp(all, mine, sizeof mine) == 0);
    ZT_CHECK_ST(zc__boot_allgather(&b, all, all, sizeof all), ZC_OK); /* in place */
    ZT_CHECK(memcmp(all, mine, sizeof mine) == 0);
    ZT_CHECK_ST(zc__boot_barrier(&b), ZC_OK);
    zc__boot_close(&b);
    zc__boot_close(&b); /* twice is fine */
    ZT_CHECK_EQ(b.listen_sock, -1);
}

void boot_rejects_invalid_arguments_with_a_sentence(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    uint64_t later = zc_plat_now_ns() + 1000 * ZT_MS;
    ZT_CHECK_ST(zc__boot_open(NULL, &cfg, zt_where, later, err, sizeof err), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "NULL") != NULL);
    ZT_CHECK_ST(zc__boot_open(&b, NULL, zt_where, later, err, sizeof err), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "cfg") != NULL);

    zc_config_default(&cfg);
    cfg.rank = 1; /* of 1 */
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, zt_where, later, err, sizeof err), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "rank") != NULL);
    zc_config_default(&cfg);
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, zt_where, 0, err, sizeof err), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "deadline") != NULL);
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, NULL, later, err, sizeof err), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "where is NULL") != NULL);

    zt_client_cfg(&cfg, 4242);
    cfg.secret_set = false;
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, zt_where, later, err, sizeof err), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "secret") != NULL);
    /* A bootstrap whose open failed is closed: its calls say so instead of hanging. */
    uint8_t one = 1, all[2];
    ZT_CHECK_ST(zc__boot_allgather(&b, &one, all, 1), ZC_INVALID_STATE);
    ZT_CHECK(strstr(err, "closed") != NULL);
    ZT_CHECK_ST(zc__boot_barrier(&b), ZC_INVALID_STATE);

    zt_client_cfg(&cfg, 4242);
    snprintf(cfg.root_addr, sizeof cfg.root_addr, "127.0.0.1");
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, zt_where, later, err, sizeof err), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "root_addr") != NULL);

    /* allgather's own arguments, on an open single-rank bootstrap. */
    zc_config_default(&cfg);
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, zt_where, later, err, sizeof err), ZC_OK);
    static uint8_t big[ZC_BOOT_MAX_BLOB + 1], big_all[ZC_BOOT_MAX_BLOB + 1];
    ZT_CHECK_ST(zc__boot_allgather(&b, big, big_all, 0), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "bytes_each") != NULL);
    ZT_CHECK_ST(zc__boot_allgather(&b, big, big_all, ZC_BOOT_MAX_BLOB + 1), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc__boot_allgather(&b, big, big_all, ZC_BOOT_MAX_BLOB), ZC_OK);
    ZT_CHECK_ST(zc__boot_allgather(&b, NULL, big_all, 1), ZC_INVALID_ARG);
    ZT_CHECK(strstr(err, "mine") != NULL);
    ZT_CHECK_ST(zc__boot_allgather(&b, big, NULL, 1), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc__boot_allgather(NULL, big, big_all, 1), ZC_INVALID_ARG);
    ZT_CHECK_ST(zc__boot_barrier(NULL), ZC_INVALID_ARG);
    zc__boot_close(&b);
    zc__boot_close(NULL);

    /* A tiny error buffer is never overrun. */
    char tiny[4] = {'x', 'x', 'x', 'x'};
    ZT_CHECK_ST(zc__boot_open(&b, NULL, zt_where, later, tiny, 3), ZC_INVALID_ARG);
    ZT_CHECK(tiny[2] == '\0' && tiny[3] == 'x');
}

void boot_connect_times_out_without_root(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    zt_client_cfg(&cfg, zt_closed_port());
    uint64_t t0 = zc_plat_now_ns();
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, zt_where, t0 + 400 * ZT_MS, err, sizeof err),
                ZC_TIMED_OUT);
    uint64_t ms = zt_ms_since(t0);
    printf("    %s (%llu ms)\n", err, (unsigned long long)ms);
    ZT_CHECK(ms >= 400 && ms <= 1500);
    ZT_CHECK(strstr(err, "timed out") != NULL);
    ZT_CHECK(strstr(err, cfg.root_addr) != NULL);
    ZT_CHECK(strstr(err, "refused") != NULL);
    ZT_CHECK_EQ(b.up_sock, -1);
}

/* ---- a fake rank 0, written from the protocol comment, against the real client ---- */

typedef struct zt_fake_root {
    int listen_sock, sock;
    uint16_t port;
    uint8_t nonce_s[16], nonce_c[16];
    uint32_t rank, nranks;
    bool proof_ok; /* tag_c verified with the real secret */
} zt_fake_root;

/* Starts a client process: rank 1 of 2 opening against the fake root, which exits 0 when
 * zc__boot_open returned want and its sentence contains needle. */
static pid_t zt_start_client(uint16_t port, zc_status want, const char *needle) {
    pid_t pid = fork();
    ZT_CHECK(pid >= 0);
    if (pid > 0) return pid;
    zc_config cfg;
    zc__boot b;
    char err[256] = "";
    zt_client_cfg(&cfg, port);
    zc_status st = zc__boot_open(&b, &cfg, zt_where, zc_plat_now_ns() + 5000 * ZT_MS, err,
                                 sizeof err);
    printf("    client: %s: %s\n", zc_status_name(st), err);
    fflush(stdout);
    zc__boot_close(&b);
    _exit(st == want && strstr(err, needle) ? 0 : 1);
}

/* Accepts the client, greets it and reads its proof, checking every field. */
static void zt_fake_handshake(zt_fake_root *f, const uint8_t secret[16]) {
    uint64_t deadline = zc_plat_now_ns() + 5000 * ZT_MS;
    uint8_t hello[24], proof[40], msg[46];
    ZT_CHECK_ST(zc_plat_tcp_accept(f->listen_sock, deadline, &f->sock), ZC_PLAT_OK);
    memcpy(hello, "ZCB1", 4);
    zt_put32(hello + 4, 2);
    for (int i = 0; i < 16; i++) f->nonce_s[i] = (uint8_t)(0xa0 + i);
    memcpy(hello + 8, f->nonce_s, 16);
    ZT_CHECK_ST(zc_plat_tcp_send_all(f->sock, hello, sizeof hello, deadline), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_tcp_recv_all(f->sock, proof, sizeof proof, deadline), ZC_PLAT_OK);
    ZT_CHECK(memcmp(proof, "ZCB1", 4) == 0);
    ZT_CHECK_EQ(zt_get32(proof + 4), 2);
    f->rank = zt_get32(proof + 8);
    f->nranks = zt_get32(proof + 12);
    memcpy(f->nonce_c, proof + 16, 16);
    memcpy(msg, "client", 6);
    memcpy(msg + 6, f->nonce_s, 16);
    memcpy(msg + 22, f->nonce_c, 16);
    zt_put32(msg + 38, f->rank);
    zt_put32(msg + 42, f->nranks);
    f->proof_ok = zc__siphash(secret, msg, sizeof msg) == zt_get64(proof + 32);
}

/* Sends the verdict {code, value, SipHash(key, "server" nonce_c nonce_s rank code value)}. */
static void zt_fake_verdict(zt_fake_root *f, const uint8_t key[16], uint32_t code,
                            uint32_t value) {
    uint8_t v[16], msg[50];
    memcpy(msg, "server", 6);
    memcpy(msg + 6, f->nonce_c, 16);
    memcpy(msg + 22, f->nonce_s, 16);
    zt_put32(msg + 38, f->rank);
    zt_put32(msg + 42, code);
    zt_put32(msg + 46, value);
    zt_put32(v, code);
    zt_put32(v + 4, value);
    zt_put64(v + 8, zc__siphash(key, msg, sizeof msg));
    ZT_CHECK_ST(zc_plat_tcp_send_all(f->sock, v, sizeof v, zc_plat_now_ns() + 1000 * ZT_MS),
                ZC_PLAT_OK);
}

/* Reads the client's note of kind `got` (code OK, rank 1, the u32 at byte `zero` 0) and
 * answers with a note of kind `reply`, every other field 0. */
static void zt_fake_answer(zt_fake_root *f, const char *got, uint32_t zero, const char *reply) {
    uint64_t deadline = zc_plat_now_ns() + 2000 * ZT_MS;
    uint8_t note[24];
    ZT_CHECK_ST(zc_plat_tcp_recv_all(f->sock, note, sizeof note, deadline), ZC_PLAT_OK);
    ZT_CHECK(memcmp(note, got, 4) == 0);
    ZT_CHECK_EQ(zt_get32(note + 4), 0);
    ZT_CHECK_EQ(zt_get32(note + 8), 1);
    ZT_CHECK_EQ(zt_get32(note + zero), 0);
    memset(note, 0, sizeof note);
    memcpy(note, reply, 4);
    ZT_CHECK_ST(zc_plat_tcp_send_all(f->sock, note, sizeof note, deadline), ZC_PLAT_OK);
}

/* After the verdict: the client's address note (rank 1 of 2 has no children: port 0) gets
 * rank 0 named as its parent (this connection); then the ready wave: the client's note up
 * {ZCRY, OK, rank 1, 0 bytes each, 0, 0}, rank 0's note down {ZCRY, OK, 0, 0, 0, 0}. */
static void zt_fake_place(zt_fake_root *f) {
    zt_fake_answer(f, "ZCAD", 12, "ZCPA");
    zt_fake_answer(f, "ZCRY", 20, "ZCRY");
}

static int zt_wait_exit(pid_t pid) {
    int status = 0;
    ZT_CHECK(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void zt_fake_listen(zt_fake_root *f) {
    memset(f, 0, sizeof *f);
    f->sock = -1;
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &f->listen_sock, &f->port), ZC_PLAT_OK);
}

void boot_handshake_follows_documented_wire_format(void) {
    zt_fake_root f;
    uint8_t secret[16];
    for (uint8_t i = 0; i < 16; i++) secret[i] = i;
    zt_fake_listen(&f);
    pid_t pid = zt_start_client(f.port, ZC_OK, "");
    zt_fake_handshake(&f, secret);
    ZT_CHECK_EQ(f.rank, 1);
    ZT_CHECK_EQ(f.nranks, 2);
    ZT_CHECK(f.proof_ok);
    zt_fake_verdict(&f, secret, 0, 2);
    zt_fake_place(&f);
    ZT_CHECK_EQ(zt_wait_exit(pid), 0);
    zc_plat_tcp_close(f.sock);
    zc_plat_tcp_close(f.listen_sock);
}

/* Rank 3 of 4 (its parent is rank 2) admitted by the fake root, which names as the parent a
 * listener that answers the connection with a failure note instead of a greeting (a parent
 * that failed before it served its children tells them so): the child fails with the
 * parent's failure (ZC_PEER_LOST naming the rank that found it), not "bad greeting". */
void boot_child_reports_its_parents_failure_note(void) {
    zt_fake_root f;
    uint8_t secret[16];
    for (uint8_t i = 0; i < 16; i++) secret[i] = i;
    zt_fake_listen(&f);
    int parent_listen = -1, parent_sock = -1;
    uint16_t parent_port = 0;
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &parent_listen, &parent_port), ZC_PLAT_OK);
    pid_t pid = fork();
    ZT_CHECK(pid >= 0);
    if (pid == 0) {
        zc_config cfg;
        zc__boot b;
        char err[256] = "";
        zt_client_cfg(&cfg, f.port);
        cfg.rank = 3;
        cfg.nranks = 4;
        zc_status st = zc__boot_open(&b, &cfg, zt_where, zc_plat_now_ns() + 5000 * ZT_MS, err,
                                     sizeof err);
        printf("    rank 3: %s: %s\n", zc_status_name(st), err);
        fflush(stdout);
        zc__boot_close(&b);
        _exit(st == ZC_PEER_LOST && strstr(err, "rank 2 failed during the rendezvous") ? 0 : 1);
    }
    zt_fake_handshake(&f, secret);
    ZT_CHECK_EQ(f.rank, 3);
    zt_fake_verdict(&f, secret, 0, 4);
    uint64_t deadline = zc_plat_now_ns() + 2000 * ZT_MS;
    uint8_t note[24];
    ZT_CHECK_ST(zc_plat_tcp_recv_all(f.sock, note, sizeof note, deadline), ZC_PLAT_OK);
    ZT_CHECK(memcmp(note, "ZCAD", 4) == 0); /* rank 3 has no children: port 0 */
    memset(note, 0, sizeof note);
    memcpy(note, "ZCPA", 4);
    zt_put32(note + 8, 2);                    /* the parent, rank 2, ... */
    zt_put32(note + 12, parent_port);         /* ... listens at this port ... */
    zt_put32(note + 16, 0x7f000001u);         /* ... of 127.0.0.1 */
    ZT_CHECK_ST(zc_plat_tcp_send_all(f.sock, note, sizeof note, deadline), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_tcp_accept(parent_listen, deadline, &parent_sock), ZC_PLAT_OK);
    memset(note, 0, sizeof note);
    memcpy(note, "ZCRY", 4);
    zt_put32(note + 4, 10);                   /* failed ... */
    zt_put32(note + 8, 2);
    zt_put32(note + 20, 2);                   /* ... found by rank 2 */
    ZT_CHECK_ST(zc_plat_tcp_send_all(parent_sock, note, sizeof note, deadline), ZC_PLAT_OK);
    ZT_CHECK_EQ(zt_wait_exit(pid), 0);
    zc_plat_tcp_close(parent_sock);
    zc_plat_tcp_close(parent_listen);
    zc_plat_tcp_close(f.sock);
    zc_plat_tcp_close(f.listen_sock);
}

void boot_client_rejects_root_without_secret(void) {
    zt_fake_root f;
    uint8_t guess[16]; /* the job's secret is 00 01 .. 0f (zt_client_cfg) */
    for (uint8_t i = 0; i < 16; i++) guess[i] = (uint8_t)(i ^ 0x5a);
    zt_fake_listen(&f);
    pid_t pid = zt_start_client(f.port, ZC_AUTH, "did not prove the job secret");
    zt_fake_handshake(&f, guess); /* a root without the secret cannot check the proof... */
    ZT_CHECK(!f.proof_ok);
    zt_fake_verdict(&f, guess, 0, 2); /* ...and its "welcome" carries a wrong tag */
    ZT_CHECK_EQ(zt_wait_exit(pid), 0);
    zc_plat_tcp_close(f.sock);
    zc_plat_tcp_close(f.listen_sock);
}

/* A rank 0 that does not finish a handshake (silent: stalled, as on a loaded host; or
 * closing before its verdict: its 2 s handshake timer, as over a lossy link) costs the client
 * one more connection, not the job: the second handshake is answered and open succeeds. */
static void zt_retry_case(bool greet_first) {
    zt_fake_root f;
    uint8_t secret[16];
    for (uint8_t i = 0; i < 16; i++) secret[i] = i;
    zt_fake_listen(&f);
    uint64_t t0 = zc_plat_now_ns();
    pid_t pid = zt_start_client(f.port, ZC_OK, "");
    if (greet_first) {
        zt_fake_handshake(&f, secret); /* greeting and proof; then no verdict */
        ZT_CHECK(f.proof_ok);
    } else {
        ZT_CHECK_ST(zc_plat_tcp_accept(f.listen_sock, t0 + 5000 * ZT_MS, &f.sock), ZC_PLAT_OK);
        uint8_t byte;
        /* silent until the client gives up on this connection (EOF after 2 s) */
        ZT_CHECK_ST(zc_plat_tcp_recv_all(f.sock, &byte, 1, t0 + 4000 * ZT_MS), ZC_PLAT_CLOSED);
        ZT_CHECK(zt_ms_since(t0) >= 2000);
    }
    zc_plat_tcp_close(f.sock);
    zt_fake_handshake(&f, secret);
    ZT_CHECK(f.proof_ok);
    zt_fake_verdict(&f, secret, 0, 2);
    zt_fake_place(&f);
    ZT_CHECK_EQ(zt_wait_exit(pid), 0);
    zc_plat_tcp_close(f.sock);
    zc_plat_tcp_close(f.listen_sock);
}

void boot_client_tries_again_after_a_silent_listener(void) { zt_retry_case(false); }
void boot_client_tries_again_when_rank_0_drops_its_handshake(void) { zt_retry_case(true); }

/* ---- rank programs ---- */

/* Each rank contributes {rank, pid, 100 pattern bytes}, then a full-size blob; all checked. */
int boot_rank_allgather(void) {
    static uint8_t all[64 * ZC_BOOT_MAX_BLOB], big[ZC_BOOT_MAX_BLOB];
    zc_config cfg;
    zc__boot b;
    char err[256];
    uint8_t mine[108];
    zt_boot_cfg(&cfg);
    ZT_CHECK(cfg.nranks <= 64);
    zc_status st = zc__boot_open(&b, &cfg, zt_where, zc_plat_now_ns() + 20000 * ZT_MS, err,
                                 sizeof err);
    if (st != ZC_OK) printf("open: %s\n", err);
    ZT_CHECK_ST(st, ZC_OK);
    zt_put32(mine, cfg.rank);
    zt_put32(mine + 4, (uint32_t)getpid());
    for (uint32_t i = 0; i < 100; i++) mine[8 + i] = (uint8_t)(cfg.rank * 31u + i * 7u + 1u);
    st = zc__boot_allgather(&b, mine, all, sizeof mine);
    if (st != ZC_OK) printf("allgather: %s\n", err);
    ZT_CHECK_ST(st, ZC_OK);
    for (uint32_t r = 0; r < cfg.nranks; r++) {
        const uint8_t *blob = all + r * sizeof mine;
        ZT_CHECK_EQ(zt_get32(blob), r);
        ZT_CHECK(zt_get32(blob + 4) != 0);
        for (uint32_t q = 0; q < r; q++) /* every rank is its own process */
            ZT_CHECK(zt_get32(blob + 4) != zt_get32(all + q * sizeof mine + 4));
        for (uint32_t i = 0; i < 100; i++) ZT_CHECK_EQ(blob[8 + i], (uint8_t)(r * 31u + i * 7u + 1u));
    }
    ZT_CHECK_ST(zc__boot_barrier(&b), ZC_OK);
    for (uint32_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 13u + cfg.rank);
    ZT_CHECK_ST(zc__boot_allgather(&b, big, all, sizeof big), ZC_OK);
    for (uint32_t r = 0; r < cfg.nranks; r++)
        for (uint32_t i = 0; i < sizeof big; i += 61)
            ZT_CHECK_EQ(all[r * sizeof big + i], (uint8_t)(i * 13u + r));
    ZT_CHECK_ST(zc__boot_barrier(&b), ZC_OK);
    zc__boot_close(&b);
    printf("boot ok rank %u of %u\n", cfg.rank, cfg.nranks);
    return 0;
}

void boot_allgather_collects_every_rank_blob(void) {
    static char out[1 << 16];
    static const uint32_t ns[] = {1, 2, 4, 8, 13};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        zt_boot_job(ns[i], "boot_rank_allgather", 30, NULL, out, sizeof out);
        ZT_CHECK_EQ(zt_count(out, "boot ok rank"), ns[i]);
    }
}

/* The sparse exchange's test need: rank r wants itself, r +- 1 and r +- s (mod n, s = n / 2 - 1
 * at least 2), a symmetric set whose far half is not near r in the tree. */
static uint32_t zt_need(void *ctx, uint32_t r, uint32_t *out, uint32_t cap) {
    uint32_t n = *(const uint32_t *)ctx, k = 0, s = n / 2u > 3u ? n / 2u - 1u : 2u % n;
    uint32_t want[5] = {r, (r + 1u) % n, (r + n - 1u) % n, (r + s) % n, (r + n - s) % n};
    for (uint32_t i = 0; i < 5 && k < cap; i++) {
        bool dup = false;
        for (uint32_t j = 0; j < k; j++) dup = dup || out[j] == want[i];
        if (!dup) out[k++] = want[i];
    }
    return k;
}

/* A need that is not symmetric: r wants itself, r + 1 and 7 r + 3 (mod n). */
static uint32_t zt_need_lopsided(void *ctx, uint32_t r, uint32_t *out, uint32_t cap) {
    uint32_t n = *(const uint32_t *)ctx, k = 0, want[3] = {r, (r + 1u) % n, (7u * r + 3u) % n};
    for (uint32_t i = 0; i < 3 && k < cap; i++) out[k++] = want[i];
    return k;
}

static uint8_t zt_blob_byte(uint32_t u, size_t i) { return (uint8_t)(u * 29u + i * 11u + 1u); }

/* One sparse exchange of bytes-sized blobs in rounds of window ranks, its scratch exactly
 * zc__boot_sparse_bytes and fenced: every blob this rank needs arrives intact in need order,
 * nothing is written past the scratch or the needs. */
static void zt_sparse_once(zc__boot *b, uint32_t n, uint32_t rank, size_t bytes,
                           uint32_t window, const char *err) {
    static uint8_t out[8 * 20000 + 64], scratch[64 * 20100 + 64], mine[20000];
    uint32_t set[ZC_BOOT_NEED_MAX], nset = zt_need(&n, rank, set, ZC_BOOT_NEED_MAX);
    size_t sb = zc__boot_sparse_bytes(window < n ? window : n, bytes);
    ZT_CHECK(sb + 64 <= sizeof scratch && nset * bytes + 64 <= sizeof out);
    memset(out, 0xee, sizeof out);
    memset(scratch, 0xee, sizeof scratch);
    for (size_t i = 0; i < bytes; i++) mine[i] = zt_blob_byte(rank, i);
    zc_status st = zc__boot_sparse(b, mine, out, bytes, zt_need, &n, scratch, window);
    if (st != ZC_OK) printf("sparse: %s\n", err);
    ZT_CHECK_ST(st, ZC_OK);
    for (uint32_t j = 0; j < nset; j++)
        for (size_t i = 0; i < bytes; i += 7)
            ZT_CHECK_EQ(out[j * bytes + i], zt_blob_byte(set[j], i));
    for (size_t i = 0; i < 64; i++) {
        ZT_CHECK_EQ(out[nset * bytes + i], 0xee);
        ZT_CHECK_EQ(scratch[sb + i], 0xee);
    }
}

/* zc__boot_sparse with small blobs and blobs larger than the stage, in one round and in
 * rounds of 3 and 1 ranks (a window smaller than n); then a need that is not symmetric, which
 * leaves some rank without a blob (ZC_MISMATCH, the bootstrap still open); then (ZT_SPARSE_BAD)
 * the last rank's window differs, which fails every rank. */
int boot_rank_sparse(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    zt_boot_cfg(&cfg);
    ZT_CHECK(cfg.nranks <= 64);
    zc_status st = zc__boot_open(&b, &cfg, zt_where, zc_plat_now_ns() + 20000 * ZT_MS, err,
                                 sizeof err);
    if (st != ZC_OK) printf("open: %s\n", err);
    ZT_CHECK_ST(st, ZC_OK);
    static const size_t sizes[2] = {40, 20000};
    static const uint32_t windows[3] = {64, 3, 1};
    for (int t = 0; t < 2; t++)
        for (int w = 0; w < 3; w++)
            zt_sparse_once(&b, cfg.nranks, cfg.rank, sizes[t], windows[w], err);
    static uint8_t out[5 * 40], scratch[64 * 48], mine[40];
    memset(mine, (int)cfg.rank + 1, sizeof mine);
    st = zc__boot_sparse(&b, mine, out, sizeof mine, zt_need_lopsided, &cfg.nranks, scratch, 64);
    ZT_CHECK(st == ZC_OK || (st == ZC_MISMATCH && strstr(err, "never reached") != NULL));
    if (st != ZC_OK) printf("lopsided rank %u: %s\n", cfg.rank, err);
    if (getenv("ZT_SPARSE_BAD")) {
        uint32_t window = cfg.rank == cfg.nranks - 1u ? 2u : 3u;
        st = zc__boot_sparse(&b, mine, out, sizeof mine, zt_need, &cfg.nranks, scratch, window);
        printf("bad window rank %u: %s: %s\n", cfg.rank, zc_status_name(st), err);
        ZT_CHECK(st != ZC_OK);
        zc__boot_close(&b);
        printf("boot ok rank %u of %u\n", cfg.rank, cfg.nranks);
        return 0;
    }
    ZT_CHECK_ST(zc__boot_barrier(&b), ZC_OK);
    zc__boot_close(&b);
    printf("boot ok rank %u of %u\n", cfg.rank, cfg.nranks);
    return 0;
}

void boot_sparse_exchange_gives_each_rank_its_needs(void) {
    static char out[1 << 16];
    static const uint32_t ns[] = {1, 2, 5, 13, 16};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        zt_boot_job(ns[i], "boot_rank_sparse", 30, NULL, out, sizeof out);
        ZT_CHECK_EQ(zt_count(out, "boot ok rank"), ns[i]);
        if (ns[i] >= 5) ZT_CHECK(zt_count(out, "never reached") >= 1);
    }
    zt_boot_job(13, "boot_rank_sparse", 30, "ZT_SPARSE_BAD=1", out, sizeof out);
    ZT_CHECK_EQ(zt_count(out, "boot ok rank"), 13);
    ZT_CHECK(strstr(out, "MISMATCH") != NULL && strstr(out, "round from rank") != NULL);
}

#define ZT_FLOOD 40 /* silent connections of the flood imposter */

/* The flood: ZT_FLOOD connections that say nothing, all open at once; each must be dropped
 * (closed by rank 0 when the rendezvous ends or its handshake's own deadline passes). */
static int zt_flood(const char *host, uint16_t port) {
    int socks[ZT_FLOOD];
    uint64_t deadline = zc_plat_now_ns() + 10000 * ZT_MS;
    for (int i = 0; i < ZT_FLOOD; i++) {
        zc_plat_rc rc = ZC_PLAT_REFUSED;
        while (rc == ZC_PLAT_REFUSED && zc_plat_now_ns() < deadline) {
            rc = zc_plat_tcp_connect(host, port, deadline, &socks[i]);
            if (rc == ZC_PLAT_REFUSED) zc_plat_sleep_ns(2 * ZT_MS);
        }
        ZT_CHECK_ST(rc, ZC_PLAT_OK);
    }
    int closed = 0;
    uint8_t buf[64];
    for (int i = 0; i < ZT_FLOOD; i++) {
        zc_plat_rc rc;
        size_t got = 0;
        do {
            rc = zc_plat_tcp_recv_some(socks[i], buf, sizeof buf, &got);
            if (rc == ZC_PLAT_AGAIN) zc_plat_sleep_ns(1 * ZT_MS);
        } while ((rc == ZC_PLAT_AGAIN || rc == ZC_PLAT_OK) && zc_plat_now_ns() < deadline);
        closed += rc == ZC_PLAT_CLOSED || rc == ZC_PLAT_ERROR;
        zc_plat_tcp_close(socks[i]);
    }
    printf("flood imposter: %d of %d silent connections dropped\n", closed, ZT_FLOOD);
    ZT_CHECK_EQ(closed, ZT_FLOOD);
    return 0;
}

/* Ranks 2 is an imposter (ZT_BOOT_IMPOSTER: wrong = a secret one bit off claiming rank 1,
 * silent = connects and says nothing, garbage = answers the greeting with junk, flood =
 * ZT_FLOOD silent connections at once); ranks 0 and 1 are a two-rank job that must not
 * notice. */
static int zt_imposter(const zc_config *job, const char *mode) {
    zc_config cfg = *job;
    char err[256] = "";
    if (strcmp(mode, "wrong") == 0) {
        zc__boot b;
        cfg.nranks = 2;
        cfg.rank = 1;
        cfg.secret[5] ^= 0x08;
        zc_status st = zc__boot_open(&b, &cfg, zt_where, zc_plat_now_ns() + 10000 * ZT_MS, err,
                                     sizeof err);
        printf("imposter refused: %s: %s\n", zc_status_name(st), err);
        ZT_CHECK_ST(st, ZC_AUTH);
        ZT_CHECK(strstr(err, "secret") != NULL);
        return 0;
    }
    char host[64];
    uint16_t port = 0;
    int s = -1;
    uint8_t hello[24], junk[40];
    ZT_CHECK(zc__split_addr(cfg.root_addr, host, sizeof host, &port));
    if (strcmp(mode, "flood") == 0) return zt_flood(host, port);
    uint64_t deadline = zc_plat_now_ns() + 10000 * ZT_MS;
    zc_plat_rc rc = ZC_PLAT_REFUSED;
    while (rc == ZC_PLAT_REFUSED && zc_plat_now_ns() < deadline) {
        rc = zc_plat_tcp_connect(host, port, deadline, &s);
        if (rc == ZC_PLAT_REFUSED) zc_plat_sleep_ns(2 * ZT_MS);
    }
    ZT_CHECK_ST(rc, ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_tcp_recv_all(s, hello, sizeof hello, deadline), ZC_PLAT_OK);
    ZT_CHECK(memcmp(hello, "ZCB1", 4) == 0);
    uint64_t t0 = zc_plat_now_ns();
    if (strcmp(mode, "garbage") == 0) {
        memset(junk, 0xab, sizeof junk);
        ZT_CHECK_ST(zc_plat_tcp_send_all(s, junk, sizeof junk, deadline), ZC_PLAT_OK);
    }
    /* Now wait to be dropped: rank 0 closes without a word (a silent one when the rendezvous
     * is over, 0.3 s from now, or its handshake's own 2 s deadline passed). */
    size_t got = 0;
    uint8_t byte;
    do {
        rc = zc_plat_tcp_recv_some(s, &byte, 1, &got);
        if (rc == ZC_PLAT_AGAIN) zc_plat_sleep_ns(1 * ZT_MS);
    } while (rc == ZC_PLAT_AGAIN && zc_plat_now_ns() < deadline);
    uint64_t ms = zt_ms_since(t0);
    printf("%s imposter dropped after %llu ms (%s)\n", mode, (unsigned long long)ms,
           zc_plat_rc_name(rc));
    ZT_CHECK(rc == ZC_PLAT_CLOSED || rc == ZC_PLAT_ERROR);
    ZT_CHECK(ms <= (strcmp(mode, "silent") == 0 ? 4000u : 1000u));
    zc_plat_tcp_close(s);
    return 0;
}

int boot_rank_with_imposter(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    const char *mode = getenv("ZT_BOOT_IMPOSTER");
    zt_boot_cfg(&cfg);
    ZT_CHECK(mode != NULL && cfg.nranks == 3);
    if (cfg.rank == 2) return zt_imposter(&cfg, mode);
    cfg.nranks = 2;
    if (cfg.rank == 1) zc_plat_sleep_ns(300 * ZT_MS); /* let the imposter go first */
    uint64_t t0 = zc_plat_now_ns();
    zc_status st = zc__boot_open(&b, &cfg, zt_where, t0 + 20000 * ZT_MS, err, sizeof err);
    if (st != ZC_OK) printf("open: %s\n", err);
    ZT_CHECK_ST(st, ZC_OK);
    uint32_t mine = 0xb00700u + cfg.rank, all[2] = {0, 0};
    ZT_CHECK_ST(zc__boot_allgather(&b, &mine, all, sizeof mine), ZC_OK);
    ZT_CHECK_EQ(all[0], 0xb00700u);
    ZT_CHECK_EQ(all[1], 0xb00701u);
    ZT_CHECK_ST(zc__boot_barrier(&b), ZC_OK);
    zc__boot_close(&b);
    uint64_t ms = zt_ms_since(t0);
    printf("boot ok rank %u in %llu ms\n", cfg.rank, (unsigned long long)ms);
    /* Handshakes overlap: no imposter delays the job (rank 1 came after 300 ms). */
    ZT_CHECK(ms < 1500);
    return 0;
}

void boot_rejects_wrong_secret_without_disturbing_job(void) {
    static char out[1 << 16];
    zt_boot_job(3, "boot_rank_with_imposter", 30, "ZT_BOOT_IMPOSTER=wrong", out, sizeof out);
    ZT_CHECK_EQ(zt_count(out, "boot ok rank"), 2);
    ZT_CHECK_EQ(zt_count(out, "imposter refused: ZC_AUTH"), 1);
    ZT_CHECK_EQ(zt_count(out, "did not prove the job secret"), 1); /* rank 0's one WARN line */
}

void boot_silent_imposter_does_not_delay_job(void) {
    static char out[1 << 16];
    zt_boot_job(3, "boot_rank_with_imposter", 30, "ZT_BOOT_IMPOSTER=silent", out, sizeof out);
    ZT_CHECK_EQ(zt_count(out, "boot ok rank"), 2);
    ZT_CHECK_EQ(zt_count(out, "silent imposter dropped"), 1);
}

/* 40 silent connections (serially they once cost 2 s each, 80 s) neither delay the job nor
 * write 40 log lines: the first 8 drops are logged, the rest summed up. */
void boot_flood_of_silent_connections_does_not_delay_job_or_flood_log(void) {
    static char out[1 << 16];
    zt_boot_job(3, "boot_rank_with_imposter", 30, "ZT_BOOT_IMPOSTER=flood", out, sizeof out);
    ZT_CHECK_EQ(zt_count(out, "boot ok rank"), 2);
    ZT_CHECK_EQ(zt_count(out, "40 of 40 silent connections dropped"), 1);
    ZT_CHECK(zt_count(out, "dropped a connection") <= 8);
    ZT_CHECK(zt_count(out, "more connection(s)") >= 1);
}

void boot_garbage_sender_is_dropped(void) {
    static char out[1 << 16];
    zt_boot_job(3, "boot_rank_with_imposter", 30, "ZT_BOOT_IMPOSTER=garbage", out, sizeof out);
    ZT_CHECK_EQ(zt_count(out, "boot ok rank"), 2);
    ZT_CHECK_EQ(zt_count(out, "garbage imposter dropped"), 1);
    ZT_CHECK_EQ(zt_count(out, "not a zcoll bootstrap proof"), 1);
}

/* ZT_BOOT_SQUAT names a port another program holds (listening, never answering): rank 0
 * cannot listen there and says so at once; rank 1 reaches the squatter, hears no greeting,
 * tries again (a stalled rank 0 would be silent too) and fails at the 5 s deadline, saying
 * what it heard. */
int boot_rank_facing_squatter(void) {
    zc_config cfg;
    zc__boot b;
    char err[512];
    zt_boot_cfg(&cfg);
    snprintf(cfg.root_addr, sizeof cfg.root_addr, "127.0.0.1:%s", getenv("ZT_BOOT_SQUAT"));
    uint64_t t0 = zc_plat_now_ns();
    zc_status st = zc__boot_open(&b, &cfg, zt_where, t0 + 5000 * ZT_MS, err, sizeof err);
    uint64_t ms = zt_ms_since(t0);
    printf("rank %u: %s after %llu ms: %s\n", cfg.rank, zc_status_name(st),
           (unsigned long long)ms, err);
    if (cfg.rank == 0) {
        ZT_CHECK_ST(st, ZC_SYSTEM);
        ZT_CHECK(ms < 1000);
        ZT_CHECK(strstr(err, "cannot listen") != NULL);
    } else {
        ZT_CHECK_ST(st, ZC_TIMED_OUT);
        ZT_CHECK(ms >= 5000 && ms < 6500);
        ZT_CHECK(strstr(err, "sent no greeting") != NULL && strstr(err, "tries") != NULL);
    }
    return 0;
}

void boot_port_squatter_fails_rank_0_at_once_and_the_others_by_the_deadline(void) {
    static char out[1 << 16];
    int squat = -1;
    uint16_t port = 0;
    ZT_CHECK_ST(zc_plat_tcp_listen("127.0.0.1", 0, &squat, &port), ZC_PLAT_OK);
    char env[48];
    snprintf(env, sizeof env, "ZT_BOOT_SQUAT=%u", (unsigned)port);
    zt_boot_job(2, "boot_rank_facing_squatter", 30, env, out, sizeof out);
    printf("%s", out);
    zc_plat_tcp_close(squat);
}

int boot_rank_never_comes(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    zt_boot_cfg(&cfg);
    if (cfg.rank != 0) {
        zc_plat_sleep_ns(3000 * ZT_MS);
        return 0;
    }
    uint64_t t0 = zc_plat_now_ns();
    ZT_CHECK_ST(zc__boot_open(&b, &cfg, zt_where, t0 + 500 * ZT_MS, err, sizeof err),
                ZC_TIMED_OUT);
    uint64_t ms = zt_ms_since(t0);
    printf("open timed out: %s (%llu ms)\n", err, (unsigned long long)ms);
    ZT_CHECK(ms >= 500 && ms <= 2000);
    ZT_CHECK(strstr(err, "timed out") != NULL && strstr(err, "1 of 2 ranks") != NULL);
    ZT_CHECK_EQ(b.listen_sock, -1);
    return 0;
}

void boot_times_out_when_a_rank_never_comes(void) {
    static char out[1 << 16];
    zt_boot_job(2, "boot_rank_never_comes", 20, NULL, out, sizeof out);
    ZT_CHECK_EQ(zt_count(out, "open timed out"), 1);
}

/* ZT_BOOT_MISMATCH picks what rank `culprit` does differently: size = allgather of 16 bytes
 * where the others pass 8; call = barrier where the others allgather; nranks = opens for
 * nranks + 1; lost = leaves right after open. Every rank must see the failure, none hang. */
int boot_rank_mismatch(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    const char *mode = getenv("ZT_BOOT_MISMATCH");
    uint8_t mine[16] = {0}, all[16 * 3];
    zt_boot_cfg(&cfg);
    ZT_CHECK(mode != NULL);
    uint32_t culprit = cfg.nranks - 1;
    bool odd = cfg.rank == culprit;
    if (strcmp(mode, "nranks") == 0 && odd) cfg.nranks++;
    uint64_t t0 = zc_plat_now_ns();
    zc_status st = zc__boot_open(&b, &cfg, zt_where, t0 + 10000 * ZT_MS, err, sizeof err);
    if (strcmp(mode, "nranks") == 0) {
        ZT_CHECK_ST(st, ZC_MISMATCH);
        ZT_CHECK(strstr(err, "started for 3 ranks but rank 0 for 2") != NULL);
        printf("mismatch seen at rank %u: %s\n", cfg.rank, err);
    } else {
        ZT_CHECK_ST(st, ZC_OK);
        if (strcmp(mode, "lost") == 0 && odd) {
            zc__boot_close(&b);
            printf("mismatch seen at rank %u: (left)\n", cfg.rank);
            return 0;
        }
        if (strcmp(mode, "call") == 0 && odd) st = zc__boot_barrier(&b);
        else st = zc__boot_allgather(&b, mine, all, strcmp(mode, "size") == 0 && odd ? 16 : 8);
        zc_status want = strcmp(mode, "lost") == 0 ? ZC_PEER_LOST : ZC_MISMATCH;
        if (st != want) printf("rank %u: %s: %s\n", cfg.rank, zc_status_name(st), err);
        ZT_CHECK_ST(st, want);
        const char *needle = strcmp(mode, "size") == 0   ? "rank 2 passed 16 bytes, rank 0 passed 8"
                             : strcmp(mode, "call") == 0 ? "rank 2 called barrier while rank 0 "
                                                           "called allgather"
                                                         : "rank 2 closed the connection";
        ZT_CHECK(strstr(err, needle) != NULL);
        printf("mismatch seen at rank %u: %s\n", cfg.rank, err);
        /* A failed bootstrap is closed: later calls fail at once. */
        ZT_CHECK_ST(zc__boot_barrier(&b), ZC_INVALID_STATE);
    }
    zc__boot_close(&b);
    ZT_CHECK(zt_ms_since(t0) < 5000);
    return 0;
}

static void zt_mismatch_job(uint32_t nranks, const char *env) {
    static char out[1 << 16];
    zt_boot_job(nranks, "boot_rank_mismatch", 20, env, out, sizeof out);
    ZT_CHECK_EQ(zt_count(out, "mismatch seen at rank"), nranks);
}

void boot_mismatched_blob_size_is_mismatch(void) {
    zt_mismatch_job(3, "ZT_BOOT_MISMATCH=size");
}

void boot_mismatched_call_is_mismatch(void) { zt_mismatch_job(3, "ZT_BOOT_MISMATCH=call"); }

void boot_mismatched_rank_count_is_mismatch(void) {
    zt_mismatch_job(2, "ZT_BOOT_MISMATCH=nranks");
}

void boot_rank_leaving_during_allgather_is_peer_lost(void) {
    zt_mismatch_job(3, "ZT_BOOT_MISMATCH=lost");
}

/* ---- the tree: few descriptors, a listener of rank > 0, a rank dying ---- */

/* Each rank may hold ZT_NOFILE descriptors (set before init): fewer than the job's ranks, so
 * rank 0 cannot keep a connection to every rank; the tree needs ZC_BOOT_PENDING + log2(n) + 2
 * at most during the rendezvous. Then an all_reduce, checked. */
int boot_rank_few_descriptors(void) {
    zc_config cfg;
    zc_comm *c = NULL;
    struct rlimit lim;
    const char *nofile = getenv("ZT_NOFILE");
    ZT_CHECK(nofile != NULL && getrlimit(RLIMIT_NOFILE, &lim) == 0);
    lim.rlim_cur = (rlim_t)strtoul(nofile, NULL, 10);
    ZT_CHECK(setrlimit(RLIMIT_NOFILE, &lim) == 0);
    zt_boot_cfg(&cfg);
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arena = aligned_alloc(64, (bytes + 63u) / 64u * 64u);
    ZT_CHECK(arena != NULL);
    zc_status st = zc_comm_init(&cfg, arena, bytes, &c);
    if (st != ZC_OK) printf("rank %u: init: %s\n", cfg.rank, zc_init_error_text());
    ZT_CHECK_ST(st, ZC_OK);
    int32_t send[8], recv[8];
    for (int i = 0; i < 8; i++) send[i] = (int32_t)(cfg.rank * 8u + (uint32_t)i);
    zc_req req;
    ZT_CHECK_ST(zc_allreduce(c, send, recv, 8, ZC_INT32, ZC_SUM, &req), ZC_OK);
    ZT_CHECK_ST(zc_wait(c, &req), ZC_OK);
    uint32_t n = cfg.nranks;
    for (int i = 0; i < 8; i++) /* sum over r of 8r + i */
        ZT_CHECK_EQ(recv[i], (int32_t)(4u * n * (n - 1u) + (uint32_t)i * n));
    ZT_CHECK_ST(zc_comm_fini(c), ZC_OK);
    free(arena);
    printf("fds ok rank %u of %u (limit %s)\n", cfg.rank, n, nofile);
    return 0;
}

void boot_job_starts_with_fewer_descriptors_per_rank_than_ranks(void) {
    static char out[1 << 16];
    const char *env[] = {"ZT_NOFILE=24", "ZC_TRANSPORT=shm", "ZC_SLOT_BYTES=4096", "ZC_SLOTS=2",
                         NULL};
    int rc = zt_run_ranks(40, "boot_rank_few_descriptors", 120, env, out, sizeof out);
    if (rc != 0) printf("%s", out);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK_EQ(zt_count(out, "fds ok rank"), 40);
}

/* The TCP port process pid listens on (its only listening socket), from /proc; 0 if none. */
static uint16_t zt_listen_port_of(pid_t pid) {
    char path[64], line[512], link[64];
    unsigned long inodes[64];
    unsigned ninodes = 0;
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    for (struct dirent *e = readdir(d); e && ninodes < 64; e = readdir(d)) {
        char fd[600];
        snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
        ssize_t n = readlink(fd, link, sizeof link - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        if (sscanf(link, "socket:[%lu]", &inodes[ninodes]) == 1) ninodes++;
    }
    closedir(d);
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f) return 0;
    uint16_t port = 0;
    while (!port && fgets(line, sizeof line, f)) {
        unsigned lport = 0, st = 0;
        unsigned long inode = 0;
        if (sscanf(line, " %*u: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &lport,
                   &st, &inode) != 3 || st != 0x0a)
            continue;
        for (unsigned i = 0; i < ninodes; i++)
            if (inodes[i] == inode) port = (uint16_t)lport;
    }
    fclose(f);
    return port;
}

/* The imposter at rank 2's tree port: finds the port (rank 2 wrote its pid to pidfile),
 * answers the greeting with a proof under a secret one bit off, claiming rank 3, and must
 * get AUTH and be closed. */
static int zt_child_imposter(const zc_config *job, const char *pidfile, uint64_t deadline) {
    zc_config cfg = *job;
    pid_t pid = 0;
    uint16_t port = 0;
    while (port == 0 && zc_plat_now_ns() < deadline) {
        FILE *f = fopen(pidfile, "r");
        if (f) {
            if (fscanf(f, "%d", &pid) != 1) pid = 0;
            fclose(f);
        }
        if (pid > 0) port = zt_listen_port_of(pid);
        if (port == 0) zc_plat_sleep_ns(5 * ZT_MS);
    }
    ZT_CHECK(port != 0);
    int s = -1;
    uint8_t hello[24], proof[40], msg[46], key[16], v[16];
    ZT_CHECK_ST(zc_plat_tcp_connect("127.0.0.1", port, deadline, &s), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_tcp_recv_all(s, hello, sizeof hello, deadline), ZC_PLAT_OK);
    ZT_CHECK(memcmp(hello, "ZCB1", 4) == 0);
    memcpy(key, cfg.secret, 16);
    key[3] ^= 0x40; /* one bit off */
    memcpy(proof, hello, 8);
    zt_put32(proof + 8, 3);
    zt_put32(proof + 12, 4);
    memset(proof + 16, 0x5c, 16);
    memcpy(msg, "client", 6);
    memcpy(msg + 6, hello + 8, 16);
    memcpy(msg + 22, proof + 16, 16);
    zt_put32(msg + 38, 3);
    zt_put32(msg + 42, 4);
    zt_put64(proof + 32, zc__siphash(key, msg, sizeof msg));
    ZT_CHECK_ST(zc_plat_tcp_send_all(s, proof, sizeof proof, deadline), ZC_PLAT_OK);
    ZT_CHECK_ST(zc_plat_tcp_recv_all(s, v, sizeof v, deadline), ZC_PLAT_OK);
    printf("child imposter got verdict code %u\n", zt_get32(v));
    ZT_CHECK_EQ(zt_get32(v), 1); /* AUTH */
    uint8_t byte;
    ZT_CHECK_ST(zc_plat_tcp_recv_all(s, &byte, 1, deadline), ZC_PLAT_CLOSED);
    zc_plat_tcp_close(s);
    return 0;
}

/* Rank 4 of zcrun's 5 is an imposter; ranks 0..3 are a four-rank job in which rank 2 listens
 * for its child, rank 3, which comes 1.5 s late. The imposter finds rank 2's port (rank 2
 * writes its pid to ZT_PIDFILE) and answers its greeting with a proof under a wrong secret,
 * claiming rank 3: rank 2 drops it (AUTH) and the job starts. */
int boot_rank_with_child_imposter(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    const char *pidfile = getenv("ZT_PIDFILE");
    zt_boot_cfg(&cfg);
    ZT_CHECK(pidfile != NULL && cfg.nranks == 5);
    cfg.nranks = 4;
    uint64_t deadline = zc_plat_now_ns() + 10000 * ZT_MS;
    if (cfg.rank == 4) return zt_child_imposter(&cfg, pidfile, deadline);
    if (cfg.rank == 2) {
        FILE *f = fopen(pidfile, "w");
        ZT_CHECK(f != NULL);
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    if (cfg.rank == 3) zc_plat_sleep_ns(1500 * ZT_MS);
    zc_status st = zc__boot_open(&b, &cfg, zt_where, deadline, err, sizeof err);
    if (st != ZC_OK) printf("open: %s\n", err);
    ZT_CHECK_ST(st, ZC_OK);
    uint32_t mine = 0xc0de00u + cfg.rank, all[4] = {0, 0, 0, 0};
    ZT_CHECK_ST(zc__boot_allgather(&b, &mine, all, sizeof mine), ZC_OK);
    for (uint32_t r = 0; r < 4; r++) ZT_CHECK_EQ(all[r], 0xc0de00u + r);
    zc__boot_close(&b);
    printf("boot ok rank %u\n", cfg.rank);
    return 0;
}

void boot_imposter_at_a_child_listener_is_dropped(void) {
    static char out[1 << 16];
    char env[96];
    snprintf(env, sizeof env, "ZT_PIDFILE=/tmp/zt-boot-child-imposter-%d.pid", (int)getpid());
    unlink(env + strlen("ZT_PIDFILE="));
    zt_boot_job(5, "boot_rank_with_child_imposter", 30, env, out, sizeof out);
    unlink(env + strlen("ZT_PIDFILE="));
    ZT_CHECK_EQ(zt_count(out, "boot ok rank"), 4);
    ZT_CHECK_EQ(zt_count(out, "child imposter got verdict code 1"), 1);
    ZT_CHECK_EQ(zt_count(out, "rank 2 dropped a connection: a process claiming rank 3 did not "
                              "prove the job secret"), 1);
}

static void zt_vanish(int sig) {
    (void)sig;
    _exit(0); /* as if killed: no goodbye, the kernel closes its sockets */
}

/* Twelve ranks; rank 4 (parent of 5 and 6, grandparent of 7) vanishes 300 ms in, inside open
 * (rank 11 comes 800 ms late, so nobody has finished); every other rank must fail, in open or
 * in the allgather after it, with ZC_PEER_LOST naming rank 4, long before the 20 s deadline. */
int boot_rank_killed_mid_bootstrap(void) {
    zc_config cfg;
    zc__boot b;
    char err[256];
    zt_boot_cfg(&cfg);
    uint64_t t0 = zc_plat_now_ns();
    if (cfg.rank == 4) {
        struct itimerval when = {{0, 0}, {0, 300000}};
        signal(SIGALRM, zt_vanish);
        ZT_CHECK(setitimer(ITIMER_REAL, &when, NULL) == 0);
    }
    if (cfg.rank == 11) zc_plat_sleep_ns(800 * ZT_MS);
    zc_status st = zc__boot_open(&b, &cfg, zt_where, t0 + 20000 * ZT_MS, err, sizeof err);
    if (st == ZC_OK) {
        uint8_t mine[8] = {0}, all[8 * 12];
        st = zc__boot_allgather(&b, mine, all, sizeof mine);
    }
    if (cfg.rank == 4) zc_plat_sleep_ns(5000 * ZT_MS); /* the timer ends it */
    uint64_t ms = zt_ms_since(t0);
    printf("rank %u: %s after %llu ms: %s\n", cfg.rank, zc_status_name(st),
           (unsigned long long)ms, err);
    ZT_CHECK_ST(st, ZC_PEER_LOST);
    ZT_CHECK(strstr(err, "rank 4 ") != NULL);
    ZT_CHECK(ms < 5000);
    zc__boot_close(&b);
    printf("rank %u saw rank 4 go\n", cfg.rank);
    return 0;
}

void boot_rank_killed_mid_bootstrap_fails_the_others_before_the_deadline(void) {
    static char out[1 << 16];
    zt_boot_job(12, "boot_rank_killed_mid_bootstrap", 30, NULL, out, sizeof out);
    ZT_CHECK_EQ(zt_count(out, "saw rank 4 go"), 11);
}
