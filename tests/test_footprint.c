/* test_footprint.c: zc_comm_footprint against what init really takes (an in-process group's
 * arena and window, a shared-memory job's segments as the kernel maps them, transport_ib's
 * own sizes and queue pairs) and against the documented window layout; its refusals; and the
 * simulated hosts of cfg->inproc_ranks_per_host (zc_comm_node, split by node and across
 * hosts, collectives unchanged against tests/ref.c). */
#include "zt.h"
#include "zcoll.h"
#include "ref.h"

#include "../provider/wire.h" /* transport_ib's own sizes, as init asks them */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FP_MAXR 64

/* One rank's shared-memory window as docs/architecture.md lays it out: header and alarm
 * lines, a credit line per (lane, peer), then a ring of slots per (lane, peer). */
static size_t fp_window_bytes(const zc_config *cfg) {
    size_t n = cfg->nranks, stride = 64u + cfg->slot_bytes;
    size_t table = (n * 4u + 63u) & ~(size_t)63u; /* the window's connections */
    return 128u + table + 2u * n * 64u + 2u * n * cfg->slots * stride + (size_t)cfg->sym_bytes;
}

/* ---- in-process ---- */

void footprint_of_an_inproc_group_is_its_arena_with_the_window_in_it(void) {
    static const uint32_t ns[] = {1, 2, 8, 33};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        uint32_t n = ns[i];
        zc_config cfg;
        zr_group_config(&cfg, n, 1024, 2, 1024, 0);
        zc_footprint fp;
        ZT_CHECK_ST(zc_comm_footprint(&cfg, 0, &fp), ZC_OK);
        ZT_CHECK_EQ(fp.arena_bytes, zc_comm_arena_bytes(&cfg));
        ZT_CHECK_EQ(fp.transport, ZC_TRANSPORT_INPROC);
        ZT_CHECK_EQ(fp.shared_bytes, 0);
        ZT_CHECK_EQ(fp.registered_bytes, 0);
        ZT_CHECK_EQ(fp.private_bytes, 0);
        ZT_CHECK_EQ(fp.qps, 0);
        ZT_CHECK_EQ(fp.cq_entries, 0);
        ZT_CHECK_EQ(fp.peers, n - 1u);
        ZT_CHECK_EQ(fp.hosts, 1);
        cfg.inproc_ranks_per_host = 4; /* simulated hosts: the same sizes, ceil(n / 4) hosts */
        zc_footprint sim;
        ZT_CHECK_ST(zc_comm_footprint(&cfg, 0, &sim), ZC_OK);
        ZT_CHECK_EQ(sim.hosts, (n + 3u) / 4u);
        ZT_CHECK_EQ(sim.arena_bytes, fp.arena_bytes);
        cfg.inproc_ranks_per_host = 0;
        /* The window is part of the arena: the arena is larger than the window by the state. */
        ZT_CHECK(fp.arena_bytes > fp_window_bytes(&cfg));
        void *arenas[FP_MAXR];
        zc_comm *c[FP_MAXR];
        for (uint32_t r = 0; r < n; r++) ZT_CHECK((arenas[r] = aligned_alloc(64, fp.arena_bytes)));
        ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, fp.arena_bytes - 1u, c), ZC_TOO_SMALL);
        ZT_CHECK_ST(zc_comm_init_inproc(&cfg, arenas, fp.arena_bytes, c), ZC_OK);
        /* Every rank's footprint is the same in-process. */
        for (uint32_t r = 0; r < n; r++) {
            zc_footprint mine;
            cfg.rank = r;
            ZT_CHECK_ST(zc_comm_footprint(&cfg, 0, &mine), ZC_OK);
            ZT_CHECK(memcmp(&mine, &fp, sizeof fp) == 0);
        }
        for (uint32_t r = 0; r < n; r++) ZT_CHECK_ST(zc_comm_fini(c[r]), ZC_OK);
        for (uint32_t r = 0; r < n; r++) free(arenas[r]);
    }
}

/* ---- a shared-memory job: the segment the kernel maps for this rank ---- */

