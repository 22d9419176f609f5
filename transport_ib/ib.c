/* ib.c: transport_ib's setup and the zc_wire_ib ops table. Sizes (state, window, address
 * blob, queue depths) are pure functions of the geometry and the config; create opens the
 * device, checks its limits, takes and registers all memory, makes the completion queue and
 * one to four RC queue pairs per connection (INIT, every receive posted) and writes this
 * rank's address blob; attach checks every connection's blob and moves the queue pairs to RTR
 * and RTS; close tears everything down. Everything is per connection (the geometry's
 * conn_peer: every rank, or the core's overlay): windows, staging, queue pairs and completion
 * queue entries grow with nconn, not nranks; only the credit lines and the blob are sized for
 * conn_cap (the same on every rank). The data path is path.c; libibverbs is behind verbs.c.
 * Must not: allocate (platform pages at create only), or block after init (close drains the
 * flushed completions for a bounded time).
 *
 * Queue sizing, per queue pair (d = ceil(slots / qps), the messages of one lane it can carry
 * at once): receive queue 2 d (both lanes; reposted as each arrives, before its credit can
 * go back, so it never runs dry); send queue 2 (4 d + 2 slots) + ZC_IB_SQ_SPARE (data in
 * flight, each message with a put before it, a burst of credit writes, the alarm) with every
 * (send queue / 4)-th request signalled, and every put from the caller's memory; one
 * completion queue of the sum of all queues (a flush after an error completes every request). */
#include "ib.h"

#define ZC_IB_DRAIN_NS 50000000ull /* close: how long flushed completions are waited for */
#define ZC_IB_FLUSH_MAX_NS 10000000000ull /* close: how long its last writes may take */

typedef struct zc_ib_size {
    uint32_t qps, rq, sq, every;
    uint64_t cqe, qps_all; /* qps_all: the queue pairs of this rank, qps per connection */
    size_t window, local, words_off, addr, pairs_off;
} zc_ib_size;

/* The address blob's head; then the rank's connections (nconn ranks ascending, room for
 * conn_cap), then {qpn, psn} per (connection, queue pair), the ones towards its connection i
 * at [i * qps + j]. A rank whose create failed publishes 0xff bytes (core/comm.c). */
typedef struct zc_ib_blob {
    uint64_t magic, comm_id;
    uint32_t rank, nranks, slots, stride;
    uint32_t qps, link_layer, mtu, lid;
    uint32_t rkey;
    int32_t gid_index;
    uint64_t window, window_bytes;
    uint64_t host, pid;
    uint8_t gid[16];
    uint32_t put_min;         /* cfg->ib_zcopy_min_bytes: must be the same everywhere */
    uint32_t nconn, conn_cap; /* its connections, and the most any rank may have */
    uint32_t pad_;
} zc_ib_blob;
_Static_assert(sizeof(zc_ib_blob) <= ZC_IB_BLOB_HEAD, "blob head fits its bytes");
_Static_assert(ZC_IB_BLOB_HEAD + (size_t)ZC_MESH_MAX_RANKS * (4u + ZC_IB_MAX_QPS * 8u) <=
                   ZC_WIRE_MAX_ADDR_BYTES,
               "an address blob for a full mesh fits ZC_WIRE_MAX_ADDR_BYTES");

static size_t zc_align64(size_t v) { return (v + 63u) & ~(size_t)63u; }

static uint32_t zc_ib_qps_of(const zc_config *cfg) {
    uint32_t q = cfg ? cfg->ib_qps_per_peer : ZC_IB_MAX_QPS;
    return q < 1u ? 1u : q > ZC_IB_MAX_QPS ? ZC_IB_MAX_QPS : q;
}

