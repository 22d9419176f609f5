/* conn.c: the connection set of a rank, a pure function of the rank count, the rank, the
 * configuration and where the ranks run, so that both ends of a connection agree without
 * talking: every rank (a full mesh), or in overlay mode the overlay of layout.h plus the ranks
 * of its own host. The communicator's connection table (comm->conn, comm->conn_peer) is filled
 * from it. */
#include "engine.h"
#include "text.h"

static uint32_t zc_log2_ceil(uint32_t n) {
    uint32_t k = 0;
    while (k < 32u && (1ull << k) < n) k++;
    return k;
}

uint32_t zc__conn_cap(const zc_config *cfg) {
    uint32_t n = cfg->nranks;
    if (!zc__overlay(cfg)) return n;
    uint32_t k = cfg->inproc_ranks_per_host && cfg->inproc_ranks_per_host < n
                     ? cfg->inproc_ranks_per_host : n;
    uint32_t local = cfg->transport == ZC_TRANSPORT_INPROC ? k : ZC_OVERLAY_MAX_LOCAL;
    uint64_t cap = 2u * (uint64_t)zc_log2_ceil(n) + zc_log2_ceil(n) + 1u + local;
    return cap < n ? (uint32_t)cap : n;
}

/* Virtual rank of r under recursive doubling on n ranks (P, e as in layout.h), UINT32_MAX for
 * a folded rank; and the real rank of virtual rank u. */
static uint32_t zc_vrank(uint32_t r, uint32_t e) {
    if (r < 2u * e) return r & 1u ? UINT32_MAX : r / 2u;
    return r - e;
}
static uint32_t zc_real(uint32_t u, uint32_t e) { return u < e ? 2u * u : u + e; }

/* Adds p to the set under construction (out[0..*k), kept ascending, no repeats); false when
 * p is new and the set holds cap already. */
static bool zc_add(uint32_t *out, uint32_t *k, uint32_t cap, uint32_t p) {
    uint32_t i = *k;
    while (i > 0 && out[i - 1u] > p) i--;
    if (i > 0 && out[i - 1u] == p) return true;
    if (*k == cap) return false;
    for (uint32_t j = *k; j > i; j--) out[j] = out[j - 1u];
    out[i] = p;
    (*k)++;
    return true;
}

uint32_t zc__overlay_set(uint32_t n, uint32_t r, uint32_t *out, uint32_t cap) {
    uint32_t k = 0, P = 1;
    while (P <= n / 2u) P *= 2u;
    uint32_t e = n - P, u = zc_vrank(r, e);
    bool fit = true;
    for (uint64_t d = 1; d < n; d *= 2u) {
        fit = zc_add(out, &k, cap, (uint32_t)((r + d) % n)) && fit;
        fit = zc_add(out, &k, cap, (uint32_t)((r + n - d) % n)) && fit;
    }
    for (uint32_t d = 1; u != UINT32_MAX && d < P; d *= 2u)
        fit = zc_add(out, &k, cap, zc_real(u ^ d, e)) && fit;
    if (r < 2u * e) fit = zc_add(out, &k, cap, r ^ 1u) && fit;
    fit = zc_add(out, &k, cap, r) && fit;
    ZC_ASSERT(fit); /* zc__conn_cap bounds the overlay */
    return k;
}

/* Rank p's host: hosts[p] at stride bytes, else its simulated host. */
static uint64_t zc_host(const zc_comm *c, const uint64_t *hosts, size_t stride, uint32_t p) {
    uint32_t n = c->nranks, k = c->cfg.inproc_ranks_per_host;
    if (hosts) return *(const uint64_t *)(const void *)((const uint8_t *)hosts + p * stride);
    return k && k < n ? p / k : 0u;
}

uint32_t zc__conn_count(const zc_config *cfg, uint32_t per_host) {
    uint32_t set[128], n = cfg->nranks, r = cfg->rank;
    if (!zc__overlay(cfg)) return n;
    uint32_t k = zc__overlay_set(n, r, set, 128u), per = per_host && per_host < n ? per_host : n;
    uint32_t lo = r / per * per, hi = lo + per < n ? lo + per : n;
    for (uint32_t p = lo; p < hi; p++) {
        bool in = false;
        for (uint32_t i = 0; i < k && !in; i++) in = set[i] == p;
        k += !in;
    }
    return k;
}

uint32_t zc__conn_set(const zc_comm *c, const uint64_t *hosts, size_t stride, uint32_t r,
                      uint32_t *out, uint32_t cap) {
    uint32_t n = c->nranks, k = 0;
    if (!zc__overlay(&c->cfg)) {
        for (uint32_t p = 0; p < n && k < cap; p++) out[k++] = p;
        return k;
    }
    uint32_t room = zc__conn_cap(&c->cfg) < cap ? zc__conn_cap(&c->cfg) : cap;
    k = zc__overlay_set(n, r, out, room);
    uint64_t its = zc_host(c, hosts, stride, r);
    for (uint32_t p = 0; p < n; p++) /* bounded by n; a host past the room is cut short */
        if (zc_host(c, hosts, stride, p) == its && !zc_add(out, &k, room, p)) break;
    return k;
}

bool zc__conn_fill(zc_comm *c, const uint64_t *hosts, size_t stride) {
    uint32_t n = c->nranks, cap = zc__conn_cap(&c->cfg), k = 0;
    uint32_t *set = c->conn_peer;
    uint64_t mine = zc_host(c, hosts, stride, c->rank);
    if (!zc__overlay(&c->cfg)) {
        for (uint32_t p = 0; p < n; p++) set[k++] = p;
    } else {
        k = zc__overlay_set(n, c->rank, set, cap);
        for (uint32_t p = 0; p < n; p++)
            if (zc_host(c, hosts, stride, p) == mine && !zc_add(set, &k, cap, p)) {
                zc__fmt(c->err, sizeof c->err, "rank %u's host runs more ranks than overlay "
                        "mode allows (%u): lower the ranks per host or raise "
                        "ZC_OVERLAY_MIN_RANKS above %u", c->rank, ZC_OVERLAY_MAX_LOCAL, n);
                return false;
            }
    }
    for (uint32_t p = 0; p < n; p++) c->conn[p] = ZC_NO_CONN;
    for (uint32_t i = 0; i < k; i++) c->conn[set[i]] = i;
    c->nconn = k;
    return true;
}