/* Bytes of this process's mapping of the memfd segment labelled "zc-<id>-<rank>" (0: none). */
static size_t fp_my_segment(uint32_t rank) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512], tail[32];
    size_t bytes = 0;
    snprintf(tail, sizeof tail, "-%u (deleted)", rank);
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        size_t len = strlen(line), tl = strlen(tail);
        if (!strstr(line, "memfd:zc-") || len < tl || strcmp(line + len - tl, tail) != 0)
            continue;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) bytes += hi - lo;
    }
    if (f) fclose(f);
    return bytes;
}

/* This process's pinned memory in bytes (VmPin: what the NIC registrations pinned). */
static size_t fp_pinned(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmPin: %lu kB", &kib) == 1) break;
    if (f) fclose(f);
    return (size_t)kib * 1024u;
}

/* A rank of a zcrun job: its configuration from the environment, its footprint, then its
 * communicator in an arena of fp.arena_bytes, and how much init pinned. */
typedef struct fp_rank {
    zc_config cfg;
    zc_footprint fp;
    void *arena;
    zc_comm *c;
    size_t pinned;
} fp_rank;

/* 0, or the rank's exit status with a line saying why. */
static int fp_rank_open(fp_rank *k) {
    memset(k, 0, sizeof *k);
    zc_config_default(&k->cfg);
    if (zc_config_from_env(&k->cfg) != ZC_OK) return 2;
    if (zc_comm_footprint(&k->cfg, 0, &k->fp) != ZC_OK) {
        printf("rank %u: footprint: %s\n", k->cfg.rank, zc_init_error_text());
        return 3;
    }
    size_t before = fp_pinned();
    k->arena = aligned_alloc(64, k->fp.arena_bytes);
    if (zc_comm_init(&k->cfg, k->arena, k->fp.arena_bytes, &k->c) != ZC_OK) {
        printf("rank %u: init: %s\n", k->cfg.rank, zc_init_error_text());
        return 4;
    }
    k->pinned = fp_pinned() - before;
    return 0;
}

static void fp_rank_close(fp_rank *k) {
    zc_comm_fini(k->c);
    free(k->arena);
}

int footprint_rank_shm_job(void) {
    fp_rank k;
    int rc = fp_rank_open(&k);
    if (rc) return rc;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), want = fp_window_bytes(&k.cfg);
    size_t seg = fp_my_segment(k.cfg.rank);
    int bad = k.fp.arena_bytes != zc_comm_arena_bytes(&k.cfg) ||
              k.fp.transport != ZC_TRANSPORT_SHM || strcmp(zc_comm_transport(k.c), "shm") != 0 ||
              k.fp.shared_bytes != want || seg != (want + page - 1u) / page * page ||
              k.fp.registered_bytes != 0 || k.pinned || k.fp.peers != k.cfg.nranks - 1u ||
              k.fp.qps != 0 || k.fp.hosts != 1;
    printf("rank %u: shared %zu (layout %zu), mapped %zu, peers %u, transport %s\n", k.cfg.rank,
           k.fp.shared_bytes, want, seg, k.fp.peers, zc_comm_transport(k.c));
    fp_rank_close(&k);
    return bad ? 1 : 0;
}

void footprint_matches_the_shm_windows_of_a_job(void) {
    static char out[8192];
    const char *env[] = {"ZC_TRANSPORT=auto", "ZC_SLOT_BYTES=4096", "ZC_SLOTS=4", NULL};
    int rc = zt_run_ranks(3, "footprint_rank_shm_job", 30, env, out, sizeof out);
    if (rc != 0) printf("%s", out);
    ZT_CHECK_EQ(rc, 0);
}

/* ---- transport_ib ---- */

#ifdef ZC_HAVE_IB
/* Rank 5 of 16 between processes, the default sizes. */
static void fp_sixteen(zc_config *cfg) {
    zc_config_default(cfg);
    cfg->nranks = 16;
    cfg->rank = 5;
    strcpy(cfg->root_addr, "127.0.0.1:1");
    cfg->secret_set = true;
}
#endif