/* Sizes for g's connections (nconn; conn_cap where a geometry names none). */
static void zc_ib_sizes(const zc_wire_geom *g, uint32_t qps, zc_ib_size *z) {
    size_t n = g->nconn ? g->nconn : g->conn_cap, ring = (size_t)g->slots * g->stride;
    uint32_t per = (g->slots + qps - 1u) / qps;
    z->qps = qps;
    z->rq = zc_wire_lanes(g) * per;
    z->sq = 2u * (2u * z->rq + zc_wire_lanes(g) * g->slots) + ZC_IB_SQ_SPARE;
    z->every = z->sq / 4u;
    z->qps_all = (uint64_t)(n - 1u) * qps;
    z->cqe = z->qps_all * (z->sq + z->rq);
    z->window = zc__ib_rings_off(g) + zc_wire_lanes(g) * n * ring;
    z->words_off = zc_align64(zc_wire_lanes(g) * n * ring);
    z->local = z->words_off + n * qps * (size_t)z->sq * 8u;
    z->pairs_off = ZC_IB_BLOB_HEAD + (((size_t)g->conn_cap * 4u + 7u) & ~(size_t)7u);
    z->addr = z->pairs_off + (size_t)g->conn_cap * qps * 8u;
}

/* Offsets of the state's arrays (per connection, conn_cap of each): peers, qp, rx_next,
 * rx_tag; returns the total. */
static size_t zc_ib_state_layout(const zc_wire_geom *g, uint32_t qps, size_t off[4]) {
    size_t n = g->conn_cap, end = zc_align64(sizeof(zc_ib));
    off[0] = end;
    end = zc_align64(end + n * sizeof(zc_ib_peer));
    off[1] = end;
    end = zc_align64(end + n * qps * sizeof(zc_ib_qp));
    off[2] = end;
    end = zc_align64(end + zc_wire_lanes(g) * n * qps * sizeof(uint64_t));
    off[3] = end;
    end = zc_align64(end + zc_wire_lanes(g) * n * g->slots * sizeof(uint64_t));
    return end;
}

static size_t zc_ib_state_bytes(const zc_wire_geom *g) {
    size_t off[4];
    return zc_ib_state_layout(g, zc_ib_qps_of(g->cfg), off);
}

static size_t zc_ib_window_bytes(const zc_wire_geom *g) {
    zc_ib_size z;
    zc_ib_sizes(g, zc_ib_qps_of(g->cfg), &z);
    return z.window;
}

/* The inbound window and the staging pages, both registered with the NIC. */
static void zc_ib_takes(const zc_wire_geom *g, uint64_t *mem, uint64_t *locked) {
    zc_ib_size z;
    zc_ib_sizes(g, zc_ib_qps_of(g->cfg), &z);
    *mem = *locked = (uint64_t)z.window + z.local;
}

/* Every other connection, through qps queue pairs each; one completion queue for all. */
static void zc_ib_links(const zc_wire_geom *g, zc_wire_links *out) {
    zc_ib_size z;
    zc_ib_sizes(g, zc_ib_qps_of(g->cfg), &z);
    *out = (zc_wire_links){0};
    out->peers = (g->nconn ? g->nconn : g->conn_cap) - 1u;
    out->qps = (uint32_t)z.qps_all;
    out->cq_entries = z.cqe;
}

static size_t zc_ib_addr_bytes(const zc_wire_geom *g) {
    zc_ib_size z;
    zc_ib_sizes(g, zc_ib_qps_of(g->cfg), &z);
    return z.addr;
}

/* The QP local ACK timeout exponent (4.096 us * 2^t per try) whose retry_cnt + 1 tries end
 * within half of timeout_ns, so that a write (or liveness probe) to a dead peer fails with the
 * verbs status before the request's deadline; at most 20 (4.3 s a try: longer only delays
 * failure reports). */
static uint32_t zc_ib_derive_timeout(uint64_t timeout_ns, uint32_t retry_cnt) {
    uint64_t per_try = (timeout_ns ? timeout_ns : ZC_DEFAULT_TIMEOUT_NS) / 2u / (retry_cnt + 1u);
    uint32_t t = 1;
    while (t < 20u && (4096ull << (t + 1u)) <= per_try) t++;
    return t;
}

