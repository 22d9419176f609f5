/* test_initscale.c: init's per-rank work on synthetic hello tables of 4,096 and 65,536 ranks
 * (8 per host, a host's ranks scattered over the rank space): the ranks sorted by host and
 * linked per host (zc__sort_by_key, zc__link_keys) against a plain scan, every rank's
 * connection set (what rank 0 computes once per held blob in the sparse exchange) against
 * the overlay plus a scan of its host, and the time of each, printed. */
#include "zt.h"
#include "zcoll.h"

#include "../core/bootstrap.h"
#include "../core/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank r's host: 8 ranks per host, host h's ranks spread by a multiplier prime to n. */
static uint64_t is_host(uint32_t r, uint32_t n) {
    uint32_t spread = (uint32_t)(((uint64_t)r * 40503u) % n); /* a permutation: n = 2^k */
    return 0x9e3779b97f4a7c15ull * (spread / 8u + 1u);
}

/* A communicator of n ranks of processes in overlay mode (only what the connection set reads). */
static zc_comm *is_comm(uint32_t n) {
    zc_comm *c = calloc(1, sizeof *c);
    ZT_CHECK(c != NULL);
    zc_config_default(&c->cfg);
    c->cfg.nranks = n;
    c->cfg.overlay_min_ranks = 8;
    c->cfg.transport = ZC_TRANSPORT_IB;
    c->nranks = n;
    return c;
}

static void is_check_size(uint32_t n) {
    uint64_t *host = malloc(n * sizeof *host);
    uint32_t *order = malloc(n * 4u), *first = malloc(n * 4u), *next = malloc(n * 4u);
    uint32_t set[ZC_BOOT_NEED_MAX], want[ZC_BOOT_NEED_MAX];
    ZT_CHECK(host && order && first && next);
    for (uint32_t r = 0; r < n; r++) host[r] = is_host(r, n);
    double t0 = zt_now_s();
    zc__sort_by_key(host, sizeof *host, n, order);
    zc__link_keys(host, sizeof *host, n, order, first, next);
    double t_index = zt_now_s() - t0;
    for (uint32_t i = 1; i < n; i++) /* sorted by host, then rank */
        ZT_CHECK(host[order[i - 1]] < host[order[i]] ||
                 (host[order[i - 1]] == host[order[i]] && order[i - 1] < order[i]));
    zc_comm *c = is_comm(n);
    t0 = zt_now_s();
    uint64_t total = 0;
    for (uint32_t r = 0; r < n; r++)
        total += zc__conn_set(c, first, next, r, set, ZC_BOOT_NEED_MAX);
    double t_sets = zt_now_s() - t0;
    for (uint32_t r = 0; r < n; r += n / 61u + 1u) { /* against the overlay and a scan */
        uint32_t k = zc__conn_set(c, first, next, r, set, ZC_BOOT_NEED_MAX);
        uint32_t lowest = n, mates = 0;
        uint32_t w = zc__overlay_set(n, r, want, ZC_BOOT_NEED_MAX);
        for (uint32_t p = 0; p < n; p++) {
            if (host[p] != host[r]) continue;
            lowest = p < lowest ? p : lowest;
            mates++;
            bool in = false;
            for (uint32_t i = 0; i < w; i++) in = in || want[i] == p;
            if (!in) want[w++] = p;
        }
        ZT_CHECK_EQ(first[r], lowest);
        ZT_CHECK_EQ(mates, n < 8u ? n : 8u);
        ZT_CHECK_EQ(k, w);
        for (uint32_t i = 0; i < k; i++) {
            bool in = false;
            for (uint32_t j = 0; j < w; j++) in = in || want[j] == set[i];
            ZT_CHECK(in && (i == 0 || set[i - 1] < set[i]));
        }
    }
    printf("init at %u ranks, 8 per host: sort by host and link %.2f ms, every rank's "
           "connection set %.2f ms (%.1f connections each)\n", n, t_index * 1e3, t_sets * 1e3,
           (double)total / n);
    free(c);
    free(host);
    free(order);
    free(first);
    free(next);
}

void init_host_index_and_connection_sets_at_4096_and_65536_ranks(void) {
    is_check_size(4096);
    is_check_size(65536);
    is_check_size(1); /* one rank: its own host, itself */
    is_check_size(32);
}