void footprint_over_ib_is_what_transport_ib_takes(void) {
#ifndef ZC_HAVE_IB
    ZT_SKIP("this build has no transport_ib");
#else
    zc_config cfg;
    fp_sixteen(&cfg);
    for (uint32_t q = 1; q <= 4; q++) {
        cfg.ib_qps_per_peer = q;
        zc_footprint fp;
        ZT_CHECK_ST(zc_comm_footprint(&cfg, 1, &fp), ZC_OK); /* AUTO, a rank per host: ib */
        ZT_CHECK_EQ(fp.transport, ZC_TRANSPORT_IB);
        ZT_CHECK_EQ(fp.hosts, 16);
        ZT_CHECK_EQ(fp.peers, 15);
        ZT_CHECK_EQ(fp.qps, 15u * q); /* a full mesh: every peer through q queue pairs */
        ZT_CHECK_EQ(fp.arena_bytes, zc_comm_arena_bytes(&cfg));
        zc_config ib = cfg;
        ib.transport = ZC_TRANSPORT_IB;
        zc_wire_geom g = {0, cfg.rank, cfg.nranks, cfg.slots, cfg.slot_bytes,
                          ZC_SLOT_HDR_BYTES + cfg.slot_bytes, cfg.nranks, cfg.nranks, 0, NULL,
                          NULL, NULL, &ib, NULL, NULL};
        uint64_t mem = 0, locked = 0;
        zc_wire_ib.takes(&g, &mem, &locked);
        zc_wire_links links;
        zc_wire_ib.links(&g, &links);
        ZT_CHECK_EQ(fp.registered_bytes, locked);
        ZT_CHECK_EQ(fp.private_bytes, mem);
        ZT_CHECK_EQ(fp.shared_bytes, 0);
        ZT_CHECK_EQ(fp.cq_entries, links.cq_entries);
        /* The registration holds at least the window's rings (one per lane and peer). */
        ZT_CHECK(fp.registered_bytes >= 2u * 16u * cfg.slots * (64u + cfg.slot_bytes));
        /* ib named outright: the same on one host. */
        zc_footprint one;
        ZT_CHECK_ST(zc_comm_footprint(&ib, 0, &one), ZC_OK);
        ZT_CHECK_EQ(one.qps, fp.qps);
        ZT_CHECK_EQ(one.registered_bytes, fp.registered_bytes);
        ZT_CHECK_EQ(one.hosts, 1);
    }
    zc_footprint fp; /* AUTO on one host: shared memory */
    ZT_CHECK_ST(zc_comm_footprint(&cfg, 0, &fp), ZC_OK);
    ZT_CHECK_EQ(fp.transport, ZC_TRANSPORT_SHM);
    ZT_CHECK_EQ(fp.qps, 0);
    ZT_CHECK_EQ(fp.shared_bytes, fp_window_bytes(&cfg));
#endif
}

/* hier across hosts of 4 ranks: the two-wire communicator, each instance sized for its own
 * connections (shm: the host's 4 under a cap of 4; ib: the 12 others and this rank, under a
 * cap of 16 - 4 + 1), as the wires' own takes and links say; AUTO there stays on ib. */