static uint64_t zc_ib_host_hash(void) {
    char id[256];
    uint64_t h = 0xcbf29ce484222325ull;
    if (zc_plat_host_id(id, sizeof id) != ZC_PLAT_OK) return 0;
    for (const char *c = id; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    return h;
}

static zc_status zc_ib_pages(void **out, size_t bytes, const char *what, char *err,
                             size_t cap) {
    zc_plat_rc rc = zc_plat_pages_alloc(bytes, out);
    if (rc == ZC_PLAT_OK) return ZC_OK;
    char os[96];
    zc_plat_os_error_text(zc_plat_os_error(), os, sizeof os);
    zc__fmt(err, cap, "ib: cannot allocate the %s (%llu bytes): %s (%s)", what,
               (unsigned long long)bytes, zc_plat_rc_name(rc), os);
    *out = 0;
    return ZC_SYSTEM;
}

/* Every queue pair (INIT, receives posted), with a random first packet sequence number. */
static zc_status zc_ib_make_qps(zc_ib *s, const zc_ib_need *need, char *err, size_t cap) {
    for (uint32_t p = 0; p < s->g.nconn; p++) {
        if (p == s->self) continue;
        for (uint32_t j = 0; j < s->qps; j++) {
            zc_ib_qp *q = zc__ib_qp(s, p, j);
            uint32_t psn = 0;
            if (zc_plat_random(&psn, sizeof psn) != ZC_PLAT_OK) psn = p * 7919u + j;
            q->psn = psn & 0xffffffu;
            zc_status st = zc__ib_qp_create(&s->dev, need, zc__ib_wr_id(ZC_IB_WR_RECV, p, j, 0),
                                            &q->qp, &q->qpn, err, cap);
            if (q->qp) q->rq_out = need->rq_depth; /* as posted; a failed post ends create */
            if (st != ZC_OK) return st;
        }
    }
    return ZC_OK;
}

static zc_status zc_ib_make(zc_ib *s, const zc_config *cfg, const zc_ib_size *z, char *err,
                            size_t cap) {
    zc_status st = zc__ib_open(&s->dev, cfg, err, cap);
    if (st != ZC_OK) return st;
    zc_ib_need need = {z->sq, z->rq, z->cqe > UINT32_MAX ? UINT32_MAX : (uint32_t)z->cqe,
                       (uint32_t)z->qps_all, z->window, z->local};
    st = zc__ib_check(&s->dev, &need, err, cap);
    if (st == ZC_OK) st = zc_ib_pages((void **)&s->win, z->window, "inbound window", err, cap);
    if (st == ZC_OK) s->win_bytes = z->window;
    if (st == ZC_OK) st = zc_ib_pages((void **)&s->loc, z->local, "staging slots", err, cap);
    if (st == ZC_OK) s->loc_bytes = z->local;
    if (st == ZC_OK)
        st = zc__ib_setup(&s->dev, s->win, s->win_bytes, s->loc, s->loc_bytes, need.cqe, err,
                          cap);
    if (st == ZC_OK) st = zc_ib_make_qps(s, &need, err, cap);
    return st;
}

static void zc_ib_write_blob(const zc_ib *s, uint8_t *out) {
    zc_ib_blob b;
    __builtin_memset(&b, 0, sizeof b);
    b.magic = ZC_IB_MAGIC;
    b.comm_id = s->g.comm_id;
    b.rank = s->g.rank;
    b.nranks = s->g.nranks;
    b.slots = s->g.slots;
    b.stride = s->g.stride;
    b.qps = s->qps;
    b.link_layer = s->dev.link_layer;
    b.mtu = s->dev.mtu;
    b.lid = s->dev.lid;
    b.rkey = s->dev.win_rkey;
    b.gid_index = s->dev.gid_index;
    b.window = (uint64_t)(uintptr_t)s->win;
    b.window_bytes = s->win_bytes;
    b.host = s->host;
    b.pid = s->pid;
    __builtin_memcpy(b.gid, s->dev.gid, 16);
    b.put_min = s->put_min;
    b.nconn = s->g.nconn;
    b.conn_cap = s->g.conn_cap;
    zc_ib_size z;
    zc_ib_sizes(&s->g, s->qps, &z);
    __builtin_memset(out, 0, z.addr);
    __builtin_memcpy(out, &b, sizeof b);
    __builtin_memcpy(out + ZC_IB_BLOB_HEAD, s->g.conn_peer, (size_t)s->g.nconn * 4u);
    uint8_t *qp = out + z.pairs_off;
    for (uint32_t p = 0; p < s->g.nconn; p++)
        for (uint32_t j = 0; j < s->qps; j++, qp += 8) {
            const zc_ib_qp *q = zc__ib_qp(s, p, j);
            uint32_t pair[2] = {q->qpn, q->psn};
            __builtin_memcpy(qp, pair, sizeof pair);
        }
}

static void zc_ib_close(void *state);

static zc_status zc_ib_create(void *state, const zc_wire_geom *g, void *window, void *addr,
                              char *err, size_t cap) {
    zc_ib *s = state;
    size_t off[4];
    uint32_t qps = zc_ib_qps_of(g->cfg);
    size_t total = zc_ib_state_layout(g, qps, off);
    (void)window;
    __builtin_memset(s, 0, total);
    s->g = *g;
    s->g.cfg = 0;
    s->g.inproc_windows = 0;
    s->peers = (zc_ib_peer *)(void *)((uint8_t *)s + off[0]);
    s->qp = (zc_ib_qp *)(void *)((uint8_t *)s + off[1]);
    s->rx_next = (uint64_t *)(void *)((uint8_t *)s + off[2]);
    s->rx_tag = (uint64_t *)(void *)((uint8_t *)s + off[3]);
    if (g->inproc_windows || !g->cfg || !addr) {
        zc__fmt(err, cap, "ib: transport_ib connects processes; in-process groups use the "
                   "shared-memory wire");
        return ZC_UNSUPPORTED;
    }
    if (!g->conn || !g->conn_peer || !g->nconn || g->nconn > g->conn_cap ||
        g->conn[g->rank] >= g->nconn) {
        zc__fmt(err, cap, "ib: the geometry names no connection table of this rank");
        return ZC_INVALID_ARG;
    }
    zc_ib_size z;
    zc_ib_sizes(g, qps, &z);
    s->qps = qps;
    s->sq_depth = z.sq;
    s->rq_depth = z.rq;
    s->signal_every = z.every;
    s->words_off = z.words_off;
    /* rdma_rxe takes a retry count of 7 as "retry forever", which would hide a dead peer
     * until the deadline: 6 retries everywhere (the spec's 7 is one more, no real loss). */
    s->retry_cnt = g->cfg->ib_retry_cnt < 6u ? g->cfg->ib_retry_cnt : 6u;
    s->timeout = g->cfg->ib_timeout ? g->cfg->ib_timeout
                                    : zc_ib_derive_timeout(g->cfg->timeout_ns, s->retry_cnt);
    s->put_min = g->cfg->ib_zcopy_min_bytes;
    s->host = zc_ib_host_hash();
    s->pid = zc_plat_process_id();
    s->self = g->conn[g->rank];
    for (size_t i = 0; i < (size_t)zc_wire_lanes(g) * g->nconn * qps; i++)
        s->rx_next[i] = i % qps; /* queue pair j carries messages j, j + qps, ... */
    zc_status st = zc_ib_make(s, g->cfg, &z, err, cap);
    if (st != ZC_OK) {
        zc_ib_close(s);
        return st;
    }
    zc_ib_write_blob(s, addr);
    return ZC_OK;
}

/* ---- attach ---------------------------------------------------------------------------------- */

static int zc_ib_blob_failed(const uint8_t *b) {
    for (size_t i = 0; i < 16; i++)
        if (b[i] != 0xffu) return 0;
    return 1;
}

static zc_status zc_ib_check_blob(const zc_ib *s, uint32_t p, const zc_ib_blob *b,
                                  const uint8_t *raw, char *err, size_t cap) {
    if (zc_ib_blob_failed(raw)) {
        zc__fmt(err, cap, "ib: rank %u could not set up transport_ib (its own error says "
                   "why)", p);
        return ZC_PEER_LOST;
    }
    if (b->magic != ZC_IB_MAGIC || b->comm_id != s->g.comm_id || b->rank != p) {
        zc__fmt(err, cap, "ib: the address blob of rank %u is not transport_ib's for this "
                   "communicator (it says rank %u)", p, b->rank);
        return ZC_MISMATCH;
    }
    if (b->nranks != s->g.nranks || b->slots != s->g.slots || b->stride != s->g.stride ||
        b->qps != s->qps || b->conn_cap != s->g.conn_cap || b->nconn > b->conn_cap) {
        zc__fmt(err, cap, "ib: rank %u has nranks=%u slots=%u stride=%u ib_qps_per_peer=%u "
                   "connections=%u of %u but rank %u has nranks=%u slots=%u stride=%u "
                   "ib_qps_per_peer=%u connections=%u of %u: every rank needs the same geometry",
                   p, b->nranks, b->slots, b->stride, b->qps, b->nconn, b->conn_cap, s->g.rank,
                   s->g.nranks, s->g.slots, s->g.stride, s->qps, s->g.nconn, s->g.conn_cap);
        return ZC_MISMATCH;
    }
    if (b->put_min != s->put_min) {
        zc__fmt(err, cap, "ib: rank %u has ib_zcopy_min_bytes=%u but rank %u has %u: every "
                   "rank needs the same (both ends of a stream decide alike whether it is "
                   "written in place)", p, b->put_min, s->g.rank, s->put_min);
        return ZC_MISMATCH;
    }
    if (b->link_layer != s->dev.link_layer) {
        zc__fmt(err, cap, "ib: rank %u's port is %s but rank %u's is %s: both ends of a "
                   "queue pair need the same link layer", p,
                   b->link_layer == ZC_IB_LINK_ETH ? "Ethernet (RoCE)" : "InfiniBand", s->g.rank,
                   s->dev.link_layer == ZC_IB_LINK_ETH ? "Ethernet (RoCE)" : "InfiniBand");
        return ZC_MISMATCH;
    }
    return ZC_OK;
}

/* This rank's index in the connection table of p's blob (nconn ranks ascending), or
 * ZC_NO_PEER when p does not count this rank as a connection. */
static uint32_t zc_ib_back(const zc_ib *s, const zc_ib_blob *b, const uint8_t *raw) {
    uint32_t lo = 0, hi = b->nconn; /* at most conn_cap: checked */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u, r;
        __builtin_memcpy(&r, raw + ZC_IB_BLOB_HEAD + (size_t)mid * 4u, sizeof r);
        if (r < s->g.rank) lo = mid + 1u;
        else hi = mid;
    }
    uint32_t r = UINT32_MAX;
    if (lo < b->nconn) __builtin_memcpy(&r, raw + ZC_IB_BLOB_HEAD + (size_t)lo * 4u, sizeof r);
    return r == s->g.rank ? lo : ZC_NO_PEER;
}

