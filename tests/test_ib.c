/* test_ib.c: transport_ib where the tests run. On a host without an RDMA device (no kernel
 * RDMA support: ibv_get_device_list fails with ENOSYS) asking for ib must be a clear error on
 * every rank, never a crash or a hang; the wire's sizes must follow the geometry and the
 * config only; its credit record must catch torn writes; create must fail cleanly. With a
 * device (the rxe guest of tests/rxe), the same tests take their other branch: init works
 * and an allreduce goes over verbs, and two ranks of the wire in one process move messages,
 * credits and an alarm over a loopback pair of queue pairs. The multi-process collectives over
 * ib are tests/test_mp.c's, run with ZC_TRANSPORT=ib in the rxe guest (tests/rxe/suite.sh). */
#include "zt.h"

#include "../transport_ib/ib.h"
#include "wire.h"
#include "zcoll.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IB_MS 1000000ull

static char ib_out[1 << 16];

static uint64_t ib_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- ZC_TRANSPORT=ib through zcrun ---------------------------------------------------------- */

/* Without a device: zc_comm_init fails with ZC_UNSUPPORTED, a sentence starting "ib: no RDMA
 * device (", *comm_out NULL, and fast. With one: init works and an allreduce is right. */
static int ib_rank_device_or_clear_error(zc_config *cfg, void *arena, size_t bytes) {
    zc_comm *comm = (zc_comm *)(uintptr_t)1;
    uint64_t t0 = ib_now_ns();
    zc_status st = zc_comm_init(cfg, arena, bytes, &comm);
    double ms = (double)(ib_now_ns() - t0) / 1e6;
    if (st == ZC_OK) {
        int32_t x[1000], want = (int32_t)(cfg->nranks * (cfg->nranks + 1u) / 2u);
        for (int i = 0; i < 1000; i++) x[i] = (int32_t)(cfg->rank + 1u) * i;
        zc_req r;
        st = zc_allreduce(comm, x, x, 1000, ZC_INT32, ZC_SUM, &r);
        if (st == ZC_OK) st = zc_wait(comm, &r);
        for (int i = 0; i < 1000 && st == ZC_OK; i++)
            if (x[i] != want * i) st = ZC_INTERNAL;
        printf("ib-info: rank %u: device present; allreduce over ib: %s %s\n", cfg->rank,
               zc_status_name(st), st == ZC_OK ? "" : zc_comm_error_text(comm));
        zc_comm_fini(comm);
        return st == ZC_OK ? 0 : 1;
    }
    const char *text = zc_init_error_text();
    printf("ib-info: rank %u: %s after %.0f ms: %s\n", cfg->rank, zc_status_name(st), ms, text);
#ifdef ZC_HAVE_IB
    const char *want = "ib: no RDMA device (";
#else
    const char *want = "this build has no transport_ib";
#endif
    if (st != ZC_UNSUPPORTED || !strstr(text, want) || comm != NULL || ms > 10000.0) {
        printf("ib FAILED: rank %u: expected ZC_UNSUPPORTED with \"%s\" within 10 s and no "
               "communicator\n", cfg->rank, want);
        return 1;
    }
    return 0;
}

int ib_rank_init_reports(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    zc_status st = zc_config_from_env(&cfg);
    if (st != ZC_OK || cfg.transport != ZC_TRANSPORT_IB) {
        printf("ib FAILED: zc_config_from_env: %s, transport %d: %s\n", zc_status_name(st),
               (int)cfg.transport, cfg.error_text);
        return 1;
    }
    size_t bytes = zc_comm_arena_bytes(&cfg);
    void *arena = bytes ? aligned_alloc(64, (bytes + 63u) & ~(size_t)63u) : NULL;
    if (!arena) {
        printf("ib FAILED: rank %u: arena of %zu bytes\n", cfg.rank, bytes);
        return 1;
    }
    int rc = ib_rank_device_or_clear_error(&cfg, arena, bytes);
    free(arena);
    return rc;
}

static void ib_job(uint32_t n) {
    const char *env[] = {"ZC_TRANSPORT=ib", NULL};
    int rc = zt_run_ranks(n, "ib_rank_init_reports", 30, env, ib_out, sizeof ib_out);
    printf("%s", ib_out);
    ZT_CHECK_EQ(rc, 0);
    ZT_CHECK(strstr(ib_out, "ib FAILED") == NULL);
    for (uint32_t r = 0; r < n; r++) {
        char line[64];
        snprintf(line, sizeof line, "[%u] ib-info: rank %u: ", r, r);
        ZT_CHECK(strstr(ib_out, line) != NULL);
    }
}