void footprint_of_the_two_wire_communicator_is_per_instance(void) {
#ifndef ZC_HAVE_IB
    ZT_SKIP("this build has no transport_ib");
#else
    zc_config cfg;
    fp_sixteen(&cfg);
    cfg.transport = ZC_TRANSPORT_HIER;
    for (uint32_t q = 1; q <= 2; q++) {
        cfg.ib_qps_per_peer = q;
        zc_footprint fp;
        ZT_CHECK_ST(zc_comm_footprint(&cfg, 4, &fp), ZC_OK);
        ZT_CHECK_EQ(fp.transport, ZC_TRANSPORT_HIER);
        ZT_CHECK_EQ(fp.hosts, 4);
        ZT_CHECK_EQ(fp.peers, 15);
        ZT_CHECK_EQ(fp.qps, 12u * q); /* queue pairs for the other hosts' ranks only */
        ZT_CHECK_EQ(fp.arena_bytes, zc_comm_arena_bytes(&cfg));
        zc_wire_geom g = {0, cfg.rank, cfg.nranks, cfg.slots, cfg.slot_bytes,
                          ZC_SLOT_HDR_BYTES + cfg.slot_bytes, 4, 4, 0, NULL, NULL, NULL, &cfg, NULL, NULL};
        uint64_t mem = 0, locked = 0, imem = 0, ilocked = 0;
        zc_wire_links links, ilinks;
        zc_wire_shm.takes(&g, &mem, &locked);
        zc_wire_shm.links(&g, &links);
        g.nconn = g.conn_cap = 13;
        zc_wire_ib.takes(&g, &imem, &ilocked);
        zc_wire_ib.links(&g, &ilinks);
        ZT_CHECK_EQ(fp.shared_bytes, mem);
        ZT_CHECK_EQ(fp.registered_bytes, ilocked);
        ZT_CHECK_EQ(fp.private_bytes, imem);
        ZT_CHECK_EQ(fp.qps, ilinks.qps);
        ZT_CHECK_EQ(fp.cq_entries, ilinks.cq_entries);
        /* Less than one wire for all: ib alone registers rings for 16 connections. */
        zc_config ib = cfg;
        ib.transport = ZC_TRANSPORT_IB;
        zc_footprint one;
        ZT_CHECK_ST(zc_comm_footprint(&ib, 4, &one), ZC_OK);
        ZT_CHECK(fp.registered_bytes < one.registered_bytes);
        ZT_CHECK_EQ(one.qps, 15u * q);
        /* AUTO stays on ib (hier is asked for): ib's footprint. */
        zc_config automatic = cfg;
        automatic.transport = ZC_TRANSPORT_AUTO;
        zc_footprint a;
        ZT_CHECK_ST(zc_comm_footprint(&automatic, 4, &a), ZC_OK);
        ZT_CHECK_EQ(a.transport, ZC_TRANSPORT_IB);
        ZT_CHECK_EQ(a.registered_bytes, one.registered_bytes);
        ZT_CHECK_EQ(a.qps, one.qps);
    }
#endif
}

void footprint_refuses_what_init_refuses_with_a_sentence(void) {
    zc_config cfg;
    zc_footprint fp;
    zc_config_default(&cfg);
    ZT_CHECK_ST(zc_comm_footprint(NULL, 0, &fp), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_init_error_text(), "cfg is NULL") != NULL);
    ZT_CHECK_ST(zc_comm_footprint(&cfg, 0, NULL), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_init_error_text(), "out is NULL") != NULL);
    cfg.nranks = ZC_MAX_RANKS + 1u;
    strcpy(cfg.root_addr, "127.0.0.1:1");
    cfg.secret_set = true;
    memset(&fp, 0x5a, sizeof fp);
    ZT_CHECK_ST(zc_comm_footprint(&cfg, 8, &fp), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_init_error_text(), "cfg->nranks") != NULL);
    ZT_CHECK_EQ(fp.arena_bytes, 0);
    ZT_CHECK_EQ(fp.peers, 0);
    cfg.nranks = 16;
    cfg.transport = ZC_TRANSPORT_SHM;
    ZT_CHECK_ST(zc_comm_footprint(&cfg, 8, &fp), ZC_UNSUPPORTED);
    ZT_CHECK(strstr(zc_init_error_text(), "span 2 hosts") != NULL);
    ZT_CHECK_ST(zc_comm_footprint(&cfg, 16, &fp), ZC_OK); /* all on one host */
    ZT_CHECK_EQ(fp.hosts, 1);
    cfg.slots = 3;
    ZT_CHECK_ST(zc_comm_footprint(&cfg, 0, &fp), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_init_error_text(), "cfg->slots") != NULL);
}

/* ---- simulated hosts in one process ---- */

typedef struct fp_group {
    uint32_t n;
    size_t bytes;
    void *arenas[FP_MAXR];
    zc_comm *c[FP_MAXR];
} fp_group;