/* Connects this rank's queue pairs towards its connection i (rank p) to the ones p made
 * towards this rank; p's blob is raw. */
static zc_status zc_ib_connect_peer(zc_ib *s, uint32_t i, const uint8_t *raw, char *err,
                                    size_t cap) {
    zc_ib_blob b;
    uint32_t p = s->g.conn_peer[i];
    __builtin_memcpy(&b, raw, sizeof b);
    zc_status st = zc_ib_check_blob(s, p, &b, raw, err, cap);
    if (st != ZC_OK) return st;
    zc_ib_size z, zp;
    zc_ib_sizes(&s->g, s->qps, &z);
    zc_wire_geom theirs = s->g; /* p's window holds rings for its own nconn connections */
    theirs.nconn = b.nconn;
    zc_ib_sizes(&theirs, s->qps, &zp);
    zc_ib_peer *peer = &s->peers[i];
    peer->back = zc_ib_back(s, &b, raw);
    if (peer->back == ZC_NO_PEER || b.window_bytes < zp.window) {
        zc__fmt(err, cap, "ib: rank %u does not count rank %u among its %u connections though "
                "rank %u counts it: the ranks disagree on the connection set (every rank needs "
                "the same overlay_min_ranks and host placement, ZC_HOST_ID included)", p,
                s->g.rank, b.nconn, s->g.rank);
        return ZC_MISMATCH;
    }
    peer->rank = p;
    peer->window = b.window;
    for (uint32_t lane = 0; lane < zc_wire_lanes(&s->g); lane++)
        peer->ring[lane] = b.window + zc__ib_rings_off(&s->g) +
                           ((uint64_t)lane * b.nconn + peer->back) * s->g.slots * s->g.stride;
    peer->rkey = b.rkey;
    peer->host = b.host;
    peer->pid = b.pid;
    for (uint32_t j = 0; j < s->qps && st == ZC_OK; j++) {
        uint32_t pair[2];
        __builtin_memcpy(pair, raw + z.pairs_off + ((size_t)peer->back * s->qps + j) * 8u,
                         sizeof pair);
        zc_ib_remote r = {pair[0], pair[1], b.lid, b.mtu, raw + __builtin_offsetof(zc_ib_blob,
                                                                                     gid)};
        zc_ib_qp *q = zc__ib_qp(s, i, j);
        st = zc__ib_qp_connect(&s->dev, q->qp, &r, q->psn, s->timeout, s->retry_cnt, err, cap);
    }
    return st;
}

