/* fake_plat.c: the in-memory platform of the fuzz targets (see fake_plat.h). */
#include "fake_plat.h"

#include "platform.h"

#include <stdlib.h>
#include <string.h>

static fp_state fp_st;

static uint64_t fp_now(void *u) {
    fp_state *st = u;
    return st->clock_ns += 1000000u;
}

static zc_plat_rc fp_random(void *u, void *buf, size_t bytes) {
    fp_state *st = u;
    uint8_t *p = buf;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)((st->rand_ctr++ * 0x9e3779b97f4a7c15ull) >> 56);
    return ZC_PLAT_OK;
}

static const char *fp_getenv(void *u, const char *name) {
    fp_state *st = u;
    for (uint32_t i = 0; i < st->nenv; i++)
        if (strcmp(st->names[i], name) == 0) return st->values[i];
    return NULL;
}

static zc_plat_rc fp_listen(void *u, const char *host, uint16_t port, int *sock, uint16_t *got) {
    (void)u, (void)host;
    *sock = 3;
    if (got) *got = port;
    return ZC_PLAT_OK;
}

/* The first accept hands out the scripted connection; later ones wait out their deadline. */
static zc_plat_rc fp_accept(void *u, int ls, uint64_t deadline_ns, int *sock) {
    fp_state *st = u;
    (void)ls;
    if (st->accepts++ == 0) {
        *sock = FP_SOCK;
        return ZC_PLAT_OK;
    }
    if (deadline_ns == 0) return ZC_PLAT_AGAIN;
    if (st->clock_ns < deadline_ns) st->clock_ns = deadline_ns;
    return ZC_PLAT_TIMEOUT;
}

static zc_plat_rc fp_connect(void *u, const char *host, uint16_t port, uint64_t dl, int *sock) {
    (void)u, (void)host, (void)port, (void)dl;
    *sock = FP_SOCK;
    return ZC_PLAT_OK;
}

static zc_plat_rc fp_send(void *u, int sock, const void *buf, size_t bytes, uint64_t dl) {
    fp_state *st = u;
    (void)dl;
    if (sock != FP_SOCK) return ZC_PLAT_CLOSED;
    const uint8_t *p = buf;
    for (size_t i = 0; i < bytes; i++) st->out[(st->out_len++) % sizeof st->out] = p[i];
    st->out_total += bytes;
    return ZC_PLAT_OK;
}

static zc_plat_rc fp_recv_some(void *u, int sock, void *buf, size_t cap, size_t *got) {
    fp_state *st = u;
    *got = 0;
    if (sock != FP_SOCK) return ZC_PLAT_CLOSED;
    if (st->before_recv) st->before_recv(st);
    if (st->in_at >= st->in_len) return ZC_PLAT_CLOSED;
    size_t n = st->in_len - st->in_at < cap ? st->in_len - st->in_at : cap;
    memcpy(buf, st->in + st->in_at, n);
    st->in_at += n;
    *got = n;
    return ZC_PLAT_OK;
}

static zc_plat_rc fp_recv_all(void *u, int sock, void *buf, size_t bytes, uint64_t dl) {
    (void)dl;
    size_t got = 0;
    zc_plat_rc rc = fp_recv_some(u, sock, buf, bytes, &got);
    if (rc == ZC_PLAT_OK && got < bytes) return ZC_PLAT_CLOSED; /* the peer stopped short */
    return rc;
}

static void fp_close(void *u, int sock) { (void)u, (void)sock; }
static zc_plat_rc fp_local_host(void *u, int sock, char *buf, size_t cap) {
    (void)u, (void)sock;
    if (cap < 10) return ZC_PLAT_INVALID;
    memcpy(buf, "127.0.0.1", 10);
    return ZC_PLAT_OK;
}
static void fp_log(void *u, zc_plat_log_level level, const char *line) {
    (void)u, (void)level, (void)line;
}
static void fp_panic(void *u, const char *file, int line, const char *what) {
    (void)u, (void)file, (void)line, (void)what;
    abort(); /* a broken invariant is a finding */
}
static zc_plat_rc fp_host_id(void *u, char *buf, size_t cap) {
    (void)u;
    if (cap < 5) return ZC_PLAT_INVALID;
    memcpy(buf, "fuzz", 5);
    return ZC_PLAT_OK;
}
static uint64_t fp_pid(void *u) {
    (void)u;
    return 4242;
}

fp_state *fp_install(void) {
    memset(&fp_st, 0, sizeof fp_st);
    zc_plat_hooks h = {0};
    h.struct_bytes = sizeof h;
    h.user = &fp_st;
    h.now_ns = fp_now;
    h.random = fp_random;
    h.getenv = fp_getenv;
    h.tcp_listen = fp_listen;
    h.tcp_accept = fp_accept;
    h.tcp_connect = fp_connect;
    h.tcp_send_all = fp_send;
    h.tcp_recv_all = fp_recv_all;
    h.tcp_recv_some = fp_recv_some;
    h.tcp_close = fp_close;
    h.tcp_local_host = fp_local_host;
    h.log = fp_log;
    h.panic = fp_panic;
    h.host_id = fp_host_id;
    h.process_id = fp_pid;
    zc_plat_install_hooks(&h);
    return &fp_st;
}

void fp_set_env(fp_state *st, const uint8_t *data, size_t len) {
    size_t n = len < sizeof st->env_store - 1 ? len : sizeof st->env_store - 1;
    memcpy(st->env_store, data, n);
    st->env_store[n] = '\0';
    st->nenv = 0;
    char *p = st->env_store;
    while (*p && st->nenv < FP_MAX_ENV) {
        char *end = strchr(p, '\n');
        if (end) *end = '\0';
        char *eq = strchr(p, '=');
        if (eq) {
            *eq = '\0';
            st->names[st->nenv] = p;
            st->values[st->nenv++] = eq + 1;
        }
        if (!end) break;
        p = end + 1;
    }
}