static void fp_open(fp_group *g, const zc_config *cfg) {
    g->n = cfg->nranks;
    g->bytes = zc_comm_arena_bytes(cfg);
    ZT_CHECK(g->bytes > 0);
    for (uint32_t r = 0; r < g->n; r++) ZT_CHECK((g->arenas[r] = aligned_alloc(64, g->bytes)));
    zc_status st = zc_comm_init_inproc(cfg, g->arenas, g->bytes, g->c);
    if (st != ZC_OK) printf("    init: %s\n", zc_init_error_text());
    ZT_CHECK_ST(st, ZC_OK);
}

static void fp_close(fp_group *g) {
    for (uint32_t r = 0; r < g->n; r++) {
        if (g->c[r]) ZT_CHECK_ST(zc_comm_fini(g->c[r]), ZC_OK);
        free(g->arenas[r]);
    }
}

/* Splits g by colors into kids (arenas from the parent's size). */
static void fp_split(fp_group *g, const int *colors, fp_group *kids) {
    int keys[FP_MAXR] = {0};
    memset(kids, 0, sizeof *kids);
    kids->n = g->n;
    kids->bytes = g->bytes;
    for (uint32_t r = 0; r < g->n; r++) ZT_CHECK((kids->arenas[r] = aligned_alloc(64, g->bytes)));
    ZT_CHECK_ST(zc_comm_split_inproc(g->c, colors, keys, kids->arenas, g->bytes, kids->c), ZC_OK);
}

void inproc_simulated_hosts_set_node_and_survive_split(void) {
    zc_config cfg;
    zr_group_config(&cfg, 10, 512, 4, 1024, 0);
    cfg.inproc_ranks_per_host = 4;
    fp_group g, by_node, by_parity;
    fp_open(&g, &cfg);
    static const uint32_t node[10] = {0, 0, 0, 0, 4, 4, 4, 4, 8, 8};
    int colors[FP_MAXR], parity[FP_MAXR];
    for (uint32_t r = 0; r < 10; r++) {
        ZT_CHECK_EQ(zc_comm_node(g.c[r]), node[r]);
        colors[r] = (int)zc_comm_node(g.c[r]);
        parity[r] = (int)(r % 2u);
    }
    /* By node: one child per simulated host (4, 4 and 2 ranks), each on one host. */
    fp_split(&g, colors, &by_node);
    for (uint32_t r = 0; r < 10; r++) {
        ZT_CHECK_EQ(zc_comm_size(by_node.c[r]), r < 8 ? 4u : 2u);
        ZT_CHECK_EQ(zc_comm_rank(by_node.c[r]), r % 4u);
        ZT_CHECK_EQ(zc_comm_node(by_node.c[r]), 0);
    }
    /* By parity: the evens 0 2 4 6 8 sit on hosts 0 0 1 1 2 (child nodes 0 0 2 2 4), the odds
     * 1 3 5 7 9 on hosts 0 0 1 1 2 as well. */
    fp_split(&g, parity, &by_parity);
    static const uint32_t kid_node[5] = {0, 0, 2, 2, 4};
    for (uint32_t r = 0; r < 10; r++) ZT_CHECK_EQ(zc_comm_node(by_parity.c[r]), kid_node[r / 2u]);
    fp_close(&by_parity);
    fp_close(&by_node);
    fp_close(&g);
    /* Without simulated hosts every rank is on host 0; k >= n is one host too. */
    cfg.inproc_ranks_per_host = 0;
    fp_open(&g, &cfg);
    for (uint32_t r = 0; r < 10; r++) ZT_CHECK_EQ(zc_comm_node(g.c[r]), 0);
    fp_close(&g);
    cfg.inproc_ranks_per_host = 25;
    fp_open(&g, &cfg);
    for (uint32_t r = 0; r < 10; r++) ZT_CHECK_EQ(zc_comm_node(g.c[r]), 0);
    fp_close(&g);
}

/* Every collective on a group with simulated hosts (uneven: 3 to a host of 10 ranks), against
 * the reference, in place and not. */