static zc_status zc_ib_attach(void *state, const void *addrs, char *err, size_t cap) {
    zc_ib *s = state;
    zc_ib_size z;
    zc_ib_sizes(&s->g, s->qps, &z);
    zc_status st = addrs ? ZC_OK : ZC_INTERNAL;
    for (uint32_t i = 0; i < s->g.nconn && st == ZC_OK; i++)
        if (i != s->self)
            st = zc_ib_connect_peer(s, i, (const uint8_t *)addrs + (size_t)i * z.addr, err, cap);
    if (st != ZC_OK) {
        zc_ib_close(s); /* split does not close after a failed attach */
        return st;
    }
    s->attached = 1;
    return ZC_OK;
}

static void zc_ib_seal(void *state) { (void)state; /* nothing is named: nothing to drop */ }

/* ---- close ----------------------------------------------------------------------------------- */

/* Before the queue pairs go: a peer may still wait for this rank's last messages (a lost packet is
 * sent again only after a local ACK timeout, and the queue pair that would send it is about to be
 * destroyed). The peer's credits say which messages it consumed: wait until every live peer
 * consumed every message posted to it and took the clean-close mark (closing, path.c), posting this
 * rank's own owed credits meanwhile (the peers wait the same way). At most as long as the queue
 * pairs retry (retry_cnt + 1 local ACK timeouts, ZC_IB_FLUSH_MAX_NS at most): an unreachable peer
 * would be reported lost by then anyway. A peer on this host whose process has exited (it
 * crashed, or exited without closing) is lost at once: its process is looked for every
 * ZC_IB_FLUSH_WATCH_NS while the flush waits. A failed job (the alarm word set, here or by a
 * peer) owes nobody anything and waits not at all. */