void ib_init_fails_clearly_without_device_else_works_n1(void) { ib_job(1); }
void ib_init_fails_clearly_without_device_else_works_n2(void) { ib_job(2); }

/* ---- configuration --------------------------------------------------------------------------- */

/* An invalid ib_* field: arena bytes 0, and zc_comm_init names the field. */
static void ib_expect_invalid(const zc_config *cfg, const char *field) {
    uint64_t arena[64];
    zc_comm *comm = NULL;
    ZT_CHECK(zc_comm_arena_bytes(cfg) == 0);
    ZT_CHECK_ST(zc_comm_init(cfg, arena, sizeof arena, &comm), ZC_INVALID_ARG);
    if (!strstr(zc_init_error_text(), field))
        zt_fail(__FILE__, __LINE__, "the init error names the field", zc_init_error_text());
    ZT_CHECK(comm == NULL);
}

void ib_config_errors_name_the_field(void) {
    zc_config ok, c;
    zc_config_default(&ok);
    ok.transport = ZC_TRANSPORT_IB;
    ZT_CHECK(zc_comm_arena_bytes(&ok) > 0);
    c = ok, c.ib_qps_per_peer = 0, ib_expect_invalid(&c, "ib_qps_per_peer");
    c = ok, c.ib_qps_per_peer = 5, ib_expect_invalid(&c, "ib_qps_per_peer");
    c = ok, c.ib_port = 256, ib_expect_invalid(&c, "ib_port");
    c = ok, c.ib_gid_index = -2, ib_expect_invalid(&c, "ib_gid_index");
    c = ok, c.ib_timeout = 32, ib_expect_invalid(&c, "ib_timeout");
    c = ok, c.ib_retry_cnt = 8, ib_expect_invalid(&c, "ib_retry_cnt");
    c = ok, memset(c.ib_device, 'x', sizeof c.ib_device), ib_expect_invalid(&c, "ib_device");
    /* The environment names the variable. */
    static const char *const bad[][2] = {{"ZC_IB_QPS_PER_PEER", "5"}, {"ZC_IB_PORT", "x"},
                                         {"ZC_IB_TIMEOUT", "32"}, {"ZC_IB_RETRY_CNT", "8"},
                                         {"ZC_IB_GID_INDEX", "-1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ZT_CHECK(setenv(bad[i][0], bad[i][1], 1) == 0);
        c = ok;
        ZT_CHECK_ST(zc_config_from_env(&c), ZC_INVALID_ARG);
        if (!strstr(c.error_text, bad[i][0]))
            zt_fail(__FILE__, __LINE__, "the error names the variable", c.error_text);
        unsetenv(bad[i][0]);
    }
}

/* ---- the wire's sizes ------------------------------------------------------------------------ */

#ifdef ZC_HAVE_IB
/* A full mesh's geometry: every rank is a connection, connection i is rank i. */
static zc_wire_geom ib_geom(uint32_t rank, uint32_t n, uint32_t slots, uint32_t slot_bytes,
                            const zc_config *cfg) {
    static uint32_t ident[ZC_MESH_MAX_RANKS];
    for (uint32_t i = 0; i < ZC_MESH_MAX_RANKS; i++) ident[i] = i;
    zc_wire_geom g = {7, rank, n, slots, slot_bytes, ZC_SLOT_HDR_BYTES + slot_bytes, n, n, 0,
                      ident, ident, NULL, cfg, NULL, NULL};
    return g;
}

/* The same sizes whatever the rank, comm id, device choice, timing or timeout. */
static void ib_sizes_ignore_the_rest(const zc_wire_geom *g, const zc_config *cfg) {
    const zc_wire_ops *w = &zc_wire_ib;
    zc_config other = *cfg;
    strcpy(other.ib_device, "mlx5_9");
    other.ib_port = 2, other.ib_gid_index = 5, other.ib_timeout = 14, other.ib_retry_cnt = 3;
    other.timeout_ns = 1, other.max_requests = 1000, other.rank = g->nranks - 1u;
    zc_wire_geom h = *g;
    h.rank = g->nranks - 1u, h.comm_id = 99, h.cfg = &other;
    ZT_CHECK(w->addr_bytes(&h) == w->addr_bytes(g));
    ZT_CHECK(w->state_bytes(&h) == w->state_bytes(g));
    ZT_CHECK(w->window_bytes(&h) == w->window_bytes(g));
}
#endif

void ib_wire_sizes_follow_geometry_and_config_only(void) {
#ifndef ZC_HAVE_IB
    ZT_SKIP("this build has no transport_ib");
#else
    const zc_wire_ops *w = &zc_wire_ib;
    ZT_CHECK_EQ(w->struct_bytes, sizeof(zc_wire_ops));
    ZT_CHECK_EQ(w->version, ZC_WIRE_VERSION);
    ZT_CHECK(strcmp(w->name, "ib") == 0);
    static const uint32_t ns[] = {1, 2, 3, 8, 100, ZC_MESH_MAX_RANKS};
    static const uint32_t slots[] = {2, 8, 1024}, bytes[] = {256, 65536};
    zc_config cfg;
    zc_config_default(&cfg);
    for (size_t si = 0; si < 3; si++)
        for (size_t bi = 0; bi < 2; bi++) {
            size_t prev_addr[ZC_IB_MAX_QPS + 1] = {0}, prev_state[ZC_IB_MAX_QPS + 1] = {0};
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (uint32_t q = 1; q <= ZC_IB_MAX_QPS; q++) {
                    cfg.ib_qps_per_peer = q;
                    zc_wire_geom g = ib_geom(0, ns[ni], slots[si], bytes[bi], &cfg);
                    size_t ab = w->addr_bytes(&g), sb = w->state_bytes(&g);
                    ZT_CHECK(ab > 0 && ab <= ZC_WIRE_MAX_ADDR_BYTES);
                    ZT_CHECK(w->window_bytes(&g) >=
                             2u * (size_t)ns[ni] * slots[si] * g.stride);
                    ZT_CHECK(ab >= prev_addr[q] && sb >= prev_state[q]); /* grows with n */
                    ZT_CHECK(ab >= prev_addr[q - 1] || q == 1);
                    prev_addr[q] = ab, prev_state[q] = sb;
                    ib_sizes_ignore_the_rest(&g, &cfg);
                    /* No config (the size query of an unknown config) covers every one. */
                    zc_wire_geom none = ib_geom(0, ns[ni], slots[si], bytes[bi], NULL);
                    ZT_CHECK(w->addr_bytes(&none) >= ab && w->state_bytes(&none) >= sb);
                }
        }
    /* The largest geometry still has an arena, over ib and auto (which may pick ib). */
    cfg = (zc_config){0};
    zc_config_default(&cfg);
    cfg.nranks = ZC_MESH_MAX_RANKS, cfg.slots = 1024, cfg.ib_qps_per_peer = ZC_IB_MAX_QPS;
    strcpy(cfg.root_addr, "127.0.0.1:1");
    cfg.secret_set = true;
    cfg.transport = ZC_TRANSPORT_IB;
    size_t ib = zc_comm_arena_bytes(&cfg);
    cfg.transport = ZC_TRANSPORT_AUTO;
    ZT_CHECK(ib > 0 && zc_comm_arena_bytes(&cfg) >= ib);
#endif
}

/* A torn 8-byte credit write (bytes from two records) is never taken for a third count. */
void ib_credit_record_catches_torn_writes(void) {
    zt_rng rng = {zt_seed() ^ 0xc4ed17ull};
    for (int i = 0; i < 20000; i++) {
        uint64_t a = zt_rng_next(&rng) >> (zt_rng_below(&rng, 64)), b = a + 1u +
                                                                          zt_rng_below(&rng, 1024);
        uint64_t ra = zc__ib_credit_record(a), rb = zc__ib_credit_record(b);
        ZT_CHECK(ra != rb && (uint32_t)ra == (uint32_t)a);
        for (uint32_t mask = 1; mask < 255; mask++) {
            uint64_t torn = 0;
            for (int k = 0; k < 8; k++)
                torn |= ((mask >> k) & 1u ? ra : rb) & (0xffull << (8 * k));
            if (torn != ra && torn != rb && torn == zc__ib_credit_record((uint32_t)torn)) {
                char d[128];
                snprintf(d, sizeof d, "counts %llu and %llu, byte mask 0x%x",
                         (unsigned long long)a, (unsigned long long)b, mask);
                zt_fail(__FILE__, __LINE__, "torn record rejected", d);
            }
        }
    }
}

/* ---- create and attach, in one process ------------------------------------------------------- */

#ifdef ZC_HAVE_IB
typedef struct ib_pair {
    zc_config cfg;
    zc_wire_geom g[2];
    void *state[2];
    uint8_t *blobs;
    size_t ab;
    char err[ZC_ERROR_TEXT_BYTES];
} ib_pair;

static void ib_pair_make(ib_pair *p, uint32_t slots, uint32_t qps) {
    memset(p, 0, sizeof *p);
    zc_config_default(&p->cfg);
    ZT_CHECK_ST(zc_config_from_env(&p->cfg), ZC_OK); /* ZC_IB_DEVICE and friends */
    p->cfg.ib_qps_per_peer = qps;
    for (uint32_t r = 0; r < 2; r++) {
        p->g[r] = ib_geom(r, 2, slots, 256, &p->cfg);
        size_t sb = (zc_wire_ib.state_bytes(&p->g[r]) + 63u) & ~(size_t)63u;
        p->state[r] = aligned_alloc(64, sb);
        ZT_CHECK(p->state[r] != NULL);
        memset(p->state[r], 0, sb); /* close of a never-created state must find nothing */
    }
    p->ab = zc_wire_ib.addr_bytes(&p->g[0]);
    p->blobs = calloc(2, p->ab);
    ZT_CHECK(p->blobs != NULL);
}

static void ib_pair_free(ib_pair *p) {
    for (uint32_t r = 0; r < 2; r++) {
        zc_wire_ib.close(p->state[r]);
        zc_wire_ib.close(p->state[r]); /* a second close does nothing */
        free(p->state[r]);
    }
    free(p->blobs);
}
#endif

void ib_create_fails_cleanly_without_device_or_in_process(void) {
#ifndef ZC_HAVE_IB
    ZT_SKIP("this build has no transport_ib");
#else
    ib_pair p;
    ib_pair_make(&p, 8, 1);
    void *windows[2] = {p.blobs, p.blobs};
    p.g[0].inproc_windows = windows;
    ZT_CHECK_ST(zc_wire_ib.create(p.state[0], &p.g[0], NULL, p.blobs, p.err, sizeof p.err),
                ZC_UNSUPPORTED);
    ZT_CHECK(strstr(p.err, "in-process") != NULL);
    zc_wire_ib.close(p.state[0]);
    p.g[0].inproc_windows = NULL;
    zc_status st = zc_wire_ib.create(p.state[0], &p.g[0], NULL, p.blobs, p.err, sizeof p.err);
    printf("    create: %s: %s\n", zc_status_name(st), st == ZC_OK ? "(a device)" : p.err);
    if (st != ZC_OK) {
        ZT_CHECK_ST(st, ZC_UNSUPPORTED);
        ZT_CHECK(strncmp(p.err, "ib: no RDMA device (", 20) == 0);
        ib_pair_free(&p);
        return;
    }
    /* A device: rank 1's create "failed" (its blob is 0xff bytes); attach names rank 1. */
    memset(p.blobs + p.ab, 0xff, p.ab);
    ZT_CHECK_ST(zc_wire_ib.attach(p.state[0], p.blobs, p.err, sizeof p.err), ZC_PEER_LOST);
    ZT_CHECK(strstr(p.err, "rank 1 could not set up") != NULL);
    ib_pair_free(&p);
    /* Rank 1 with other ring geometry (the address blob is as long: it depends on the ranks
     * and queue pairs only): attach refuses with ZC_MISMATCH and says what differs. */
    ib_pair_make(&p, 4, 1);
    free(p.state[1]);
    p.g[1] = ib_geom(1, 2, 8, 256, &p.cfg);
    size_t sb1 = (zc_wire_ib.state_bytes(&p.g[1]) + 63u) & ~(size_t)63u;
    p.state[1] = aligned_alloc(64, sb1);
    ZT_CHECK(p.state[1] != NULL && zc_wire_ib.addr_bytes(&p.g[1]) == p.ab);
    memset(p.state[1], 0, sb1);
    for (uint32_t r = 0; r < 2; r++)
        ZT_CHECK_ST(zc_wire_ib.create(p.state[r], &p.g[r], NULL, p.blobs + r * p.ab, p.err,
                                      sizeof p.err), ZC_OK);
    ZT_CHECK_ST(zc_wire_ib.attach(p.state[0], p.blobs, p.err, sizeof p.err), ZC_MISMATCH);
    printf("    other geometry: %s\n", p.err);
    ZT_CHECK(strstr(p.err, "rank 1 has nranks=2 slots=8") != NULL);
    ib_pair_free(&p);
    /* The largest geometry needs more completion-queue entries than any device has: ZC_LIMIT
     * naming the limit, before anything is allocated or registered. */
    zc_config big;
    zc_config_default(&big);
    ZT_CHECK_ST(zc_config_from_env(&big), ZC_OK);
    big.ib_qps_per_peer = ZC_IB_MAX_QPS;
    zc_wire_geom g = ib_geom(3, ZC_MESH_MAX_RANKS, 1024, 256, &big);
    size_t sb = (zc_wire_ib.state_bytes(&g) + 63u) & ~(size_t)63u;
    void *state = aligned_alloc(64, sb);
    uint8_t *blob = malloc(zc_wire_ib.addr_bytes(&g));
    ZT_CHECK(state && blob);
    char err[ZC_ERROR_TEXT_BYTES];
    ZT_CHECK_ST(zc_wire_ib.create(state, &g, NULL, blob, err, sizeof err), ZC_LIMIT);
    printf("    largest geometry: %s\n", err);
    ZT_CHECK(strstr(err, "max_cqe") != NULL || strstr(err, "max_qp") != NULL);
    zc_wire_ib.close(state);
    free(blob);
    free(state);
#endif
}

#ifdef ZC_HAVE_IB
/* Waits (polling, 10 s at most) until rank r's slot holds tag; returns it. */
static const uint8_t *ib_wait_rx(ib_pair *p, uint32_t r, uint32_t lane, uint32_t from,
                                 uint64_t m) {
    uint64_t t0 = ib_now_ns();
    for (;;) {
        uint32_t slot = (uint32_t)(m % p->g[r].slots);
        const uint8_t *in = zc_wire_ib.rx_slot(p->state[r], lane, from, slot, m + 1u, 0);
        if (in) return in;
        ZT_CHECK(zc_wire_ib.peer_alive(p->state[r], from, p->err, sizeof p->err) == ZC_OK);
        ZT_CHECK(ib_now_ns() - t0 < 10000 * IB_MS);
    }
}

static void ib_wait_credit(ib_pair *p, uint32_t r, uint32_t lane, uint32_t to, uint64_t want) {
    uint64_t t0 = ib_now_ns();
    while (zc_wire_ib.credits(p->state[r], lane, to) != want)
        ZT_CHECK(ib_now_ns() - t0 < 10000 * IB_MS);
}

/* Creates and attaches both ranks of p; false (p freed) when there is no RDMA device. */
static bool ib_pair_up(ib_pair *p) {
    for (uint32_t r = 0; r < 2; r++) {
        zc_status st = zc_wire_ib.create(p->state[r], &p->g[r], NULL, p->blobs + r * p->ab,
                                         p->err, sizeof p->err);
        if (st == ZC_UNSUPPORTED && r == 0) {
            ib_pair_free(p);
            return false;
        }
        ZT_CHECK_ST(st, ZC_OK);
    }
    for (uint32_t r = 0; r < 2; r++)
        ZT_CHECK_ST(zc_wire_ib.attach(p->state[r], p->blobs, p->err, sizeof p->err), ZC_OK);
    return true;
}

/* Rounds of `slots` messages 0 -> 1 on lane 0 and 1 -> 0 on lane 1, each round consumed and
 * credited back, so the rings wrap three times. */
static void ib_pair_traffic(ib_pair *p) {
    uint32_t slots = p->g[0].slots;
    for (uint64_t round = 0, m = 0; round < 3; round++) {
        for (uint64_t k = 0; k < slots; k++) {
            for (uint32_t lane = 0; lane < 2; lane++) {
                uint32_t from = lane, to = 1u - lane, slot = (uint32_t)((m + k) % slots);
                uint8_t *out = zc_wire_ib.tx_slot(p->state[from], lane, to, slot);
                memset(out, 0, ZC_SLOT_HDR_BYTES);
                for (uint32_t i = 0; i < 200; i++)
                    out[ZC_SLOT_HDR_BYTES + i] = (uint8_t)(m + k + i + lane);
                ZT_CHECK_ST(zc_wire_ib.post(p->state[from], lane, to, slot,
                                            ZC_SLOT_HDR_BYTES + 200, m + k + 1u), ZC_OK);
            }
        }
        for (uint64_t k = 0; k < slots; k++)
            for (uint32_t lane = 0; lane < 2; lane++) {
                const uint8_t *in = ib_wait_rx(p, 1u - lane, lane, lane, m + k);
                for (uint32_t i = 0; i < 200; i++)
                    ZT_CHECK_EQ(in[ZC_SLOT_HDR_BYTES + i], (uint8_t)(m + k + i + lane));
                zc_wire_ib.credit(p->state[1u - lane], lane, lane, m + k + 1u);
            }
        m += slots;
        ib_wait_credit(p, 0, 0, 1, m);
        ib_wait_credit(p, 1, 1, 0, m);
    }
}
#endif

void ib_wire_loopback_moves_messages_credits_and_alarm(void) {
#ifndef ZC_HAVE_IB
    ZT_SKIP("this build has no transport_ib");
#else
    for (uint32_t qps = 1; qps <= 3; qps += 2) {
        ib_pair p;
        ib_pair_make(&p, 4, qps);
        if (!ib_pair_up(&p))
            ZT_SKIP("no RDMA device here (tests/rxe runs this in a soft-RoCE guest)");
        ib_pair_traffic(&p);
        /* The first alarm wins in every window, the sender's own included. */
        zc_wire_ib.alarm(p.state[0], 0x1111);
        uint64_t t0 = ib_now_ns();
        while (zc_wire_ib.alarmed(p.state[1]) != 0x1111) {
            (void)zc_wire_ib.peer_alive(p.state[0], 1, p.err, sizeof p.err);
            ZT_CHECK(ib_now_ns() - t0 < 10000 * IB_MS);
        }
        zc_wire_ib.alarm(p.state[1], 0x2222);
        ZT_CHECK_EQ(zc_wire_ib.alarmed(p.state[0]), 0x1111);
        ZT_CHECK_EQ(zc_wire_ib.alarmed(p.state[1]), 0x1111);
        for (uint32_t r = 0; r < 2; r++)
            ZT_CHECK_ST(zc_wire_ib.peer_alive(p.state[r], 1u - r, p.err, sizeof p.err), ZC_OK);
        printf("    qps %u: 3 rounds of 4 messages each way, credits and alarm ok\n", qps);
        ib_pair_free(&p);
    }
#endif
}

#ifdef ZC_HAVE_IB
/* Puts 0 -> 1 into dst at byte offset off: one from the staging (src unregistered), then one
 * from src's registration, each followed by its header-only message; checks the bytes are
 * in place when the message arrives and that put_done follows. */
static void ib_put_round(ib_pair *p, uint64_t m, const zc_wire_mr *src_mr, uint8_t *src,
                         const uint8_t *dst, uint64_t raddr, uint64_t rkey, uint32_t bytes) {
    uint32_t slots = p->g[0].slots, slot = (uint32_t)(m % slots);
    for (uint32_t i = 0; i < bytes; i++) src[i] = (uint8_t)(m * 31u + i * 7u + 1u);
    ZT_CHECK_ST(zc_wire_ib.put(p->state[0], 0, 1, slot, m + 1u, src, src_mr, bytes, raddr, rkey),
                ZC_OK);
    uint8_t *hdr = zc_wire_ib.tx_slot(p->state[0], 0, 1, slot);
    memset(hdr, 0, ZC_SLOT_HDR_BYTES);
    ZT_CHECK_ST(zc_wire_ib.post(p->state[0], 0, 1, slot, ZC_SLOT_HDR_BYTES, m + 1u), ZC_OK);
    (void)ib_wait_rx(p, 1, 0, 0, m);
    for (uint32_t i = 0; i < bytes; i++)
        ZT_CHECK_EQ(dst[i], (uint8_t)(m * 31u + i * 7u + 1u));
    zc_wire_ib.credit(p->state[1], 0, 0, m + 1u);
    uint64_t t0 = ib_now_ns();
    while (!zc_wire_ib.put_done(p->state[0], 1)) ZT_CHECK(ib_now_ns() - t0 < 10000 * IB_MS);
}
#endif

void ib_wire_puts_into_registered_memory(void) {
#ifndef ZC_HAVE_IB
    ZT_SKIP("this build has no transport_ib");
#else
    ib_pair p;
    ib_pair_make(&p, 4, 2);
    p.cfg.ib_zcopy_min_bytes = 4096;
    if (!ib_pair_up(&p))
        ZT_SKIP("no RDMA device here (tests/rxe runs this in a soft-RoCE guest)");
    ZT_CHECK_EQ(zc_wire_ib.put_min(p.state[0]), 4096);
    enum { BYTES = 1u << 16 };
    uint8_t *src = aligned_alloc(4096, BYTES), *dst = aligned_alloc(4096, BYTES);
    ZT_CHECK(src && dst);
    memset(dst, 0, BYTES);
    zc_wire_mr smr, dmr;
    ZT_CHECK_ST(zc_wire_ib.mem_register(p.state[0], src, BYTES, ZC_MEM_HOST, -1, 0, &smr, p.err,
                                        sizeof p.err), ZC_OK);
    ZT_CHECK_ST(zc_wire_ib.mem_register(p.state[1], dst, BYTES, ZC_MEM_HOST, -1, 0, &dmr, p.err,
                                        sizeof p.err), ZC_OK);
    ZT_CHECK(smr.handle && dmr.handle);
    /* Staged puts fit a slot (256 bytes here); direct ones go whole, at any offset. Messages
     * 0.. on lane 0 over two queue pairs: each put rides its message's queue pair. */
    uint64_t m = 0;
    for (uint32_t round = 0; round < 6; round++, m++) {
        bool direct = round % 2 == 1;
        uint32_t off = round * 1000u, bytes = direct ? 9000u + round : 200u + round;
        ib_put_round(&p, m, direct ? &smr : NULL, src, dst + off,
                     (uint64_t)(uintptr_t)(dst + off), dmr.rkey, bytes);
    }
    printf("    6 puts (3 staged, 3 from registered memory) arrived in place before their "
           "messages\n");
    /* A put with a wrong key fails the peer for good (reported, not hung). */
    uint32_t slot = (uint32_t)(m % 4u);
    ZT_CHECK_ST(zc_wire_ib.put(p.state[0], 0, 1, slot, m + 1u, src, &smr, 64,
                               (uint64_t)(uintptr_t)dst, dmr.rkey ^ 0x80u), ZC_OK);
    uint64_t t0 = ib_now_ns();
    zc_status st;
    while ((st = zc_wire_ib.peer_alive(p.state[0], 1, p.err, sizeof p.err)) == ZC_OK)
        ZT_CHECK(ib_now_ns() - t0 < 20000 * IB_MS);
    ZT_CHECK_ST(st, ZC_PEER_LOST);
    printf("    wrong key: %s\n", p.err);
    ZT_CHECK(zc_wire_ib.put_done(p.state[0], 1)); /* a lost peer reads nothing any more */
    zc_wire_ib.mem_deregister(p.state[0], &smr);
    zc_wire_ib.mem_deregister(p.state[1], &dmr);
    ZT_CHECK(smr.handle == NULL && dmr.handle == NULL);
    ib_pair_free(&p);
    free(src);
    free(dst);
    /* Ranks with other ib_zcopy_min_bytes: attach says ZC_MISMATCH, naming the field. */
    ib_pair_make(&p, 4, 1);
    zc_config other = p.cfg;
    other.ib_zcopy_min_bytes = p.cfg.ib_zcopy_min_bytes + 1u;
    p.g[1].cfg = &other;
    for (uint32_t r = 0; r < 2; r++)
        ZT_CHECK_ST(zc_wire_ib.create(p.state[r], &p.g[r], NULL, p.blobs + r * p.ab, p.err,
                                      sizeof p.err), ZC_OK);
    ZT_CHECK_ST(zc_wire_ib.attach(p.state[0], p.blobs, p.err, sizeof p.err), ZC_MISMATCH);
    printf("    other threshold: %s\n", p.err);
    ZT_CHECK(strstr(p.err, "ib_zcopy_min_bytes") != NULL);
    ib_pair_free(&p);
#endif
}