void inproc_simulated_hosts_keep_every_collective_correct(void) {
    zc_config cfg;
    zr_group_config(&cfg, 10, 256, 4, 512, 0);
    cfg.inproc_ranks_per_host = 3;
    fp_group g;
    fp_open(&g, &cfg);
    static const size_t counts[] = {0, 1, 7, 300, 2000};
    uint8_t *send[FP_MAXR], *recv[FP_MAXR], *want[FP_MAXR];
    zc_req reqs[FP_MAXR];
    for (uint32_t i = 0; i < (uint32_t)ZR_COUNT * 5u * 2u; i++) {
        const zr_case k = {(zr_coll)(i / 10u), 10, counts[i / 2u % 5u], ZC_FLOAT32, ZC_SUM,
                           i % 7u % 10u, (i % 2u) && (zr_coll)(i / 10u) != ZR_A2A};
        size_t bb = zr_buf_bytes(&k);
        for (uint32_t r = 0; r < 10; r++) {
            send[r] = malloc(bb + 1), recv[r] = malloc(bb + 1), want[r] = malloc(bb + 1);
            zr_fill(send[r], 10 * k.count, k.t, zt_seed() + i, r, 0);
            memset(recv[r], 0xA5, bb), memset(want[r], 0xA5, bb);
        }
        for (uint32_t r = 0; r < 10; r++) zr_want(&k, send, r, want[r]);
        for (uint32_t r = 0; r < 10; r++)
            ZT_CHECK_ST(zr_issue(&k, g.c[r], r, send[r], recv[r], &reqs[r]), ZC_OK);
        for (uint32_t r = 0; r < 10; r++) ZT_CHECK_ST(zc_wait(g.c[r], &reqs[r]), ZC_OK);
        for (uint32_t r = 0; r < 10; r++) {
            size_t bytes;
            const uint8_t *got = zr_result(&k, r, send[r], recv[r], &bytes);
            ZT_CHECK(zr_first_diff(got, want[r], bytes) == bytes);
        }
        for (uint32_t r = 0; r < 10; r++) free(send[r]), free(recv[r]), free(want[r]);
    }
    fp_close(&g);
}

void config_inproc_ranks_per_host_is_for_inproc_groups_only(void) {
    zc_config cfg;
    zc_config_default(&cfg);
    ZT_CHECK_EQ(cfg.inproc_ranks_per_host, 0);
    cfg.inproc_ranks_per_host = 4; /* AUTO */
    ZT_CHECK_EQ(zc_comm_arena_bytes(&cfg), 0);
    zc_footprint fp;
    ZT_CHECK_ST(zc_comm_footprint(&cfg, 0, &fp), ZC_INVALID_ARG);
    ZT_CHECK(strstr(zc_init_error_text(), "inproc_ranks_per_host is 4") != NULL);
    cfg.transport = ZC_TRANSPORT_INPROC;
    ZT_CHECK(zc_comm_arena_bytes(&cfg) > 0);
    /* The environment sets it for in-process groups and is refused for others. */
    zc_config_default(&cfg);
    cfg.transport = ZC_TRANSPORT_INPROC;
    setenv("ZC_INPROC_RANKS_PER_HOST", "8", 1);
    ZT_CHECK_ST(zc_config_tunables_from_env(&cfg), ZC_OK);
    ZT_CHECK_EQ(cfg.inproc_ranks_per_host, 8);
    zc_config_default(&cfg);
    ZT_CHECK_ST(zc_config_tunables_from_env(&cfg), ZC_INVALID_ARG);
    ZT_CHECK(strstr(cfg.error_text, "inproc_ranks_per_host") != NULL);
    ZT_CHECK_EQ(cfg.inproc_ranks_per_host, 0);
    setenv("ZC_INPROC_RANKS_PER_HOST", "x", 1);
    cfg.transport = ZC_TRANSPORT_INPROC;
    ZT_CHECK_ST(zc_config_tunables_from_env(&cfg), ZC_INVALID_ARG);
    ZT_CHECK(strstr(cfg.error_text, "ZC_INPROC_RANKS_PER_HOST") != NULL);
    unsetenv("ZC_INPROC_RANKS_PER_HOST");
}

/* ---- zcfoot ---- */

static char fp_out[1 << 16];