#define ZC_IB_FLUSH_WATCH_NS 1000000ull
static void zc_ib_flush(zc_ib *s) {
    if (!s->attached || zc__ib_alarmed(s)) return;
    uint64_t try_ns = 4096ull << s->timeout, now = zc_plat_now_ns(), end = now;
    uint64_t retry_ns = (s->retry_cnt + 1u) * try_ns, watch = now + ZC_IB_FLUSH_WATCH_NS;
    end += retry_ns < ZC_IB_FLUSH_MAX_NS ? retry_ns : ZC_IB_FLUSH_MAX_NS;
    /* Bounded by the time above: each pass polls once. */
    for (bool pending = true; pending && (now = zc_plat_now_ns()) < end;) {
        pending = false;
        if (now >= watch) { /* the peers on this host whose process is gone owe nothing */
            for (uint32_t i = 0; i < s->g.nconn; i++)
                if (i != s->self) zc__ib_watch_process(s, i);
            watch = now + ZC_IB_FLUSH_WATCH_NS;
        }
        for (uint32_t i = 0; i < s->g.nconn && !pending; i++) {
            for (uint32_t lane = 0; lane < zc_wire_lanes(&s->g) && i != s->self; lane++)
                if (!s->peers[i].lost &&
                    zc__ib_credits(s, lane, s->g.conn_peer[i]) < s->peers[i].sent[lane])
                    pending = true;
            /* The close mark's completion (polled by zc__ib_credits above), unless the peer's
             * own mark is here: a peer that closed first waited for that mark's completion and
             * may have taken its queue pairs down before ours arrived. */
            const zc_ib_peer *p = &s->peers[i];
            if (i != s->self && !p->lost && p->mark > zc__ib_qp(s, i, 0)->sq_done &&
                !zc__ib_closed_after(s, s->g.conn_peer[i]))
                pending = true;
        }
        if (pending) zc_plat_cpu_relax();
    }
}

/* After every queue pair went to ERR: takes the flushed completions until every receive came
 * back (each does exactly once) and the queue is empty, or ZC_IB_DRAIN_NS passed. */
