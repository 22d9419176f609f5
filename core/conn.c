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

void zc__host_blocks(zc_comm *c, const uint64_t *hosts, size_t stride) {
    uint32_t n = c->nranks, k = c->cfg.inproc_ranks_per_host, q = 0;
    /* Simulated hosts of k ranks: a block stays on one when its size divides k; one host (k 0
     * or at least n) has no blocks. */
    bool one_host = !hosts && !(k && k < n);
    for (uint32_t b = 2; !one_host && b <= n / 2u && n % b == 0; b *= 2u) {
        bool one = hosts ? true : k % b == 0;
        for (uint32_t r = 0; hosts && r < n && one; r++)
            one = zc_host(c, hosts, stride, r) == zc_host(c, hosts, stride, r & ~(b - 1u));
        if (!one) break;
        q = b;
    }
    c->hblock = q;
}

uint32_t zc__conn_count(const zc_config *cfg, uint32_t per_host) {
    uint32_t set[128], n = cfg->nranks, r = cfg->rank;
    if (!zc__overlay(cfg)) return n;
    uint32_t o = zc__overlay_set(n, r, set, 128u), per = per_host && per_host < n ? per_host : n;
    uint32_t lo = r / per * per, hi = lo + per < n ? lo + per : n, k = o;
    for (uint32_t p = lo; p < hi; p++) { /* the host's ranks the overlay lacks */
        bool in = false;
        for (uint32_t i = 0; i < o && !in; i++) in = set[i] == p;
        k += !in;
    }
    return k;
}

uint32_t zc__conn_set(const zc_comm *c, const uint32_t *first, const uint32_t *next,
                      uint32_t r, uint32_t *out, uint32_t cap) {
    uint32_t n = c->nranks, k = 0, per = c->cfg.inproc_ranks_per_host;
    if (!zc__overlay(&c->cfg)) {
        for (uint32_t p = 0; p < n && k < cap; p++) out[k++] = p;
        return k;
    }
    uint32_t room = zc__conn_cap(&c->cfg) < cap ? zc__conn_cap(&c->cfg) : cap;
    k = zc__overlay_set(n, r, out, room);
    if (!first) { /* simulated hosts: ranks lo..hi-1 */
        uint32_t lo = per && per < n ? r / per * per : 0, hi = per && per < n ? lo + per : n;
        for (uint32_t p = lo; p < hi && p < n; p++)
            if (!zc_add(out, &k, room, p)) break;
        return k;
    }
    /* The walk is bounded by n; a host past the room is cut short. */
    for (uint32_t p = first[r], i = 0; p < n && i < n; p = next[p], i++)
        if (!zc_add(out, &k, room, p)) break;
    return k;
}

/* keys[r] at stride bytes. */
static uint64_t zc_key(const uint64_t *keys, size_t stride, uint32_t r) {
    return *(const uint64_t *)(const void *)((const uint8_t *)keys + r * stride);
}

/* Whether rank a sorts before rank b: by key, then by rank. */
static bool zc_before(const uint64_t *keys, size_t stride, uint32_t a, uint32_t b) {
    uint64_t ka = zc_key(keys, stride, a), kb = zc_key(keys, stride, b);
    return ka < kb || (ka == kb && a < b);
}

/* Moves order[i] down the heap order[0..n) (the largest on top) to its place. */
static void zc_sift(const uint64_t *keys, size_t stride, uint32_t *order, uint32_t i,
                    uint32_t n) {
    while (2u * (uint64_t)i + 1u < n) { /* at most log2(n) levels */
        uint32_t j = 2u * i + 1u;
        if (j + 1u < n && zc_before(keys, stride, order[j], order[j + 1u])) j++;
        if (!zc_before(keys, stride, order[i], order[j])) return;
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
        i = j;
    }
}

void zc__sort_by_key(const uint64_t *keys, size_t stride, uint32_t n, uint32_t *order) {
    for (uint32_t r = 0; r < n; r++) order[r] = r;
    for (uint32_t i = n / 2u; i-- > 0;) zc_sift(keys, stride, order, i, n);
    for (uint32_t end = n; end > 1u; end--) {
        uint32_t t = order[0];
        order[0] = order[end - 1u];
        order[end - 1u] = t;
        zc_sift(keys, stride, order, 0, end - 1u);
    }
}

void zc__link_keys(const uint64_t *keys, size_t stride, uint32_t n, const uint32_t *order,
                   uint32_t *first, uint32_t *next) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = order[i];
        bool same = i > 0 && zc_key(keys, stride, order[i - 1u]) == zc_key(keys, stride, r);
        first[r] = same ? first[order[i - 1u]] : r;
        next[r] = ZC_NO_CONN;
        if (same) next[order[i - 1u]] = r;
    }
}

bool zc__conn_fill(zc_comm *c, const uint64_t *hosts, size_t stride) {
    uint32_t n = c->nranks, cap = zc__conn_cap(&c->cfg), k = 0;
    uint32_t *set = c->conn_peer;
    uint64_t mine = zc_host(c, hosts, stride, c->rank);
    if (!zc__overlay(&c->cfg)) {
        for (uint32_t p = 0; p < n; p++) set[k++] = p;
    } else {
        k = zc__overlay_set(n, c->rank, set, cap);
        uint32_t per = c->cfg.inproc_ranks_per_host, lo = 0, hi = n; /* simulated: one range */
        if (!hosts && per && per < n) lo = c->rank / per * per, hi = lo + per < n ? lo + per : n;
        for (uint32_t p = lo; p < hi; p++)
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