static int fp_zcfoot(const char *const args[]) {
    static char path[4200];
    const char *argv[24];
    size_t k = 0;
    snprintf(path, sizeof path, "%s/zcfoot", zt_build_dir());
    argv[k++] = path;
    for (size_t i = 0; args[i] && k + 1 < sizeof argv / sizeof argv[0]; i++) argv[k++] = args[i];
    argv[k] = NULL;
    int rc = zt_run(argv, NULL, fp_out, sizeof fp_out, 20000, NULL);
    if (rc != 0) printf("    --- zcfoot ---\n%s    ---\n", fp_out);
    return rc;
}

/* The row of n in fp_out: its columns after "ranks" as read by sscanf (0: no such row). */
static int fp_row(uint32_t n, char *wire, unsigned long long v[8]) {
    char head[16];
    snprintf(head, sizeof head, "\n%8u ", n);
    const char *row = strstr(fp_out, head);
    if (!row) return 0;
    unsigned hosts;
    return sscanf(row + 1, "%*u %u %15s %llu %llu %llu %llu %llu %llu %llu %llu", &hosts, wire,
                  &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
}

void zcfoot_prints_the_footprint_and_refuses_past_the_ceiling(void) {
    const char *args[] = {"--raw", "--transport", "ib", "--per-host", "8", "--ranks",
                          "SIZES", "--slots", "4", NULL};
    char big[32], line[64];
    snprintf(big, sizeof big, "8,64,%u", ZC_MAX_RANKS + 1u);
    args[6] = big;
#ifndef ZC_HAVE_IB
    args[2] = "shm", args[4] = "0";
#endif
    ZT_CHECK_EQ(fp_zcfoot(args), 0);
    static const uint32_t ns[] = {8, 64};
    for (size_t i = 0; i < 2; i++) {
        zc_config cfg;
        zc_config_default(&cfg);
        cfg.nranks = ns[i];
        cfg.slots = 4;
        cfg.transport = strcmp(args[2], "ib") == 0 ? ZC_TRANSPORT_IB : ZC_TRANSPORT_SHM;
        strcpy(cfg.root_addr, "127.0.0.1:29500");
        cfg.secret_set = true;
        zc_footprint fp;
        ZT_CHECK_ST(zc_comm_footprint(&cfg, (uint32_t)atoi(args[4]), &fp), ZC_OK);
        char wire[16];
        unsigned long long v[8];
        ZT_CHECK_EQ(fp_row(ns[i], wire, v), 10);
        ZT_CHECK(strcmp(wire, args[2]) == 0);
        ZT_CHECK_EQ(v[0], fp.arena_bytes);
        ZT_CHECK_EQ(v[1], fp.shared_bytes);
        ZT_CHECK_EQ(v[2], fp.registered_bytes);
        ZT_CHECK_EQ(v[3], fp.device_bytes);
        ZT_CHECK_EQ(v[4], fp.peers);
        ZT_CHECK_EQ(v[5], fp.qps);
        ZT_CHECK_EQ(v[6], fp.cq_entries);
        ZT_CHECK_EQ(v[7], fp.arena_bytes + fp.shared_bytes + fp.private_bytes);
    }
    snprintf(line, sizeof line, "%8u refused: ", ZC_MAX_RANKS + 1u);
    ZT_CHECK(strstr(fp_out, line) != NULL);
    ZT_CHECK(strstr(fp_out, "cfg->nranks") != NULL);
    const char *bad[] = {"--ranks", "8,x", NULL};
    ZT_CHECK_EQ(fp_zcfoot(bad), 2);
    ZT_CHECK(strstr(fp_out, "--ranks") != NULL);
}

void zcfoot_times_a_small_inproc_allreduce(void) {
    const char *args[] = {"--time", "--ranks", "4,9", "--slot-bytes", "1024", "--slots", "2",
                          "--reps", "3", "--no-gpu", NULL};
    ZT_CHECK_EQ(fp_zcfoot(args), 0);
    ZT_CHECK(strstr(fp_out, "median_ms") != NULL);
    ZT_CHECK(strstr(fp_out, "\n       4 ") != NULL);
    ZT_CHECK(strstr(fp_out, "\n       9 ") != NULL);
    ZT_CHECK(strstr(fp_out, "\n# 9 / 4 ranks: median ") != NULL); /* the sizes' ratio */
    ZT_CHECK(strstr(fp_out, "failed") == NULL);
}

/* A barrier's time and messages: the hierarchical one on hosts of 4 (16 ranks: 2.0 messages per
 * rank, measured and by formula), dissemination with every rank its own host (4 each). */
void zcfoot_times_barriers_with_their_formula(void) {
    const char *hier[] = {"--time", "--coll", "barrier", "--ranks", "16", "--overlay", "9",
                          "--per-host", "4", "--slot-bytes", "1024", "--slots", "2", "--reps",
                          "3", "--no-gpu", NULL};
    ZT_CHECK_EQ(fp_zcfoot(hier), 0);
    ZT_CHECK(strstr(fp_out, " hrd ") != NULL);
    ZT_CHECK(strstr(fp_out, "2.0         4           hrd      6         2.0") != NULL);
    const char *flat[] = {"--time", "--coll", "barrier", "--ranks", "16", "--overlay", "9",
                          "--per-host", "1", "--slot-bytes", "1024", "--slots", "2", "--reps",
                          "3", "--no-gpu", NULL};
    ZT_CHECK_EQ(fp_zcfoot(flat), 0);
    ZT_CHECK(strstr(fp_out, "4.0         4 dissemination      4         4.0") != NULL);
}

/* ---- over real verbs (tests/rxe runs the ib_ tests in a soft-RoCE guest) ---- */

/* RC queue pairs `rdma res show qp` lists for this process. */
static uint32_t fp_my_qps(void) {
    char cmd[64], line[512], mine[32];
    uint32_t n = 0;
    snprintf(mine, sizeof mine, " pid %d ", (int)getpid());
    snprintf(cmd, sizeof cmd, "rdma res show qp 2>/dev/null");
    FILE *p = popen(cmd, "r");
    while (p && fgets(line, sizeof line, p))
        if (strstr(line, "type RC") && strstr(line, mine)) n++;
    if (p) pclose(p);
    return n;
}

int footprint_rank_ib_job(void) {
    fp_rank k;
    int rc = fp_rank_open(&k);
    if (rc) return rc;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint32_t qps = fp_my_qps();
    /* The window and the staging are pinned apart, each rounded up to whole pages. */
    int bad = k.fp.transport != ZC_TRANSPORT_IB || strcmp(zc_comm_transport(k.c), "ib") != 0 ||
              k.pinned < k.fp.registered_bytes || k.pinned > k.fp.registered_bytes + 2u * page ||
              qps != k.fp.qps || k.fp.qps != (k.cfg.nranks - 1u) * k.cfg.ib_qps_per_peer;
    printf("rank %u: registered %zu, pinned %zu; qps %u, listed %u\n", k.cfg.rank,
           k.fp.registered_bytes, k.pinned, k.fp.qps, qps);
    zc_req r;
    if (zc_barrier(k.c, &r) != ZC_OK || zc_wait(k.c, &r) != ZC_OK) bad = 1; /* all counted */
    fp_rank_close(&k);
    return bad ? 1 : 0;
}

void ib_footprint_matches_what_a_job_pins_and_opens(void) {
#ifndef ZC_HAVE_IB
    ZT_SKIP("this build has no transport_ib");
#else
    static char out[8192];
    if (access("/sys/class/infiniband/rxe0", F_OK) != 0)
        ZT_SKIP("no RDMA device here (tests/rxe runs this in a soft-RoCE guest)");
    const char *env[] = {"ZC_TRANSPORT=ib", "ZC_IB_DEVICE=rxe0", "ZC_IB_QPS_PER_PEER=2",
                         "ZC_SLOT_BYTES=4096", "ZC_SLOTS=4", NULL};
    int rc = zt_run_ranks(3, "footprint_rank_ib_job", 60, env, out, sizeof out);
    printf("%s", out);
    ZT_CHECK_EQ(rc, 0);
#endif
}