static void zc_ib_drain(zc_ib *s, uint64_t receives) {
    uint64_t seen = 0, end = zc_plat_now_ns() + ZC_IB_DRAIN_NS;
    for (;;) {
        zc_ib_wc wc[ZC_IB_POLL_BATCH];
        int n = zc__ib_poll_cq(&s->dev, wc, (int)ZC_IB_POLL_BATCH);
        if (n < 0) return;
        for (int i = 0; i < n; i++) seen += (wc[i].wr_id & ZC_IB_WR_KIND) == ZC_IB_WR_RECV;
        if ((n == 0 && seen >= receives) || zc_plat_now_ns() > end) return;
        if (n == 0) zc_plat_cpu_relax();
    }
}

static void zc_ib_close(void *state) {
    zc_ib *s = state;
    uint64_t receives = 0;
    zc_ib_flush(s);
    for (size_t i = 0; i < (size_t)s->g.nconn * s->qps; i++)
        if (s->qp[i].qp) {
            zc__ib_qp_error(s->qp[i].qp);
            receives += s->qp[i].rq_out;
        }
    if (s->dev.cq) zc_ib_drain(s, receives);
    for (size_t i = 0; i < (size_t)s->g.nconn * s->qps; i++)
        if (s->qp[i].qp) {
            zc__ib_qp_destroy(s->qp[i].qp);
            s->qp[i].qp = 0;
        }
    zc__ib_teardown(&s->dev);
    if (s->win) zc_plat_pages_free(s->win, s->win_bytes);
    if (s->loc) zc_plat_pages_free(s->loc, s->loc_bytes);
    s->win = s->loc = 0;
    s->attached = 0;
}

/* ---- the caller's memory --------------------------------------------------------------------- */

static uint64_t zc_ib_put_min(void *state) {
    const zc_ib *s = state;
    return s->attached ? s->put_min : 0;
}

static zc_status zc_ib_mem_register(void *state, void *addr, size_t bytes, uint32_t kind,
                                    int32_t fd, uint64_t fd_offset, zc_wire_mr *out, char *err,
                                    size_t cap) {
    zc_ib *s = state;
    struct ibv_mr *mr = 0;
    out->handle = 0;
    out->lkey = out->rkey = 0;
    if (!s->dev.pd) {
        zc__fmt(err, cap, "ib: the wire is closed");
        return ZC_INVALID_STATE;
    }
    if (bytes > s->dev.max_mr_size) {
        zc__fmt(err, cap, "ib: %llu bytes exceed %s's max_mr_size of %llu",
                   (unsigned long long)bytes, s->dev.name,
                   (unsigned long long)s->dev.max_mr_size);
        return ZC_LIMIT;
    }
    zc_status st = zc__ib_reg_user(&s->dev, addr, bytes, kind == ZC_MEM_CUDA, fd, fd_offset, &mr,
                                   err, cap);
    if (st != ZC_OK) return st;
    out->handle = mr;
    out->lkey = zc__ib_mr_lkey(mr);
    out->rkey = zc__ib_mr_rkey(mr);
    return ZC_OK;
}

static void zc_ib_mem_deregister(void *state, zc_wire_mr *mr) {
    (void)state;
    zc__ib_dereg_user(mr->handle);
    mr->handle = 0;
}

/* ---- the ops table (data path in path.c) ----------------------------------------------------- */

const zc_wire_ops zc_wire_ib = {
    sizeof(zc_wire_ops), ZC_WIRE_VERSION, "ib",
    zc_ib_state_bytes, zc_ib_window_bytes, zc_ib_addr_bytes,
    zc_ib_create, zc_ib_attach, zc_ib_seal, zc_ib_close,
    zc__ib_tx_slot, zc__ib_post, zc__ib_rx_slot,
    zc__ib_credit, zc__ib_credits,
    zc__ib_alarm, zc__ib_alarmed, zc__ib_peer_alive,
    zc_ib_put_min, zc_ib_mem_register, zc_ib_mem_deregister, zc__ib_put, zc__ib_put_done,
    0, /* no symmetric region */
    zc_ib_takes,
    zc_ib_links,
    0, /* no flagged lines: an RDMA write does not promise the order its bytes land in */
    zc__ib_closing, zc__ib_closed_after,
    0, /* no waking: no in-process groups */
};
